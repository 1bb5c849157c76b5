"""The pass manager: a registry of named passes and `optimize`, which runs a pipeline of them
(by default Grappler's order: prune, cse, constfold, arith, layout, affine, remap, loop,
dependency) for 2 rounds.

    >>> g2 = optimize(g, keep=["loss"])                 # before: 40 nodes   after: 17 nodes
    >>> g3 = optimize(g, passes=["constfold"], report=rows)
    >>> rows[0]["pass"], rows[0]["before"], rows[0]["after"]
    ('constfold', 40, 31)

A pass is `fn(graph, opts) -> bool` that edits `graph` in place and says whether it changed
anything. The manager hands it a copy, so a pass that raises is rolled back (and reported);
with `verify=True` (tests) the error is raised instead, and the graph is checked after every
pass: inputs exist with valid ports, no cycle that a NextIteration does not break, every
preserved node still there with its op's outputs.
"""
import gc
import importlib
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

from tfg.errors import GraphValidationError, TfgError, TfgInputError
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.names import parse_tensor
from tfg.graphdef.colocation_refs import fix_colocation_refs
from tfg.passes.rewrite import PLACEHOLDERS, PassOptions, RewriteContext, removable
from tfg.schemas.ops import has_op
from tfg.schemas.ops.signature import num_outputs


@dataclass
class PassInfo:
    name: str
    fn: object
    doc: str
    first_round_only: bool = False


PASSES = {}
DEFAULT_PIPELINE = ("prune", "cse", "constfold", "arith", "layout", "affine", "remap", "loop",
                    "dependency")
DEFAULT_ROUNDS = 2


def register_pass(name, doc, first_round_only=False):
    """Decorator: `@register_pass("constfold", "Fold constant subgraphs")` on `fn(graph, opts)`."""
    def deco(fn):
        PASSES[name] = PassInfo(name, fn, doc, first_round_only)
        return fn
    return deco


def _load_passes():
    # Importing the pass modules registers them (here, not at module top: they import this one).
    for mod in ("prune", "constfold", "arith", "layout", "affine", "remap", "loop", "dependency",
                "collective"):
        importlib.import_module(f"tfg.passes.{mod}")


def list_passes():
    """[(name, doc, in default pipeline)] for `tfg optimize --list`."""
    _load_passes()
    return [(p.name, p.doc, p.name in DEFAULT_PIPELINE) for p in PASSES.values()]


def make_options(graph, keep=(), feeds=(), devices=(), verify=False):
    """PassOptions with the preserved set: kept names/outputs, fed nodes, every Placeholder and
    PlaceholderWithDefault, and, when nothing is kept explicitly, every node without consumers."""
    keep_nodes = set()
    for name in keep or ():
        node = parse_tensor(name).node if not name.startswith("^") else name[1:]
        if node not in graph:
            raise TfgInputError(f"--keep: no node named {node!r} in the graph")
        keep_nodes.add(node)
    feed_nodes = set()
    for name in feeds or ():
        node = parse_tensor(name).node
        if node not in graph:
            raise TfgInputError(f"feed {name!r}: no node named {node!r} in the graph")
        feed_nodes.add(node)
    preserved = set(keep_nodes) | feed_nodes
    preserved |= {n.name for n in graph if n.op in PLACEHOLDERS}
    if not keep_nodes:
        consumed = {r.node for n in graph for r in n.input_refs}
        preserved |= {n.name for n in graph if n.name not in consumed}
    if isinstance(devices, str):
        devices = tuple(d for d in devices.split(",") if d)
    return PassOptions(keep=frozenset(keep_nodes), feeds=frozenset(feed_nodes),
                       devices=tuple(devices or ()), verify=verify,
                       preserved=frozenset(preserved))


