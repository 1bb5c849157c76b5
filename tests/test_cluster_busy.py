"""A step with more tensors in flight to one task than that worker's --max-calls: the worker
hands back a RecvTensor whose value is not sent yet after busy.RECV_HOLD_S (asking the
receiver to ask again) and refused calls wait their turn (tfg/executor/distributed/busy.py),
so the step finishes with the local run's values instead of failing "Concurrent RPC limit
exceeded" (a Keras RNN gradient split over two tasks pulled ~360 tensors at once)."""
import numpy as np

from tfg import builder as tb
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.rendezvous import LocalRendezvous
from tfg.executor.session import Session

T0, T1 = "/job:worker/task:0", "/job:worker/task:1"


def fan_in_graph(n=40, spin=3000):
    """Task 1 computes y in a loop of `spin` steps; task 0 makes n tensors from y, each read
    by task 1. Task 1 asks task 0 for all n when the step starts, long before they exist."""
    with tb.Graph() as b:
        with tb.device(T1):
            x = tb.placeholder(tb.float32, [4], name="x")
            _, y = tb.while_loop(lambda i, v: tb.less(i, spin),
                                 lambda i, v: (i + 1, v * 0.999 + 0.001), [tb.constant(0), x])
        with tb.device(T0):
            parts = [tb.sin(y + float(k)) for k in range(n)]
        with tb.device(T1):
            tb.add_n(parts, name="out")
    return b.graph


def test_more_pulls_than_max_calls_finish():
    graph = fan_in_graph()
    x = np.array([0.5, -1.0, 2.0, 3.0], np.float32)
    local = graph.copy()
    for node in local:
        node.device = ""
    want = Session(local).run("out", feeds={"x": x})
    with LocalCluster(2, extra_args=("--max-calls", "6")) as c:
        with Session(graph, cluster=c.spec) as sess:
            for _ in range(2):
                np.testing.assert_allclose(sess.run("out", feeds={"x": x}), want, rtol=1e-5)


def test_withdraw_takes_back_a_waiter_but_never_a_delivered_value():
    rv = LocalRendezvous()
    got = []
    cb = lambda v, d, e: got.append(v)  # noqa: E731
    rv.recv_async("k", cb)
    assert rv.withdraw("k", cb) and not rv.withdraw("k", cb)
    rv.send("k", 1.0)  # no waiter left: the value stays for the next receiver
    assert got == [] and rv.recv("k") == (1.0, False)
    rv.recv_async("j", cb)
    rv.send("j", 2.0)
    assert got == [2.0] and not rv.withdraw("j", cb)


def test_only_a_caller_that_asks_again_gets_the_empty_answer():
    """TensorFlow's workers pull from a tfg worker in a mixed cluster and read any answer as
    the tensor: a RecvTensor without busy.ASKS_AGAIN is held until the value (here: past the
    call's deadline), one with it (tfg's client) is answered "ask again" after the hold."""
    import time

    import grpc
    import pytest

    from tfg.executor.distributed import busy
    from tfg.executor.distributed.rpc import WorkerClient
    from tfg.schemas.proto import worker_pb2 as pb

    with LocalCluster(1) as c:
        client = WorkerClient(("worker", 0), c.addresses[0])
        req = pb.RecvTensorRequest(step_id=77, rendezvous_key="never;sent")
        t0 = time.monotonic()
        first = client.stub.RecvTensor(req, timeout=30, metadata=(busy.ASKS_AGAIN,))
        assert busy.asks_again(first) and time.monotonic() - t0 < 10
        with pytest.raises(grpc.RpcError) as e:
            client.stub.RecvTensor(req, timeout=busy.RECV_HOLD_S * 4)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
