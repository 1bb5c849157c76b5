"""Loop bodies compiled once: a while loop's frame as a fixed schedule of prepared calls over
integer slots, so that an iteration is a tight loop instead of the dataflow executor's per-node
bookkeeping (pending counts, dead counts, tags, ready queue).

    >>> programs = compile_loops(plan)          # frame name -> LoopProgram, where one applies
    >>> exits = programs[b"rnn/while_context"].run(enter_values, step, group)
    >>> exits                                   # (Exit item, its value) once the loop ended
    [(<Item 41 rnn/Exit_1 exit>, array(...))]

Before: every iteration of `while i < n: i, x = i + 1, x * c` dispatches 9 nodes through the
ready queue, each with its frame and iteration state. After: 3 calls per iteration (Less, Mul,
AddV2 on numpy scalars, tfg.kernels.math_ops.scalar_kernel); the LoopCond, Switches, Identities,
NextIterations and Exits share their input's slot and cost nothing, the Const is computed once.

A frame is compiled when the executor's exact semantics reduce to this order, that is when,
as in every loop `tf.while_loop`, TensorFlow's While lowering or tfg's builder writes:
- its nodes are reached from its Enters without crossing its Exits, and take every input from
  inside the frame (or an Enter); none is a nested frame's Enter (the inner loop is compiled,
  the outer one runs in the dataflow executor), a Send/Recv, a kernel that may block (queues)
  or a fetched tensor (an Exit may be fetched);
- each non-constant Enter feeds only Merges; the loop's Merges join one such Enter and one
  NextIteration; the loop's Switches take the one LoopCond's output as predicate;
- with the predicate true, the nodes after a loop Switch's output 1 are live and those after
  output 0 dead, and the other way round when it is false: each node depends on one side at
  most, every NextIteration on output 1 and every Exit on output 0 (a control edge from a
  Switch fires whichever side it took);
- other Switches and Merges are a cond inside the body: the nodes after them may be dead in
  an iteration. Each gets a condition (which cond branches it is after); a cond's Merge of
  both branches is as live as its Switch. A node of a non-empty condition runs guarded: dead
  (NOVAL in its slots, tfg/executor/loop_calls.py) when an input or a control input is, as
  the dataflow executor decides. Gradient loops of conds (stacks of predicates) qualify.
  Where every node's condition is known at compile time (the usual case), the conds run as
  blocks instead, without dead values: Switches forward their data, each branch is one
  call behind one test of its predicate, a Merge picks the branch taken (loop_conds.py);
- no Enter depends on an Exit of the same frame instance (the loop could not start before it
  ends), nor on a _Recv (another device's dependencies are not visible here).
Then an iteration runs what the predicate needs, reads it, and runs in dependency order the
other nodes of no side (a ControlTrigger is of none: it is never dead) and those of the live
side; iterations run one after the other,
which is a valid schedule for every `parallel_iterations` (stack pushes and pops keep their
order). A zero-iteration loop runs the false side at once. Loop invariants (stateless kernels
of constant Enters, Consts and loop variables passed through unchanged) run in the first
iteration only and keep their slots; a constant Enter of a variable's buffer that a kernel
writes in place (ref_aliases.py: a TF1 training loop's `w/read`) is not one. Dead Enter
values (a loop in an untaken cond branch) and traced steps go through the dataflow executor,
as do frames that do not qualify
(`compile_loops(plan, why)` says why). Nothing here changes values: the same kernels run on
the same inputs (but for an RNN's input products and a gradient loop's accumulations, made
as one GEMM each: loop_projection.py, loop_accumulation.py, within float rounding).
"""
import operator
import os

import numpy as np

from tfg.executor import loop_conds as LC
from tfg.executor import loop_graph as G
from tfg.executor import plan as P
from tfg.executor.calls import slot_call
from tfg.executor.direct_calls import (list_get_call, list_set_call, matmul_call,
                                       select_call, slice_call)
from tfg.executor.loop_calls import (INDEX, LoopNodeError, binary_call, forward, guarded,
                                     merge_call, switch_call, unary_call)
from tfg.executor.loop_array_calls import array_call
from tfg.executor.loop_kernels import kernel_call
from tfg.executor.loop_stack_groups import group_stack_calls
from tfg.executor.loop_list_writes import push_pop_in_place
from tfg.executor.loop_fusion import fuse_chains
from tfg.executor.loop_accumulation import defer_accumulations
from tfg.executor.loop_projection import hoist_projections
from tfg.executor.ref_aliases import variable_buffers
from tfg.executor.devices import to_host
from tfg.kernels.math_ops import (SCALAR_OPS, array_kernel, scalar_kernel,
                                  select, select_v2)
