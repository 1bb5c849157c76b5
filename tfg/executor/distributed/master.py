"""The master: what `Session(graph, cluster=...)` and `tfg run --cluster` run steps through.

    >>> sess = ClusterSession(tfg.load("train.pb"), "worker=127.0.0.1:2222,127.0.0.1:2223")
    >>> sess.run(None, targets=["init"])
    >>> sess.run("loss", feeds={"x": batch}, targets=["train"])
    array(0.25, dtype=float32)
    >>> sess.save("ckpt/", step=100); sess.close()

A graph not yet partitioned is placed over the cluster's devices and partitioned (a graph that
`tfg partition --cluster` wrote is used as it is). Each distinct (feeds, fetches, targets) is
pruned once, split per task and registered on each task that has work in it; a step is then
one RunGraph per such task, all at once, feeds and fetches by tensor name. While a step runs
the master pings its tasks: a task that dies or stops answering ends the step everywhere
within `timeout` seconds (AbortStep to the others) with an error naming it, never a hang.
"""
import itertools
import random
import threading
import time
import uuid

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor import checkpoint
from tfg.executor import feeds as F
from tfg.executor import partitions
from tfg.executor.distributed import rpc
from tfg.executor.distributed.liveness import call_all_watched
from tfg.executor.distributed.spec import ClusterConfig, task_label, task_of
from tfg.executor.step import StepRequest, check_request
from tfg.executor.trace import StepTrace
from tfg.graphdef.graph import Graph
from tfg.graphdef.names import DeviceSpec, tensor_name
from tfg.kernels.resources import Ref, ResourceMgr
from tfg.passes.partition import partition
from tfg.schemas.proto import worker_pb2 as pb


class _Prepared:
    def __init__(self, handles, fetch_src, fed):
        self.handles = handles  # task -> (graph handle, feed refs sent there)
        self.fetch_src = fetch_src  # fetch index -> ("feed", i) | (task, index in its recv)
        self.fed = fed


