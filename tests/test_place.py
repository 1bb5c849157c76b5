"""Placement: requested and partial devices, colocation, soft placement, the cost model."""
import json

import numpy as np
import pytest

from tfg.graphdef.graph import Graph
from tfg.graphdef.names import DeviceSpec
from tfg.kernels import has_kernel
from tfg.passes import cost_model as cm_mod
from tfg.passes.cluster_spec import cluster_devices, device_names, parse_cluster
from tfg.passes.cost_model import CostModel
from tfg.passes.place import PlacementError, place
from tfg.passes.place import colocation
from tfg.schemas.dtypes import DType

from conftest import FIXTURES

CPU = "/job:localhost/replica:0/task:0/device:CPU:%d"
GPU = "/job:localhost/replica:0/task:0/device:GPU:%d"
F = DType.FLOAT


def placeholder(g, name, shape, device=""):
    return g.add_node(name, "Placeholder", attrs={"dtype": F, "shape": shape}, device=device)


def unary(g, name, op, x, device="", **attrs):
    return g.add_node(name, op, [x], attrs={"T": F, **attrs}, device=device)


def chain_graph():
    g = Graph()
    placeholder(g, "x", (2, 2))
    unary(g, "a", "Neg", "x")
    unary(g, "b", "Neg", "a")
    return g


def collect():
    msgs = []
    return msgs, msgs.append


# --- device lists -----------------------------------------------------------------------

def test_device_names_from_spec_and_cluster():
    assert device_names("cpu:2,gpu:1") == [CPU % 0, CPU % 1, GPU % 0]
    assert device_names(["/device:CPU:1", "/cpu:0"]) == [CPU % 1, CPU % 0]
    assert parse_cluster("worker=h:1,h:2") == {"worker": ["h:1", "h:2"]}
    assert cluster_devices("worker=h:1,h:2;ps=h:3") == [
        "/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0",
        "/job:ps/replica:0/task:0/device:CPU:0"]
    with pytest.raises(Exception, match="names a device twice"):
        device_names("cpu:1,/device:CPU:0")


def test_cluster_spec_json_file(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}))
    assert device_names(cluster=str(path))[1] == "/job:worker/replica:0/task:1/device:CPU:0"
    with pytest.raises(Exception, match="expected job=host:port"):
        parse_cluster("nonsense")


# --- requested devices ------------------------------------------------------------------

def test_every_node_gets_a_full_device():
    g2 = place(chain_graph(), "cpu:3")
    for node in g2:
        assert DeviceSpec.parse(node.device).is_full()
        assert node.device in device_names("cpu:3")


def test_requested_full_partial_and_legacy_devices_are_kept():
    g = chain_graph()
    g["x"].device = "/job:localhost/replica:0/task:0/device:CPU:2"
    g["a"].device = "/device:CPU:1"
    g["b"].device = "/cpu:1"
    g2 = place(g, "cpu:3")
    assert [g2[n].device for n in ("x", "a", "b")] == [CPU % 2, CPU % 1, CPU % 1]


def test_partial_spec_narrows_to_matching_devices():
    g = chain_graph()
    g["b"].device = "/job:localhost/task:0/device:CPU:*"
    names = ["/job:localhost/replica:0/task:0/device:CPU:0",
             "/job:other/replica:0/task:0/device:CPU:0"]
    g2 = place(g, names)
    assert g2["b"].device == names[0]
    g["b"].device = "/job:other"
    assert place(g, names)["b"].device == names[1]


def test_soft_placement_falls_back_with_a_warning():
    g = chain_graph()
    g["a"].device = "/device:GPU:0"
    msgs, warn = collect()
    g2 = place(g, "cpu:2", warn=warn)
    assert g2["a"].device in (CPU % 0, CPU % 1)
    assert len(msgs) == 1 and "'a'" in msgs[0] and "GPU:0" in msgs[0]