from tfg.schemas.ops import get_op, has_op
from tfg.kernels.indexing_ops import strided_slice
from tfg.kernels.list_ops import tensor_list_get_item, tensor_list_set_item
from tfg.kernels.nn_ops import matmul as nn_matmul
from tfg.kernels.resources import Ref



class LoopProgram:
    """One frame's compiled iteration (see the module docstring)."""

    def __init__(self, frame_name, nslots, enter_slots, merges, hoisted, header, pred_slot,
                 body, tail, exits, index_read, scalar_enters=()):
        self.frame_name = frame_name
        self.nslots = nslots
        self.enter_slots = enter_slots  # Enter item id -> slot of its value
        # (out slot, index slot, Enter slot, Enter's input index, NextIteration slot, its
        # input index, deref) per Merge
        self.merges = merges
        self.hoisted = hoisted  # (call, item): constants, run once before the first iteration
        self.header = header  # (call, item): what the predicate needs, in order
        self.pred_slot = pred_slot
        self.body = body  # (call, item): the rest when the predicate is true
        self.tail = tail  # (call, item): the rest when it is false (the Exits among them)
        self.exits = exits  # (Exit item, slot of its value)
        self.index_read = index_read  # whether a node reads a loop Merge's value_index
        self.scalar_enters = scalar_enters  # slots of 0-d invariants to keep as numpy scalars
        self.header_rest, self.body_rest = header, body  # without the loop invariants
        # Values fixed by the graph (Consts, and invariants of Consts only): after a run that
        # computed them, later runs take them from `fixed` ([(slot, value)]) and run the
        # first iteration's lists without them (`header_fixed`, `body_fixed`); see
        # _fixed_values.
        self.fixed_slots = ()
        self.fixed = None
        self.header_fixed, self.body_fixed = header, body
        self.call_slots = {}  # item id -> (input slots, output slots, call) (_build)
        self.resets = ()  # reset functions of the in-place list writers (_build)
        # the Merges whose value changes: a passed-through one keeps its slot as it is
        moving = [m for m in merges if m[0] != m[4]]
        self._outs = tuple(m[0] for m in moving)
        self._nexts = tuple(m[4] for m in moving)
        self._deref = any(m[6] for m in merges)

    def start(self, enter_values):
        """A run's slots from {Enter item id: value}, and the lists it runs:
        (vals, hoisted, header, body, fixed); `fixed` is None until the kept values exist
        (then the hoisted calls are not run again). loop_pairs.py starts its two loops here."""
        vals = [None] * self.nslots
        for reset in self.resets:
            reset()  # (the in-place list writers: a new run's lists are its own)
        for iid, slot in self.enter_slots.items():
            vals[slot] = enter_values[iid]
        for slot in self.scalar_enters:
            v = vals[slot]
            if type(v) is np.ndarray and v.ndim == 0 and v.dtype.kind in "biuf":
                vals[slot] = v[()]
        for out, idx, enter_slot, enter_index, _, _, deref in self.merges:
            v = vals[enter_slot]
            vals[out] = v.get() if deref and type(v) is Ref else v
            vals[idx] = INDEX[enter_index]
        fixed = self.fixed
        if fixed is None:
            return vals, self.hoisted, self.header, self.body, fixed
        for slot, v in fixed:
            vals[slot] = v
        return vals, (), self.header_fixed, self.body_fixed, fixed

    def run(self, enter_values, step, group):
        """Run the loop from {Enter item id: value}; -> [(Exit item, value)], or None when
        the step failed elsewhere meanwhile. A kernel's error propagates as (item, error)."""
        vals, hoisted, header, body, fixed = self.start(enter_values)
        pred_slot = self.pred_slot
        outs, nexts = self._outs, self._nexts
        single = len(outs) == 1
        next_values = operator.itemgetter(*nexts) if len(nexts) > 1 else None
        item = None
        try:
            for call, item in hoisted:
                call(vals, step)
            first = True
            while True:
                for call, item in header:
                    call(vals, step)
                pred = vals[pred_slot]
                if type(pred) is not np.bool_:
                    if type(pred) is Ref:
                        pred = pred.get()
                    if not isinstance(pred, (np.ndarray, np.generic, bool)):
                        pred = to_host(pred)  # a predicate computed on a GPU
                if not pred:
                    break
                for call, item in body:
                    call(vals, step)
                # The Merges take the NextIterations' values all at once (a body may swap
                # two loop variables).
                if single:
                    vals[outs[0]] = vals[nexts[0]]
                elif not outs:
                    pass
                else:
                    for s, v in zip(outs, next_values(vals)):
                        vals[s] = v
                if first:
                    first = False
                    header, body = self.header_rest, self.body_rest
                    if fixed is None and self.fixed_slots:
                        # (one list, assigned whole: a concurrent run sees it or not)
                        self.fixed = [(s, vals[s]) for s in self.fixed_slots]
                    if self.index_read or self._deref:
                        self._after_first(vals)
                elif self._deref:
                    self._after_first(vals)
                if group.error is not None:
                    return None
            for call, item in self.tail:
                call(vals, step)
        except LoopNodeError:
            raise  # a fused chain's member, named already
        except Exception as e:  # noqa: BLE001 - the executor names the node
            raise LoopNodeError(item, e) from e
        return [(exit_item, vals[slot]) for exit_item, slot in self.exits]

    def _after_first(self, vals):
        """value_index of the Merges from the second iteration on; Refs read."""
        for out, idx, _, _, _, next_index, deref in self.merges:
            vals[idx] = INDEX[next_index]
            if deref and type(vals[out]) is Ref:
                vals[out] = vals[out].get()


