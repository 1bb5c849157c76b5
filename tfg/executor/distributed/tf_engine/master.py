"""tfg as the master of TensorFlow servers (`tfg run --cluster SPEC --engine tensorflow`).

    >>> sess = TFClusterSession(tfg.load("train.pb"), "worker=10.0.0.1:2222,10.0.0.2:2222")
    >>> sess.run(None, targets=["init"]); sess.run("loss", feeds=batch, targets=["train"])
    >>> sess.close()        # DeregisterGraph, DeleteWorkerSession on every server

Setup: GetStatus on every server (its devices and their incarnations), then one worker session
per server for the life of this object (CreateWorkerSession with the cluster's ServerDef and
isolated state, so variables live on the servers across steps and go with the session). The
graph is placed and partitioned by tfg (placer, cost model) unless `tfg partition` did it.
Each distinct (feeds, fetches, targets) is pruned and split per task once (graphs.py) and
registered on each task that has work in it; a step is one RunGraph per such task, with a
TensorFlow step id, feeds and fetches by rendezvous key (step.py watches it). After each step
CleanupGraph drops its rendezvous state on the servers.
"""
import random
import threading
import uuid

from tfg.errors import TfgInputError
from tfg.executor import feeds as F
from tfg.executor import partitions
from tfg.executor.distributed import rpc
from tfg.executor.distributed.spec import ClusterConfig, task_label
from tfg.executor.distributed.tf_engine import variables
from tfg.executor.distributed.tf_engine.client import TFWorkerClient
from tfg.executor.distributed.tf_engine.graphs import task_graphs
from tfg.executor.distributed.tf_engine.step import StepWatch
from tfg.executor.step import StepRequest, check_request
from tfg.graphdef.names import DeviceSpec, canonical_device
from tfg.passes.partition import partition
from tfg.schemas.proto import tf_worker_pb2 as tfpb


class _Prepared:
    def __init__(self, handles, parts, fed_fetches):
        self.handles = handles          # task -> graph handle
        self.parts = parts              # task -> TaskGraph (its feed and fetch keys)
        self.fed_fetches = fed_fetches  # fetch index -> feed index (answered by the master)


