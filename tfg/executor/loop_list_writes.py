"""List writes made in place: a lockstep loop's TensorListSetItem (tfg/executor/
loop_lockstep.py), and any compiled loop's TensorListPushBack and TensorListPopBack
(tfg/executor/loops.py), whose list is a loop variable read by nothing else in the body.

    Before, each iteration of a Keras RNN's output list (20 items):
      out_list' = TensorListSetItem(out_list, i, h)    # a copy of the 20-item Python list
    After, from the second write of a run:
      out_list.items[i] = h                            # the list this run made, in place

A TensorList is a value (tfg/kernels/list_ops.py: every op that changes one returns a new
one), so changing one in place is right only where no reader can see the old value. Here
the list the write takes is the loop variable's (its Merge's) and the new list goes only to
its NextIteration: nothing in the loop reads a list the next write replaces, and the last
one leaves the loop through the Exit after the writes end. The writer changes only a list
it made itself in this run (a copy of the list the normal call returned), and only with an
item of the dtype and shape the normal call accepted at an index in range, so the list holds
what the normal calls would have made. Anything else runs the normal call.

The same for a TF2 gradient loop's stacks of TensorLists (push_pop_in_place): the forward
loop pushes each value its gradient needs, the gradient loop pops them, and each push or pop
copied the list's items (a loop of n iterations: n^2 / 2 copies a list; an LSTM's gradient
keeps 8 lists: at 1,000 steps 4 million copies a step). From the second call of a run, the
list that call made gets the item appended (popped) in place.
"""
import numpy as np

from tfg.kernels._util import immutable
from tfg.kernels.list_ops import TensorList

ndarray = np.ndarray


def in_place(lst, program, others):
    """`lst` (the (call, item) pairs of the program's calls after the chain) with the writes
    that may be made in place wrapped (module docstring); `others`: the (call, item) lists
    whose calls may read the program's slots. -> (the new pairs, the writers' reset
    functions, to call at the start of each run)."""
    nexts = {m[4]: m[0] for m in program.merges if m[0] != m[4]}  # NextIteration -> Merge
    reads = _reads(program, others)
    if reads is None:
        return lst, ()
    out, resets = [], []
    for call, it in lst:
        s = program.call_slots.get(it.id)
        if (it.op == "TensorListSetItem" and s is not None and s[2] is call
                and len(s[0]) == 3 and len(s[1]) == 1):
            (h, i, v), (o,) = s[0], s[1]
            if (nexts.get(o) == h and reads.get(h, 0) == 1 and reads.get(o, 0) == 0
                    and h not in program.fixed_slots and h != program.pred_slot):
                call = _writer(call, h, i, v, o)
                resets.append(call.reset)
        out.append((call, it))
    return out, tuple(resets)


def _reads(program, others):
    """{slot: how many calls read it} over `others`, a fused chain's members read each of
    theirs; None where a call's slots are not known (a call a later pass made)."""
    reads = {}
    for lst in others:
        for call, it in lst:
            io = getattr(call, "io", None)
            if io is not None:
                ins = [s for _, _, member_ins, _ in io for s in member_ins]
            else:
                s = program.call_slots.get(it.id)
                if s is None or s[2] is not call:
                    if not hasattr(call, "row_of"):
                        return None
                    ins = call.row_of[:2]  # (an input projection: its state and index)
                else:
                    ins = s[0]
            for slot in set(ins):
                reads[slot] = reads.get(slot, 0) + 1
    return reads


