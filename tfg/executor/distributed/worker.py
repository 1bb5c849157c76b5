"""The worker service: one task of a cluster, running the parts of steps a master registers.

    >>> server = serve({"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}, "worker", 0)
    >>> server.wait()          # until stop() (SIGTERM in `tfg worker`)

Variables and queues live in the worker's containers (tfg/executor/containers.py): they outlive
the session that made them, so another client's graph sees them, until CleanupAll resets their
container; their bytes are bounded by --max-memory. Registered graphs and tfg's private state
live per session handle, the rendezvous other tasks pull from per step id (kept until the
master's CleanupGraph). A registered graph is
prepared once (kernels bound, one plan per device of this task) and then run by the same
step driver as a local Session (tfg/executor/step.py), over a `RemoteRendezvous`. The worker
only runs the ops of registered graphs through the kernel registry: no code and no pickles
travel.
"""
import gc
import itertools
import sys
import threading
import time
import uuid
from concurrent import futures

import grpc

from tfg.errors import TfgError, TfgInputError, TfgRuntimeError
from tfg.executor import blas, limits
from tfg.executor import step as step_driver
from tfg.executor.containers import SessionResources, check_bounded
from tfg.executor.devices import DeviceSet
from tfg.executor.distributed import busy, rpc, session_table
from tfg.executor.distributed.graph_checks import check_registered
from tfg.executor.distributed.rendezvous import RemoteRendezvous, aborted_by
from tfg.executor.distributed.spec import bind_address, refuse_taken_port, task_label
from tfg.executor.distributed.tf_engine import service as tf_service
from tfg.executor.executor import StepGroup
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.graph import Graph
from tfg.graphdef.names import parse_tensor
from tfg.kernels import jit
from tfg.kernels.resources import Ref, ResourceMgr, StepContext
from tfg.schemas.proto import worker_pb2 as pb
from tfg.schemas.proto import worker_pb2_grpc

# Steps whose master never called CleanupGraph are dropped this long after they ended.
STEP_TTL_S = session_table.STEP_TTL_S


class _Registered:
    def __init__(self, prepared, feed_names):
        self.prepared = prepared  # a step.PreparedStep: plans, schedule, fetch owners
        self.feed_names = feed_names
        self.steps = 0  # its RunGraph calls: from the second, compiled loops pay (jit.py)


class _Session:
    def __init__(self, containers):
        self.resources = SessionResources(containers)
        self.graphs = {}
        self.last_used = time.monotonic()
        self.busy = 0  # RPCs preparing for it now: never idle meanwhile


class _Step:
    """One step's state here: its rendezvous, and the executors' group while it runs."""

    def __init__(self, step_id, local_task, peer):
        self.rendezvous = RemoteRendezvous(step_id, local_task, peer)
        self.group = None
        self.ended = None  # monotonic time the RunGraph ended
        self.session = None  # the session handle of the RunGraph that ran it
        self.rest = {}  # rendezvous key -> bytes after the first chunk, until pulled
        self.lock = threading.Lock()
        self.created = time.monotonic()  # a step no RunGraph claims is collected later

    def abort(self, error):
        with self.lock:
            group = self.group
        if group is not None:
            group.fail(error)
        self.rendezvous.abort(error)


class _WorkerStepGroup(StepGroup):
    """A step group whose idle executors may be waiting on another task: only a wait for a
    key this task itself should send can be a deadlock here."""

    def check_deadlock(self):
        rv = self.rendezvous
        for run in self.runs:
            for key in run.recv_waiting.values():
                if rv.is_remote(key):
                    return None
        return super().check_deadlock()


