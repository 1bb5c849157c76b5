"""`Session`: run a graph's fetches and targets with feeds, on local devices.

    >>> sess = Session(tfg.load("model.pb"), devices="cpu:2")
    >>> sess.run("y", feeds={"x": [[1.0, 2.0]]})            # one name -> one array
    array([[3.]], dtype=float32)
    >>> sess.run(["loss", "acc"], feeds=batch, targets=["train"])   # a list -> a list
    >>> sess.save("ckpt/"); sess.restore("ckpt/")            # every variable

Each distinct (feeds, fetches, targets) is pruned, checked and prepared once: unknown names,
ports out of range, ops without a kernel and unfed placeholders are input errors raised before
anything runs. A graph whose nodes carry full device names and talk through `_Send`/`_Recv`
(what `tfg partition` writes) runs one executor per device over a shared rendezvous; other
graphs run on the first device. Variables, queues and random streams live as long as the
Session. `max_memory` (bytes or '4G'; default: the machine's memory) refuses, before
allocating, any tensor larger than it (tfg/executor/limits.py). `blas_threads` caps the BLAS
library's threads while a step runs (an int, 'auto' for half the cores; default:
$TFG_BLAS_THREADS, else BLAS left alone; tfg/executor/blas.py says why).
"""
import os
import threading

import numpy as np

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor import blas
from tfg.executor import feeds as F
from tfg.executor import limits
from tfg.executor import partitions
from tfg.executor.devices import DeviceSet, to_host
from tfg.executor.executor import NOVAL, DataflowRun, StepGroup
from tfg.executor.fastpath import Schedule
from tfg.executor.plan import BUILTIN_KINDS, KERNEL, build_plan
from tfg.executor.rendezvous import LocalRendezvous
from tfg.graphdef import io
from tfg.graphdef.names import tensor_name
from tfg.graphdef.validate import check_control_flow, validate
from tfg.kernels.resources import Ref, ResourceMgr, StepContext


class StepTrace:
    """What `run(..., trace=True)` leaves in `session.last_trace`: per-node timings, peak memory."""

    def __init__(self, events, peak_bytes, devices):
        self.events = events  # (name, op, device, start_ns, dur_ns, thread)
        self.peak_bytes = peak_bytes
        self.devices = devices


class _Prepared:
    def __init__(self, plans, schedules, fetch_owner, fetch_copy, feed_refs):
        self.plans = plans
        self.schedules = schedules
        self.fetch_owner = fetch_owner  # session fetch index -> (plan index, plan fetch index)
        self.fetch_copy = fetch_copy
        self.feed_refs = feed_refs


