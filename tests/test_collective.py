"""tb.collective on local devices (`cpu:3`): values against numpy, the graph it builds (trees,
devices, Send/Recv after partitioning), collectives inside a split while loop, and errors.

The same collectives across real worker processes, and the data-parallel example, are in
test_collective_cluster.py.
"""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgInputError
from tfg.executor.session import Session
from tfg.passes.partition import partition

CPU = [f"/device:CPU:{i}" for i in range(3)]
RNG = np.random.RandomState(7)
VALUES = [RNG.randn(2, 3).astype(np.float32) for _ in CPU]
NUMPY = {"sum": lambda v: v[0] + v[1] + v[2], "prod": lambda v: v[0] * v[1] * v[2],
         "min": lambda v: np.minimum(np.minimum(v[0], v[1]), v[2]),
         "max": lambda v: np.maximum(np.maximum(v[0], v[1]), v[2]),
         "mean": lambda v: (v[0] + v[1] + v[2]) / np.float32(3)}


def members(devices=CPU, dtype=tb.float32, shape=(2, 3)):
    xs = []
    for i, dev in enumerate(devices):
        with tb.device(dev):
            xs.append(tb.placeholder(dtype, list(shape), name=f"x{i}"))
    return xs


def feeds(values=VALUES):
    return {f"x{i}": v for i, v in enumerate(values)}


def device_of(graph, tensor):
    return graph[tensor.op.name].device


@pytest.mark.parametrize("merge", ["sum", "prod", "min", "max", "mean"])
def test_all_reduce_on_three_devices(merge):
    g = tb.Graph()
    with g:
        xs = members()
        fn = getattr(tb.collective, f"all_{merge}")
        outs = fn(xs)
    assert [device_of(g.graph, t) for t in outs] == CPU
    got = Session(g.graph, devices="cpu:3").run([t.name for t in outs], feeds=feeds())
    want = NUMPY[merge](VALUES)
    for value in got:
        np.testing.assert_allclose(value, want, rtol=1e-6)
    # Computed once and copied: every device holds exactly the same bits.
    assert all(np.array_equal(v, got[0]) for v in got)


def test_all_sum_builds_a_reduction_tree_then_a_broadcast_tree():
    devs = [f"/device:CPU:{i}" for i in range(4)]
    g = tb.Graph()
    with g:
        outs = tb.collective.all_sum(members(devs, shape=[5]))
    ops = {n.name: n for n in g.graph if n.name.startswith("all_sum/")}
    adds = sorted(n for n, node in ops.items() if node.op == "AddV2")
    # Pairs on the left member's device, then the two partial sums: depth 2 for 4 members.
    assert adds == ["all_sum/reduce_0_0", "all_sum/reduce_0_1", "all_sum/reduce_1_0"]
    assert ops["all_sum/reduce_0_1"].device == devs[2]
    assert ops["all_sum/reduce_1_0"].device == devs[0]
    # The broadcast: each round every holder sends to one new device (2 rounds for 4).
    srcs = {t.op.name: ops[t.op.name].inputs[0] for t in outs}
    assert srcs == {"all_sum/out_0": "all_sum/reduce_1_0", "all_sum/out_1": "all_sum/reduce_1_0",
                    "all_sum/out_2": "all_sum/reduce_1_0", "all_sum/out_3": "all_sum/out_1"}
    # Partitioned: cross-device edges became Send/Recv pairs, nothing else was needed: 3 for
    # the reduction (1->0, 3->2, 2->0) and 3 for the broadcast (0->1, 0->2, 1->3).
    parted = partition(g.graph, devices="cpu:4")
    sends = [n for n in parted if n.op == "_Send"]
    assert len(sends) == 6 and len([n for n in parted if n.op == "_Recv"]) == 6
    per_device = {}
    for n in sends:
        per_device[n.device] = per_device.get(n.device, 0) + 1
    assert per_device["/job:localhost/replica:0/task:0/device:CPU:0"] == 2
    x = [np.arange(5, dtype=np.float32) * (i + 1) for i in range(4)]
    got = Session(g.graph, devices="cpu:4").run([t.name for t in outs],
                                                feeds={f"x{i}": v for i, v in enumerate(x)})
    for v in got:
        np.testing.assert_array_equal(v, sum(x))