class WorkerService(worker_pb2_grpc.WorkerServiceServicer):
    """The servicer (see the module docstring)."""

    def __init__(self, jobs, job, task, devices=None, token=None, log=None, tls_ca=None,
                 max_memory=None):
        self.jobs = jobs
        self.tls_ca = tls_ca  # PEM bytes: peers (other workers) are reached over TLS
        self.job, self.task = job, task
        self.local_task = (job, task)
        self.devices = DeviceSet.from_spec(devices or "cpu:1", job=job, task=task)
        self.token = token
        self.incarnation = uuid.uuid4().int & ((1 << 63) - 1)
        self.sessions = {}
        # Every session's variables and queues, for as long as the worker runs (or a reset).
        self.containers = ResourceMgr()
        self.tensor_bytes_sent = 0
        self.steps = {}
        self.peers = {}
        self.lock = threading.Lock()
        self.serving = True
        self.log = log
        self._handles = itertools.count(1)
        # As a local Session: BLAS threads per step from $TFG_BLAS_THREADS, else 'adaptive'.
        self.blas_threads = blas.resolve_blas_threads(None)
        # Per tensor, as `tfg run --max-memory`: default 80% of the memory available now.
        self.memory_limit = limits.resolve_limit(max_memory)

    # --- helpers --------------------------------------------------------------------------
    def _log(self, context, method, what=""):
        if self.log is not None:
            self.log(f"{task_label(self.local_task)} {method} {what}".rstrip())

    def peer(self, task):
        with self.lock:
            client = self.peers.get(task)
            if client is None:
                job, index = task
                addrs = self.jobs.get(job, [])
                if not 0 <= index < len(addrs):
                    raise TfgRuntimeError(f"no task {task_label(task)} in the cluster")
                client = self.peers[task] = rpc.WorkerClient(task, addrs[index], self.token,
                                                                 tls_ca=self.tls_ca)
            return client

    def _step(self, step_id, create=True):
        with self.lock:
            step = self.steps.get(step_id)
            if step is None and create:
                self._collect_garbage()
                step = self.steps[step_id] = _Step(step_id, self.local_task, self.peer)
            return step

    def _collect_garbage(self):
        now = time.monotonic()
        for sid in [s for s, st in self.steps.items() if session_table.collectable(st, now)]:
            del self.steps[sid]

    def _session(self, handle, context):
        with self.lock:
            sess = self.sessions.get(handle)
            if sess is None:
                sess = self.sessions[handle] = _Session(self.containers)
            sess.last_used = time.monotonic()
            return sess

    # --- RPCs -----------------------------------------------------------------------------
    def GetStatus(self, request, context):
        self._log(context, "GetStatus")
        with self.lock:
            active = sum(1 for s in self.steps.values() if s.group is not None and
                         s.ended is None)
            resp = pb.GetStatusResponse(job=self.job, task=self.task,
                                        incarnation=self.incarnation,
                                        sessions=len(self.sessions), active_steps=active,
                                        container_items=len(self.containers.items()),
                                        tensor_bytes_sent=self.tensor_bytes_sent)
        resp.container_bytes = self.containers.nbytes()
        for d in self.devices:
            resp.devices.add(name=d.name, device_type=d.device_type)
        return resp

    def RegisterGraph(self, request, context):
        self._log(context, "RegisterGraph", f"session={request.session_handle[:8]} "
                                            f"nodes={len(request.graph_def.node)}")
        # Touched first: preparing a large graph may take longer than the idle timeout.
        sess = self._session(request.session_handle, context)
        with self.lock:
            sess.busy += 1
        try:
            # Checked as `tfg run` checks a graph (and TensorFlow's import): duplicate names,
            # attrs, arity and edge dtypes; a malformed graph is INVALID_ARGUMENT, not UNKNOWN.
            graph = canonicalize(Graph.from_proto(request.graph_def), strict=False)
            check_registered(graph, request.feeds)
            reg = self._prepare(graph, list(request.feeds), list(request.fetches))
        except TfgError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, " ".join(str(e).split()))
        finally:
            with self.lock:
                sess.busy -= 1
                sess.last_used = time.monotonic()
        handle = f"g{next(self._handles)}"
        with self.lock:
            sess.graphs[handle] = reg
        return pb.RegisterGraphResponse(graph_handle=handle)

    def _prepare(self, graph, feed_names, fetch_names):
        for node in graph:
            if node.device and self.devices.find(node.device) is None:
                raise TfgInputError(f"node {node.name!r} is placed on {node.device}, which "
                                    f"is not a device of {task_label(self.local_task)}")
        # A tensor larger than this worker's limit fails cleanly (tfg/executor/limits.py).
        prepared = step_driver.prepare(
            graph, {n.name for n in graph}, self.devices,
            tuple(parse_tensor(n) for n in feed_names), [parse_tensor(n) for n in fetch_names],
            memory_limit=self.memory_limit, check_elementwise=limits.overcommits(),
            where=task_label(self.local_task))
        return _Registered(prepared, feed_names)

    def RunGraph(self, request, context):
        sid = request.step_id
        self._log(context, "RunGraph", f"step={sid} graph={request.graph_handle}")
        with self.lock:
            sess = self.sessions.get(request.session_handle)
            reg = sess.graphs.get(request.graph_handle) if sess is not None else None
        if reg is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown graph handle "
                          f"{request.graph_handle!r} of session {request.session_handle[:8]}")
        sess.last_used = time.monotonic()
        with self.lock:
            for old in request.cleanup_step_ids:
                self.steps.pop(old, None)
        step = self._step(sid)
        step.session = request.session_handle
        step.rendezvous.compress = request.compress_transfers
        done = threading.Event()

        def on_end():  # the master cancelled the call or went away: stop the step here
            if not done.is_set():
                step.abort(aborted_by("the master cancelled RunGraph"))

        context.add_callback(on_end)
        resp = pb.RunGraphResponse()
        try:
            feeds = {t.name: rpc.decode(t.tensor) for t in request.send}
            missing = [n for n in reg.feed_names if n not in feeds]
            if missing:
                raise TfgInputError(f"RunGraph: feed {missing[0]!r} was not sent")
            with blas.blas_limit(self.blas_threads):
                values, group = self._execute(step, sess, reg,
                                              [feeds[n] for n in reg.feed_names], request.trace)
            check_bounded(self.containers, self.memory_limit, task_label(self.local_task))
            for i, value in enumerate(values):
                name = reg.prepared.fetch_name(i)
                rpc.encode(step_driver.fetched_value(value, name), resp.recv.add(name=name).tensor)
            if request.trace:
                for (name, op, dev, start, dur, thread, *_) in group.trace:
                    resp.trace.add(name=name, op=op, device=dev, start_ns=start, dur_ns=dur,
                                   thread=thread)
                resp.peak_bytes = group.peak_bytes
        except Exception as e:  # noqa: BLE001 - every failure goes back to the master
            resp = pb.RunGraphResponse()
            resp.error.code = pb.StepError.INPUT if isinstance(e, TfgInputError) else \
                pb.StepError.RUNTIME
            msg = " ".join(str(e).split()) if isinstance(e, TfgError) else \
                f"{type(e).__name__}: {' '.join(str(e).split())}"
            resp.error.message = msg
            resp.error.derived = bool(getattr(e, "derived", False))
            self._log(context, "RunGraph", f"step={sid} failed: {msg}")
        finally:
            done.set()
            step.ended = sess.last_used = time.monotonic()  # idle counts from the step's end
        return resp

    def _execute(self, step, sess, reg, feed_values, trace):
        reg.steps += 1  # (a race between two steps of one graph only repeats the call)
        if reg.steps == 2:  # as a local Session's second step (kernels/vector_math.py)
            jit.mark_warm()
        ctx = StepContext(session_resources=sess.resources, step_id=step.rendezvous.step_id)
        group = _WorkerStepGroup(ctx, trace=trace)
        group.rendezvous = step.rendezvous
        with step.lock:
            step.group = group
        if step.rendezvous.error is not None:  # aborted before it started here
            raise step.rendezvous.error
        return step_driver.run_prepared(reg.prepared, group, feed_values, step.rendezvous), group

    def RecvTensor(self, request, context):
        sid, key = request.step_id, request.rendezvous_key
        self._log(context, "RecvTensor", f"step={sid} key={key}")
        step = self._step(sid)
        box, arrived = [], threading.Event()
        withdraw = step.rendezvous.take(
            key, lambda v, d: (box.append((v, d, None)), arrived.set()),
            lambda e: (box.append((None, True, e)), arrived.set()))
        # Only a tfg client understands "ask again"; TensorFlow's is held until the value.
        give_back = (time.monotonic() + busy.RECV_HOLD_S if busy.caller_asks_again(context)
                     else float("inf"))
        while not arrived.wait(min(0.5, busy.RECV_HOLD_S)):
            if time.monotonic() >= give_back and withdraw():
                # Not sent yet: free this thread for other calls (at most --max-calls run
                # at once); the receiver asks again (tfg/executor/distributed/busy.py).
                return pb.RecvTensorResponse()
            if not context.is_active():  # the receiver gave up; its step is ending
                return pb.RecvTensorResponse(is_dead=True)
            if self.steps.get(sid) is not step:  # collected: no RunGraph ever claimed it
                context.abort(grpc.StatusCode.ABORTED, f"step {sid} never ran on "
                              f"{task_label(self.local_task)}")
        value, is_dead, error = box[0]
        if error is not None:
            context.abort(grpc.StatusCode.ABORTED, f"step {sid} was aborted on "
                          f"{task_label(self.local_task)}: {' '.join(str(error).split())}")
        try:
            first, rest = rpc.first_chunk(value, is_dead, compress=request.compress)
        except TfgError as e:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, " ".join(str(e).split()))
        if rest is not None:
            with step.lock:
                step.rest[key] = rest
        with self.lock:
            self.tensor_bytes_sent += first.total_bytes or len(first.tensor.tensor_content)
        return first

    def RecvTensorChunks(self, request, context):
        sid, key = request.step_id, request.rendezvous_key
        self._log(context, "RecvTensorChunks", f"step={sid} key={key}")
        step = self._step(sid, create=False)
        rest = None
        if step is not None:
            with step.lock:
                rest = step.rest.pop(key, None)
        if rest is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          f"no pending chunks of {key} in step {sid}")
        yield from rpc.rest_chunks(rest)

    def CleanupGraph(self, request, context):
        self._log(context, "CleanupGraph", f"step={request.step_id}")
        with self.lock:
            self.steps.pop(request.step_id, None)
        return pb.CleanupGraphResponse()

    def AbortStep(self, request, context):
        self._log(context, "AbortStep", f"step={request.step_id} reason={request.reason}")
        step = self._step(request.step_id)
        step.abort(aborted_by(request.reason))
        if step.ended is None and step.group is None:
            step.ended = time.monotonic()  # never ran here: collectable later
        return pb.AbortStepResponse()

    def CloseSession(self, request, context):
        self._log(context, "CloseSession", f"session={request.session_handle[:8]}")
        with self.lock:
            sess = self.sessions.pop(request.session_handle, None)
            for sid in [k for k, st in self.steps.items()
                        if st.session == request.session_handle]:
                del self.steps[sid]
        if sess is not None:
            session_table.release(sess)
        return pb.CloseSessionResponse()

    def CleanupAll(self, request, context):
        names = list(request.container)
        self._log(context, "CleanupAll", f"containers={names or ['']}")
        removed = self.containers.reset(names)
        gc.collect()  # variables sit in reference cycles of finished steps: free them now
        return pb.CleanupAllResponse(removed=removed)

    def GetVariables(self, request, context):
        self._log(context, "GetVariables", f"session={request.session_handle[:8]}")
        sess = self._session(request.session_handle, context)
        resp = pb.GetVariablesResponse()
        for (container, name), item in sess.resources.items():
            if type(item) is Ref and item.initialized:
                var = resp.variables.add(container=container, name=name)
                rpc.encode(item.get(), var.tensor)
        return resp

    def SetVariables(self, request, context):
        self._log(context, "SetVariables", f"session={request.session_handle[:8]} "
                                           f"n={len(request.variables)}")
        sess = self._session(request.session_handle, context)
        for var in request.variables:
            ref = sess.resources.get_or_create(var.container, var.name,
                                               lambda n=var.name: Ref(n))
            if type(ref) is not Ref:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"resource {var.name!r} is not a variable")
            ref.assign(rpc.decode(var.tensor))
        try:
            check_bounded(self.containers, self.memory_limit, task_label(self.local_task))
        except TfgError as e:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        return pb.SetVariablesResponse()


