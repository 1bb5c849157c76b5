"""Devices, rendezvous and partitioned graphs: one executor per device, dead values crossing
devices, errors aborting every partition, and a missing Send reported instead of a hang."""
import threading

import numpy as np
import pytest

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor import DeviceSet, Session
from tfg.executor.rendezvous import LocalRendezvous, make_key, parse_key
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
F = DType.FLOAT


def test_device_specs():
    assert DeviceSet.from_spec("cpu:3").names[2].endswith("device:CPU:2")
    assert DeviceSet.from_spec(None).default.name == CPU0
    ds = DeviceSet.from_spec(f"{CPU0},/device:CPU:1")
    assert ds.names == [CPU0, CPU1]
    assert ds.find("/device:CPU:1").name == CPU1
    assert ds.find("/cpu:0").name == CPU0
    assert ds.find("/device:CPU:7") is None
    for bad in ("tpu:1", "cpu:0", "/device:CPU", "cpu:1,cpu:0,/device:CPU:0",
                "/job:w/task:1/device:CPU:0"):
        with pytest.raises(TfgInputError):
            DeviceSet.from_spec(bad)


def test_gpu_without_cupy_is_a_clear_error():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed")
    except Exception:
        pass
    with pytest.raises(TfgInputError, match="CuPy"):
        DeviceSet.from_spec("gpu:1")


def test_rendezvous_keys_and_abort():
    key = make_key(CPU0, 1, CPU1, "edge_1_x", 12, 3)
    assert key.split(";")[1] == "0000000000000001" and key.endswith(";edge_1_x;12:3")
    assert parse_key(key) == (CPU0, 1, CPU1, "edge_1_x", 12, 3)
    rv = LocalRendezvous()
    rv.send(key, 5, False)
    assert rv.recv(key) == (5, False)
    got = []
    rv.recv_async("other", lambda v, d, e: got.append(e))
    rv.abort(TfgRuntimeError("boom"))
    assert got and "boom" in str(got[0])
    with pytest.raises(TfgRuntimeError, match="boom"):
        rv.recv("later", timeout=1)


def _send(g, name, inp, tensor_name, src=CPU0, dst=CPU1):
    g.add_node(name, "_Send", [inp], {"T": F, "tensor_name": tensor_name, "send_device": src,
                                      "send_device_incarnation": 1, "recv_device": dst,
                                      "client_terminated": False}, device=src)


def _recv(g, name, tensor_name, src=CPU0, dst=CPU1, inputs=()):
    g.add_node(name, "_Recv", list(inputs), {"tensor_type": F, "tensor_name": tensor_name,
                                             "send_device": src, "send_device_incarnation": 1,
                                             "recv_device": dst, "client_terminated": False},
               device=dst)


def partitioned_cond():
    """CPU:0 switches x on p and sends both branches; CPU:1 merges what arrives.

    The untaken branch's value crosses devices dead, so the Merge still fires once.
    """
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F}, device=CPU0)
    g.add_node("p", "Placeholder", [], {"dtype": DType.BOOL}, device=CPU0)
    g.add_node("sw", "Switch", ["x", "p"], {"T": F}, device=CPU0)
    g.add_node("neg", "Neg", ["sw"], {"T": F}, device=CPU0)
    g.add_node("sq", "Square", ["sw:1"], {"T": F}, device=CPU0)
    _send(g, "send_f", "neg", "edge_f")
    _send(g, "send_t", "sq", "edge_t")
    _recv(g, "recv_f", "edge_f")
    _recv(g, "recv_t", "edge_t")
    g.add_node("m", "Merge", ["recv_f", "recv_t"], {"T": F, "N": 2}, device=CPU1)
    g.add_node("out", "Mul", ["m", "m"], {"T": F}, device=CPU1)
    g.add_node("t_only", "Identity", ["recv_t"], {"T": F}, device=CPU1)
    return g


