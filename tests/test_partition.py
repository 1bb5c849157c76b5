"""Partitioning: Send/Recv structure, control edges, control loops, and values of graphs split
over three CPU devices against what TensorFlow computed."""
import json

import numpy as np
import pytest

from tfg.errors import TfgInputError
from tfg.graphdef import io
from tfg.graphdef.frames import analyze
from tfg.graphdef.graph import Graph
from tfg.graphdef.names import CONTROL, DeviceSpec
from tfg.kernels import has_kernel
from tfg.passes.partition import partition, split_by_device
from tfg.passes.place import PlacementError, place
from tfg.schemas.dtypes import DType

from conftest import FIXTURES, conformance_cases

CPU = "/job:localhost/replica:0/task:0/device:CPU:%d"
F = DType.FLOAT
CASES = sorted(p for p in (FIXTURES / "partition").iterdir() if (p / "case.json").exists())


def check_partitioned(g):
    """The partitioned-graph invariant, and Send/Recv pairing."""
    sends, recvs = {}, {}
    for node in g:
        assert DeviceSpec.parse(node.device).is_full(), node
        for ref in node.input_refs:
            assert g[ref.node].device == node.device, (node.name, ref)
        if node.op in ("_Send", "_Recv"):
            key = node.get_attr("tensor_name")
            assert node.get_attr("send_device_incarnation") == 1
            assert node.get_attr("client_terminated") is False
            assert key.startswith(b"edge_")
            (sends if node.op == "_Send" else recvs)[key] = node
    assert sends.keys() == recvs.keys()
    for key, send in sends.items():
        recv = recvs[key]
        assert send.device.encode() == send.get_attr("send_device") == recv.get_attr(
            "send_device")
        assert recv.device.encode() == recv.get_attr("recv_device") == send.get_attr(
            "recv_device")
        assert send.get_attr("T") == recv.get_attr("tensor_type")
        assert send.device != recv.device
    return sends, recvs


def two_device_graph():
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": F, "shape": (2,)}, device=CPU % 0)
    g.add_node("a", "Neg", ["x"], attrs={"T": F}, device=CPU % 0)
    g.add_node("b", "Neg", ["a"], attrs={"T": F}, device=CPU % 1)
    g.add_node("c", "AddV2", ["a", "b"], attrs={"T": F}, device=CPU % 1)
    g.add_node("d", "Neg", ["c", "^x"], attrs={"T": F}, device=CPU % 1)
    g.add_node("e", "Neg", ["c", "^x"], attrs={"T": F}, device=CPU % 1)
    return g


def test_one_recv_per_tensor_and_destination():
    g = partition(two_device_graph())
    sends, recvs = check_partitioned(g)
    data = [r for r in recvs.values() if r.get_attr("tensor_type") == F
            and not any(c.op == "Identity" for c, _ in g.consumers(r.name))]
    assert len(data) == 1  # a:0 crosses once, read by b and c
    recv = data[0].name
    assert g["b"].inputs == (recv,) and g["c"].inputs == (recv, "b")
    send = next(s for s in sends.values() if s.inputs == ("a",))
    assert send.device == CPU % 0 and send.get_attr("T") == F


def test_control_edge_crosses_as_dummy_const():
    g = partition(two_device_graph())
    ctrl = [n.control_inputs for n in (g["d"], g["e"])]
    assert ctrl[0] == ctrl[1] and len(ctrl[0]) == 1  # shared by both consumers
    ident = g[ctrl[0][0]]
    assert ident.op == "Identity" and ident.device == CPU % 1
    recv = g[ident.inputs[0]]
    assert recv.op == "_Recv"
    send = next(n for n in g if n.op == "_Send"
                and n.get_attr("tensor_name") == recv.get_attr("tensor_name"))
    dummy = g[send.inputs[0]]
    assert dummy.op == "Const" and dummy.inputs == ("^x",) and dummy.device == CPU % 0
    assert dummy.get_attr("value").shape == (0,) and dummy.get_attr("dtype") == F


def test_partition_is_idempotent_and_splits_by_device():
    g = partition(two_device_graph())
    again = partition(g)
    assert [n.to_proto() for n in again] == [n.to_proto() for n in g]
    parts = split_by_device(g)
    assert set(parts) == {CPU % 0, CPU % 1}
    assert sum(len(p) for p in parts.values()) == len(g)
    with pytest.raises(TfgInputError, match="not partitioned"):
        split_by_device(two_device_graph())