def test_hard_placement_error_names_node_and_device():
    g = chain_graph()
    g["a"].device = "/device:CPU:7"
    with pytest.raises(PlacementError, match=r"node 'a' \(Neg\) requests device "
                                             r"'/device:CPU:7', which does not exist"):
        place(g, "cpu:2", soft=False)


def test_requested_device_without_kernel():
    if has_kernel("Neg", "GPU"):
        pytest.skip("Neg has a GPU kernel here")
    g = chain_graph()
    g["a"].device = "/device:GPU:0"
    with pytest.raises(PlacementError, match="has no kernel for op 'Neg' on GPU"):
        place(g, "cpu:1,gpu:1", soft=False)
    msgs, warn = collect()
    assert place(g, "cpu:1,gpu:1", warn=warn)["a"].device == CPU % 0
    assert msgs


def test_op_without_any_kernel_is_an_error():
    g = chain_graph()
    g.add_node("q", "NoSuchOpAnywhere", ["b"])
    with pytest.raises(PlacementError, match="no kernel for op 'NoSuchOpAnywhere'"):
        place(g, "cpu:1")


# --- colocation -------------------------------------------------------------------------

def test_class_attr_colocates():
    g = chain_graph()
    g["x"].device = "/device:CPU:2"
    g["b"].set_attr("_class", [b"loc:@x"])
    g2 = place(g, "cpu:3")
    assert g2["b"].device == CPU % 2


def test_conflicting_jobs_in_a_group_are_always_an_error():
    g = chain_graph()
    g["x"].device = "/job:a/device:CPU:0"
    g["b"].device = "/job:b/device:CPU:0"
    g["b"].set_attr("_class", [b"loc:@x"])
    names = ["/job:a/replica:0/task:0/device:CPU:0", "/job:b/replica:0/task:0/device:CPU:0"]
    with pytest.raises(PlacementError, match="cannot colocate node .* conflicting job"):
        place(g, names)


def test_conflicting_device_ids_soft_keeps_the_first():
    g = chain_graph()
    g["x"].device = "/device:CPU:1"
    g["b"].device = "/device:CPU:2"
    g["b"].set_attr("_class", [b"loc:@x"])
    msgs, warn = collect()
    g2 = place(g, "cpu:3", warn=warn)
    assert g2["x"].device == g2["b"].device == CPU % 1
    assert msgs and "conflicting device_index" in msgs[0]
    with pytest.raises(PlacementError):
        place(g, "cpu:3", soft=False)


@pytest.mark.skipif(not has_kernel("VariableV2"), reason="no VariableV2 kernel yet")
def test_ref_edges_colocate_variable_and_assign():
    g = Graph()
    g.add_node("w", "VariableV2", attrs={"dtype": F, "shape": (2,)}, device="/device:CPU:2")
    g.add_node("v", "Const", attrs={"dtype": F, "value": np.ones(2, np.float32)})
    g.add_node("assign", "Assign", ["w", "v"], attrs={"T": F})
    g.add_node("read", "Identity", ["w"], attrs={"T": F})
    g2 = place(g, "cpu:3")
    assert g2["assign"].device == CPU % 2
    groups = colocation.build_groups(g, device_names("cpu:3"))
    assert sorted(groups.of("w").members) == ["assign", "w"]


def test_readers_of_a_variable_written_in_place_go_with_its_buffer():
    # TF1 SGD in a while loop over ref variables: w/read is w's buffer, AssignSub writes it in
    # place. The reads after the loop (Identity, Identity_1 of steps) and the loop's read of
    # w/read go with the buffer: on another task they would get a copy sent before the loop.
    import tfg
    g = tfg.load(str(FIXTURES / "real_loops" / "tf1_train_loop_ref" / "graph.pb"))
    g2 = place(g, cluster="worker=127.0.0.1:2222,127.0.0.1:2223")
    task = {n.name: DeviceSpec.parse(n.device).task for n in g2}
    assert {task[n] for n in ("w/read", "Identity", "while/Identity_2", "while/matmul",
                              "while/AssignSub")} == {task["w"]}
    assert {task[n] for n in ("steps/read", "Identity_1", "while/AssignAdd")} == {
        task["steps"]}