class TFClusterSession:
    """See the module docstring; the interface of master.ClusterSession (run, run_request,
    variables, save, restore, checkpoint_step, close)."""

    def __init__(self, graph, cluster, devices=None, timeout=None, auth_token=None):
        self.config = ClusterConfig(cluster, timeout=timeout, auth_token=auth_token)
        self.timeout = self.config.timeout
        self.clients = {t: TFWorkerClient(t, self.config.address(t), self.config.auth_token,
                                          tls_ca=self.config.tls_ca)
                        for t in self.config.tasks}
        self.handle = f"tfg_{uuid.uuid4().hex}"
        # TensorFlow's masters draw step ids at random below 2**56; so does tfg.
        self._next_step = random.getrandbits(55)
        self._cache = {}
        self._lock = threading.Lock()
        self._sessions = set()  # tasks with a worker session of ours
        self._helpers = None  # the graph with variables.py's nodes, made on first use
        self.last_trace = None
        self.status = rpc.call_all({t: (c, "GetStatus", tfpb.GetStatusRequest())
                                    for t, c in self.clients.items()}, timeout=self.timeout)
        self.incarnations = {canonical_device(d.name): d.incarnation
                             for st in self.status.values() for d in st.device_attributes}
        self._check_identities()
        self._source = graph
        self._unrunnable = {}
        self.graph = self._executable(graph, devices)
        self._create_sessions()

    # --- setup ----------------------------------------------------------------------------
    def _check_identities(self):
        """A server must be the task the SPEC says it is (else its devices are not where the
        partitions are sent)."""
        for task, st in self.status.items():
            names = [d.name for d in st.device_attributes]
            mine = [n for n in names if DeviceSpec.parse(n)[:3] == (task[0], 0, task[1])]
            if not mine:
                raise TfgInputError(
                    f"{self.clients[task].label} serves {', '.join(names) or 'no devices'}, "
                    f"not {task_label(task)}: the --cluster SPEC must list the TensorFlow "
                    "servers in the order of their own cluster spec")

    def _executable(self, graph, devices):
        if not partitions.is_partitioned(graph):
            types = {d.device_type for st in self.status.values() for d in st.device_attributes}
            graph, self._unrunnable = partitions.without_unrunnable(graph, types)
            graph = partition(graph, devices=devices, cluster=self.config.jobs)
        for node in graph:
            if canonical_device(node.device) not in self.incarnations:
                raise TfgInputError(
                    f"node {node.name!r} is placed on {node.device or '(no device)'!r}, which "
                    f"no server of the cluster has ({', '.join(sorted(self.incarnations))}); "
                    "partition the graph with --cluster for this cluster")
        return graph

    def _create_sessions(self):
        server_def = tfpb.ServerDef(protocol="grpc")
        for job, addrs in self.config.jobs.items():
            jd = server_def.cluster.job.add(name=job)
            for i, addr in enumerate(addrs):
                jd.tasks[i] = addr
        attrs = [d for st in self.status.values() for d in st.device_attributes]
        calls = {}
        for task, client in self.clients.items():
            sd = tfpb.ServerDef()
            sd.CopyFrom(server_def)
            sd.job_name, sd.task_index = task
            calls[task] = (client, "CreateWorkerSession", tfpb.CreateWorkerSessionRequest(
                session_handle=self.handle, server_def=sd, isolate_session_state=True,
                cluster_device_attributes=attrs))
        results = rpc.call_all(calls, timeout=self.timeout, strict=False)
        self._sessions = {t for t, r in results.items() if not isinstance(r, Exception)}
        for task in self.config.tasks:
            if task not in self._sessions:
                self.close()
                raise results[task]

    # --- running --------------------------------------------------------------------------
    def run(self, fetches=None, feeds=None, targets=None, trace=False):
        request = StepRequest.parse(fetches, feeds, targets)
        return F.shape_results(self.run_request(request, trace), request.how)

    def run_request(self, request, trace=False):
        """One step of a StepRequest (tfg/executor/step.py); -> the fetched values."""
        if trace:
            raise TfgInputError("--trace is not available with --engine tensorflow "
                                "(TensorFlow's servers keep their own step stats)")
        partitions.check_runnable(self._source, self._unrunnable, request.fetch_refs,
                                  request.targets, set(request.feed_refs))
        return self._run(self.graph, request)

    def run_helper(self, request):
        """A step of the variable helpers' graph (variables.py): the session's graph with
        read, assign and is-initialized nodes beside each variable."""
        with self._lock:
            if self._helpers is None:
                self._helpers = variables.helper_graph(self.graph)
        return self._run(self._helpers, request)

    def _run(self, graph, request):
        key = (id(graph), request.key)
        with self._lock:
            prepared = self._cache.get(key)
            if prepared is None:
                prepared = self._cache[key] = self._prepare(graph, request)
        values = request.converted_feeds(graph)
        return self._step(prepared, values, len(request.fetch_refs))

    def _prepare(self, graph, request):
        needed = check_request(graph, request.feed_refs, request.fetch_refs, request.targets)
        parts = task_graphs(graph, needed, request.feed_refs, request.fetch_refs,
                            self.incarnations)
        fed = {ref: i for i, ref in enumerate(request.feed_refs)}
        fed_fetches = {i: fed[r] for i, r in enumerate(request.fetch_refs) if r in fed}
        calls = {t: (self.clients[t], "RegisterGraph", tfpb.RegisterGraphRequest(
            session_handle=self.handle, create_worker_session_called=True,
            graph_def=p.graph_def)) for t, p in parts.items()}
        # Registration imports and optimizes the graph: slower than a ping, bounded all the same.
        resps = rpc.call_all(calls, timeout=self.timeout * 3)
        return _Prepared({t: r.graph_handle for t, r in resps.items()}, parts, fed_fetches)

    def _step(self, prepared, feed_values, n_fetches):
        with self._lock:
            self._next_step += 1
            step_id = self._next_step
        requests = {}
        for task, handle in prepared.handles.items():
            req = tfpb.RunGraphRequest(session_handle=self.handle, graph_handle=handle,
                                       step_id=step_id, create_worker_session_called=True)
            for i, key in prepared.parts[task].feed_keys:
                rpc.encode(feed_values[i], req.send.add(name=key).tensor)
            req.recv_key.extend(key for _, key in prepared.parts[task].fetch_keys)
            requests[task] = req
        watch = StepWatch(self.clients, self.status, self.timeout)
        try:
            responses = watch.run(requests)
        finally:
            self._cleanup(step_id, list(requests))
        out = [None] * n_fetches
        for i, f in prepared.fed_fetches.items():
            out[i] = feed_values[f]
        for task, resp in responses.items():
            got = {t.name: t.tensor for t in resp.recv}
            for i, key in prepared.parts[task].fetch_keys:
                out[i] = rpc.decode(got[key])
        return out

    def _cleanup(self, step_id, tasks):
        """CleanupGraph(step_id) on every task, not waited for (TensorFlow's master does the
        same); on a dead task it fails quietly."""
        for task in tasks:
            self.clients[task].call_async("CleanupGraph", tfpb.CleanupGraphRequest(
                step_id=step_id), self.timeout / 2)

    # --- variables ------------------------------------------------------------------------
    def variables(self):
        return variables.collect(self)

    def save(self, directory, step=None):
        return variables.save(self, directory, step)

    def checkpoint_step(self, directory):
        return variables.saved_step(self, directory)

    def restore(self, directory):
        return variables.restore(self, directory)

    def assign_variables(self, values):
        variables.assign(self, values)

    # --- ending ---------------------------------------------------------------------------
    def close(self):
        """DeregisterGraph every graph and DeleteWorkerSession on every server (best effort,
        short deadlines: a dead server keeps nothing of ours), then close the channels."""
        wait = min(2.0, self.timeout)
        calls = {}
        for key, prepared in self._cache.items():
            for task, handle in prepared.handles.items():
                calls[(key, task)] = (self.clients[task], "DeregisterGraph",
                                      tfpb.DeregisterGraphRequest(
                                          session_handle=self.handle, graph_handle=handle,
                                          create_worker_session_called=True))
        if calls:
            rpc.call_all(calls, timeout=wait, strict=False)
        self._cache.clear()
        if self._sessions:
            rpc.call_all({t: (self.clients[t], "DeleteWorkerSession",
                              tfpb.DeleteWorkerSessionRequest(session_handle=self.handle))
                          for t in self._sessions}, timeout=wait, strict=False)
            self._sessions = set()
        for client in self.clients.values():
            client.close()