def compile_loops(plan, why=None):
    """{frame name: LoopProgram} for the frames of `plan` that qualify; `why` (a dict), if
    given, gets {frame name: reason} for the others."""
    items = plan.items
    sources = [[] for _ in items]  # item id -> [(src item, port, input index)]
    for it in items:
        for dst, port, idx in it.out_edges:
            sources[dst].append((it, port, idx))
    enters = {}
    for it in items:
        if it.kind == P.ENTER:
            enters.setdefault(it.frame_name, []).append(it)
    out = {}
    buffers = variable_buffers(plan) if enters else frozenset()
    for name, frame_enters in enters.items():
        try:
            out[name] = _compile_frame(name, frame_enters, items, sources, buffers)
        except G.Unsupported as e:
            if why is not None:
                why[name] = str(e)
    return out


def _compile_frame(name, frame_enters, items, sources, buffers):
    members, exits = G.frame_members(name, frame_enters, items)
    if members is None:
        raise G.Unsupported("a nested frame")
    member_ids = {it.id for it in members}
    enter_ids = {it.id for it in frame_enters}
    for it in members:
        if it.kind in (P.SEND, P.RECV, P.FEED) or it.blocking:
            raise G.Unsupported(f"{it.name!r} ({it.op}) communicates or may block")
        if it.fetch_ports and it.kind != P.EXIT:
            raise G.Unsupported(f"{it.name!r} is fetched")
        for src, _, _ in sources[it.id]:
            if src.id not in member_ids and src.id not in enter_ids:
                raise G.Unsupported(f"{it.name!r} reads {src.name!r} from outside the frame")
    frame = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
    if G.enter_depends_on_exit(frame_enters, exits, sources, member_ids, frame):
        raise G.Unsupported("an Enter may wait for an Exit of its own frame")
    loop_merges, inner_merges = G.loop_and_cond_merges(members, sources)
    for enter in frame_enters:
        if not enter.is_constant and any(d not in loop_merges for d, _, _ in enter.out_edges):
            raise G.Unsupported(f"Enter {enter.name!r} feeds something else than a Merge")
    loop_conds = [it for it in members if it.kind == P.IDENT]
    if len(loop_conds) != 1:
        raise G.Unsupported(f"{len(loop_conds)} LoopConds")
    pred = loop_conds[0]
    # Which side of the predicate each node depends on, in a topological order of one
    # iteration (NextIteration -> Merge edges are the next iteration's).
    order = G.iteration_order(members, member_ids, sources, loop_merges)
    if order is None:
        raise G.Unsupported("a cycle within one iteration")
    side, cond, loop_switches = G.sides(order, sources, enter_ids, loop_merges, pred)
    # the constant Enters whose values do not change while the loop runs (not a variable's
    # buffer that a kernel writes in place)
    fixed_enters = [e for e in frame_enters if e.is_constant and e.id not in buffers]
    return _build(name, frame_enters, fixed_enters, items, sources, order, side, cond,
                  loop_merges, loop_switches, pred, exits)