class ClusterSession:
    """See the module docstring. `cluster` is a SPEC, a {job: [address]} dict or a
    ClusterConfig (which also carries `timeout` and `auth_token`)."""

    def __init__(self, graph, cluster, devices=None, timeout=None, auth_token=None):
        self.config = ClusterConfig(cluster, timeout=timeout, auth_token=auth_token)
        self.timeout = self.config.timeout
        self.clients = {t: rpc.WorkerClient(t, self.config.address(t), self.config.auth_token,
                                            tls_ca=self.config.tls_ca)
                        for t in self.config.tasks}
        self.handle = uuid.uuid4().hex
        self._step_ids = itertools.count(random.getrandbits(62))
        self._cache = {}
        self._ended = {}  # task -> step ids to clean up with its next RunGraph
        self._lock = threading.Lock()
        self.last_trace = None
        self.status = self._status_all()
        self._source = graph
        self._unrunnable = {}  # node -> why no device of the cluster can run it
        self.graph = self._executable(graph, devices)
        self._owners = _variable_owners(self.graph)

    # --- setup ----------------------------------------------------------------------------
    def _status_all(self):
        """GetStatus of every task at once (an unreachable task is an error naming it)."""
        return rpc.call_all({t: (c, "GetStatus", pb.GetStatusRequest())
                             for t, c in self.clients.items()}, timeout=self.timeout)

    def _executable(self, graph, devices):
        if not partitions.is_partitioned(graph):
            types = {d.device_type for st in self.status.values() for d in st.devices}
            graph, self._unrunnable = partitions.without_unrunnable(graph, types)
            graph = partition(graph, devices=devices, cluster=self.config.jobs)
        served = {d.name for st in self.status.values() for d in st.devices}
        for node in graph:
            dev = DeviceSpec.parse(node.device).to_string() if node.device else ""
            if dev not in served:
                raise TfgInputError(
                    f"node {node.name!r} is placed on {node.device or '(no device)'!r}, which "
                    f"no task of the cluster serves ({', '.join(sorted(served))}); partition "
                    "the graph with --cluster for this cluster")
        return graph

    # --- running --------------------------------------------------------------------------
    def run(self, fetches=None, feeds=None, targets=None, trace=False):
        """Like Session.run, on the cluster."""
        request = StepRequest.parse(fetches, feeds, targets)
        return F.shape_results(self.run_request(request, trace), request.how)

    def run_request(self, request, trace=False):
        """One step of a StepRequest (tfg/executor/step.py); -> the fetched values."""
        with self._lock:
            prepared = self._cache.get(request.key)
            if prepared is None:
                prepared = self._cache[request.key] = self._prepare(request.feed_refs,
                                                                    request.fetch_refs,
                                                                    request.targets)
        values = dict(zip(request.feed_refs, request.converted_feeds(self.graph)))
        recvs = self._step(prepared, values, trace)
        out = []
        for i, src in enumerate(prepared.fetch_src):
            if src[0] == "feed":
                out.append(values[request.fetch_refs[i]])
            else:
                out.append(recvs[src[0]][src[1]])
        return out

    def _prepare(self, feed_refs, fetch_refs, targets):
        partitions.check_runnable(self._source, self._unrunnable, fetch_refs, targets,
                                  set(feed_refs))
        graph = self.graph
        needed = check_request(graph, feed_refs, fetch_refs, targets)
        fed = set(feed_refs)
        by_task = {}
        for node in graph:  # file order
            if node.name in needed:
                by_task.setdefault(task_of(node.device), []).append(node)
        fetch_src, task_fetches = [], {}
        for i, ref in enumerate(fetch_refs):
            if ref in fed:
                fetch_src.append(("feed", i))
                continue
            task = task_of(graph[ref.node].device)
            lst = task_fetches.setdefault(task, [])
            fetch_src.append((task, len(lst)))
            lst.append(ref)
        requests = {}
        for task, nodes in by_task.items():
            sub = Graph()
            sub.versions.CopyFrom(graph.versions)
            sub.library = graph.library
            for node in nodes:
                sub.add(node.copy())
            task_feeds = [r for r in feed_refs if task_of(graph[r.node].device) == task]
            requests[task] = (pb.RegisterGraphRequest(
                session_handle=self.handle, graph_def=sub.to_proto(),
                feeds=[tensor_name(*r) for r in task_feeds],
                fetches=[tensor_name(*r) for r in task_fetches.get(task, [])]), task_feeds)
        resps = call_all_watched({t: (self.clients[t], "RegisterGraph", req)
                                  for t, (req, _) in requests.items()}, self.timeout)
        handles = {t: (resps[t].graph_handle, requests[t][1]) for t in requests}
        return _Prepared(handles, fetch_src, fed)

    def _step(self, prepared, feed_values, trace):
        """One RunGraph per task, watched until all end; -> {task: [fetched arrays]}."""
        step_id = next(self._step_ids)
        watch = _StepWatch(self, step_id, list(prepared.handles))
        for task, (handle, task_feeds) in prepared.handles.items():
            req = pb.RunGraphRequest(session_handle=self.handle, graph_handle=handle,
                                     step_id=step_id, trace=trace,
                                     compress_transfers=self.config.compress_transfers)
            # The previous steps' rendezvous state goes with this call, not a call of its own.
            req.cleanup_step_ids.extend(self._ended.pop(task, ()))
            for ref in task_feeds:
                rpc.encode(feed_values[ref], req.send.add(name=tensor_name(*ref)).tensor)
            watch.start(task, req)
        try:
            responses = watch.wait()
        except KeyboardInterrupt:  # Ctrl-C: end the step on every task, then re-raise
            watch.cancel()
            raise
        finally:
            for task in prepared.handles:
                self._ended.setdefault(task, []).append(step_id)
        if trace:
            self.last_trace = _merge_traces(responses)
        return {task: [rpc.decode(t.tensor) for t in resp.recv]
                for task, resp in responses.items()}

    # --- variables ------------------------------------------------------------------------
    def variables(self):
        """{checkpoint name: array} of every initialized variable on every task."""
        resps = call_all_watched({t: (c, "GetVariables", pb.GetVariablesRequest(
            session_handle=self.handle)) for t, c in self.clients.items()}, self.timeout)
        mgr, owner = ResourceMgr(), {}
        for task, resp in resps.items():
            for var in resp.variables:
                key = (var.container, var.name)
                if self._owners and key not in self._owners:
                    continue  # another graph's, in a shared container: not this checkpoint's
                if key in owner:
                    raise TfgRuntimeError(f"variable {var.name!r} exists on both "
                                          f"{task_label(owner[key])} and {task_label(task)}")
                owner[key] = task
                mgr.get_or_create(var.container, var.name, lambda n=var.name: Ref(n)).assign(
                    rpc.decode(var.tensor))
        return mgr

    def save(self, directory, step=None):
        """Collect every task's variables and write one checkpoint here (atomically)."""
        return checkpoint.save(self.variables(), directory, step=step, graph=self.graph)

    def checkpoint_step(self, directory):
        return checkpoint.saved_step(directory, self.graph)

    def restore(self, directory):
        """Read a checkpoint here and assign each variable on the task that owns it."""
        mgr = ResourceMgr()
        names = checkpoint.restore(mgr, self.graph, directory)
        self.assign_variables({key: (ref.get(), None, None) for key, ref in mgr.items()})
        return names

    def assign_variables(self, values):
        """Set each variable ({(container, name): (array, dtype, shape)}) on the task whose
        graph holds it (the first task where no node declares it), one call per task."""
        per_task = {}
        first = self.config.tasks[0]
        for (container, name), (value, _, _) in values.items():
            task = self._owners.get((container, name), first)
            var = per_task.setdefault(task, pb.SetVariablesRequest(
                session_handle=self.handle)).variables.add(container=container, name=name)
            rpc.encode(value, var.tensor)
        call_all_watched({t: (self.clients[t], "SetVariables", req)
                          for t, req in per_task.items()}, self.timeout)

    def reset(self, containers=None):
        """Clear `containers` (None: the default container "") on every task, whichever
        session made their variables and queues (TensorFlow's Session::Reset); -> how many
        resources went."""
        resps = call_all_watched({t: (c, "CleanupAll", pb.CleanupAllRequest(
            container=list(containers or []))) for t, c in self.clients.items()}, self.timeout)
        return sum(r.removed for r in resps.values())

    def close(self):
        """Drop this session's state on every task (best effort) and close the channels."""
        # CloseSession also drops the session's step state; a dead task keeps nothing.
        rpc.call_all({t: (c, "CloseSession", pb.CloseSessionRequest(
            session_handle=self.handle)) for t, c in self.clients.items()},
            timeout=min(2.0, self.timeout), strict=False)
        for client in self.clients.values():
            client.close()


