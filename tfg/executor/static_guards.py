"""The memory guard decided once per feed signature where shapes are static.

    >>> guards = SignatureGuards.build(program, items, order)   # None: nothing to decide
    >>> calls = guards.calls(feed_values)    # None: second step of this signature, verify
    >>> guards.verify_run(vals, step, feed_values)   # runs the step, guarded, and checks

Every kernel with a shape function runs behind tfg/executor/limits.py's check, which keys a
cached verdict on its inputs' shapes and small integer values: a dictionary lookup and a key
built per call, 5-7% of a NASNetMobile step. In a fast-path schedule most of those keys are
fixed by the feeds' signature (their dtypes, shapes and small integer values): the shapes flow
from the feeds and the Consts through stateless ops whose shape functions need nothing else.
Per signature, once:

1. Infer each tensor from the signature alone (tfg/graphdef/infer.py's infer_node, node by
   node, in schedule order): a feed's dtype and shape, its value only where the signature has
   it; a Const's value; then each stateless kernel's outputs from its inputs' inferred shapes
   and from values only where those are themselves fixed. A stateful or Ref-reading node, a
   node annotated with `_output_shapes` (an annotation is not a proof), a variant or
   resource, a compiled loop's outputs: unknown, and everything after them.
2. A guarded call whose every input is known, whose integer and 0-d inputs have known values
   (the verdict cache keys on those), is a candidate.
3. The second step of the signature (the first runs guarded and infers nothing: a one-shot
   run never pays for the inference) runs every call guarded, as before, and compares each
   candidate's actual inputs with the inferred ones (dtype, shape, value where keyed).
4. If the step ends without error, later steps of the signature run the matching candidates'
   kernels without the check: their inputs' keys are the ones verified, so the verdict is
   the one just given. A step over the limit raised in 3 and is not remembered: it raises
   again, with the same message, every time.

Before: NASNetMobile b2, every Conv2D, pool, Concat, Pad checked per call. After: checked in
the second step of each input shape. `TFG_STATIC_GUARDS=0` keeps the per-call check.
"""
import os

import numpy as np

from tfg.executor import conv_chains
from tfg.executor import plan as P
from tfg.executor.calls import slot_call
from tfg.executor.executor import node_error
from tfg.graphdef.infer import TensorInfo, infer_node
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import get_op, has_op

_KEY_ELEMENTS = 16  # (limits._KEY_ELEMENTS) integer inputs up to this size key by value
_SIGNATURES = 16  # signatures remembered per schedule


class SignatureGuards:
    """Per feed signature: the program's calls with the verified candidates unguarded."""

    def __init__(self, program, items, order):
        self.program = program
        self.items = items
        self.order = order
        self._by_sig = {}
        self._seen = set()  # signatures that ran once, guarded, and are verified next time

    @staticmethod
    def build(program, items, order):
        """None when the program has no guarded call or TFG_STATIC_GUARDS=0."""
        if os.environ.get("TFG_STATIC_GUARDS", "1") == "0":
            return None
        if not any(_guarded(fn, item) for item, (fn, *_) in
                   zip(program.items, program.entries)):
            return None
        return SignatureGuards(program, items, order)

    def calls(self, feed_values):
        """The calls for this step's signature; None when it must be verified first.
        A signature's first step runs guarded without inferring anything: a one-shot run
        (`tfg run`) would pay the inference (about 130 us a node) and never gain from it."""
        sig = _signature(feed_values)
        if sig is None:
            return self.program.calls
        calls = self._by_sig.get(sig)
        if calls is None and sig not in self._seen:
            if len(self._seen) >= _SIGNATURES:
                self._seen.clear()
            self._seen.add(sig)
            return self.program.calls
        return calls

    def verify_run(self, vals, step, feed_values):
        """Run the step with every guard (`vals`: the slots, feeds in place), checking the
        candidates' inputs; on success, remember this signature's calls."""
        prog = self.program
        sig = _signature(feed_values)
        cands = _candidates(prog, self.items, self.order, feed_values)
        ok = dict(cands)
        ctx = None
        try:
            for i, (call, ctx) in enumerate(prog.calls):
                want = cands.get(i)
                if want is not None and not all(
                        _matches(vals[s], info) for s, info in zip(prog.entries[i][2], want)):
                    ok.pop(i, None)
                call(vals, step)
        except Exception as e:  # noqa: BLE001 - name the node that failed
            raise node_error(ctx, e) from e
        if len(self._by_sig) >= _SIGNATURES:
            self._by_sig.clear()
        self._by_sig[sig] = _unguarded_calls(prog, ok)