def test_partition_places_nodes_without_device():
    g = two_device_graph()
    g["e"].device = ""
    g2 = partition(g, "cpu:2")
    check_partitioned(g2)
    assert g2["e"].device in (CPU % 0, CPU % 1)


def test_ref_edges_are_never_shared_and_never_cross():
    g = Graph()
    g.add_node("w", "VariableV2", attrs={"dtype": F, "shape": (2,)}, device=CPU % 0)
    g.add_node("r1", "Identity", ["w"], attrs={"T": F}, device=CPU % 1)
    g.add_node("r2", "Identity", ["w"], attrs={"T": F}, device=CPU % 1)
    g2 = partition(g)
    check_partitioned(g2)
    assert g2["r1"].inputs != g2["r2"].inputs  # one Recv each
    assert all(n.get_attr("T") == F for n in g2 if n.op == "_Send")
    g.add_node("v", "Const", attrs={"dtype": F, "value": np.ones(2, np.float32)},
               device=CPU % 1)
    g.add_node("assign", "Assign", ["w", "v"], attrs={"T": F}, device=CPU % 1)
    with pytest.raises(PlacementError, match="'assign' .* by reference"):
        partition(g)


def round_robin(g, n=3):
    """Every node requests CPU:(i mod n); placement then settles colocation conflicts."""
    g = g.copy()
    for i, node in enumerate(g):
        node.device = f"/device:CPU:{i % n}"
    return place(g, f"cpu:{n}", warn=lambda msg: None)


def test_while_loop_across_devices_gets_control_loops():
    g = partition(round_robin(io.load(str(FIXTURES / "partition" / "nested_while_invariant"
                                          / "graph.pb"))))
    check_partitioned(g)
    info = analyze(g)
    cloop_merges = {n.name: n for n in g if n.op == "Merge" and n.name.startswith("cloop/")}
    assert cloop_merges
    for merge in cloop_merges.values():
        enter, nxt = (g[i] for i in merge.inputs)
        assert enter.op == "Enter" and nxt.op == "NextIteration"
        switch = g[nxt.inputs[0].rsplit(":", 1)[0]]
        assert switch.op == "Switch" and switch.inputs[0] == merge.name
        frame = info.frame_of(merge.name)
        pred = g[switch.inputs[1]]
        assert pred.name == frame.loop_cond or (
            pred.op == "_Recv" and any(
                s.inputs == (frame.loop_cond,) and s.get_attr("tensor_name")
                == pred.get_attr("tensor_name") for s in g if s.op == "_Send"))
        start = g[enter.inputs[0]]
        if frame.parent is None:
            assert start.op == "Const" and start.get_attr("value").shape == (0,)
        else:  # nested: entered from the parent frame's control loop on the same device
            assert start.name in cloop_merges and start.device == merge.device
        assert enter.get_attr("frame_name").decode() == frame.name
    # Every Recv inside a frame re-runs per iteration: a control edge from its control loop.
    for node in g:
        frame = info.frame_of(node.name)
        if node.op == "_Recv" and frame is not None:
            (ctrl,) = node.control_inputs
            assert ctrl in cloop_merges and info.frame_of(ctrl) is frame
            assert g[ctrl].device == node.device


def _run_case(d, graph):
    from tfg.executor.session import Session

    meta = json.load(open(d / "case.json"))
    feeds = dict(np.load(d / "feeds.npz"))
    expected = np.load(d / "expected.npz")
    sess = Session(graph, devices="cpu:3")
    for op in meta.get("init", []):
        sess.run([], targets=[op])
    for _ in range(meta.get("steps", 1)):
        out = sess.run(meta["fetches"], feeds=feeds, targets=meta.get("targets", []))
    for name, value in zip(meta["fetches"], out):
        np.testing.assert_allclose(value, expected[name], rtol=meta.get("rtol", 1e-4),
                                   atol=meta.get("atol", 1e-5), err_msg=name)