def _build(name, frame_enters, fixed_enters, items, sources, order, side, cond, loop_merges,
           loop_switches, pred, exits):
    """Slots, aliases and calls from the analysis of _compile_frame."""
    slot = {}  # (item id, port) -> slot; an alias shares its input's slot

    def new(key):
        slot[key] = n = len(slot_count)
        slot_count.append(key)
        return n
    slot_count = []
    for e in frame_enters:
        new((e.id, 0))
    aliased = set()
    live = {}  # item id -> slots that hold a dead value when the node was dead
    ins_of = {}
    optimize = os.environ.get("TFG_LOOP_FUSE", "1") != "0"  # (off: for A/B measurements)
    # Conds of known conditions as blocks, without dead values (loop_conds.py): their
    # Switches forward the data in its slot.
    static = (optimize and os.environ.get("TFG_LOOP_BLOCKS", "1") != "0"
              and LC.static_conds(order, cond))
    switch_alias = {it.id for it in order if static and it.kind == P.SWITCH
                    and it.id not in loop_switches
                    and not _deref(it, *G.data_sources(it, sources)[0])}
    computed = {}  # CSE key -> the first node computing it
    same = {}  # its id -> the nodes whose outputs are its outputs
    for it in order:
        ins = [None] * it.num_inputs
        controls = []
        for src, port, idx in sources[it.id]:
            if port >= 0:
                if it.id in loop_merges:
                    continue
                ins[idx] = slot[(src.id, port)]
            elif cond.get(src.id, G.EMPTY) != G.EMPTY:
                controls.extend(live[src.id])
        if it.id not in loop_merges and None in ins:
            raise G.Unsupported(f"{it.name!r} ({it.op}) misses an input")
        ins_of[it.id] = (ins, controls)
        key = G.cse_key(it, ins, sources) if optimize else None
        if key is not None and cond[it.id] != G.EMPTY:
            key += (cond[it.id],)  # (two branches may read one slot: loop_conds.py)
        if key is not None and it.op == "Const":
            # a Const kept as a numpy scalar (below) is not the same value as one kept as an
            # array: a Keras loop's `i + 1` and its Split's axis, both int32 1
            key += (_scalar_only(it, items),)
        if key is not None and key in computed:
            # The same op on the same values (a BiLSTM's three Tiles of one mask): its
            # outputs are the first one's.
            first = computed[key]
            same.setdefault(first.id, []).append(it)
            aliased.add(it.id)
            for p in range(it.num_outputs):
                slot[(it.id, p)] = slot[(first.id, p)]
            live[it.id] = live[first.id]
            continue
        if key is not None:
            computed[key] = it
        if it.id in switch_alias:
            aliased.add(it.id)
            slot[(it.id, 0)] = slot[(it.id, 1)] = ins[0]
            live[it.id] = tuple(ins)
            continue
        if _aliased(it, ins, controls, sources, loop_switches):
            aliased.add(it.id)
            for p in range(it.num_outputs):
                slot[(it.id, p)] = ins[0]
            live[it.id] = (ins[0],)
            continue
        if _aliased_each(it, ins, controls):
            aliased.add(it.id)
            for p in range(it.num_outputs):
                slot[(it.id, p)] = ins[p]
            live[it.id] = tuple(ins)
            continue
        for p in range(it.num_outputs):
            new((it.id, p))
        if it.num_outputs and it.kind != P.SWITCH:
            live[it.id] = (slot[(it.id, 0)],)
        elif it.kind == P.SWITCH:
            live[it.id] = tuple(ins)
        else:
            live[it.id] = (new((it.id, "live")),) if cond[it.id] != G.EMPTY else ()
    merges = []
    index_read = False
    for mid, data in loop_merges.items():
        (i0, s0), (i1, s1) = data
        (ei, enter), (ni, nxt) = ((i0, s0), (i1, s1)) if s0.kind == P.ENTER else ((i1, s1),
                                                                                 (i0, s0))
        deref = _deref(items[mid], enter, 0) or _deref(items[mid], nxt, 0)
        merges.append((slot[(mid, 0)], slot[(mid, 1)], slot[(enter.id, 0)], ei,
                       slot[(nxt.id, 0)], ni, deref))
        index_read = index_read or any(port == 1 for _, port, _ in items[mid].out_edges)
    # The header computes the predicate; then one pass over the rest runs the nodes of no
    # side and those of the live side, in dependency order (a node of no side may follow one
    # of a side: a ControlTrigger after the body's pivot, the stack pops after it).
    header_ids = G.ancestors(pred, {it.id for it in order}, sources)
    hoisted, header, true_pass, false_pass = [], [], [], []
    call_slots = {}  # item id -> (input slots, output slots, its call): loop_pairs.py's
    invariant = {e.id for e in fixed_enters}
    # a loop variable passed through unchanged (a lowered While carries its captures so):
    # its NextIteration shares the Merge's slot
    invariant.update(mid for mid, data in loop_merges.items()
                     if any(src.kind == P.NEXT and slot[(src.id, 0)] == slot[(mid, 0)]
                            for _, src in data))
    once = set()  # ids of nodes computed in the first iteration only (loop-invariant)
    # ids of the invariants whose values the graph fixes, the same in every run (_fixed_values)
    fixed = {e.id for e in fixed_enters if _const_fed(e, sources)}
    for it in order:
        if _invariant(it, sources, invariant, cond, aliased):
            invariant.add(it.id)
            if it.kind == P.KERNEL and it.num_inputs:
                once.add(it.id)
            if all(src.id in fixed for src, port, _ in sources[it.id] if port >= 0):
                fixed.add(it.id)  # (a Const of the frame too: it has no data input)
        if it.id in loop_merges or it.id in aliased:
            continue
        ins, controls = ins_of[it.id]
        outs = [slot[(it.id, p)] for p in range(it.num_outputs)]
        call = _call(it, ins, outs, sources)
        if static and it.kind == P.MERGE:
            call = LC.cond_merge_call(it, ins, outs, sources, cond, loop_switches, slot, any(
                _deref(it, src, port) for src, port in G.data_sources(it, sources)))
        elif static:
            pass  # it runs in its condition's block, where its inputs are live
        elif cond[it.id] != G.EMPTY and it.kind not in (P.SWITCH, P.MERGE):
            # the inputs that may be dead: after a cond's Switch, or inside a cond
            guard = tuple(dict.fromkeys(
                [s for s, (src, port) in zip(ins, G.data_sources(it, sources))
                 if cond.get(src.id, G.EMPTY) != G.EMPTY
                 or (src.kind == P.SWITCH and src.id not in loop_switches)] + controls))
            own = live[it.id][0] if not outs and live[it.id] else None
            if guard:
                call = guarded(call, guard, outs, own)
        if call is None:
            continue
        call_slots[it.id] = (tuple(ins), tuple(outs), call)
        if it.op == "Const" and not it.num_inputs and cond[it.id] == G.EMPTY:
            # The same value every iteration: computed once. A number read only by kernels
            # with a scalar fast path is kept as a numpy scalar for them (`i + 1`, `x * c`).
            if all(_scalar_only(x, items) for x in [it] + same.get(it.id, [])):
                call = _as_scalar(call, outs[0])
            hoisted.append((call, it))
        elif it.id in header_ids:
            header.append((call, it))
        else:
            if side[it.id] != G.FALSE:
                true_pass.append((call, it))
            if side[it.id] != G.TRUE:
                false_pass.append((call, it))
    if optimize:
        outside = ({m[4] for m in merges} | {slot[(e.id, 0)] for e in exits}
                   | {slot[(pred.id, 0)]})
        # an RNN's input projection for all time steps at once, a gradient loop's
        # accumulated products as one at its end (loop_projection.py, loop_accumulation.py)
        # (not in a body with conds, whose blocks order their calls by the graph's edges)
        plain = (lambda it: cond[it.id] == G.EMPTY and it.id not in once) if all(  # noqa: E731
            cond[it.id] == G.EMPTY for it in order) else (lambda it: False)
        true_pass, projected = hoist_projections(
            true_pass, order, slot, aliased, ins_of, invariant, merges, outside, plain, new)
        true_pass, false_pass, deferred = defer_accumulations(
            true_pass, false_pass, order, slot, aliased, ins_of, merges, slot[(pred.id, 0)],
            plain, new)
        true_pass = fuse_chains(
            true_pass, ins_of, lambda it: [slot[(it.id, p)] for p in range(it.num_outputs)],
            outside, lambda it: (cond[it.id] == G.EMPTY and it.id not in once
                                 and it.id not in projected and it.id not in deferred),
            lambda key: new(key), {slot[(it.id, 0)] for _, it in hoisted})
    # Loop-invariant numbers read only by kernels with a scalar fast path: as numpy scalars.
    scalar_enters = tuple(slot[(e.id, 0)] for e in fixed_enters if all(
        items[d].op in SCALAR_OPS for d, port, _ in e.out_edges if port >= 0))
    program = LoopProgram(name, len(slot_count), {e.id: slot[(e.id, 0)] for e in frame_enters},
                          merges, hoisted, header, slot[(pred.id, 0)], true_pass, false_pass,
                          [(e, slot[(e.id, 0)]) for e in exits], index_read, scalar_enters)
    program.call_slots = call_slots
    # From the second iteration on, the invariant nodes keep their first values in their
    # slots (nothing else writes them): the lists without them.
    program.header_rest = [(c, it) for c, it in header if it.id not in once]
    program.body_rest = [(c, it) for c, it in true_pass if it.id not in once]
    if static:
        LC.as_blocks(program, order, cond, sources, loop_switches, slot, aliased, same)
    if optimize and program.header is header and program.body is true_pass:
        _fixed_values(program, hoisted, once & fixed, outside,
                      lambda it: [slot[(it.id, p)] for p in range(it.num_outputs)])
    if optimize and all(cond[it.id] == G.EMPTY for it in order):
        # a TF2 gradient loop's list pushes and pops, in place (loop_list_writes.py)
        reads = {}
        for it in order:
            if it.id not in aliased and it.id in ins_of:
                ins, controls = ins_of[it.id]
                for s in {s for s in list(ins) + list(controls) if s is not None}:
                    reads[s] = reads.get(s, 0) + 1
        program.body_rest, program.resets = push_pop_in_place(program.body_rest, program,
                                                              reads)
        if os.environ.get("TFG_STACK_GROUPS", "1") != "0":  # (off: for A/B measurements)
            # a TF1 gradient's stack pushes as one call, its pops as one (loop_stack_groups.py)
            program.body_rest = group_stack_calls(program.body_rest, reads, outside)
    return program


