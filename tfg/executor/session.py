"""`Session`: run a graph's fetches and targets with feeds, on local devices or a cluster.

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
Session (as TensorFlow's DirectSession; on a cluster, variables and queues live in the workers'
containers and outlive it: tfg/executor/containers.py); `reset(containers)` clears containers.
`max_memory` (bytes or '4G'; default: the machine's memory) refuses, before allocating,
any tensor larger than it (tfg/executor/limits.py). `blas_threads` sets the BLAS
library's threads while a step runs (default: $TFG_BLAS_THREADS, else 'adaptive': the cores
other processes leave free, measured during steps; an int fixes it, 'auto' is half the cores,
0 leaves BLAS alone; tfg/executor/blas.py says why).

As TensorFlow's DirectSession runs Grappler, each request's subgraph is rewritten once, when
it is prepared (tfg/passes/step_rewrite.py: constant folding, batch-norm folds into
convolutions, Conv/MatMul + BiasAdd + activation fusions, dependency pruning); fed, fetched
and targeted nodes and stateful ops are kept exactly. `graph_rewrites=False` (or
$TFG_GRAPH_REWRITES=0) runs graphs as given, as TensorFlow's `disable_meta_optimizer`;
`session.rewrites` lists what each prepared request's rewrite did (StepRewrite objects).

`Session` is a facade over a backend: `LocalSession` here, or the master's `ClusterSession`
(tfg/executor/distributed/master.py) with `cluster=`. Both read a request and prepare a step
with tfg/executor/step.py; `session.runner(...)` owns a loop of steps (tfg/executor/runner.py).
"""
import os
import threading
import time

import numpy as np

from tfg.executor import blas, checkpoint
from tfg.executor.blas_floor import GemmFloor
from tfg.executor.blas_trial import ThreadTrial
from tfg.executor import limits
from tfg.executor import partitions
from tfg.executor import rewrites
from tfg.executor import step as S
from tfg.executor.devices import DeviceSet
from tfg.executor.executor import StepGroup
from tfg.executor.feeds import shape_results
from tfg.executor.runner import Runner
from tfg.executor.trace import StepTrace
from tfg.graphdef import io
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.validate import check_control_flow, validate
from tfg.kernels import jit
from tfg.kernels.resources import Ref, ResourceMgr, StepContext