class _StepWatch:
    """Waits for one step's RunGraph calls while pinging their tasks; on the first failure
    aborts the step on every other task and reports the failure that is not a consequence."""

    def __init__(self, master, step_id, tasks):
        self.master = master
        self.step_id = step_id
        self.timeout = master.timeout
        self.cond = threading.Condition()
        self.done = {}  # task -> RunGraphResponse or exception
        self.pings = {}  # task -> None while in flight, then the response or exception
        self.tasks = tasks

    def _post(self, table, task):
        def done(result):
            with self.cond:
                table[task] = result
                self.cond.notify_all()
        return done

    def start(self, task, request):
        # No deadline: a step may run for as long as it needs; the pings watch the task.
        self.master.clients[task].call_async("RunGraph", request, None,
                                             self._post(self.done, task))

    def wait(self):
        interval = min(1.0, self.timeout / 5)
        errors, aborted_at = {}, None
        next_ping = time.monotonic() + interval
        n = len(self.tasks)
        while True:
            with self.cond:
                self.cond.wait_for(lambda: len(self.done) == n, timeout=interval / 2)
                done, pings = dict(self.done), dict(self.pings)
            for task, result in done.items():
                if task not in errors:
                    err = self._error_of(task, result)
                    if err is not None:
                        errors[task] = err
            if len(done) == n:
                break
            for task, result in pings.items():
                if result is not None:
                    with self.cond:
                        del self.pings[task]
                    err = self._ping_error(task, result)
                    if err is not None and task not in done and task not in errors:
                        errors[task] = err
            now = time.monotonic()
            if errors and aborted_at is None:
                aborted_at = now
                self._abort([t for t in self.tasks if t not in done],
                            next(iter(errors.values())))
            if aborted_at is not None:
                if now - aborted_at > self.timeout / 4:  # give up on the stragglers
                    for t in self.tasks:
                        if t not in done and t not in errors:
                            errors[t] = rpc.TaskUnreachable(
                                f"{self.master.clients[t].label} did not stop within "
                                f"{self.timeout / 4:.1f}s of the abort")
                    break
                continue
            if now >= next_ping:
                next_ping = now + interval
                for task in self.tasks:
                    if task not in done and task not in pings:
                        with self.cond:
                            self.pings[task] = None
                        self.master.clients[task].call_async(
                            "GetStatus", pb.GetStatusRequest(), self.timeout * 0.5,
                            self._post(self.pings, task))
        if errors:
            primary = [e for e in errors.values() if not getattr(e, "derived", False)]
            raise (primary or list(errors.values()))[0]
        return done

    def _error_of(self, task, result):
        client = self.master.clients[task]
        if isinstance(result, BaseException):
            if hasattr(result, "code"):
                return client.error("RunGraph", result)
            return TfgRuntimeError(f"{client.label}: RunGraph failed: {result}")
        if result.error.code == pb.StepError.OK:
            return None
        cls = TfgInputError if result.error.code == pb.StepError.INPUT else TfgRuntimeError
        if result.error.derived:
            cls = rpc.StepAborted
        return cls(f"{task_label(task)}: {result.error.message}")

    def _ping_error(self, task, result):
        client = self.master.clients[task]
        if isinstance(result, BaseException):
            return client.error("GetStatus", result) if hasattr(result, "code") else result
        if result.incarnation != self.master.status[task].incarnation:
            return rpc.TaskUnreachable(f"{client.label} was restarted during the step (its "
                                       "variables are gone); rerun to resume from a checkpoint")
        return None

    def cancel(self):
        """Abort the step on every task still running it (the client was interrupted)."""
        with self.cond:
            running = [t for t in self.tasks if t not in self.done]
        self._abort(running, "cancelled by the client (interrupted)")

    def _abort(self, tasks, error):
        reason = " ".join(str(error).split())
        for task in tasks:
            self.master.clients[task].call_async("AbortStep", pb.AbortStepRequest(
                step_id=self.step_id, reason=reason), self.timeout / 2)


def _merge_traces(responses):

    events, peak, devices = [], 0, []
    for resp in responses.values():
        for e in resp.trace:
            events.append((e.name, e.op, e.device, e.start_ns, e.dur_ns, e.thread))
            if e.device not in devices:
                devices.append(e.device)
        peak = max(peak, resp.peak_bytes)
    return StepTrace(events, peak, devices)


def _variable_owners(graph):
    """{(container, name): task} of the graph's variable nodes."""
    out = {}
    for node in graph:
        if node.op in checkpoint.VARIABLE_OPS:
            container = node.get_attr("container", b"").decode()
            name = node.get_attr("shared_name", b"").decode() or node.name
            out[(container, name)] = task_of(node.device)
    return out