class Session:
    """Runs one graph; see the module docstring."""

    def __init__(self, graph, devices=None, cluster=None, fast_path=True, max_memory=None,
                 blas_threads=None, validate_graph=False):
        if isinstance(graph, (str, os.PathLike)):
            graph = io.load(graph)
        if validate_graph:
            # As TensorFlow checks a GraphDef on import (what `tfg run` asks for): attrs, arity
            # and the dtype of every edge against the op signatures, so that a float into a
            # LogicalNot or a Neg without its T is an input error naming the node, not a kernel
            # that happens to run. Unknown ops are left to the kernel lookup of a step that
            # needs them. Off by default: graphs built in Python may hold attrs in a looser form
            # (a Const's value as a float) that the kernels accept.
            validate(graph, require_known_ops=False)
        # Control flow and _Send/_Recv run without kernels that would check them: a malformed
        # one (Enter(), a LoopCond of an int32) is an input error naming the node, not an
        # IndexError or a loop that never ends (TensorFlow refuses such a GraphDef on import).
        # Local and cluster sessions alike.
        check_control_flow(graph)
        self._remote = None
        if cluster is not None:
            self._remote = _connect_cluster(graph, cluster)
        self.graph = graph
        self.devices = DeviceSet.from_spec(devices)
        self.resources = ResourceMgr()
        self.last_trace = None
        self._cache = {}
        self._lock = threading.Lock()
        self._exec_graph = None
        self._unrunnable = {}  # node -> why no device of the set can run it (several devices)
        # False forces the dataflow executor even where the precomputed schedule would do
        # (for comparisons; results are the same).
        self.fast_path = fast_path
        # The largest tensor a kernel may allocate (bytes or '4G'; default: physical memory),
        # checked before allocating (tfg/executor/limits.py).
        self.memory_limit = limits.resolve_limit(max_memory)
        self._check_elementwise = max_memory is not None or limits.overcommits()
        # BLAS threads busy-wait on the cores the executor's pool needs: capped while a step
        # runs (None: BLAS left as it is).
        self.blas_threads = blas.resolve_blas_threads(blas_threads)

    # --- running --------------------------------------------------------------------------
    def run(self, fetches=None, feeds=None, targets=None, trace=False):
        """Compute `fetches` (a name, a list or a dict of names) after feeding `feeds`.

        `targets` are nodes run for their effect. With `trace=True` per-node timings and the
        peak of live tensor memory are kept in `self.last_trace`.
        """
        if self._remote is not None:  # a cluster: tfg/executor/distributed/master.py
            values = self._remote.run(fetches, feeds=feeds, targets=targets, trace=trace)
            self.last_trace = self._remote.last_trace
            return values
        refs, how = F.parse_fetches(fetches)
        if isinstance(targets, str):
            targets = [targets]
        targets = tuple(t.lstrip("^") for t in (targets or ()))
        feeds = feeds or {}
        feed_items = [(F.to_ref(k), v) for k, v in feeds.items()]
        feed_refs = tuple(r for r, _ in feed_items)
        if len(set(feed_refs)) != len(feed_refs):
            raise TfgInputError("a tensor is fed twice")
        if not refs and not targets:
            raise TfgInputError("nothing to run: give at least one fetch or target")
        key = (feed_refs, tuple(refs), targets)
        with self._lock:
            prepared = self._cache.get(key)
            if prepared is None:
                prepared = self._cache[key] = self._prepare(feed_refs, refs, targets)
        graph = self._graph()
        feed_values = [F.convert_feed(graph, r, v) for r, v in feed_items]
        with blas.blas_limit(self.blas_threads):
            values = self._execute(prepared, feed_values, trace)
        return F.shape_results(values, how)

    def _graph(self):
        if self._exec_graph is None:
            self._exec_graph, self._unrunnable = partitions.executable_graph(self.graph,
                                                                             self.devices)
        return self._exec_graph

    def _prepare(self, feed_refs, fetch_refs, targets):
        graph = self._graph()
        partitions.check_runnable(self.graph, self._unrunnable, fetch_refs, targets,
                                  set(feed_refs))
        for what, refs in (("fetch", fetch_refs), ("feed", feed_refs)):
            for ref in refs:
                _check_tensor(graph, ref, what)
        for t in targets:
            if t not in graph:
                raise TfgInputError(f"target {t!r}: no node named {t!r} in the graph")
        fed = set(feed_refs)
        needed = partitions.needed_nodes(graph, fetch_refs, targets, fed)
        for name in needed:
            node = graph[name]
            if node.op in ("Placeholder", "PlaceholderV2") and (name, 0) not in fed:
                raise TfgInputError(f"You must feed a value for placeholder {name!r}")
        limits.check_constants((graph[n] for n in needed), self.memory_limit)
        groups = partitions.group_by_device(graph, needed, self.devices)
        plans, owner = [], [None] * len(fetch_refs)
        for pi, (device, nodes) in enumerate(groups):
            names = {n.name for n in nodes}
            mine = [i for i, r in enumerate(fetch_refs)
                    if (r.node in names and r not in fed) or (r in fed and pi == 0)]
            plan = build_plan(nodes, device, feeds=feed_refs,
                              fetches=[fetch_refs[i] for i in mine], targets=targets)
            limits.guard_plan(plan, self.memory_limit, self._check_elementwise)
            for j, i in enumerate(mine):
                owner[i] = (pi, j)
            plans.append(plan)
        schedules = [Schedule.build(p) if len(plans) == 1 and self.fast_path else None
                     for p in plans]
        copies = [_needs_copy(graph, r, r in fed) for r in fetch_refs]
        return _Prepared(plans, schedules, owner, copies, feed_refs)

    def _execute(self, prepared, feed_values, trace):
        step = StepContext(session_resources=self.resources)
        group = StepGroup(step, trace=trace)
        plans = prepared.plans
        per_plan = [None] * len(plans)
        if len(plans) == 1 and prepared.schedules[0] is not None:
            memory = [0] if trace else None
            try:
                per_plan[0] = prepared.schedules[0].run(step, feed_values, group.trace, memory)
            except BaseException:
                step.cancelled.set()
                raise
            group.peak_bytes = memory[0] if trace else 0
        else:
            rendezvous = LocalRendezvous()
            group.rendezvous = rendezvous
            runs = [DataflowRun(p, group, rendezvous, feed_values) for p in plans]
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
        if trace:
            self.last_trace = StepTrace(list(group.trace), group.peak_bytes,
                                        [p.device.name for p in plans])
        out = []
        for i, (pi, j) in enumerate(prepared.fetch_owner):
            out.append(_fetch_value(per_plan[pi][j], prepared, i, plans[pi]))
        return out

    # --- variables ------------------------------------------------------------------------
    def variables(self):
        """{name: array} of every initialized variable (reference and resource variables)."""
        from tfg.executor import checkpoint

        if self._remote is not None:
            return checkpoint.collect(self._remote.variables())
        return checkpoint.collect(self.resources)

    def save(self, directory, step=None):
        """Write every initialized variable to `directory` (atomically, with a checksum)."""
        if self._remote is not None:
            return self._remote.save(directory, step=step)
        from tfg.executor import checkpoint

        return checkpoint.save(self.resources, directory, step=step, graph=self._graph())

    def checkpoint_step(self, directory):
        """The step of the checkpoint in `directory` (None: there is none), once checked to
        be this graph's (see tfg.executor.checkpoint.check_same_graph)."""
        from tfg.executor import checkpoint

        return checkpoint.saved_step(directory, self._graph() if self._remote is None
                                     else self._remote.graph)

    def restore(self, directory):
        """Load variables saved by `save`; the checksum is verified first."""
        if self._remote is not None:
            return self._remote.restore(directory)
        from tfg.executor import checkpoint

        return checkpoint.restore(self.resources, self._graph(), directory)

    def close(self):
        if self._remote is not None:
            self._remote.close()
        self.resources.clear()
        self._cache.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _connect_cluster(graph, cluster):
    """The cluster backend: `tfg.executor.distributed.connect(graph, cluster)` returns an
    object with this class's `run(fetches, feeds, targets, trace)` (and save/restore)."""
    from tfg.executor import distributed  # lazy: gRPC is slow to import
    return distributed.connect(graph, cluster)