def optimize(graph, passes=None, keep=(), feeds=(), devices=(), rounds=DEFAULT_ROUNDS,
             verify=False, report=None, on_pass=None, extra=None):
    """Run a pipeline of passes on a copy of `graph`; returns the optimized Graph.

    `passes`: names (list or comma string; default DEFAULT_PIPELINE). `keep`: node names or
    tensor names that must survive with their values (default: nodes without consumers).
    `report`: a list that receives one dict per pass run (pass, round, before, after, seconds,
    changed, error). `on_pass(name, index, total)`: called before each pass runs; index counts
    from 1 over the `total` runs planned (fewer run when a round changes nothing).
    `extra`: PassOptions.extra, e.g. {"tfg_kernels": True} when only tfg runs the result.
    """
    _load_passes()
    names = _pass_names(passes)
    # Calls inlined, functional control flow lowered; a call that cannot be is kept opaque.
    graph = canonicalize(graph, strict=False)
    opts = make_options(graph, keep, feeds, devices, verify)
    opts.extra.update(extra or {})
    total = sum(1 for rnd in range(rounds) for name in names
                if not (PASSES[name].first_round_only and rnd > 0))
    index = 0
    with collector_paused():
        current = graph.copy()
        for rnd in range(rounds):
            round_changed = False
            for name in names:
                info = PASSES[name]
                if info.first_round_only and rnd > 0:
                    continue
                index += 1
                if on_pass is not None:
                    on_pass(name, index, total)
                result, changed = run_pass(info, current, opts, rnd, report)
                if result is not current:
                    _discard(current)
                current = result
                round_changed |= changed
            if not round_changed:
                break
    fix_colocation_refs(current)  # TensorFlow's import refuses `loc:@` names of removed nodes
    return current


@contextmanager
def collector_paused():
    """Pause CPython's cyclic garbage collector while passes run.

    Why: a large graph is millions of small long-lived objects (nodes, input tuples, attr
    caches), and every pass allocates more; each full collection re-scans all of them, so on
    a 100,000-node graph the collector took more time than the passes. Reference counting
    still frees what the passes drop (`_discard` breaks the graph<->node cycles), and the
    collector resumes afterwards for anything else.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _discard(graph):
    """Break the node -> graph back references of an intermediate graph nobody will use again,
    so reference counting frees it without the cyclic collector."""
    for node in graph:
        node._graph = None
    graph._nodes = {}
    graph._consumers = None
    graph._topo = None


def run_pass(info, graph, opts, rnd=0, report=None):
    """Run one pass on a copy of `graph` (rollback on failure); returns (graph, changed)."""
    before = len(graph)
    start = time.perf_counter()
    work = graph.copy()
    error = None
    try:
        changed = bool(info.fn(work, opts))
        changed |= remove_dead(work, opts)
        if opts.verify:
            verify_graph(work, opts, info.name)
    except TfgError as e:
        if opts.verify:
            raise
        error, changed = f"{type(e).__name__}: {e}", False
    except Exception as e:  # noqa: BLE001 - a failing pass is rolled back, as Grappler does
        if opts.verify:
            raise
        error, changed = f"internal {type(e).__name__}: {e}", False
    if error is not None:
        _discard(work)
        work = graph
    if report is not None:
        report.append({"pass": info.name, "round": rnd + 1, "before": before,
                       "after": len(work), "seconds": time.perf_counter() - start,
                       "changed": changed, "error": error})
    if error is not None and report is None:
        print(f"tfg: warning: pass {info.name} failed and was rolled back: {error}",
              file=sys.stderr)
    return work, changed


def _pass_names(passes):
    if passes is None:
        return list(DEFAULT_PIPELINE)
    if isinstance(passes, str):
        passes = [p.strip() for p in passes.split(",") if p.strip()]
    for p in passes:
        if p not in PASSES:
            raise TfgInputError(f"unknown pass {p!r}; passes: {', '.join(PASSES)}")
    return list(passes)


def remove_dead(graph, opts):
    """Delete side-effect-free nodes that nothing reads and nobody asked to keep."""
    # Most passes leave nothing dead: find candidates with one cheap sweep before building the
    # consumer index that removal needs.
    consumed = {ref.node for n in graph for ref in n.input_refs}
    preserved = opts.preserved
    if all(n.name in consumed or n.name in preserved for n in graph):
        return False
    ctx = RewriteContext(graph, opts)
    dead = [n.name for n in graph if not ctx.has_consumers(n.name) and removable(ctx, n)]
    for name in dead:
        ctx.remove_if_dead(name)
    return bool(dead)


def verify_graph(graph, opts=None, after=""):
    """Raise GraphValidationError if the graph is structurally broken (see module doc)."""
    where = f" after pass {after}" if after else ""
    for node in graph:
        for ref in node.input_refs:
            src = graph.get(ref.node)
            if src is None:
                raise GraphValidationError(f"{node.name!r} reads missing node {ref.node!r}{where}")
            if ref.port > 0 and has_op(src.op):
                try:
                    n = num_outputs(src)
                except TfgError:
                    continue
                if ref.port >= n:
                    raise GraphValidationError(
                        f"{node.name!r} reads {ref.node}:{ref.port} but {src.op} has {n} "
                        f"outputs{where}")
    graph.topo_order()
    for name in (opts.preserved if opts else ()):
        if name not in graph:
            raise GraphValidationError(f"preserved node {name!r} was removed{where}")
