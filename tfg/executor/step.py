"""The step driver: what a local Session, the worker service and the master share to prepare a
step and run it. One copy of each rule: how a run request is read and checked, how a pruned
graph becomes one plan per device, and how a step runs its plans against a rendezvous.

    >>> request = StepRequest.parse(["y", "z"], {"x": [1.0]}, targets=None)
    >>> request.fetch_refs, request.targets
    ([TensorRef(node='y', port=0), TensorRef(node='z', port=0)], ())
    >>> needed = check_request(graph, request.feed_refs, request.fetch_refs, request.targets)
    >>> prepared = prepare(graph, needed, devices, request.feed_refs, request.fetch_refs)
    >>> values = run_prepared(prepared, StepGroup(StepContext()), feed_values)
    >>> values                            # one per fetch, NOVAL where it is dead
    [array([2.], dtype=float32), array([3.], dtype=float32)]

Before this module each of Session, WorkerService and ClusterSession carried its own copy of
these steps; now they differ only in where the graph comes from (a local graph, a registered
part, a cluster) and in the rendezvous (in-process table or RecvTensor RPCs).
"""
import threading

import numpy as np

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor import feeds as F
from tfg.executor import limits, partitions
from tfg.executor.devices import to_host
from tfg.executor.executor import NOVAL, DataflowRun
from tfg.executor.fastpath import Schedule
from tfg.executor.plan import BUILTIN_KINDS, KERNEL, RECV, build_plan
from tfg.executor.ref_aliases import mark_variable_writes
from tfg.executor.rendezvous import LocalRendezvous
from tfg.graphdef.frames_loops import ENTER_OPS, EXIT_OPS, assign_frames
from tfg.graphdef.names import tensor_name
from tfg.kernels.registry import get_kernel
from tfg.kernels.memory import received
from tfg.kernels.resources import Ref
from tfg.passes.variable_buffers import buffer_holders
from tfg.schemas.ops import fed_placeholder_ops

_FED_PLACEHOLDERS = fed_placeholder_ops()


class StepRequest:
    """One `run(fetches, feeds, targets)` call, read and checked for what needs no graph."""

    __slots__ = ("fetch_refs", "how", "feed_refs", "feed_values", "targets", "key")

    def __init__(self, fetch_refs, how, feed_refs, feed_values, targets):
        self.fetch_refs = fetch_refs
        self.how = how  # how to shape the results: feeds.shape_results
        self.feed_refs = feed_refs
        self.feed_values = feed_values  # as given, in feed_refs order
        self.targets = targets
        self.key = (feed_refs, tuple(fetch_refs), targets)

    @classmethod
    def parse(cls, fetches=None, feeds=None, targets=None):
        """Before: `("y", {"x": 1.0}, "train")`. After: refs y:0 / x:0, targets ("train",)."""
        refs, how = F.parse_fetches(fetches)
        if isinstance(targets, str):
            targets = [targets]
        targets = tuple(t.lstrip("^") for t in (targets or ()))
        feed_items = [(F.to_ref(k), v) for k, v in (feeds or {}).items()]
        feed_refs = tuple(r for r, _ in feed_items)
        F.check_fed_once(feed_refs)
        if not refs and not targets:
            raise TfgInputError("nothing to run: give at least one fetch or target")
        return cls(refs, how, feed_refs, [v for _, v in feed_items], targets)

    def converted_feeds(self, graph):
        """The feed values cast and checked against the placeholders they feed."""
        return [F.convert_feed(graph, r, v) for r, v in zip(self.feed_refs, self.feed_values)]


def check_request(graph, feed_refs, fetch_refs, targets):
    """Refuse a request naming what `graph` lacks or leaving a placeholder unfed; returns the
    names of the nodes the step needs (pruned from the fetches and targets to the feeds).

    Before: fetch `y:3` of a one-output node. After: TfgInputError "fetch 'y:3': node 'y' (Relu)
    has 1 output(s)".
    """
    for what, refs in (("fetch", fetch_refs), ("feed", feed_refs)):
        for ref in refs:
            _check_tensor(graph, ref, what)
    _check_outside_loops(graph, feed_refs, fetch_refs)
    if feed_refs:
        F.refuse_fed_copies(graph, feed_refs)
    for t in targets:
        if t not in graph:
            raise TfgInputError(f"target {t!r}: no node named {t!r} in the graph")
    fed = set(feed_refs)
    needed = partitions.needed_nodes(graph, fetch_refs, targets, fed)
    for node in graph:  # file order: the first unfed placeholder is reported
        if (node.name in needed and node.op in _FED_PLACEHOLDERS
                and (node.name, 0) not in fed):
            raise TfgInputError(f"You must feed a value for placeholder {node.name!r}")
    return needed