def _quiet(fn):
    """A thread target whose error is already recorded in the StepGroup."""
    def target():
        try:
            fn()
        except BaseException:  # noqa: BLE001 - the group holds the first error
            pass
    return target


def _check_tensor(graph, ref, what):
    name = tensor_name(ref.node, ref.port)
    if ref.node not in graph:
        raise TfgInputError(f"{what} {name!r}: no node named {ref.node!r} in the graph")
    node = graph[ref.node]
    n = partitions.num_outputs(node)
    if n is not None and ref.port >= n:
        raise TfgInputError(f"{what} {name!r}: node {ref.node!r} ({node.op}) has {n} "
                            f"output(s)")


def _needs_copy(graph, ref, fed):
    """Whether a fetched value may alias state a later step changes (a variable's array)."""
    if fed:
        return False
    node = graph[ref.node]
    if BUILTIN_KINDS.get(node.op, KERNEL) != KERNEL:
        return True
    try:
        from tfg.kernels.registry import get_kernel

        return get_kernel(node.op).forwards_input or node.op.startswith(("Variable", "Read"))
    except Exception:
        return True


def _fetch_value(value, prepared, i, plan):
    if value is NOVAL:
        name = tensor_name(plan.fetches[prepared.fetch_owner[i][1]].node,
                           plan.fetches[prepared.fetch_owner[i][1]].port)
        raise TfgRuntimeError(f"fetch {name!r} has no value: it is dead (computed on a branch "
                              "that was not taken) or was never computed")
    if type(value) is Ref:
        value = to_host(value.get())
        return np.array(value, copy=True)
    value = to_host(value)  # a GPU result comes back as numpy
    if isinstance(value, np.ndarray):
        return value.copy() if prepared.fetch_copy[i] else value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value