def _fixed_values(program, hoisted, fixed_once, outside, outs_of):
    """Keep the values the graph alone fixes from one run of the loop to the next: the
    hoisted Consts, and the loop invariants computed from Consts only (a Keras GRU's weight
    Split and bias Squeezes of its Const kernels: 13 calls, ~100 us a step, that gave the
    same arrays every run). Stateless kernels (_invariant) of the same values give the same
    values; nothing in a loop body writes into an input (a fused chain writes only into its
    own temporaries). Not an invariant that leaves the loop (a loop variable's next value, an
    Exit: a caller could write into a fetched array), nor in bodies with conds (their lists
    are blocks, loop_conds.py)."""
    once = [it for calls in (program.header, program.body) for _, it in calls
            if it.id in fixed_once and not any(s in outside for s in outs_of(it))]
    fixed_once = {it.id for it in once}
    if not hoisted and not fixed_once:
        return
    slots = [s for _, it in hoisted for s in outs_of(it)]
    slots.extend(s for it in once for s in outs_of(it))
    program.fixed_slots = tuple(dict.fromkeys(slots))
    program.header_fixed = [(c, it) for c, it in program.header if it.id not in fixed_once]
    program.body_fixed = [(c, it) for c, it in program.body if it.id not in fixed_once]


def _const_fed(enter, sources):
    """Whether a constant Enter's value comes from a Const (not fed: a fed tensor is a feed
    item), the same array in every step."""
    return all(src.kind == P.KERNEL and src.op == "Const" and not src.num_inputs
               for src, port, _ in sources[enter.id] if port >= 0)