def _check_tensor(graph, ref, what):
    name = tensor_name(ref.node, ref.port)
    if ref.node not in graph:
        raise TfgInputError(f"{what} {name!r}: no node named {ref.node!r} in the graph")
    node = graph[ref.node]
    n = partitions.num_outputs(node)
    if n is not None and ref.port >= n:
        raise TfgInputError(f"{what} {name!r}: node {ref.node!r} ({node.op}) has {n} "
                            f"output(s)")


def _check_outside_loops(graph, feed_refs, fetch_refs):
    """A tensor of a while loop's body has one value per iteration: TensorFlow refuses to
    fetch it ("Retval[0] has already been set") or feed it (its consumers then have "inputs
    from different frames"). Before, tfg answered "has no value: it is dead" for both, which
    sends a user looking at conds.

        fetch 'while/add:0'  ->  TfgInputError "fetch 'while/add:0' is inside while loop
                                 'while/while_context' ..."
    """
    if not (feed_refs or fetch_refs) or not any(n.op in ENTER_OPS for n in graph):
        return
    try:
        _, frame_of = assign_frames(graph, graph.topo_order())
    except TfgInputError:
        return  # malformed control flow: the session's own check names it
    for what, refs in (("fetch", fetch_refs), ("feed", feed_refs)):
        for ref in refs:
            frame = frame_of.get(ref.node)
            if frame is not None and graph[ref.node].op in EXIT_OPS:
                frame = frame.parent  # an Exit's output is the parent frame's
            if frame is not None:
                raise TfgInputError(
                    f"{what} {tensor_name(ref.node, ref.port)!r} is inside while loop "
                    f"{frame.name!r}: it has one value per iteration, and TensorFlow does not "
                    f"{what} a loop's tensors either; "
                    + ("fetch what the loop's Exit passes out" if what == "fetch"
                       else "feed a tensor outside the loop"))


class PreparedStep:
    """One plan per device, the fast path's schedule where one plan without control flow
    suffices, and where each fetch comes from."""

    def __init__(self, plans, schedules, fetch_owner, fetch_copy, feed_refs, fast_path=True):
        self.plans = plans
        self.schedules = schedules  # per plan: a Schedule or None
        # False: every plan runs on the plain dataflow executor, loops included (comparisons)
        self.fast_path = fast_path
        self.fetch_owner = fetch_owner  # fetch index -> (plan index, plan fetch index)
        self.fetch_copy = fetch_copy  # fetch index -> whether the value may alias state
        self.feed_refs = feed_refs
        self._names = None

    def fetch_name(self, i):
        """The name of fetch `i` (`y:0`), made once: every step's results ask for it."""
        if self._names is None:
            names = []
            for pi, j in self.fetch_owner:
                ref = self.plans[pi].fetches[j]
                names.append(tensor_name(ref.node, ref.port))
            self._names = names
        return self._names[i]


def prepare(graph, needed, devices, feed_refs, fetch_refs, targets=(), memory_limit=None,
            check_elementwise=False, fast_path=True, where="this step"):
    """Plans for the `needed` nodes of `graph`, grouped by device of `devices`.

    Before: a graph and the nodes a request needs. After: a PreparedStep whose plans have
    their kernels bound and their tensors checked against `memory_limit` (bytes).
    """
    if memory_limit is None:
        memory_limit = limits.physical_memory()
    limits.check_constants((graph[n] for n in needed), memory_limit)
    fed = set(feed_refs)
    groups = partitions.group_by_device(graph, needed, devices)
    plans, owner = [], [None] * len(fetch_refs)
    for pi, (device, nodes) in enumerate(groups):
        names = {n.name for n in nodes}
        mine = [i for i, r in enumerate(fetch_refs)
                if (r.node in names and r not in fed) or (r in fed and pi == 0)]
        plan = build_plan(nodes, device, feeds=feed_refs,
                          fetches=[fetch_refs[i] for i in mine], targets=targets)
        limits.guard_plan(plan, memory_limit, check_elementwise)
        for j, i in enumerate(mine):
            owner[i] = (pi, j)
        plans.append(plan)
    for i, o in enumerate(owner):
        if o is None:
            raise TfgInputError(f"fetch {tensor_name(*fetch_refs[i])!r} is not computed on "
                                f"{where}")
    mark_variable_writes(plans)
    if len(plans) > 1 and any(p.has_control_flow and p.has_recv for p in plans):
        # what each _Recv's sender may wait for (compiled loops ask)
        exit_frames = partitions.recv_exit_frames(graph)
        for plan in plans:
            for it in plan.items:
                if it.kind == RECV:
                    it.exit_frames = exit_frames.get(it.name)
    schedules = [Schedule.build(p) if len(plans) == 1 and fast_path else None for p in plans]
    # (a fetch of a variable's buffer, which a later step may write in place, is a copy too)
    holders = buffer_holders(graph, written=False) if fetch_refs else frozenset()
    copies = [_needs_copy(graph, r, r in fed) or r.node in holders for r in fetch_refs]
    return PreparedStep(plans, schedules, owner, copies, tuple(feed_refs), fast_path)