# --- heuristics -------------------------------------------------------------------------

def test_shape_goes_with_its_input_and_generators_with_their_consumer():
    g = Graph()
    placeholder(g, "x", (3,), device="/device:CPU:1")
    g.add_node("s", "Shape", ["x"], attrs={"T": F, "out_type": DType.INT32})
    g.add_node("c", "Const", attrs={"dtype": F, "value": np.float32(2)})
    g.add_node("y", "Mul", ["x", "c"], attrs={"T": F}, device="/device:CPU:2")
    # A Const gated by a control input (as a loop body's constants are) is a generator too,
    # as in TensorFlow (data inputs only): it goes with its consumer, not through a _Recv.
    g.add_node("gate", "NoOp", device="/device:CPU:0")
    g.add_node("k", "Const", ["^gate"], attrs={"dtype": F, "value": np.float32(3)})
    g.add_node("z", "Mul", ["x", "k"], attrs={"T": F}, device="/device:CPU:2")
    g2 = place(g, "cpu:3")
    assert g2["s"].device == CPU % 1
    assert g2["c"].device == CPU % 2 and g2["k"].device == CPU % 2


def test_loop_skeleton_stays_on_one_device():
    g = _load_fixture("nested_while_invariant")
    g2 = place(g, "cpu:3")
    from tfg.graphdef.frames import analyze

    for frame in analyze(g2).frames.values():
        for var in frame.loop_vars:
            names = [var.merge, var.switch, var.exit, var.next_iteration, var.enter]
            assert len({g2[n].device for n in names if n}) == 1, var


def _loop_devices(g2):
    """{outermost frame name: devices of the nodes running in it}."""
    from tfg.graphdef.frames_loops import assign_frames
    _, frame_of = assign_frames(g2, g2.topo_order())
    out = {}
    for name, frame in frame_of.items():
        while frame is not None and frame.parent is not None:
            frame = frame.parent
        if frame is not None:
            out.setdefault(frame.name, set()).add(g2[name].device)
    return out


def test_a_loop_nest_goes_to_one_device():
    """Iterations would pay every crossing again: the greedy spread of a loop's independent
    ops (a Keras LSTM's gates) over devices is not taken inside a loop."""
    import tfg
    g = tfg.load(str(FIXTURES / "real_models" / "keras_lstm" / "graph.pb"))
    for spec in ("cpu:3", "cpu:1,gpu:1"):
        loops = _loop_devices(place(g, spec))
        assert loops and all(len(d) == 1 for d in loops.values()), (spec, loops)


def test_a_loop_with_heavy_work_goes_to_the_faster_device(monkeypatch):
    import tfg.builder as tb
    _allow_gpu(monkeypatch)
    with tb.Graph() as b:
        w = tb.placeholder(tb.float32, [2048, 2048], name="w")
        h0 = tb.placeholder(tb.float32, [2048, 2048], name="h0")
        tb.while_loop(lambda i, h: tb.less(i, 10),
                      lambda i, h: (tb.add(i, 1), tb.tanh(tb.matmul(h, w))),
                      [tb.constant(0), h0], name="loop")
    loops = _loop_devices(place(b.graph, "cpu:1,gpu:1"))
    assert list(loops.values()) == [{GPU % 0}], loops


# --- cost model -------------------------------------------------------------------------

def _allow_gpu(monkeypatch):
    """Pretend every op has a GPU kernel: the cost model, not kernels, decides here."""
    monkeypatch.setattr(colocation, "feasible_types", lambda node, types: set(types))