def _invariant(it, sources, invariant, cond, aliased):
    """Whether `it` computes the same value in every iteration: a Const, or a stateless
    kernel (or an aliased Identity) of loop invariants only, never dead. Computed in the
    first iteration where it would run (a zero-iteration loop runs none of the body's), then
    kept: a GRU's weight slices and splits, 6 of its 26 body nodes."""
    if cond.get(it.id) != G.EMPTY:
        return False
    if it.kind == P.KERNEL:
        if it.deref is not None or it.needs_step or it.blocking or not has_op(it.op):
            return False
        if get_op(it.op).has_effects:  # an AssignAdd of invariants still runs each time
            return False
    elif it.id not in aliased:
        return False
    return all(src.id in invariant for src, port, _ in sources[it.id] if port >= 0)


def _scalar_only(it, items):
    """Whether every node reading `it` has a scalar fast path (tfg.kernels.math_ops)."""
    return all(items[d].op in SCALAR_OPS for d, port, _ in it.out_edges if port >= 0)


def _as_scalar(call, out):
    def scalar_const(vals, step):
        call(vals, step)
        v = vals[out]
        if type(v) is np.ndarray and v.ndim == 0 and v.dtype.kind in "biuf":
            vals[out] = v[()]
    return scalar_const


def _deref(item, src, port):
    """Whether `item` must read a Ref arriving from (src, port) (its output is no Ref)."""
    return not item.keeps_ref and P.may_carry_ref(src, port)