class Session:
    """Runs one graph; see the module docstring. Attributes of the backend (`resources`,
    `devices`, `memory_limit`, `blas_threads` of a local one) read through."""

    def __init__(self, graph, devices=None, cluster=None, fast_path=True, max_memory=None,
                 blas_threads=None, validate_graph=False, graph_rewrites=None):
        if isinstance(graph, (str, os.PathLike)):
            graph = io.load(graph)
        # Calls inlined, functional control flow lowered; a call that cannot be inlined stays
        # and fails only a step that needs it (tfg/executor/partitions.py: check_runnable).
        graph = canonicalize(graph, strict=False)
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
        self.graph = graph
        if cluster is not None:
            self.backend = _connect_cluster(graph, cluster)
        else:
            self.backend = LocalSession(graph, devices, fast_path=fast_path,
                                        max_memory=max_memory, blas_threads=blas_threads,
                                        graph_rewrites=graph_rewrites)
        self.is_cluster = cluster is not None

    def __getattr__(self, name):
        # Only called for what the facade lacks: the backend's own attributes.
        if name == "backend":  # not set yet (a failed __init__): no recursion
            raise AttributeError(name)
        return getattr(self.backend, name)

    @property
    def last_trace(self):
        """The StepTrace of the last step run with `trace=True` (None before one)."""
        return self.backend.last_trace

    # --- running --------------------------------------------------------------------------
    def run(self, fetches=None, feeds=None, targets=None, trace=False):
        """Compute `fetches` (a name, a list or a dict of names) after feeding `feeds`.

        `targets` are nodes run for their effect. With `trace=True` per-node timings and the
        peak of live tensor memory are kept in `self.last_trace`.
        """
        request = S.StepRequest.parse(fetches, feeds, targets)
        return shape_results(self.backend.run_request(request, trace), request.how)

    def runner(self, fetches=None, feeds=None, targets=None, **options):
        """A `Runner` of steps of this session (init, restore, steps, checkpoints); see
        tfg/executor/runner.py for the options."""
        return Runner(self, fetches=fetches, feeds=feeds, targets=targets, **options)

    # --- variables ------------------------------------------------------------------------
    def variables(self):
        """{name: array} of every initialized variable (reference and resource variables)."""
        return checkpoint.collect(self.backend.variables())

    def save(self, directory, step=None):
        """Write every initialized variable to `directory` (atomically, with a checksum)."""
        return self.backend.save(directory, step=step)

    def restore(self, directory):
        """Load variables saved by `save`; the checksum is verified first."""
        return self.backend.restore(directory)

    def assign_variables(self, values):
        """Set variables to values: {(container, name): (array, dtype, shape)}, dtype and
        shape the graph's declaration (None where unknown). On a cluster each value goes to
        the task that holds the variable.

        Before: `w` uninitialized.  After `assign_variables({("", "w"): (a, None, None)})`:
        `w` holds a copy of `a`."""
        return self.backend.assign_variables(values)

    def checkpoint_step(self, directory):
        """The step of the checkpoint in `directory` (None: there is none), once checked to
        be this graph's (see tfg.executor.checkpoint.check_same_graph)."""
        return self.backend.checkpoint_step(directory)

    def reset(self, containers=None):
        """Clear the named resource containers (None or []: the default container ""): their
        variables become uninitialized, their queues go. On a cluster this clears them on
        every worker, whichever session made them (they outlive sessions there); a local
        session's containers are its own. -> how many resources went."""
        if isinstance(containers, str):
            containers = [containers]
        return self.backend.reset(containers)

    def close(self):
        self.backend.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LocalSession:
    """The local backend: one executor per device of this process, over an in-process
    rendezvous; variables, queues and random streams in `resources`."""

    def __init__(self, graph, devices=None, fast_path=True, max_memory=None, blas_threads=None,
                 graph_rewrites=None):
        self.graph = graph
        self.devices = DeviceSet.from_spec(devices)
        self.resources = ResourceMgr()
        self.last_trace = None
        self._cache = {}
        self._lock = threading.Lock()
        self._steps = 0
        self._exec_graph = None
        self._unrunnable = {}  # node -> why no device of the set can run it (several devices)
        # False forces the plain dataflow executor even where the precomputed schedule or a
        # compiled loop would do (for comparisons; results are the same).
        self.fast_path = fast_path
        # The largest tensor a kernel may allocate (bytes or '4G'; default: physical memory),
        # checked before allocating (tfg/executor/limits.py).
        self.memory_limit = limits.resolve_limit(max_memory)
        self._check_elementwise = max_memory is not None or limits.overcommits()
        # BLAS threads busy-wait, and stall on cores other processes hold: set while a step
        # runs ('adaptive' by default; None: BLAS left as it is).
        self.blas_threads = blas.resolve_blas_threads(blas_threads)
        self.graph_rewrites = rewrites.resolve(graph_rewrites)
        self.rewrites = []  # one StepRewrite per prepared request, in order

    def run_request(self, request, trace=False):
        """One step of a StepRequest; -> the fetched values in fetch order."""
        with self._lock:
            prepared = self._cache.get(request.key)
            if prepared is None:
                prepared = self._cache[request.key] = self._prepare(request)
            self._steps += 1
            if self._steps == 2:  # steps again: compiled elementwise loops pay (vector_math.py)
                jit.mark_warm()
        feed_values = request.converted_feeds(self._graph())
        group = StepGroup(StepContext(session_resources=self.resources), trace=trace)
        limit = prepared.gemm_floor.limit(self.blas_threads, feed_values)
        limit, ticket = prepared.thread_trial.limit(limit, feed_values)
        started = time.perf_counter()
        with blas.blas_limit(limit):
            values = S.run_prepared(prepared, group, feed_values)
        prepared.thread_trial.record(ticket, time.perf_counter() - started)
        if trace:
            self.last_trace = StepTrace(list(group.trace), group.peak_bytes,
                                        [p.device.name for p in prepared.plans],
                                        dict(group.device_peaks))
        return [S.fetched_value(v, prepared.fetch_name(i), prepared.fetch_copy[i])
                for i, v in enumerate(values)]

    def _graph(self):
        if self._exec_graph is None:
            self._exec_graph, self._unrunnable = partitions.executable_graph(self.graph,
                                                                             self.devices)
        return self._exec_graph

    def _prepare(self, request):
        graph = self._graph()
        partitions.check_runnable(self.graph, self._unrunnable, request.fetch_refs,
                                  request.targets, set(request.feed_refs))
        needed = S.check_request(graph, request.feed_refs, request.fetch_refs, request.targets)
        if self.graph_rewrites and self._one_device(graph):
            graph, needed = rewrites.rewrite(graph, needed, request, self.rewrites)
        prepared = S.prepare(graph, needed, self.devices, request.feed_refs,
                             request.fetch_refs, request.targets, self.memory_limit,
                             self._check_elementwise, self.fast_path)
        # small GEMMs only: one BLAS thread instead of the adaptive count (blas_floor.py)
        prepared.gemm_floor = GemmFloor(graph, needed, request.feed_refs)
        # adaptive's count checked against this step's own times (blas_trial.py)
        prepared.thread_trial = ThreadTrial()
        return prepared

    def _one_device(self, graph):
        """Whether the step runs on one device: the step rewrites assume it."""
        return len(self.devices) == 1 or (bool(self.devices.host_only)
                                          and not partitions.is_partitioned(graph))

    def variables(self):
        return self.resources

    def save(self, directory, step=None):
        return checkpoint.save(self.resources, directory, step=step, graph=self._graph())

    def checkpoint_step(self, directory):
        return checkpoint.saved_step(directory, self._graph())

    def restore(self, directory):
        return checkpoint.restore(self.resources, self._graph(), directory)

    def assign_variables(self, values):
        for (container, name), (value, dtype, shape) in values.items():
            ref = self.resources.get_or_create(container, name,
                                               lambda n=name: Ref(n, dtype, shape))
            ref.assign(np.array(value, copy=True))  # the variable's own buffer

    def reset(self, containers=None):
        return self.resources.reset(containers)

    def close(self):
        self.resources.clear()
        self._cache.clear()


def _connect_cluster(graph, cluster):
    """The cluster backend: `tfg.executor.distributed.connect(graph, cluster)` returns an
    object with this class's `run(fetches, feeds, targets, trace)` (and save/restore)."""
    from tfg.executor import distributed  # lazy: gRPC is slow to import
    return distributed.connect(graph, cluster)
