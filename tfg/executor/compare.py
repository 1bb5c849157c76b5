"""Run two graphs on the same inputs and compare their outputs (as polygraphy does), or find
the first node whose values differ.

    >>> report = compare_graphs(tfg.load("mlp.pb"), tfg.load("mlp_opt.pb"), ["loss"],
    ...                         feeds={"x": x, "labels": y}, inits=["init"])
    >>> report[0]
    OutputDiff(name='loss', ok=True, max_abs=5.9e-08, max_rel=1.1e-07, problem=None)
    >>> first_difference(a, b, feeds, rtol=1e-5, atol=1e-5)     # --bisect
    NodeDiff(node='dense/MatMul', op='MatMul', port=0, diff=OutputDiff(...), checked=41)

A value matches when every element satisfies |a - b| <= atol + rtol * |b| (numpy's
`allclose`, with NaN equal to NaN in the same place); a different dtype kind or shape is a
mismatch whatever the tolerances. `max_rel` divides by |b| where b is not zero.
"""
from typing import NamedTuple, Optional

import numpy as np

from tfg.errors import TfgError, TfgInputError
from tfg.executor.session import Session
from tfg.graphdef.names import parse_tensor, tensor_name
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, get_op, has_op, ops_with
from tfg.schemas.ops.signature import output_dtypes, ref_input_indices

DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-5
# Nodes never compared by --bisect: inputs, state, and values without a number to compare.
_SKIP_OPS = (ops_with("placeholder") | control_flow_names("send", "recv", "control_trigger")
             | {"NoOp"})
_NOT_NUMBERS = (DType.RESOURCE, DType.VARIANT, DType.STRING)


class OutputDiff(NamedTuple):
    """How one fetched tensor of A compares with B's."""

    name: str
    ok: bool
    max_abs: Optional[float]
    max_rel: Optional[float]
    problem: Optional[str] = None  # a shape or dtype mismatch, said in words

    def to_json(self):
        return dict(self._asdict())


class NodeDiff(NamedTuple):
    """The first node (in A's topological order) whose output differs between A and B."""

    node: str
    op: str
    port: int
    diff: OutputDiff
    checked: int  # tensors compared in all

    def to_json(self):
        return {"node": self.node, "op": self.op, "port": self.port,
                "diff": self.diff.to_json(), "checked": self.checked}