def _guarded(fn, item):
    return fn is item.fn and hasattr(fn, "limit") and hasattr(fn, "__wrapped__")


def _signature(feed_values):
    """The feeds' dtypes, shapes and the values the verdict cache keys on; None when a feed
    is not an array."""
    sig = []
    for v in feed_values:
        if type(v) is not np.ndarray:
            return None
        kind = v.dtype.kind
        if kind == "O":
            return None
        keyed = v.ndim == 0 or (kind in "iu" and v.size <= _KEY_ELEMENTS)
        sig.append((v.dtype.str, v.shape, v.tobytes() if keyed else None))
    return tuple(sig)


def _feed_info(v):
    dtype = DType.from_numpy(v.dtype)
    if v.ndim == 0 or (v.dtype.kind in "iu" and v.size <= _KEY_ELEMENTS):
        elems = tuple(int(x) for x in v.reshape(-1)) if v.dtype.kind in "iu" else None
        return TensorInfo(dtype, tuple(v.shape), v, elems)
    return TensorInfo(dtype, tuple(v.shape))


def _known(info):
    """An inferred tensor usable here: a dtype of an array and a fully defined shape."""
    if info.dtype is None or info.shape is None or any(d is None for d in info.shape):
        return False
    return info.dtype.base not in (DType.RESOURCE, DType.VARIANT, DType.STRING)


def _infer(items, order, feed_values):
    """(item id, port) -> TensorInfo from the signature alone (only known ones)."""
    ins = {}
    for it in items:
        for dst, port, idx in it.out_edges:
            if port >= 0:
                ins.setdefault(dst, {})[idx] = (it.id, port)
    known = {}
    for it in order:
        if it.kind == P.FEED:
            v = feed_values[it.feed_index]
            known[(it.id, 0)] = _feed_info(v)
            continue
        node = it.node
        if (it.kind != P.KERNEL or node is None or it.needs_step or it.ref_inputs
                or it.deref or "_output_shapes" in node.attr or not has_op(it.op)
                or get_op(it.op).has_effects):
            continue
        srcs = ins.get(it.id, {})
        inputs = [known.get(srcs.get(i)) for i in range(it.num_inputs)]
        if any(x is None for x in inputs):
            continue
        try:
            outs = infer_node(node, inputs)
        except Exception:  # noqa: BLE001 - unknown, then: the guard stays
            continue
        for port, info in enumerate(outs):
            # (a value inferred here is a function of the signature: nothing else was given)
            if _known(info):
                known[(it.id, port)] = info
    return known


def _candidates(prog, items, order, feed_values):
    """{entry index: inferred info per input} of the guarded calls whose verdict keys are
    fixed by the signature (module docstring, 2)."""
    known = _infer(items, order, feed_values)
    out = {}
    for i, (item, entry) in enumerate(zip(prog.items, prog.entries)):
        if not _guarded(entry[0], item):
            continue
        infos = [known.get(src) for src in prog.sources[i]]
        if all(x is not None and (x.value is not None or not _value_keyed(x)) for x in infos):
            out[i] = infos
    return out


def _value_keyed(info):
    """Whether the verdict cache keys on this input's value (limits._cache_key)."""
    return len(info.shape) == 0 or info.dtype.base.np.kind in "iu"


def _matches(value, info):
    """Whether an actual input is what was inferred: dtype, shape, and the value if known."""
    if type(value) is not np.ndarray:
        if not isinstance(value, np.generic):
            return False
        value = np.asarray(value)
    if value.shape != info.shape or value.dtype != info.dtype.base.np:
        return False
    if not _value_keyed(info):
        return True
    return info.value is not None and np.array_equal(value, np.asarray(info.value))


def _unguarded_calls(prog, ok):
    """The program's calls, those of `ok` with the kernel behind the check, consecutive
    convolutions joined (conv_chains.py)."""
    calls = list(prog.calls)
    for i in ok:
        item = prog.items[i]
        fn, ctx, ins, _, _, deref, free = prog.entries[i]
        calls[i] = (slot_call(item, ins, prog.out_slots[i], free or (), deref, fn.__wrapped__),
                    ctx)
    return conv_chains.merge(calls)
