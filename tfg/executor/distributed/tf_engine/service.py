"""`tensorflow.WorkerService` served by `tfg worker`, beside tfg's own service on one port, so
that a TensorFlow master (a `tf.compat.v1.Session` on a TensorFlow server whose cluster spec
names the tfg worker's task) runs graph partitions on it.

    >>> server = serve(jobs, "worker", 1)      # tfg.WorkerService and tensorflow.WorkerService

What a TensorFlow master does with a worker, and what happens here:
- GetStatus: the task's devices, each with the worker's incarnation.
- CreateWorkerSession: a session with its own variables (isolate_session_state) or the
  worker's shared ones (as TensorFlow shares a server's resources across sessions otherwise);
  its ServerDef says where the other tasks are.
- RegisterGraph: the partition (nodes of this task, `_Send`/`_Recv` to the others) is checked
  and prepared like a graph of tfg's own protocol.
- RunGraph: `send` tensors go into the step's rendezvous under their keys, the partition runs
  on tfg's executor, `recv_key` tensors come back out. A `_Recv` whose sender is another task
  pulls with TensorFlow's RecvTensor from it (client.TFWorkerClient.recv_tensor).
- RecvTensor: a peer pulls a value this task sent; the answer is TensorFlow's
  RecvTensorResponse (the TensorProto with raw tensor_content, is_dead).
- CleanupGraph, DeregisterGraph, DeleteWorkerSession, CleanupAll: state goes.
A RunGraph whose caller cancels it aborts the step here (TensorFlow's master cancels the other
parts of a failed step that way).
"""
import threading
import time

import grpc

from tfg.errors import TfgError, TfgInputError
from tfg.executor import blas
from tfg.executor.distributed import rpc, session_table
from tfg.executor.distributed.graph_checks import check_registered
from tfg.executor.distributed.rendezvous import RemoteRendezvous, aborted_by
from tfg.executor.distributed.spec import task_label
from tfg.executor.distributed.tf_engine.client import TFWorkerClient
from tfg.graphdef.graph import Graph
from tfg.kernels.resources import ResourceMgr
from tfg.schemas.proto import tf_worker_pb2 as tfpb
from tfg.schemas.proto import tf_worker_pb2_grpc

SHARED = ""  # the session of calls without a worker session of their own


class _TFSession:
    def __init__(self, jobs, resources=None):
        self.resources = resources if resources is not None else ResourceMgr()
        self.graphs = {}
        self.last_used = time.monotonic()
        self.jobs = jobs  # {job: {index: address}} of its ServerDef


class _Step:
    """One step's state here (the fields worker.WorkerService._execute uses)."""

    def __init__(self, step_id, local_task):
        self.peer = None  # task -> TFWorkerClient, set by the RunGraph (its session's cluster)
        self.rendezvous = RemoteRendezvous(step_id, local_task, lambda task: self.peer(task))
        self.group = None
        self.ended = None
        self.lock = threading.Lock()
        self.created = time.monotonic()

    def abort(self, error):
        with self.lock:
            group = self.group
        if group is not None:
            group.fail(error)
        self.rendezvous.abort(error)