def run_prepared(prepared, group, feed_values, rendezvous=None):
    """Run one step of `prepared` in `group` (its StepContext, tracing and error state);
    returns one value per fetch (NOVAL where dead). `rendezvous`: what the plans' _Send/_Recv
    use (default: an in-process table, for plans that only talk to each other)."""
    step = group.step
    plans = prepared.plans
    schedule = prepared.schedules[0] if len(plans) == 1 else None
    if schedule is not None and schedule.outer and group.trace is not None:
        schedule = None  # a traced step times each node of each iteration: the dataflow run
    if schedule is not None:
        memory = [0] if group.trace is not None else None
        try:
            per_plan = [schedule.run(step, _feeds_on(plans[0].device, feed_values), group.trace,
                                     memory)]
        except BaseException:
            step.cancelled.set()
            raise
        group.peak_bytes = memory[0] if memory is not None else 0
    else:
        if rendezvous is None:
            rendezvous = LocalRendezvous()
        group.rendezvous = rendezvous
        runs = [DataflowRun(p, group, rendezvous, _feeds_on(p.device, feed_values),
                            prepared.fast_path) for p in plans]
        threads = [threading.Thread(target=_quiet(r.execute), name=f"tfg-{p.device.short}",
                                    daemon=True) for r, p in zip(runs[1:], plans[1:])]
        for t in threads:
            t.start()
        try:
            runs[0].execute()
        except BaseException as e:  # Ctrl-C: end the step on every device, then re-raise
            if group.error is None:
                group.fail(TfgRuntimeError(f"step cancelled ({type(e).__name__})"))
            raise
        finally:
            for t in threads:
                t.join()
        if group.error is not None:
            raise group.error
        per_plan = [r.results for r in runs]
    return [per_plan[pi][j] for pi, j in prepared.fetch_owner]


def fetched_value(value, name, copy=False):
    """A fetched value as the caller gets it: a host array, read from a variable's Ref, copied
    where it may alias state a later step changes; a dead fetch is an error naming it."""
    if value is NOVAL:
        raise TfgRuntimeError(f"fetch {name!r} has no value: it is dead (computed on a branch "
                              "that was not taken) or was never computed")
    if type(value) is Ref:
        return np.array(to_host(value.get()), copy=True)
    value = to_host(value)  # a GPU result comes back as numpy
    if isinstance(value, np.ndarray):
        return value.copy() if copy else value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def _needs_copy(graph, ref, fed):
    """Whether a fetched value may alias state a later step changes (a variable's array)."""
    if fed:
        return False
    node = graph[ref.node]
    if BUILTIN_KINDS.get(node.op, KERNEL) != KERNEL:
        return True
    try:
        return get_kernel(node.op).forwards_input or node.op.startswith(("Variable", "Read"))
    except Exception:  # noqa: BLE001 - no kernel: copying is the safe answer
        return True


def _quiet(fn):
    """A thread target whose error is already recorded in the StepGroup."""
    def target():
        try:
            fn()
        except BaseException:  # noqa: BLE001 - the group holds the first error
            pass
    return target


class _DeviceFeeds:
    """Feed values as a GPU partition reads them: each copied to the device once, when first
    used (a feed read by several kernels is not copied once per kernel)."""

    __slots__ = ("values", "xp", "copies")

    def __init__(self, values, xp):
        self.values, self.xp, self.copies = values, xp, {}

    def __getitem__(self, i):
        value = self.copies.get(i)
        if value is None:
            value = self.copies[i] = received(self.xp, self.values[i])
        return value

    def __len__(self):
        return len(self.values)


def _feeds_on(device, feed_values):
    if getattr(device, "device_type", "CPU") != "GPU" or not feed_values:
        return feed_values
    return _DeviceFeeds(feed_values, device.xp)