def _needs_kernels(graph):
    missing = sorted({n.op for n in graph if not n.op.startswith("_") and not has_kernel(n.op)
                      and n.op not in ("Switch", "Merge", "Enter", "Exit", "NextIteration",
                                       "LoopCond", "RefSwitch", "RefEnter", "RefMerge",
                                       "RefExit", "RefNextIteration", "ControlTrigger")})
    if missing:
        pytest.skip(f"no CPU kernel yet for {', '.join(missing)}")


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_values_round_robin_over_three_devices(case):
    graph = io.load(str(case / "graph.pb"))
    _needs_kernels(graph)
    g = partition(round_robin(graph))
    check_partitioned(g)
    assert len({n.device for n in g}) == 3
    _run_case(case, g)


CONFORMANCE = [c for c in conformance_cases()
               if json.load(open(c / "case.json"))["kind"] in ("run", "train")]


@pytest.mark.parametrize("case", CONFORMANCE, ids=lambda p: p.name)
def test_conformance_round_robin_over_three_devices(case):
    graph = io.load(str(case / "graph.pb"))
    _needs_kernels(graph)
    g = partition(round_robin(graph))
    check_partitioned(g)
    _run_case(case, g)


def test_dead_values_cross_devices():
    """A cond split so the untaken branch's dead value crosses devices into the Merge."""
    g = Graph()
    g.add_node("p", "Placeholder", attrs={"dtype": DType.BOOL, "shape": ()}, device=CPU % 0)
    g.add_node("x", "Placeholder", attrs={"dtype": F, "shape": ()}, device=CPU % 0)
    g.add_node("sw", "Switch", ["x", "p"], attrs={"T": F}, device=CPU % 0)
    g.add_node("f", "Neg", ["sw"], attrs={"T": F}, device=CPU % 1)
    g.add_node("t", "Square", ["sw:1"], attrs={"T": F}, device=CPU % 2)
    g.add_node("m", "Merge", ["f", "t"], attrs={"T": F, "N": 2}, device=CPU % 1)
    g2 = partition(g)
    check_partitioned(g2)
    from tfg.executor.session import Session

    sess = Session(g2, devices="cpu:3")
    assert sess.run("m", feeds={"p": True, "x": 3.0}) == 9.0
    assert sess.run("m", feeds={"p": False, "x": 3.0}) == -3.0


def _reshape_across_devices(shape_values, dtype=DType.INT32):
    """x (CPU:0) reshaped by r (CPU:1) to a shape Const `s` that lives on CPU:0."""
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": F, "shape": (6,)}, device=CPU % 0)
    g.add_node("s", "Const", attrs={"dtype": dtype, "value": np.array(shape_values,
                                                                       dtype.np)},
               device=CPU % 0)
    g.add_node("n", "Neg", ["x"], attrs={"T": F}, device=CPU % 0)
    g.add_node("r", "Reshape", ["n", "s"], attrs={"T": F, "Tshape": dtype}, device=CPU % 1)
    return g


def test_a_small_const_is_copied_to_the_device_that_reads_it():
    """No Send/Recv for the shape: TensorFlow's shape functions see a Const at import (a
    SpaceToBatchND behind a _Recv was refused: 'block_shape must have known size')."""
    from tfg.executor.session import Session
    g = partition(_reshape_across_devices([2, 3]))
    sends, _ = check_partitioned(g)
    assert len(sends) == 1  # only the Neg's output crosses
    copy = g[g["r"].input_refs[1].node]
    assert copy.op == "Const" and copy.device == CPU % 1 and copy.name != "s"
    assert copy.get_attr("_tfg_copy_of") == b"s"
    assert np.array_equal(copy.get_attr("value"), [2, 3])
    assert partition(g).to_proto() == g.to_proto()  # idempotent
    out = Session(g, devices="cpu:2").run("r", feeds={"x": np.arange(6, dtype=np.float32)})
    np.testing.assert_array_equal(out, -np.arange(6, dtype=np.float32).reshape(2, 3))


def test_a_large_const_still_crosses_as_send_recv():
    g = partition(_reshape_across_devices([1] * 65 + [6], DType.INT64))
    sends, _ = check_partitioned(g)
    assert len(sends) == 2 and g["r"].input_refs[1].node != "s"
    assert g[g["r"].input_refs[1].node].op == "_Recv"


def test_feeding_a_copied_const_is_refused():
    from tfg.executor.session import Session
    g = partition(_reshape_across_devices([2, 3]))
    with pytest.raises(TfgInputError, match="feed 's'.*copied this Const"):
        Session(g, devices="cpu:2").run("r", feeds={"x": np.zeros(6, np.float32), "s": [3, 2]})