def compare_values(name, a, b, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL):
    """OutputDiff of value `a` against the reference `b`.

    Before: a = [1.0, 2.0001], b = [1.0, 2.0], rtol=1e-5, atol=1e-5.
    After:  OutputDiff(name, ok=False, max_abs=1e-4, max_rel=5e-5, problem=None).
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return OutputDiff(name, False, None, None,
                          f"shape {list(a.shape)} vs {list(b.shape)}")
    if _kind(a) != _kind(b):
        return OutputDiff(name, False, None, None, f"dtype {a.dtype} vs {b.dtype}")
    if _kind(a) in ("string", "object"):
        same = bool(np.array_equal(a, b))
        return OutputDiff(name, same, None if same else float("inf"), None,
                          None if same else "string values differ")
    if a.size == 0:
        return OutputDiff(name, True, 0.0, 0.0)
    x = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    y = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
    both_nan = np.isnan(x) & np.isnan(y)
    same_inf = np.isinf(x) & np.isinf(y) & (x == y)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(both_nan | same_inf, 0.0, np.abs(x - y))
        err = np.where(np.isnan(err), np.inf, err)  # NaN against a number: infinitely off
        scale = np.abs(y)
        scale = np.where(np.isfinite(scale), scale, 0.0)  # NaN/inf matched above: error 0
        rel = np.where(scale > 0, err / np.where(scale > 0, scale, 1.0), np.where(err > 0,
                                                                              np.inf, 0.0))
        ok = bool(np.all(err <= atol + rtol * scale))
    return OutputDiff(name, ok, float(err.max()), float(rel.max()))


def _kind(arr):
    if arr.dtype == object or arr.dtype.kind in "SU":
        return "string"
    return {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}.get(
        arr.dtype.kind, "object")


def run_graph(graph, fetches, feeds=None, inits=(), devices=None):
    """The values of `fetches` in one step of `graph` (after running `inits` once). Feeds of
    tensors whose node the graph lacks are dropped, so the same feeds serve two graphs."""
    sess = Session(graph, devices=devices, validate_graph=True)
    feeds = feeds_for(graph, feeds)
    if inits:
        sess.run(None, feeds=feeds, targets=list(inits))
    return sess.run(list(fetches), feeds=feeds)


def feeds_for(graph, feeds):
    return {k: v for k, v in (feeds or {}).items() if parse_tensor(k).node in graph}


def compare_graphs(a, b, fetches, feeds=None, inits=(), rtol=DEFAULT_RTOL,
                   atol=DEFAULT_ATOL, devices=None):
    """[OutputDiff per fetch] of graph `a` against graph `b` (or a {name: array} of expected
    values) run on the same feeds."""
    got = run_graph(a, fetches, feeds, inits, devices)
    if isinstance(b, dict):
        missing = [f for f in fetches if f not in b]
        if missing:
            raise TfgInputError(f"expected values have no array named {missing[0]!r} "
                                f"(they hold: {', '.join(sorted(b)) or 'nothing'})")
        want = [b[f] for f in fetches]
    else:
        want = run_graph(b, fetches, feeds, inits, devices)
    return [compare_values(f, x, y, rtol, atol) for f, x, y in zip(fetches, got, want)]


def comparable_tensors(a, b):
    """Tensor names of A, in A's topological order, that B has too and --bisect compares:
    outputs of ops with a known, numeric dtype that are not inputs, state updates or
    transfers (fetching a stateful op or one with a reference input would run it)."""
    out = []
    for node in a.topo_order():
        other = b.get(node.name)
        if (other is None or node.op in _SKIP_OPS or not has_op(node.op)
                or not has_op(other.op) or get_op(node.op).has_effects):
            continue
        try:
            dtypes = output_dtypes(node)
            # An op with a reference input (Assign, ApplyGradientDescent) updates a variable
            # when it runs: fetching it would change the values being compared.
            if ref_input_indices(node):
                continue
        except Exception:  # noqa: BLE001 - malformed attrs: the run would say so; skip here
            continue
        for port, dt in enumerate(dtypes):
            if isinstance(dt, DType) and dt.base not in _NOT_NUMBERS:
                out.append(tensor_name(node.name, port))
    return out


def first_difference(a, b, feeds=None, inits=(), rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL,
                     devices=None):
    """The first tensor (in A's topological order) whose values in A and B differ, as a
    NodeDiff, or None when every shared tensor matches.

    Tensors that cannot be fetched on their own (dead in a cond branch, inside a loop that
    the executor refuses to expose) are skipped: a group of fetches that fails is split in
    halves until the failing tensors stand alone.
    """
    names = comparable_tensors(a, b)
    if not names:
        raise TfgInputError("--bisect: the graphs share no node names with values to compare")
    sa = Session(a, devices=devices, validate_graph=True)
    sb = Session(b, devices=devices, validate_graph=True)
    fa, fb = feeds_for(a, feeds), feeds_for(b, feeds)
    if inits:
        sa.run(None, feeds=fa, targets=list(inits))
        sb.run(None, feeds=fb, targets=list(inits))
    values = {}
    _fetch_all(sa, sb, fa, fb, names, values)
    checked = 0
    for name in names:
        if name not in values:
            continue
        checked += 1
        d = compare_values(name, *values[name], rtol=rtol, atol=atol)
        if not d.ok:
            ref = parse_tensor(name)
            return NodeDiff(ref.node, a[ref.node].op, ref.port, d, checked)
    return None


def _fetch_all(sa, sb, fa, fb, names, values):
    """Fill values[name] = (A's value, B's value), skipping tensors either run refuses."""
    try:
        got = sa.run(names, feeds=fa)
        want = sb.run(names, feeds=fb)
    except TfgError:
        if len(names) == 1:
            return
        half = len(names) // 2
        _fetch_all(sa, sb, fa, fb, names[:half], values)
        _fetch_all(sa, sb, fa, fb, names[half:], values)
        return
    for n, x, y in zip(names, got, want):
        values[n] = (x, y)