def _writer(call, h, i, v, o):
    int32, int64 = np.int32, np.int64
    # (the list this run made, the item dtype and shape, the index object and its value
    # the normal call accepted: a Keras RNN's last output is written at a Const 0)
    own = [None, None, None, None, None]

    def set_item(vals, step):
        lst, idx, item = vals[h], vals[i], vals[v]
        mine = own[0]
        if lst is mine and mine is not None and type(item) is ndarray \
                and item.dtype is own[1] and item.shape == own[2]:
            t = type(idx)
            k = own[4] if idx is own[3] else idx if t is int32 or t is int64 else -1
            if 0 <= k < len(mine.items):
                mine.items[k] = item
                vals[o] = mine
                return
        call(vals, step)
        new = vals[o]
        own[0] = None
        k = _index(idx)
        if (type(new) is TensorList and type(item) is ndarray and k is not None
                and 0 <= k < len(new.items) and new.items[k] is item):
            # (a copy: the returned list may be one another reader holds)
            own[0] = vals[o] = new.with_items(list(new.items))
            # (the index object is remembered only where nothing can write into it: a
            # 0-d array some in-place call updates would keep its identity, not its value)
            own[1], own[2], own[3], own[4] = (item.dtype, item.shape,
                                              idx if immutable(idx) else None, k)

    def reset():
        own[0] = None
    set_item.reset = reset
    return set_item


def _index(idx):
    """A list index as the kernel reads it: an int32/int64 scalar or 0-d array; else None."""
    if type(idx) is np.ndarray and idx.ndim == 0 and idx.dtype.type in (np.int32, np.int64):
        return int(idx)
    if type(idx) is np.int32 or type(idx) is np.int64:
        return int(idx)
    return None


def push_pop_in_place(lst, program, reads):
    """`lst` (the (call, item) pairs of a compiled loop body) with each TensorListPushBack
    and TensorListPopBack wrapped that may change its list in place (the module
    docstring); `reads`: {slot: how many of the loop's nodes read it}. -> (the new pairs,
    the writers' reset functions, to call at the start of each run)."""
    nexts = {m[4]: m[0] for m in program.merges if m[0] != m[4]}  # NextIteration -> Merge
    out, resets = [], []
    for call, it in lst:
        s = program.call_slots.get(it.id)
        pop = it.op == "TensorListPopBack"
        if ((pop or it.op == "TensorListPushBack") and s is not None and s[2] is call
                and len(s[0]) == 2 and len(s[1]) == 1 + pop):
            h, o = s[0][0], s[1][0]
            if (nexts.get(o) == h and reads.get(h, 0) == 1 and reads.get(o, 0) == 0
                    and h not in program.fixed_slots and h != program.pred_slot):
                call = _popper(call, h, o, s[1][1]) if pop else _pusher(call, h, s[0][1], o)
                resets.append(call.reset)
        out.append((call, it))
    return out, tuple(resets)


def _owned(call, h, o, fast):
    """The writer around `call` (the normal call): `fast(vals, mine, own)` changes `mine`,
    the list this run made, in place and returns True, or returns False (then the normal
    call runs, and its new list is copied to become this run's own: the returned one may
    be a list another reader holds), unless `fast.learn(vals)` is None (what the fast path
    cannot take: a GPU array). `own` holds [the list, what fast.learn kept of the normal
    call]."""
    own = [None, None]

    def write(vals, step):
        mine = own[0]
        if mine is not None and vals[h] is mine and fast(vals, mine, own):
            vals[o] = mine
            return
        call(vals, step)
        new = vals[o]
        own[0] = None
        learned = fast.learn(vals)
        if type(new) is TensorList and new.max_num_elements < 0 and learned is not None:
            own[0] = vals[o] = new.with_items(list(new.items))
            own[1] = learned

    def reset():
        own[0] = None
    write.reset = reset
    return write


def _pusher(call, h, v, o):
    """TensorListPushBack in place: an item of the dtype and shape the normal call took."""
    def fast(vals, mine, own):
        item = vals[v]
        if type(item) is ndarray and own[1] == (item.dtype, item.shape):
            mine.items.append(item)
            return True
        return False
    fast.learn = lambda vals: ((vals[v].dtype, vals[v].shape)
                               if type(vals[v]) is ndarray else None)
    return _owned(call, h, o, fast)


def _popper(call, h, o, item_out):
    """TensorListPopBack in place: a set last item (an unset one is the normal call's
    zeros, an empty list its error)."""
    def fast(vals, mine, own):
        items = mine.items
        if items and items[-1] is not None:
            vals[item_out] = items.pop()
            return True
        return False
    fast.learn = lambda vals: True
    return _owned(call, h, o, fast)