@pytest.mark.parametrize("dst", [0, 2])
def test_reduce_sum_lands_on_one_device(dst):
    g = tb.Graph()
    with g:
        out = tb.collective.reduce_sum(members(), device=CPU[dst])
    assert device_of(g.graph, out) == CPU[dst]
    # Rooted at the member already on the destination: no copy after the tree.
    assert g.graph[out.op.name].op == "AddV2"
    got = Session(g.graph, devices="cpu:3").run(out.name, feeds=feeds())
    np.testing.assert_allclose(got, NUMPY["sum"](VALUES), rtol=1e-6)


def test_reduce_to_a_device_outside_the_group_and_reduce_max():
    g = tb.Graph()
    with g:
        xs = members(CPU[:2])
        out = tb.collective.reduce_sum(xs, device=CPU[2])
        mx = tb.collective.reduce(xs, "max", device=CPU[1])
    assert device_of(g.graph, out) == CPU[2] and g.graph[out.op.name].op == "Identity"
    got = Session(g.graph, devices="cpu:3").run([out.name, mx.name], feeds=feeds(VALUES[:2]))
    np.testing.assert_allclose(got[0], VALUES[0] + VALUES[1], rtol=1e-6)
    np.testing.assert_array_equal(got[1], np.maximum(VALUES[0], VALUES[1]))


def test_broadcast_to_every_device():
    g = tb.Graph()
    with g:
        with tb.device(CPU[1]):
            x = tb.placeholder(tb.int32, [4], name="x")
        outs = tb.collective.broadcast(x, CPU)
    assert [device_of(g.graph, t) for t in outs] == CPU
    v = np.array([3, -1, 4, 1], np.int32)
    for got in Session(g.graph, devices="cpu:3").run([t.name for t in outs], feeds={"x": v}):
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, v)


def test_integer_and_float64_groups():
    g = tb.Graph()
    with g:
        ints = tb.collective.all_prod(members(dtype=tb.int64, shape=[2]))
        dbl = tb.collective.all_mean(members(CPU[:2], dtype=tb.float64, shape=[2]),
                                     name="dbl")
    graph = g.graph
    # The second group's placeholders are x0_1 and x1_1 (the builder's unique names).
    fed = {"x0": np.array([2, -3], np.int64), "x1": np.array([5, 7], np.int64),
           "x2": np.array([-1, 2], np.int64), "x0_1": np.array([1.0, 2.0]),
           "x1_1": np.array([3.0, 5.0])}
    got = Session(graph, devices="cpu:3").run([t.name for t in ints] + [t.name for t in dbl],
                                              feeds=fed)
    for v in got[:3]:
        assert v.dtype == np.int64
        np.testing.assert_array_equal(v, [-10, -42])
    for v in got[3:]:
        assert v.dtype == np.float64
        np.testing.assert_array_equal(v, [2.0, 3.5])


def test_all_sum_inside_a_while_loop_split_over_devices():
    """Each iteration: every device scales its own value, then all_sum; the loop runs its
    body on two devices, so each device's partition gets its own control loop."""
    g = tb.Graph()
    with g:
        with tb.device(CPU[0]):
            a0 = tb.placeholder(tb.float32, [2], name="a0")
            i0 = tb.constant(0, name="i0")
        with tb.device(CPU[1]):
            a1 = tb.placeholder(tb.float32, [2], name="a1")

        def cond(i, x, y):
            with tb.device(CPU[0]):
                return tb.less(i, 4)

        def body(i, x, y):
            with tb.device(CPU[0]):
                i1 = i + 1
                x = x * 0.5
            with tb.device(CPU[1]):
                y = y * 2.0
            s0, s1 = tb.collective.all_sum([x, y])
            return i1, s0, s1

        _, out0, out1 = tb.while_loop(cond, body, [i0, a0, a1])
        with tb.device(CPU[0]):
            tb.identity(out0, name="out0")
        with tb.device(CPU[1]):
            tb.identity(out1, name="out1")
    a0, a1 = np.array([1.0, -2.0], np.float32), np.array([0.5, 3.0], np.float32)
    x, y = a0, a1
    for _ in range(4):
        x = y = x * 0.5 + y * 2.0
    got = Session(g.graph, devices="cpu:2").run(["out0", "out1"], feeds={"a0": a0, "a1": a1})
    np.testing.assert_allclose(got[0], x, rtol=1e-6)
    np.testing.assert_array_equal(got[1], got[0])