class TFWorkerService(tf_worker_pb2_grpc.WorkerServiceServicer):
    """See the module docstring; `worker` is the task's tfg WorkerService (its devices,
    incarnation, limits and log)."""

    def __init__(self, worker):
        self.worker = worker
        self.shared = ResourceMgr()
        default_jobs = {j: dict(enumerate(a)) for j, a in worker.jobs.items()}
        self.sessions = {SHARED: _TFSession(default_jobs, self.shared)}
        self.steps = {}
        self.peers = {}
        self.lock = threading.Lock()
        self._handles = 0

    def _log(self, method, what=""):
        self.worker._log(None, f"tensorflow.{method}", what)

    def _session(self, handle, context):
        with self.lock:
            sess = self.sessions.get(handle or SHARED)
        if sess is None:
            context.abort(grpc.StatusCode.ABORTED, f"session {handle!r} does not exist on "
                          f"{task_label(self.worker.local_task)} (was the worker restarted?)")
        sess.last_used = time.monotonic()
        return sess

    def _peer_of(self, jobs):
        def peer(task):
            addr = jobs.get(task[0], {}).get(task[1])
            if addr is None:
                raise TfgInputError(f"no task {task_label(task)} in the cluster")
            with self.lock:
                client = self.peers.get((task, addr))
                if client is None:
                    client = self.peers[(task, addr)] = TFWorkerClient(task, addr)
            return client
        return peer

    def _step(self, step_id, jobs=None):
        with self.lock:
            step = self.steps.get(step_id)
            if step is None:
                now = time.monotonic()
                for sid in [s for s, st in self.steps.items()
                            if session_table.collectable(st, now)]:
                    del self.steps[sid]
                step = self.steps[step_id] = _Step(step_id, self.worker.local_task)
            if jobs is not None:  # RunGraph says whose cluster the peers are in
                step.peer = self._peer_of(jobs)
            elif step.peer is None:
                step.peer = self._peer_of(self.sessions[SHARED].jobs)
            return step

    # --- RPCs -----------------------------------------------------------------------------
    def GetStatus(self, request, context):
        resp = tfpb.GetStatusResponse()
        for d in self.worker.devices:
            resp.device_attributes.add(name=d.name, device_type=d.device_type,
                                       memory_limit=int(self.worker.memory_limit or 0),
                                       incarnation=self.worker.incarnation)
        return resp

    def CreateWorkerSession(self, request, context):
        self._log("CreateWorkerSession", f"session={request.session_handle[:12]}")
        jobs = {jd.name: dict(jd.tasks) for jd in request.server_def.cluster.job}
        if not jobs:
            jobs = self.sessions[SHARED].jobs
        sess = _TFSession(jobs, None if request.isolate_session_state else self.shared)
        with self.lock:
            self.sessions[request.session_handle] = sess
        return tfpb.CreateWorkerSessionResponse()

    def DeleteWorkerSession(self, request, context):
        self._log("DeleteWorkerSession", f"session={request.session_handle[:12]}")
        with self.lock:
            sess = self.sessions.pop(request.session_handle, None) \
                if request.session_handle else None
        if sess is not None and sess.resources is not self.shared:
            session_table.release(sess)
        return tfpb.DeleteWorkerSessionResponse()

    def RegisterGraph(self, request, context):
        self._log("RegisterGraph", f"session={request.session_handle[:12]} "
                                   f"nodes={len(request.graph_def.node)}")
        sess = self._session(request.session_handle, context)
        try:
            graph = Graph.from_proto(request.graph_def)
            check_registered(graph, [])
            reg = self.worker._prepare(graph, [], [])
        except TfgError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, " ".join(str(e).split()))
        with self.lock:
            self._handles += 1
            handle = f"tf{self._handles}"
            sess.graphs[handle] = reg
        return tfpb.RegisterGraphResponse(graph_handle=handle)

    def DeregisterGraph(self, request, context):
        with self.lock:
            sess = self.sessions.get(request.session_handle or SHARED)
            if sess is not None:
                sess.graphs.pop(request.graph_handle, None)
        return tfpb.DeregisterGraphResponse()

    def RunGraph(self, request, context):
        sid = request.step_id
        self._log("RunGraph", f"step={sid} graph={request.graph_handle}")
        sess = self._session(request.session_handle, context)
        reg = sess.graphs.get(request.graph_handle)
        if reg is None:
            context.abort(grpc.StatusCode.ABORTED, f"graph handle {request.graph_handle!r} is "
                          f"not registered on {task_label(self.worker.local_task)}")
        step = self._step(sid, sess.jobs)
        done = threading.Event()

        def on_end():  # the master cancelled the call: stop this part of the step
            if not done.is_set():
                step.abort(aborted_by("the TensorFlow master cancelled RunGraph"))

        context.add_callback(on_end)
        try:
            for t in request.send:
                step.rendezvous.send(t.name, rpc.decode(t.tensor))
            with blas.blas_limit(self.worker.blas_threads):
                self.worker._execute(step, sess, reg, [], False)
            resp = tfpb.RunGraphResponse()
            for key in request.recv_key:
                value, is_dead = step.rendezvous.recv(key, timeout=0)
                rpc.encode(value, resp.recv.add(name=key).tensor)
            return resp
        except Exception as e:  # noqa: BLE001 - every failure goes back to the master
            code = grpc.StatusCode.INVALID_ARGUMENT if isinstance(e, TfgInputError) else \
                grpc.StatusCode.ABORTED if getattr(e, "derived", False) else \
                grpc.StatusCode.INTERNAL
            msg = " ".join(str(e).split()) if isinstance(e, TfgError) else \
                f"{type(e).__name__}: {' '.join(str(e).split())}"
            self._log("RunGraph", f"step={sid} failed: {msg}")
            if request.store_errors_in_response_body:
                return tfpb.RunGraphResponse(status_code=code.value[0],
                                             status_error_message=msg)
            context.abort(code, msg)
        finally:
            done.set()
            step.ended = sess.last_used = time.monotonic()

    def RecvTensor(self, request, context):
        sid, key = request.step_id, request.rendezvous_key
        self._log("RecvTensor", f"step={sid} key={key}")
        step = self._step(sid)
        box, arrived = [], threading.Event()
        step.rendezvous.take(key, lambda v, d: (box.append((v, d, None)), arrived.set()),
                             lambda e: (box.append((None, True, e)), arrived.set()))
        while not arrived.wait(0.5):
            if not context.is_active():
                return tfpb.RecvTensorResponse(is_dead=True)
        value, is_dead, error = box[0]
        if error is not None:
            context.abort(grpc.StatusCode.ABORTED, f"step {sid} was aborted on "
                          f"{task_label(self.worker.local_task)}: "
                          f"{' '.join(str(error).split())}")
        resp = tfpb.RecvTensorResponse(is_dead=is_dead,
                                       send_start_micros=int(time.time() * 1e6))
        if not is_dead:
            try:
                rpc.encode(value, resp.tensor)
            except TfgError as e:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, " ".join(str(e).split()))
        return resp

    def CleanupGraph(self, request, context):
        with self.lock:
            step = self.steps.pop(request.step_id, None)
        if step is not None and step.ended is None:
            step.abort(aborted_by("CleanupGraph"))
        return tfpb.CleanupGraphResponse()

    def CleanupAll(self, request, context):
        self._log("CleanupAll", ",".join(request.container))
        containers = set(request.container) or {""}
        for key, _ in list(self.shared.items()):
            if key[0] in containers:
                self.shared.delete(*key)
        return tfpb.CleanupAllResponse()

    def MarkRecvFinished(self, request, context):
        return tfpb.MarkRecvFinishedResponse()


def add_to_server(worker, server):
    """Serve tensorflow.WorkerService for `worker` (a tfg WorkerService) on `server`."""
    service = TFWorkerService(worker)
    tf_worker_pb2_grpc.add_WorkerServiceServicer_to_server(service, server)
    return service