@pytest.mark.parametrize("pred,want,index", [(True, 9.0, 1), (False, -3.0, 0)])
def test_partitioned_graph_with_dead_value_crossing(pred, want, index):
    sess = Session(partitioned_cond(), devices="cpu:2")
    out, m, idx = sess.run(["out", "m", "m:1"], {"x": 3.0, "p": pred})
    assert m == want and out == want * want and idx == index
    if pred:
        assert sess.run("t_only", {"x": 3.0, "p": True}) == 9.0
    else:
        with pytest.raises(TfgRuntimeError, match="dead"):
            sess.run("t_only", {"x": 3.0, "p": False})


def test_partitioned_graph_needs_its_devices():
    with pytest.raises(TfgInputError, match="CPU:1"):
        Session(partitioned_cond()).run("out", {"x": 1.0, "p": True})


def test_partitioned_trace_has_both_devices():
    sess = Session(partitioned_cond(), devices="cpu:2")
    sess.run("out", {"x": 2.0, "p": True}, trace=True)
    assert {e[2] for e in sess.last_trace.events} == {CPU0, CPU1}


def _run_with_timeout(fn, seconds=30):
    box = []

    def target():
        try:
            box.append(("ok", fn()))
        except Exception as e:  # noqa: BLE001
            box.append(("err", e))

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the step hung"
    return box[0]


def test_error_on_one_device_aborts_the_other():
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F}, device=CPU0)
    g.add_node("bad", "CheckNumerics", ["x"], {"T": F, "message": b"bad x"}, device=CPU0)
    _send(g, "send", "bad", "edge_bad")
    _recv(g, "recv", "edge_bad")
    g.add_node("out", "Neg", ["recv"], {"T": F}, device=CPU1)
    kind, err = _run_with_timeout(
        lambda: Session(g, devices="cpu:2").run("out", {"x": np.float32("nan")}))
    assert kind == "err" and isinstance(err, TfgRuntimeError)
    assert "bad" in str(err) and "CheckNumerics" in str(err)


def test_recv_without_send_is_reported_not_hung():
    g = Graph()
    g.add_node("c", "Const", [], {"dtype": F, "value": np.float32(1)}, device=CPU0)
    _recv(g, "recv", "edge_nobody")
    g.add_node("out", "Neg", ["recv"], {"T": F}, device=CPU1)
    g.add_node("other", "Neg", ["c"], {"T": F}, device=CPU0)
    kind, err = _run_with_timeout(
        lambda: Session(g, devices="cpu:2").run(["out", "other"]))
    assert kind == "err" and "deadlock" in str(err) and "edge_nobody" in str(err)


def test_unpartitioned_graph_runs_on_several_devices():
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": (2, 2)})
    g.add_node("a", "MatMul", ["x", "x"], {"T": F}, device="/device:CPU:0")
    g.add_node("b", "Relu", ["a"], {"T": F}, device="/device:CPU:1")
    g.add_node("c", "Add", ["a", "b"], {"T": F})
    x = np.array([[1, -2], [3, 4]], np.float32)
    got = Session(g, devices="cpu:2").run("c", {"x": x})
    np.testing.assert_allclose(got, x @ x + np.maximum(x @ x, 0))


def test_ref_switch_forwards_the_variable_itself():
    g = Graph()
    g.add_node("v", "VariableV2", [], {"dtype": F, "shape": Shape(())})
    g.add_node("c", "Const", [], {"dtype": F, "value": np.float32(1)})
    g.add_node("c2", "Const", [], {"dtype": F, "value": np.float32(5)})
    g.add_node("init", "Assign", ["v", "c"], {"T": F})
    g.add_node("p", "Placeholder", [], {"dtype": DType.BOOL})
    g.add_node("rs", "RefSwitch", ["v", "p"], {"T": F})
    g.add_node("set", "Assign", ["rs:1", "c2"], {"T": F})  # writes v only when p is true
    g.add_node("read", "Identity", ["v"], {"T": F})
    sess = Session(g)
    sess.run(None, targets="init")
    sess.run(None, {"p": False}, targets="set")
    assert sess.run("read") == 1.0
    sess.run(None, {"p": True}, targets="set")
    assert sess.run("read") == 5.0
