"""ConcatV2 chains that grow one tensor (DenseNet's dense blocks), appended into one buffer
(the fast path on a CPU).

    before: c1 = concat(x, y1); c2 = concat(c1, y2); ... c6 = concat(c5, y6)
            each concat copies everything before it: O(layers^2) bytes per dense block
    after:  buf = empty(c6's shape); c1 = buf[..., :n1] with x and y1 written in;
            c2 = buf[..., :n2] with only y2 written; ...: each byte written once

A link is a ConcatV2 whose first value is the output of the ConcatV2 before it, that output
being read by no other ConcatV2 and fetched by nobody (neither is any member's). Each output
is then a view of the chain's buffer over what is filled so far; later links write only past
that, so a view never changes once returned, whoever reads it and whenever. Nothing writes
into these views: ConcatV2 is not a fresh_output op (inplace.py, chains.py write only into
fresh arrays). Values are the same bytes as np.concatenate's (a concatenation is a copy);
outputs of all but a chain's last member are strided views instead of contiguous arrays.

Exactness and fallbacks. The first step of a head's input signature (its values' dtype and
shapes, the axis) runs every member's ordinary (memory-checked) kernel and learns the last
member's output shape; a later step with that signature allocates that buffer (a size the
memory guard just allowed) at the head. A link appends only when its first value is the view
the member before it returned in this step, the axis is the head's, and every other value is
an ndarray of the buffer's dtype, its shape outside the axis, fitting in what is left; any
other call runs the ordinary kernel (and the rest of the chain copies, as before). The state
is one tuple replaced whole, so steps of one Session in several threads stay correct (they
fall back to copies when they meet).
"""
import numpy as np

from tfg.kernels.registry import get_kernel

_ndarray = np.ndarray


def find(runnable, ins, fetched):
    """Chains of ConcatV2 items (lists, head first, each at least two long) among `runnable`
    (plan items in schedule order); `ins`: item id -> its (item id, port) sources;
    `fetched`: the (item id, port) fetched."""
    concats = {it.id: it for it in runnable if _is_cpu_concat(it)}
    if len(concats) < 2:
        return []
    readers = {}  # (item id, port) of a concat's output -> the concats reading it
    for it in runnable:
        if it.id in concats:
            for src in ins[it.id]:
                if src is not None and src[0] in concats:
                    readers.setdefault(src, []).append(it.id)
    nxt = {}  # concat id -> the concat appending to its output
    for it in concats.values():
        src = ins[it.id][0]
        if (src[0] in concats and src[1] == 0 and readers.get(src) == [it.id]
                and src not in fetched and (it.id, 0) not in fetched):
            nxt[src[0]] = it.id
    heads = [i for i in nxt if i not in set(nxt.values())]
    chains = []
    for h in heads:
        chain = [concats[h]]
        while chain[-1].id in nxt:
            chain.append(concats[nxt[chain[-1].id]])
        chains.append(chain)
    return chains


def kernels(chain):
    """{item id: factory(base fn) -> fn} for the members of one chain: `base` is the
    member's ordinary prepared kernel (behind the memory check)."""
    state = [None]  # (buf, last view returned, filled extent, axis) of the current step
    learned = [None]  # (head signature, last output's shape, dtype, axis) once learned
    learning = [None]  # (head signature, last output so far) while learning
    last_id = chain[-1].id
    out = {chain[0].id: lambda base: _head(base, state, learned, learning)}
    for it in chain[1:]:
        out[it.id] = (lambda final: lambda base: _link(base, state, learned, learning, final)
                      )(it.id == last_id)
    return out


def _signature(values, axis):
    sig = [int(axis) if type(axis) is _ndarray and axis.ndim == 0 else None]
    for v in values:
        if type(v) is not _ndarray:
            return None
        sig.append((v.dtype, v.shape))
    return tuple(sig)


def _head(base, state, learned, learning):
    def concat_head(ctx, *inputs):
        values, axis = inputs[:-1], inputs[-1]
        sig = _signature(values, axis)
        rec = learned[0]
        if sig is not None and rec is not None and rec[0] == sig:
            _, shape, dtype, ax = rec
            buf = np.empty(shape, dtype)
            lead = (slice(None),) * ax
            n = 0
            for v in values:
                k = v.shape[ax]
                buf[lead + (slice(n, n + k),)] = v
                n += k
            view = buf[lead + (slice(0, n),)]
            state[0] = (buf, view, n, ax)
            return view
        state[0] = None
        r = base(ctx, *inputs)
        learning[0] = (sig, r) if sig is not None and sig[0] is not None else None
        return r
    concat_head.__name__ = "concat_head"
    return concat_head


def _link(base, state, learned, learning, final):
    def concat_link(ctx, *inputs):
        st = state[0]
        a = inputs[0]
        if st is not None and a is st[1]:
            buf, _, n, ax = st
            axis = inputs[-1]
            nd = buf.ndim
            if type(axis) is _ndarray and axis.ndim == 0 and -nd <= int(axis) < nd \
                    and int(axis) % nd == ax:
                view = _append(buf, n, ax, inputs[1:-1])
                if view is not None:
                    state[0] = None if final else (buf, view, view.shape[ax], ax)
                    return view
            learned[0] = None  # this step's shapes are not the learned ones: learn again
        state[0] = None
        r = base(ctx, *inputs)
        lrn = learning[0]
        if lrn is not None and a is lrn[1] and type(r) is _ndarray:
            if final:
                ax = lrn[0][0] % r.ndim
                learned[0] = (lrn[0], r.shape, r.dtype, ax)
                learning[0] = None
            else:
                learning[0] = (lrn[0], r)
        else:
            learning[0] = None
        return r
    concat_link.__name__ = "concat_final" if final else "concat_link"
    return concat_link


def _append(buf, n, ax, values):
    """Write `values` into `buf` from `n` along `ax`; the view over the filled part, or None
    (nothing written) when a value does not fit."""
    shape, dtype, cap = buf.shape, buf.dtype, buf.shape[ax]
    end = n
    for v in values:
        if type(v) is not _ndarray or v.dtype is not dtype or v.ndim != buf.ndim:
            return None
        vs = v.shape
        if vs[:ax] != shape[:ax] or vs[ax + 1:] != shape[ax + 1:]:
            return None
        end += vs[ax]
    if end > cap:
        return None
    lead = (slice(None),) * ax
    for v in values:
        k = v.shape[ax]
        buf[lead + (slice(n, n + k),)] = v
        n += k
    return buf[lead + (slice(0, end),)]


def _is_cpu_concat(it):
    return (it.kind == "kernel" and it.op == "ConcatV2" and it.ctx is not None
            and it.ctx.xp is np and not it.needs_step and not it.deref
            and getattr(it.fn, "__wrapped__", it.fn) is get_kernel("ConcatV2", "CPU").fn)
