"""TensorFlow's own collective ops (tests/fixtures/collective, made by
tools/gen_collective_fixtures.py: CollectiveReduce with every merge_op/final_op,
CollectiveReduceV2, CollectiveBcastSend/Recv V1 and V2, a member behind a control input)
lowered by tfg.passes.collective and run on 3 local devices and across 2 workers: the values
TensorFlow computed. Plus the groups the lowering refuses, each an input error naming a node."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from tfg.errors import TfgInputError
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.passes.collective import LOWERED_OPS, has_collectives, lower_collectives

CASE = FIXTURES / "collective"
META = json.loads((CASE / "case.json").read_text())


def tf_graph():
    return io.load(str(CASE / "graph.pbtxt"))


def check(got):
    want = np.load(CASE / "expected.npz")
    for name, value in zip(META["fetches"], got):
        assert value.dtype == want[name].dtype, name
        np.testing.assert_allclose(value, want[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_lowered_graph_has_no_collectives_and_members_keep_their_names():
    graph = tf_graph()
    assert has_collectives(graph)
    members = {n.name: n.device for n in graph if n.op in LOWERED_OPS}
    low = lower_collectives(graph)
    assert not has_collectives(low)
    for name, device in members.items():  # consumers read the same names on the same devices
        assert low[name].op == "Identity" and low[name].device == device
    # The V2 key constants are gone; the lowering's own ops are ordinary ones.
    assert {n.op for n in low} <= {"Identity", "Const", "AddV2", "Mul", "Maximum", "Minimum",
                                   "RealDiv", "Placeholder", "NoOp"}
    assert lower_collectives(low).to_proto() == low.to_proto()  # nothing left to lower


def test_tensorflow_collectives_on_three_local_devices():
    low = lower_collectives(tf_graph())
    feeds = dict(np.load(CASE / "feeds.npz"))
    check(Session(low, devices="cpu:3").run(META["fetches"], feeds=feeds))


def test_tensorflow_collectives_across_two_workers():
    """CPU:0 -> task 0, CPU:1 and CPU:2 -> task 1's two devices: across workers and within one."""
    mapping = {"/device:CPU:0": "/job:worker/replica:0/task:0/device:CPU:0",
               "/device:CPU:1": "/job:worker/replica:0/task:1/device:CPU:0",
               "/device:CPU:2": "/job:worker/replica:0/task:1/device:CPU:1"}
    graph = tf_graph()
    for node in graph:
        node.device = mapping[node.device] if node.device else ""
    low = lower_collectives(graph)
    feeds = dict(np.load(CASE / "feeds.npz"))
    with LocalCluster(2, threads=1, extra_args=["--devices", "cpu:2"]) as cluster:
        with Session(low, cluster=cluster.spec) as sess:
            check(sess.run(META["fetches"], feeds=feeds))


def test_pass_manager_runs_the_lowering():
    from tfg.passes.manager import optimize

    fetches = META["fetches"]
    low = optimize(tf_graph(), passes=["collective"], keep=fetches, verify=True)
    assert not has_collectives(low)
    feeds = dict(np.load(CASE / "feeds.npz"))
    check(Session(low, devices="cpu:3").run(fetches, feeds=feeds))


def _members(graph, instance_key):
    return [n for n in graph if n.op in LOWERED_OPS and n.has_attr("instance_key")
            and n.get_attr("instance_key") == instance_key]


def _edit(case):
    graph = tf_graph()
    add = _members(graph, 1)  # CollectiveReduce, Add/Id, on CPU:0..2
    if case == "missing":
        graph.remove_node(add[2].name)
        graph.remove_node("v1_Add_Id_2")
    elif case == "same_device":
        add[1].device = add[0].device
    elif case == "merge":
        add[0].set_attr("merge_op", b"Avg")
        for n in add[1:]:
            n.set_attr("merge_op", b"Avg")
    elif case == "disagree":
        add[1].set_attr("final_op", b"Div")
    elif case == "no_device":
        add[0].device = ""
    elif case == "two_senders":
        recv = next(n for n in graph if n.op == "CollectiveBcastRecv")
        send = next(n for n in graph if n.op == "CollectiveBcastSend")
        recv.op = "CollectiveBcastSend"
        recv.inputs = list(send.inputs)
    elif case == "v2_key":
        v2 = next(n for n in graph if n.op == "CollectiveReduceV2")
        ins = list(v2.inputs)
        ins[2] = "x0"  # group_key from a placeholder: not known when lowering
        v2.inputs = ins
    elif case == "gather":
        add[0].op = "CollectiveGather"
    return graph


