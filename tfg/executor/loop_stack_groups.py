"""A compiled loop body's stack pushes as one call at its end, and each run of adjacent stack
pops as one call (tfg/executor/loops.py): a TF1 training loop keeps every value its gradient
needs on a stack of its own, so its forward body pushes and its gradient body pops about ten
values an iteration.

    Before (a TF1 GRUCell's forward iteration, 22 calls):
      x_t = read(xs, i); push(s1, h); push(s2, x_t); concat; push(s3, ...); gate chain;
      push(s4, ...); push(s5, ...); push(s6, ...); concat; ...; i + 1
    After (13 calls):
      x_t = read(xs, i); concat; gate chain; concat; ...; i + 1
      push_all(vals)     # s1 <- h, s2 <- x_t, ... in the pushes' order, one call
    and its gradient iteration's ten pops at its start: one call instead of ten.

A call of the loop's list costs about 0.3-0.5 us before the kernel's first line (the loop's
dispatch, the closure's frame); a push or pop itself about 0.5. A push moves to the end only
where nothing in the iteration reads what it returns and its stack is touched by pushes
alone in this body: the stack then holds the same items in the same order when the
iteration ends (nothing in a body writes into an array a slot holds, so the value pushed
later is the one pushed before). Each member keeps its own fast path and, where that does
not apply (a closed or bounded stack, a value a GPU loop swapped out), its own prepared call,
whose error names its own node.
"""
from tfg.executor.loop_calls import LoopNodeError
from tfg.kernels.stack_ops import Stack
from tfg.kernels.stack_swap import Swapped, swap_in

_NONE = object()  # nothing popped


def group_stack_calls(body, reads, outside):
    """`body` ((call, item) pairs of a cond-free loop body, in order) with its movable pushes
    as one call at the end and each run of adjacent pops as one call. `reads`: {slot: how
    many of the loop's nodes read it}; `outside`: slots read after the iteration (the next
    values, the Exits, the predicate)."""
    pushes = [(call, it) for call, it in body if hasattr(call, "stack_push")]
    handle_pushes = {}
    for call, _ in pushes:
        h = call.stack_push[0]
        handle_pushes[h] = handle_pushes.get(h, 0) + 1
    moving = {id(call) for call, _ in pushes
              if reads.get(call.stack_push[2], 0) == 0 and call.stack_push[2] not in outside
              and reads.get(call.stack_push[0], 0) == handle_pushes[call.stack_push[0]]}
    out, run, moved = [], [], []
    for call, it in body:
        if id(call) in moving:
            moved.append((call, it))
            continue
        if hasattr(call, "stack_pop"):
            run.append((call, it))
            continue
        out.extend(_pops(run))
        run = []
        out.append((call, it))
    out.extend(_pops(run))
    if len(moved) > 1:
        out.append((_push_all(moved), moved[0][1]))
    else:
        out.extend(moved)
    return out


def _pops(run):
    """One call for a run of pops (the run itself where it is a single pop)."""
    if len(run) < 2:
        return run
    members = tuple((c.stack_pop[0], c.stack_pop[1], c, it) for c, it in run)

    def pop_all(vals, step):
        it = None
        try:
            for handle, out, call, it in members:
                s = vals[handle]
                if type(s) is Stack:
                    items = s.items
                    with s.lock:  # (Stack.pop, inline: loop_kernels.stack_call's)
                        v = items.pop() if items and not s.closed else _NONE
                    if v is not _NONE:
                        if type(v) is Swapped or (items and type(items[-1]) is Swapped):
                            v = swap_in(s, v)  # a value a GPU loop pushed with swap_memory
                        vals[out] = v
                        continue
                call(vals, step)  # empty, closed or no stack: the kernel words it
        except LoopNodeError:
            raise
        except Exception as e:  # noqa: BLE001 - the executor names the member's node
            raise LoopNodeError(it, e) from e
    return [(pop_all, run[0][1])]


def _push_all(moved):
    members = tuple((c.stack_push[0], c.stack_push[1], c.stack_push[2], c, it)
                    for c, it in moved)

    def push_all(vals, step):
        it = None
        try:
            for handle, elem, out, call, it in members:
                s = vals[handle]
                if type(s) is Stack and s.max_size < 0:
                    v = vals[elem]
                    with s.lock:  # (Stack.push, inline: loop_kernels.stack_call's)
                        if not s.closed:
                            s.items.append(v)
                            vals[out] = v
                            continue
                call(vals, step)  # closed, bounded or no stack: the kernel pushes or words it
        except LoopNodeError:
            raise
        except Exception as e:  # noqa: BLE001 - the executor names the member's node
            raise LoopNodeError(it, e) from e
    return push_all