def test_devices_argument_places_members_without_a_device():
    g = tb.Graph()
    with g:
        a = tb.placeholder(tb.float32, [2], name="a")
        b = tb.placeholder(tb.float32, [2], name="b")
        outs = tb.collective.all_min([a, b], devices=CPU[1:])
    assert [device_of(g.graph, t) for t in outs] == CPU[1:]
    got = Session(g.graph, devices="cpu:3").run([t.name for t in outs],
                                                feeds={"a": [1.0, 5.0], "b": [2.0, -1.0]})
    for v in got:
        np.testing.assert_array_equal(v, [1.0, -1.0])


@pytest.mark.parametrize("case,message", [
    ("no_device", "tensor 'a:0' has no device"),
    ("dtype", "is int32 but"),
    ("shape", "has shape [3] but"),
    ("empty", "an empty group"),
    ("merge", "unknown merge 'avg'"),
    ("bool", "is bool; sum needs numeric tensors"),
    ("not_list", "give a list of tensors"),
    ("devices", "2 tensors but 1 devices"),
    ("complex_max", "with an order"),
])
def test_bad_groups_are_input_errors_naming_the_tensor(case, message):
    g = tb.Graph()
    with g, pytest.raises(TfgInputError) as err:
        with tb.device(CPU[0]):
            f2 = tb.placeholder(tb.float32, [2], name="f2")
            f3 = tb.placeholder(tb.float32, [3], name="f3")
            i2 = tb.placeholder(tb.int32, [2], name="i2")
            b2 = tb.placeholder(tb.bool_, [2], name="b2")
            c2 = tb.placeholder(tb.complex64, [2], name="c2")
        a = tb.placeholder(tb.float32, [2], name="a")
        cv = tb.collective
        {"no_device": lambda: cv.all_sum([f2, a]),
         "dtype": lambda: cv.all_sum([f2, i2]),
         "shape": lambda: cv.all_max([f2, f3]),
         "empty": lambda: cv.all_sum([]),
         "merge": lambda: cv.all_reduce([f2], "avg"),
         "bool": lambda: cv.all_sum([b2, b2]),
         "not_list": lambda: cv.all_sum(f2),
         "devices": lambda: cv.all_sum([f2, a], devices=[CPU[0]]),
         "complex_max": lambda: cv.all_max([c2, c2])}[case]()
    assert message in str(err.value)


def test_from_graph_wraps_nodes_added_outside_the_builder():
    import tfg

    g = tb.Graph()
    with g:
        with tb.device(CPU[0]):
            x = tb.placeholder(tb.float32, [3], name="x")
            tb.reduce_sum(x * x, name="y")
    graph = tfg.grad(g.graph, ys="y", xs="x")
    b = tb.GraphBuilder(graph=graph)
    with b:
        gx = tb.collective.from_graph("grad/x")
        with pytest.raises(TfgInputError, match="'grad/x:0' has no device.*source="):
            tb.collective.broadcast(gx, CPU[1:])
        out = tb.collective.broadcast(gx, CPU[1:], source=CPU[0])
        with pytest.raises(TfgInputError, match="no node named 'nope'"):
            tb.collective.from_graph("nope")
        with pytest.raises(TfgInputError, match="has 1 output"):
            tb.collective.from_graph("grad/x:1")
    got = Session(b.graph, devices="cpu:3").run([t.name for t in out],
                                                feeds={"x": [1.0, 2.0, -3.0]})
    for v in got:
        np.testing.assert_allclose(v, [2.0, 4.0, -6.0])