# the kernels select_call may stand in for when their inputs have one shape of rank >= 1
# (Select's condition may be a vector or a scalar, SelectV2's broadcasts: those run the kernel)
_SELECTS = (select, select_v2)

_IDENTITY_OPS = frozenset({"Identity", "StopGradient", "PreventGradient", "Snapshot"})


def _aliased(it, ins, controls, sources, loop_switches):
    """Whether the node's outputs can share its input's slot: it forwards its input (Exit,
    NextIteration, LoopCond, the loop's Switches, Identity), no Ref is read on the way and no
    control input can make it dead where its input is live."""
    if controls or not ins:
        return False
    kind = it.kind
    if kind == P.KERNEL:
        return it.op in _IDENTITY_OPS and it.deref is None and it.forwards_input
    if kind in (P.EXIT, P.NEXT, P.IDENT) or it.id in loop_switches:
        src, port = G.data_sources(it, sources)[0]
        return not _deref(it, src, port)
    return False


def _aliased_each(it, ins, controls):
    """Whether output p of the node can share input p's slot: an IdentityN (a TF2 gradient
    loop's, forwarding all its loop values at once) that reads no Ref and has no control
    input that could make it dead where its inputs are live."""
    return (not controls and bool(ins) and it.kind == P.KERNEL and it.op == "IdentityN"
            and it.deref is None and it.forwards_input and it.num_outputs == len(ins))


def _call(it, ins, outs, sources):
    """The prepared call of one member (None: nothing to run, a NoOp)."""
    if it.kind == P.KERNEL:
        call = slot_call(it, ins, outs)
        if it.deref is not None or it.needs_step:
            return call
        fn = getattr(it.fn, "__wrapped__", it.fn)
        direct = array_call(it, fn, call, ins, outs)
        if direct is not None or len(outs) != 1:
            return direct or call
        array_fn = array_kernel(it.op, fn)
        scalar_fn = scalar_kernel(it.op) if it.op in SCALAR_OPS else None
        if len(ins) == 2 and (array_fn is not None or scalar_fn is not None):
            # (binary_call's own scalar path: Python's operator on numpy scalars)
            return binary_call(call, array_fn, scalar_fn, ins, outs[0], it.op)
        if len(ins) == 1 and array_fn is not None:
            return unary_call(call, array_fn, ins[0], outs[0])
        if fn in _SELECTS and it.ctx.xp is np:
            return select_call(call, ins, outs[0], broadcast=fn is select_v2)
        if fn is tensor_list_get_item:
            return list_get_call(call, fn, it.ctx, ins, outs[0])
        if fn is tensor_list_set_item and it.ctx.xp is np:  # (stores numpy items as they are)
            return list_set_call(call, fn, it.ctx, ins, outs[0])
        if fn is nn_matmul and it.ctx.xp is np:
            return matmul_call(call, fn, it.ctx, ins, outs[0], getattr(it.fn, "limit", None))
        if fn is strided_slice and it.ctx.xp is np:
            return slice_call(call, fn, it.ctx, ins, outs[0], getattr(it.fn, "limit", None))
        return kernel_call(it, fn, call, ins, outs) or call
    if it.kind in (P.NOOP, P.TRIGGER):
        return None
    srcs = G.data_sources(it, sources)
    if it.kind == P.SWITCH:
        return switch_call(ins[0], ins[1], outs, _deref(it, *srcs[0]))
    if it.kind == P.MERGE:
        return merge_call(ins, outs, any(_deref(it, s, p) for s, p in srcs))
    # Exit, NextIteration, LoopCond or a loop Switch that must read a Ref
    return forward(ins[0], outs, _deref(it, *srcs[0]))


