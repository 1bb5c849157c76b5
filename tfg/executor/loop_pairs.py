"""Two independent compiled loops run in lockstep, their fused cells as one batched call an
iteration (tfg/executor/batched_chain.py): the forward and backward loops of a Keras
Bidirectional layer. This module decides which two loop programs may pair and what runs
when the lockstep cannot; tfg/executor/loop_lockstep.py runs the iterations (what each
runs: lockstep_plans.py) and
tfg/executor/loop_pair_items.py merges the two items of the outer schedule.

    >>> view = outer_view(plan)            # tfg/executor/outer.py pairs them
    >>> [it.op for it in view.items if it.op == "_CompiledLoopPair"]
    ['_CompiledLoopPair']                  # a BiLSTM's two directions, one call

Before: the forward loop's 20 iterations, then the backward loop's, each iteration one
fused chain of ~20 numpy calls on [8, 32] states. After: iteration t of both, then t + 1:
each program's own calls (counters, predicate, list reads and writes) in its own order, its
chain's steps once on the two chains' operands stacked ([2, 8, 32] @ [2, 32, 128] as one
np.matmul), values bit for bit the chains' own; the two loops' equal counters and
predicates computed once (tfg/executor/pair_scalars.py).

Interleaving two loops is one of the orders the dataflow executor may take when neither
reads the other: the outer schedule pairs two loop items only where no path joins them,
and only programs without stateful kernels or Ref reads whose chains are the same chain
(`pair_runner`). The run is exact or it is not used: where the two predicates differ in an
iteration (two trip counts) the pair is dropped for good and both loops run again one after
the other from their Enter values (the kernels are stateless; nothing wrote into an Enter
value); any error does the same, so the error raised, and the node it names, are the
sequential run's. `TFG_LOOP_PAIR=0` turns this off (for A/B measurements).
"""
import os

from tfg.executor import loop_lockstep as LS
from tfg.executor import plan as P
from tfg.executor.batched_chain import batched
from tfg.executor.lockstep_plans import Mismatch, Plans
from tfg.schemas.ops import get_op, has_op

PAIR_OP = "_CompiledLoopPair"


class _NoGroup:
    error = None


_NO_GROUP = _NoGroup()


def enabled():
    return os.environ.get("TFG_LOOP_PAIR", "1") != "0"


def _chain_of(program):
    """The one fused chain of the program's body (a call with `io`), or None."""
    chains = [c for c, _ in program.body_rest if hasattr(c, "io")]
    if len(chains) != 1 or not all(any(c is chains[0] for c, _ in lst)
                                   for lst in (program.body, program.body_fixed)):
        return None
    return chains[0]


def _pure(program):
    """Whether every call of the program is of a stateless kernel without Ref reads (so the
    loop may run again from its Enter values) or of control flow."""
    if program.index_read or program._deref:
        return False
    for lst in (program.hoisted, program.header, program.body, program.tail):
        for _, it in lst:
            if it.kind == P.KERNEL and (
                    it.deref is not None or it.blocking or not has_op(it.op)
                    or get_op(it.op).has_effects):
                return False
    return True


def pair_runner(pa, pb):
    """run(enter values of A, of B, step) -> (exits of A, exits of B) for two loop programs
    that may run in lockstep, or None where they may not (module docstring)."""
    if not enabled() or pa is pb or not _pure(pa) or not _pure(pb):
        return None
    ca, cb = _chain_of(pa), _chain_of(pb)
    if ca is None or cb is None:
        return None
    both = batched(ca, cb)
    if both is None:
        return None
    plan = Plans(pa, pb, ca, cb, both)
    state = {"off": False}

    def run(ea, eb, step):
        if not state["off"]:
            try:
                return LS.lockstep(plan, ea, eb, step)
            except Mismatch:
                state["off"] = True  # (two trip counts: the next runs go in turn at once)
            except Exception:  # noqa: BLE001 - the sequential run below raises it, named
                pass
        # each loop alone from its Enter values: the sequential run's values, or its error
        return (pa.run(ea, step, _NO_GROUP), pb.run(eb, step, _NO_GROUP))
    run.state = state
    return run