class WorkerServer:
    """A running worker: the gRPC server and its service."""

    def __init__(self, server, service, address):
        self.server = server
        self.service = service
        self.address = address
        self._stopped = threading.Event()
        self.sweeper = None

    def stop(self, grace=1.0):
        if self.sweeper is not None:
            self.sweeper.stop()
        self.service.serving = False
        with self.service.lock:
            steps = list(self.service.steps.values())
        for step in steps:
            step.abort(aborted_by(f"{task_label(self.service.local_task)} is shutting down"))
        self.server.stop(grace).wait()
        self._stopped.set()

    def wait(self, timeout=None):
        return self._stopped.wait(timeout)


# The most RPCs a worker serves at once (`tfg worker --max-calls`): one thread each, since
# RunGraph holds its thread while the step runs and RecvTensor until the value is produced. A
# step needs one RunGraph per registered part plus one RecvTensor per tensor in flight to a
# peer; 256 leaves room for that, while 10,000 idle clients cannot take 10,000 threads.
DEFAULT_MAX_CALLS = 256


def serve(jobs, job, task, bind=None, devices=None, token=None, verbose=False,
          tls_cert=None, tls_key=None, tls_ca=None, max_memory=None,
          idle_timeout=session_table.DEFAULT_IDLE_S, max_calls=DEFAULT_MAX_CALLS):
    """Start serving task (job, task) of `jobs` ({job: [address]}); returns a WorkerServer.

    Listens on loopback at the port the cluster gives the task unless `bind` says otherwise.
    With `tls_cert` and `tls_key` (PEM bytes) it serves TLS only, and reaches its peers over
    TLS verified by `tls_ca` (default: `tls_cert` itself, for a self-signed certificate).
    At most `max_calls` RPCs run at once, each on its own thread; a call past that is answered
    RESOURCE_EXHAUSTED at once (it never waits for a thread: a queued RunGraph could be the
    one that a running RecvTensor waits for).

    Before: serve(jobs, "worker", 0, max_calls=32) with 200 clients calling RecvTensor.
    After:  32 calls served (about 32 threads), 168 refused "Concurrent RPC limit exceeded".
    """
    if max_calls < 1:
        raise TfgInputError(f"--max-calls must be at least 1, not {max_calls}")
    if (tls_cert is None) != (tls_key is None):
        raise TfgInputError("--tls-cert and --tls-key go together")
    if tls_cert is not None and tls_ca is None:
        tls_ca = tls_cert
    addrs = jobs.get(job)
    if addrs is None:
        raise TfgInputError(f"the cluster has no job {job!r} (it has {', '.join(jobs)})")
    if not 0 <= task < len(addrs):
        raise TfgInputError(f"job {job!r} has {len(addrs)} task(s); --task {task} is not one")
    address = bind_address(addrs[task], bind)
    refuse_taken_port(address)
    log = None
    if verbose:
        def log(line):
            sys.stderr.write(f"{time.strftime('%H:%M:%S')} {line}\n")
            sys.stderr.flush()
    service = WorkerService(jobs, job, task, devices=devices, token=token, log=log,
                            tls_ca=tls_ca if tls_cert is not None else None,
                            max_memory=max_memory)
    interceptors = [rpc.AuthInterceptor(token)] if token else []
    # As many threads as calls admitted: every admitted call has its thread, none queues.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_calls,
                                                    thread_name_prefix="tfg-worker-call"),
                         interceptors=interceptors, options=rpc.SERVER_OPTIONS,
                         maximum_concurrent_rpcs=max_calls)
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(service, server)
    # The same task for TensorFlow masters and servers, on the same port (tf_engine/service.py).
    tf_service.add_to_server(service, server)
    server.add_generic_rpc_handlers((rpc.health_handler(lambda: service.serving),))
    try:
        if tls_cert is not None:
            creds = grpc.ssl_server_credentials([(tls_key, tls_cert)])
            port = server.add_secure_port(address, creds)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError as e:
        raise TfgInputError(f"cannot listen on {address}: {e}") from None
    if port == 0:
        raise TfgInputError(f"cannot listen on {address} (address in use?)")
    server.start()
    out = WorkerServer(server, service, address)
    out.sweeper = session_table.Sweeper(service, idle_timeout)
    return out