@pytest.mark.parametrize("case,message", [
    ("missing", "group_size is 3 but the graph has 2 member(s)"),
    ("same_device", "are both on /device:CPU:0; a group has one member per device"),
    ("merge", "merge_op 'Avg' is not supported"),
    ("disagree", "disagree on final_op"),
    ("no_device", "has no device"),
    ("two_senders", "exactly one sender, found 2"),
    ("v2_key", "input group_key (x0) must be a constant"),
    ("gather", "CollectiveGather is not supported"),
])
def test_groups_the_lowering_refuses(case, message):
    with pytest.raises(TfgInputError) as err:
        lower_collectives(_edit(case))
    assert message in str(err.value)
    assert "node" in str(err.value) or "collective group_key=" in str(err.value)


def test_collective_reduce_inside_a_split_while_loop():
    """CollectiveReduce members in a while body on two devices (as tf.while_loop with
    collectives writes them): the lowered trees, the mean's constant included, stay in the
    loop's frame and run once per iteration."""
    from tfg import builder as tb
    from tfg.graphdef.builder.math_ops import make

    cpu = ["/device:CPU:0", "/device:CPU:1"]
    attrs = {"T": tb.float32, "group_size": 2, "group_key": 1, "instance_key": 5,
             "merge_op": b"Add", "final_op": b"Div", "subdiv_offsets": [0]}
    g = tb.Graph()
    with g:
        with tb.device(cpu[0]):
            a0 = tb.placeholder(tb.float32, [2], name="a0")
            i0 = tb.constant(0, name="i0")
        with tb.device(cpu[1]):
            a1 = tb.placeholder(tb.float32, [2], name="a1")

        def body(i, x, y):
            outs = []
            for k, (v, dev) in enumerate(((x, cpu[0]), (y, cpu[1]))):
                with tb.device(dev):
                    outs.append(make("CollectiveReduce", [v * float(k + 2)], attrs,
                                     f"member{k}", [tb.float32]).outputs[0])
            with tb.device(cpu[0]):
                return (i + 1, *outs)

        def cond(i, x, y):
            with tb.device(cpu[0]):
                return tb.less(i, 3)

        _, o0, o1 = tb.while_loop(cond, body, [i0, a0, a1])
        with tb.device(cpu[0]):
            tb.identity(o0, name="out0")
        with tb.device(cpu[1]):
            tb.identity(o1, name="out1")
    low = lower_collectives(g.graph)
    assert not has_collectives(low)
    x, y = np.array([1.0, -2.0], np.float32), np.array([0.5, 3.0], np.float32)
    got = Session(low, devices="cpu:2").run(["out0", "out1"], feeds={"a0": x, "a1": y})
    for _ in range(3):
        x = y = (x * 2 + y * 3) / 2
    np.testing.assert_allclose(got[0], x, rtol=1e-6)
    np.testing.assert_array_equal(got[1], got[0])


def test_tfg_run_lowers_tensorflow_collectives_when_partitioning(tmp_path):
    """`tfg run --devices cpu:3` on TensorFlow's graph: partitioning lowers the collectives."""
    from helpers import tfg_cli

    out = tmp_path / "out.npz"
    tfg_cli("run", CASE / "graph.pbtxt", "--devices", "cpu:3", "--feeds", CASE / "feeds.npz",
            "--fetch", ",".join(META["fetches"]), "-o", out)
    got = np.load(out)
    check([got[name] for name in META["fetches"]])