def test_cost_model_puts_a_big_matmul_on_the_faster_device(monkeypatch):
    _allow_gpu(monkeypatch)
    g = Graph()
    placeholder(g, "a", (2048, 2048))
    placeholder(g, "b", (2048, 2048))
    g.add_node("mm", "MatMul", ["a", "b"], attrs={"T": F})
    placeholder(g, "s", (2,))
    unary(g, "small", "Neg", "s")
    g2 = place(g, "cpu:1,gpu:1")
    assert g2["mm"].device == GPU % 0
    assert g2["small"].device == CPU % 0  # launch and copy cost more than the op


def test_measured_costs_spread_independent_heavy_nodes(tmp_path):
    g = Graph()
    placeholder(g, "x", (4,), device="/device:CPU:0")
    unary(g, "h1", "Neg", "x")
    unary(g, "h2", "Neg", "x")
    assert place(g, "cpu:2")["h2"].device == CPU % 0  # cheap: not worth a copy
    cm = CostModel()
    cm.steps = 1
    for name in ("h1", "h2"):
        cm.record(name, "Neg", CPU % 0, 5000.0, [16])
    path = tmp_path / "cost.json"
    cm.save(str(path))
    g2 = place(g, "cpu:2", cost_model=str(path))
    assert {g2["h1"].device, g2["h2"].device} == {CPU % 0, CPU % 1}


def test_cost_model_file_roundtrip_and_step_stats(tmp_path):
    cm = CostModel()
    cm.steps = 2
    cm.record("mm", "MatMul", CPU % 0, 30.0, [64])
    cm.record("mm", "MatMul", CPU % 0, 50.0, [64])
    path = tmp_path / "c.json"
    cm.save(str(path))
    back = CostModel.load(str(path))
    rec = back.nodes["mm"]
    assert (rec.count, rec.total_us, rec.output_bytes) == (2, 80.0, [64])
    stats = {"dev_stats": [{"device": CPU % 0, "node_stats": [
        {"node_name": "mm", "op_end_rel_micros": 40, "timeline_label": "mm = MatMul(a, b)",
         "output": [{"tensor_description": {"allocation_description":
                                            {"requested_bytes": 128}}}]}]}]}
    ss = CostModel.from_step_stats(stats)
    assert ss.nodes["mm"].op == "MatMul" and ss.nodes["mm"].output_bytes == [128]
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(Exception, match="not a tfg cost-model file"):
        CostModel.load(str(bad))


def test_static_estimates():
    g = Graph()
    placeholder(g, "a", (64, 32))
    placeholder(g, "b", (32, 16))
    mm = g.add_node("mm", "MatMul", ["a", "b"], attrs={"T": F})
    shapes = {("a", 0): (64, 32), ("b", 0): (32, 16), ("mm", 0): (64, 16)}
    flops, nbytes = cm_mod.estimate_work(mm, shapes)
    assert flops == 2 * 64 * 16 * 32
    model = CostModel()
    assert model.output_bytes(mm, 0, shapes) == 64 * 16 * 4
    assert model.transfer_us(1 << 20, CPU % 0, CPU % 0) == 0.0
    assert model.transfer_us(1 << 20, CPU % 0, GPU % 0) > model.transfer_us(1 << 10, CPU % 0,
                                                                             GPU % 0)
    remote = "/job:worker/replica:0/task:1/device:CPU:0"
    assert model.transfer_us(1 << 20, CPU % 0, remote) > model.transfer_us(1 << 20, CPU % 0,
                                                                           GPU % 0)


def _load_fixture(name):
    from tfg.graphdef import io

    return io.load(str(FIXTURES / "partition" / name / "graph.pb"))


def test_spread_loops_places_loop_nodes_one_by_one():
    import tfg
    g = tfg.load(str(FIXTURES / "real_models" / "keras_lstm" / "graph.pb"))
    loops = _loop_devices(place(g, "cpu:3", spread_loops=True))
    assert any(len(d) > 1 for d in loops.values()), loops
