"""tfg.grad: structure of the backward graph, the API's edge cases and errors, variables,
graphs made by tfg's own builder, and `tfg grad` end to end."""
import collections
import re

import numpy as np
import pytest

from conftest import CONFORMANCE, FIXTURES
from helpers import numeric_gradient, tfg_cli
from tfg import builder as tb
from tfg.errors import TfgInputError, UnknownOpError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.passes.grad import GradientWarning, grad

CF = FIXTURES / "grad" / "control_flow.pb"


def ops_of(g, names):
    return collections.Counter(g[n].op for n in names)


def new_nodes(before, after):
    return [n.name for n in after if n.name not in before]


def mlp():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2, 3], name="x")
        w = tb.placeholder(tb.float32, [3, 4], name="w")
        h = tb.tanh(tb.matmul(x, w), name="h")
        tb.identity(tb.reduce_sum(h * h) + tb.reduce_sum(h), name="y")
    return b.graph


FEEDS = {"x:0": np.arange(6, dtype=np.float32).reshape(2, 3) / 6,
         "w:0": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}


# --- structure ------------------------------------------------------------------------------
def test_forward_graph_untouched_and_names_under_gradients():
    g = mlp()
    g2 = grad(g, ["y"], ["w"])
    for node in g:
        assert g2[node.name].to_proto() == node.to_proto()
    added = new_nodes(g, g2)
    assert "grad/w" in added and g2["grad/w"].op == "Identity"
    assert all(n.startswith("gradients/") for n in added if n != "grad/w")
    assert g2 is not g and len(g) < len(g2)


def test_fan_out_is_summed_with_addn():
    g2 = grad(mlp(), ["y"], ["w"])
    addns = [n for n in g2 if n.op == "AddN"]
    assert any(n.name.startswith("gradients/h_grad") for n in addns)  # h used three times
    gw = Session(g2).run("grad/w", FEEDS)

    def f(w):
        h = np.tanh(FEEDS["x:0"].astype(np.float64) @ w)
        return np.sum(h * h) + np.sum(h)

    np.testing.assert_allclose(gw, numeric_gradient(f, FEEDS["w:0"], 1e-4), rtol=1e-3,
                               atol=1e-4)


def test_while_gradient_uses_counters_and_stacks():
    g = io.load(str(CF))
    g2 = grad(g, ["y"], ["x", "a0"])
    added = ops_of(g2, new_nodes(g, g2))
    # Two nested loops: two forward counters, two backward loops, stacks pushed and popped.
    assert added["StackV2"] >= 2 and added["StackPushV2"] == added["StackPopV2"]
    assert added["LoopCond"] == 2 and added["ControlTrigger"] >= 2
    pushes = [n for n in g2 if n.op == "StackPushV2"]
    for push in pushes:  # ordered after the forward counter's increment
        assert any(c.startswith("^gradients/") for c in push.inputs)
    frames = {n.get_attr("frame_name") for n in g2 if n.op == "Enter"}
    assert b"gradients/outer/while_context" in frames
    assert b"gradients/outer/inner/while_context" in frames
    # Nothing of the forward graph is renamed or removed.
    assert all(n.name in g2 for n in g)


def test_prefix_and_port_names():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [4], name="x")
        parts = tb.split(x, 2, axis=0, name="parts")
        tb.identity(tb.reduce_sum(parts[0] * 2.0 + parts[1] * 3.0), name="y")
    g2 = grad(b.graph, "y", "parts:1,x", prefix="d")
    assert g2["d/parts_1"].op == "Identity" and g2["d/x"].op == "Identity"
    got = Session(g2).run(["d/parts_1", "d/x"], {"x": np.ones(4, np.float32)})
    np.testing.assert_allclose(got[0], [3, 3])
    np.testing.assert_allclose(got[1], [2, 2, 3, 3])


def test_second_call_uses_a_new_scope_and_second_order():
    g = mlp()
    g2 = grad(g, ["y"], ["w"])
    g3 = grad(g2, ["grad/w"], ["x"], prefix="grad2")
    assert any(n.name.startswith("gradients_1/") for n in g3)
    assert "grad2/x" in g3


def test_several_ys_are_summed_and_grad_ys_scale():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [3], name="x")
        tb.identity(x * x, name="y1")
        tb.identity(tb.sin(x), name="y2")
        tb.constant(np.array([1, 2, 3], np.float32), name="gy1")
        tb.constant(np.array([0, 1, 0], np.float32), name="gy2")
    xv = np.array([0.1, 0.2, 0.3], np.float32)
    g2 = grad(b.graph, ["y1", "y2"], ["x"])
    np.testing.assert_allclose(Session(g2).run("grad/x", {"x": xv}), 2 * xv + np.cos(xv),
                               rtol=1e-6)
    g3 = grad(b.graph, ["y1", "y2"], ["x"], grad_ys=["gy1", "gy2"])
    np.testing.assert_allclose(Session(g3).run("grad/x", {"x": xv}),
                               2 * xv * [1, 2, 3] + np.cos(xv) * [0, 1, 0], rtol=1e-6)


def test_unreached_x_gets_zeros_and_a_warning():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2], name="x")
        z = tb.placeholder(tb.float32, [3], name="z")
        n = tb.cast(tb.cast(x, tb.int32), tb.float32)  # an integer path: no gradient
        tb.identity(tb.reduce_sum(n) + tb.reduce_sum(x), name="y")
    warned = []
    g2 = grad(b.graph, "y", "x,z", warn=warned.append)
    assert len(warned) == 1 and "z" in warned[0]
    gx, gz = Session(g2).run(["grad/x", "grad/z"], {"x": [1.5, 2.5], "z": [1, 2, 3]})
    np.testing.assert_allclose(gx, [1, 1])
    np.testing.assert_allclose(gz, [0, 0, 0])
    with pytest.warns(GradientWarning):
        grad(b.graph, "y", "z")


def test_stop_gradient_and_prevent_gradient():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2], name="x")
        tb.identity(tb.reduce_sum(tb.stop_gradient(x) * x), name="y")
        tb.identity(tb.reduce_sum(b.make_op("PreventGradient", [x], {"T": tb.float32,
                                                                     "message": b"no"},
                                            "pg", out_dtypes=[tb.float32]).outputs[0]),
                    name="y2")
    g2 = grad(b.graph, "y", "x")
    np.testing.assert_allclose(Session(g2).run("grad/x", {"x": [3.0, 4.0]}), [3, 4])
    with pytest.raises(TfgInputError, match="pg.*PreventGradient.*no"):
        grad(b.graph, "y2", "x")


def test_errors_name_the_problem():
    g = mlp()
    with pytest.raises(TfgInputError, match="nope"):
        grad(g, ["nope"], ["w"])
    with pytest.raises(TfgInputError, match="nope"):
        grad(g, ["y"], ["nope:0"])
    with pytest.raises(TfgInputError, match="outputs"):
        grad(g, ["y:3"], ["w"])
    with pytest.raises(TfgInputError, match="grad/w"):
        grad(grad(g, ["y"], ["w"]), ["y"], ["w"])
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2, 2], name="x")
        # An op tfg runs but has no gradient for (yet): the error names op and node.
        m = b.make_op("SoftsignGrad", [x, x], {"T": tb.float32}, "mp",
                      out_dtypes=[tb.float32]).outputs[0]
        tb.identity(tb.reduce_sum(m), name="y")
        tb.identity(tb.reduce_sum(tb.cast(x, tb.int32)), name="yi")
    with pytest.raises(UnknownOpError, match="SoftsignGrad.*'mp'"):
        grad(b.graph, "y", "x")
    with pytest.raises(TfgInputError, match="int32"):
        grad(b.graph, "yi", "x")
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [3], name="x")
        # An op without a signature under a Gather: refused naming it, not a rule failing
        # later on its unknown output dtype ("cannot encode NoneType as an attr value").
        c = b.make_op("MyCustomOp", [x], {"T": tb.float32}, "c",
                      out_dtypes=[tb.float32]).outputs[0]
        tb.identity(tb.reduce_sum(tb.gather(c, [0, 1, 0])), name="y")
    with pytest.raises(UnknownOpError, match="'c' lies between.*no signature for its op "
                                             "'MyCustomOp'"):
        grad(b.graph, "y", "x")


def _with_extra_input(g, node, extra):
    gd = g.to_proto()
    for nd in gd.node:
        if nd.name == node:
            nd.input.append(extra)
    return io.loads(gd.SerializeToString())


def test_malformed_graphs_are_input_errors_naming_the_node():
    """The input graph is validated first: a dangling input, a data input too many, an input
    port the producer does not have; each is an input error naming the node."""
    from tfg.errors import GraphValidationError

    g = mlp()
    matmul = next(n.name for n in g if n.op == "MatMul")
    for extra, why in (("nope:3", "names no node"), ("x:0", "input"), ("x:5", "")):
        with pytest.raises(GraphValidationError, match=f"{matmul}.*{why}"):
            grad(_with_extra_input(g, matmul, extra), ["y"], ["w"])
    for weird in ("a:b", "^x"):
        g3 = mlp()
        g3.add_node(weird, "NoOp")
        with pytest.raises(GraphValidationError, match=re.escape(repr(weird))):
            grad(g3, ["y"], ["w"])
    # The input graph is not required to consist of known ops off the path.
    g2 = mlp()
    g2.add_node("custom", "MyCustomOp", ["x"])
    assert "grad/w" in grad(g2, ["y"], ["w"])


def test_a_gradient_function_failing_on_the_graph_is_an_input_error(monkeypatch):
    """A graph that validates but that a gradient rule cannot use is the input's fault (exit 2
    on the CLI), named by node, not an internal error."""
    from tfg.errors import GraphValidationError
    from tfg.passes.grad import registry

    def broken(b, op, grads):
        x, y = op.inputs[:1]  # as a rule unpacking inputs the node does not have
        return [x, y]

    monkeypatch.setitem(registry._GRADS, "Tanh", registry.GradDef("Tanh", broken))
    with pytest.raises(GraphValidationError, match=r"'h' \(Tanh\): cannot build.*ValueError"):
        grad(mlp(), ["y"], ["w"])


def test_x_inside_a_loop_is_refused():
    g = io.load(str(CF))
    inner = next(n.name for n in g if n.op == "Identity" and n.name.startswith("outer/"))
    with pytest.raises(TfgInputError, match="inside while loop"):
        grad(g, ["y"], [inner])


# --- variables ------------------------------------------------------------------------------
def test_gradient_wrt_ref_variable_and_resource_variable():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2, 2], name="x")
        w = tb.Variable(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), name="w")
        tb.identity(tb.reduce_sum(tb.matmul(x, w) ** 2), name="y")
        tb.global_variables_initializer()
    g2 = grad(b.graph, "y", "w")
    sess = Session(g2)
    sess.run(targets=["init"])
    xv = np.array([[1, 0], [1, 1]], np.float32)
    wv = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_allclose(sess.run("grad/w", {"x": xv}), 2 * xv.T @ (xv @ wv))


def test_resource_variable_read():
    from tfg.graphdef.attrs import Shape
    from tfg.graphdef.graph import Graph
    from tfg.schemas.dtypes import DType

    g = Graph()
    g.add_node("v", "VarHandleOp", attrs={"dtype": DType.FLOAT, "shape": Shape((3,)),
                                          "shared_name": b"v"})
    g.add_node("init_value", "Const", attrs={"dtype": DType.FLOAT,
                                             "value": np.array([1, 2, 3], np.float32)})
    g.add_node("init", "AssignVariableOp", ["v", "init_value"], {"dtype": DType.FLOAT})
    g.add_node("read", "ReadVariableOp", ["v"], {"dtype": DType.FLOAT})
    g.add_node("sq", "Square", ["read"], {"T": DType.FLOAT})
    g.add_node("axes", "Const", attrs={"dtype": DType.INT32, "value": np.array([0], np.int32)})
    g.add_node("y", "Sum", ["sq", "axes"], {"T": DType.FLOAT, "Tidx": DType.INT32})
    g2 = grad(g, "y", "v")
    sess = Session(g2)
    sess.run(targets=["init"])
    np.testing.assert_allclose(sess.run("grad/v"), [2, 4, 6])


# --- graphs from tfg's builder ----------------------------------------------------------------
def test_builder_while_and_cond():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [3], name="x")
        p = tb.placeholder(tb.bool_, [], name="p")

        def body(i, a):
            a2 = tb.cond(p, lambda: a * x, lambda: a + tb.sin(x))
            return i + 1, a2

        _, a = tb.while_loop(lambda i, a: i < 3, body, [tb.constant(0), x])
        tb.identity(tb.reduce_sum(a), name="y")
    xv = np.array([0.3, -0.2, 0.5], np.float32)
    g2 = grad(b.graph, "y", "x")
    sess = Session(g2)
    for pv in (True, False):
        def f(v, pv=pv):
            a = v.copy()
            for _ in range(3):
                a = a * v if pv else a + np.sin(v)
            return np.sum(a)

        np.testing.assert_allclose(sess.run("grad/x", {"x": xv, "p": pv}),
                                   numeric_gradient(f, xv, 1e-4), rtol=1e-3, atol=1e-4)


def test_loop_in_cond_in_loop_with_varying_trip_count():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2], name="x")

        def outer(i, a):
            def looped():
                _, c = tb.while_loop(lambda j, c: j < i, lambda j, c: (j + 1, c * x + tb.cos(c)),
                                     [tb.constant(0), a])
                return c

            return i + 1, tb.cond(tb.equal(i % 2, 1), looped, lambda: a * 2.0 + x)

        _, a = tb.while_loop(lambda i, a: i < 4, outer, [tb.constant(0), x])
        tb.identity(tb.reduce_sum(a), name="y")

    def f(v):
        a = v.copy()
        for i in range(4):
            if i % 2:
                for _ in range(i):
                    a = a * v + np.cos(a)
            else:
                a = a * 2 + v
        return a.sum()

    xv = np.array([0.3, -0.4], np.float32)
    got = Session(grad(b.graph, "y", "x")).run("grad/x", {"x": xv})
    np.testing.assert_allclose(got, numeric_gradient(f, xv, 1e-5), rtol=1e-4, atol=1e-5)


def test_loop_var_independent_of_its_previous_value():
    # c's next value does not read c: its backward back edge carries zeros.
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2], name="x")
        c0 = tb.placeholder(tb.float32, [2], name="c0")
        _, _, c = tb.while_loop(lambda i, a, c: i < 3,
                                lambda i, a, c: (i + 1, a * x, tb.sin(a) * 2.0),
                                [tb.constant(0), x, c0])
        tb.identity(tb.reduce_sum(c), name="y")

    def f(v):
        a = v.copy()
        for _ in range(3):
            a, c = a * v, np.sin(a) * 2
        return c.sum()

    xv = np.array([0.3, -0.4], np.float32)
    gx, gc0 = Session(grad(b.graph, "y", "x,c0")).run(["grad/x", "grad/c0"],
                                                     {"x": xv, "c0": xv})
    np.testing.assert_allclose(gx, numeric_gradient(f, xv, 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gc0, [0, 0])


# --- the CLI --------------------------------------------------------------------------------
def test_cli_end_to_end(tmp_path):
    src = tmp_path / "g.pb"
    io.save(mlp(), str(src))
    out = tmp_path / "g2.pbtxt"
    tfg_cli("grad", src, "--ys", "y", "--xs", "w", "--xs", "x", "-o", out)
    assert out.read_text().startswith("node")
    g2 = io.load(str(out))
    assert "grad/w" in g2 and "grad/x" in g2
    piped = tfg_cli("grad", "-", "--ys", "y", "--xs", "w", "--prefix", "d",
                    input=src.read_bytes())
    assert "d/w" in io.loads(piped.stdout)


def test_cli_errors_and_warnings(tmp_path):
    src = tmp_path / "g.pb"
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2], name="x")
        tb.placeholder(tb.float32, [2], name="z")
        tb.identity(tb.reduce_sum(x * x), name="y")
    io.save(b.graph, str(src))
    bad = tfg_cli("grad", src, "--ys", "y", "--xs", "missing", check=False)
    assert bad.returncode == 2 and b"missing" in bad.stderr
    assert b"Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    out = tmp_path / "o.pb"
    ok = tfg_cli("grad", src, "--ys", "y", "--xs", "x,z", "-o", out)
    assert b"z" in ok.stderr and out.exists()
    usage = tfg_cli("grad", src, "--xs", "x", check=False)
    assert usage.returncode == 2
    bad_src = tmp_path / "bad.pb"
    io.save(_with_extra_input(b.graph, "y", "nope:3"), str(bad_src))
    bad_out = tmp_path / "bad_out.pb"
    dangling = tfg_cli("grad", bad_src, "--ys", "y", "--xs", "x", "-o", bad_out, check=False)
    assert dangling.returncode == 2 and b"'y'" in dangling.stderr and b"nope:3" in dangling.stderr
    assert b"Traceback" not in dangling.stderr
    assert len(dangling.stderr.strip().splitlines()) == 1 and not bad_out.exists()


@pytest.mark.skipif(not (CONFORMANCE / "grad_while").is_dir(),
                    reason="../shared/conformance is not present")
@pytest.mark.parametrize("case", ["grad_mlp", "grad_cond_0", "grad_cond_1", "grad_while"])
def test_conformance_grad_cases(case):
    import json

    d = CONFORMANCE / case
    meta = json.loads((d / "case.json").read_text())
    g2 = grad(io.load(str(d / "graph.pb")), meta["ys"], meta["xs"])
    expected = np.load(d / "expected.npz")
    got = Session(g2).run([f"grad/{x.split(':')[0]}:0" for x in meta["xs"]],
                          dict(np.load(d / "feeds.npz")))
    for x, v in zip(meta["xs"], got):
        np.testing.assert_allclose(v, expected[x], rtol=meta["rtol"], atol=meta["atol"])


@pytest.mark.skipif(not (CONFORMANCE / "grad_while").is_dir(),
                    reason="../shared/conformance is not present")
@pytest.mark.parametrize("case", ["grad_mlp", "grad_cond_0", "grad_cond_1", "grad_while"])
def test_conformance_grad_adds_no_more_nodes_than_tensorflow(case):
    """tf.gradients' node count for the same forward graph (recorded in case.json) bounds
    what tfg grad adds, the exposed grad/<x> Identity nodes included."""
    import json

    d = CONFORMANCE / case
    meta = json.loads((d / "case.json").read_text())
    g = io.load(str(d / "graph.pb"))
    assert len(g) == meta["tf_node_count"]
    added = new_nodes(g, grad(g, meta["ys"], meta["xs"]))
    assert len(added) <= meta["tf_grad_graph_node_count"] - meta["tf_node_count"], added


# --- static shapes and unneeded partials -------------------------------------------------------
def _broadcast_model(shape_x, shape_b):
    """y = mean((x @ w + b) ** 2) with placeholders of the given (maybe unknown) shapes."""
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, shape_x, name="x")
        w = tb.placeholder(tb.float32, [3, 4] if shape_x else None, name="w")
        b = tb.placeholder(tb.float32, shape_b, name="b")
        h = tb.matmul(x, w) + b
        tb.identity(tb.reduce_mean(h * h), name="y")
    return g.graph


BROADCAST_FEEDS = {"x:0": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
                   "w:0": np.linspace(-1, 2, 12, dtype=np.float32).reshape(3, 4),
                   "b:0": np.array([0.5, -0.25, 1.0, 2.0], np.float32)}


def test_known_shapes_give_constant_shapes_and_axes():
    """With every shape known the reductions' shapes and the broadcast axes are constants
    (TensorFlow's fast paths); with unknown shapes they are computed at run time. Both give
    the same gradients."""
    dynamic_ops = {"Shape", "Size", "DynamicStitch", "BroadcastGradientArgs", "Range"}
    static_g, dynamic_g = _broadcast_model([2, 3], [4]), _broadcast_model(None, None)
    s2 = grad(static_g, ["y"], ["w", "b"])
    d2 = grad(dynamic_g, ["y"], ["w", "b"])
    static_ops = ops_of(s2, new_nodes(static_g, s2))
    assert not dynamic_ops & set(static_ops), static_ops
    assert static_ops["Tile"] == 1 and static_ops["BroadcastTo"] == 0
    assert {"DynamicStitch", "BroadcastGradientArgs"} <= set(ops_of(d2, new_nodes(dynamic_g, d2)))
    # b's partial is Sum over the batch axis only: the add's other operand passes g through.
    assert static_ops["Sum"] == 1
    got_s = Session(s2).run(["grad/w", "grad/b"], BROADCAST_FEEDS)
    got_d = Session(d2).run(["grad/w", "grad/b"], BROADCAST_FEEDS)
    for a, c in zip(got_s, got_d):
        np.testing.assert_allclose(a, c, rtol=1e-6)

    def f(b):
        h = BROADCAST_FEEDS["x:0"].astype(np.float64) @ BROADCAST_FEEDS["w:0"] + b
        return np.mean(h * h)

    np.testing.assert_allclose(got_s[1], numeric_gradient(f, BROADCAST_FEEDS["b:0"], 1e-4),
                               rtol=1e-3, atol=1e-4)


def test_partials_that_reach_no_x_are_not_built():
    """d loss / d labels (LogSoftmax, Neg, Mul) is not built when only the weights are
    differentiated, and it is when the labels are an x too; the constant operand of an add
    gets no partial."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2, 3], name="x")
        labels = tb.placeholder(tb.float32, [2, 3], name="labels")
        w = tb.placeholder(tb.float32, [3, 3], name="w")
        logits = tb.matmul(x, w) + tb.constant(np.ones(3, np.float32), name="bias")
        xent = tb.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        tb.identity(tb.reduce_sum(xent), name="loss")
    g = b.graph
    only_w = grad(g, ["loss"], ["w"])
    added = ops_of(only_w, new_nodes(g, only_w))
    assert added["LogSoftmax"] == 0 and added["Neg"] == 0, added
    assert added["Sum"] == 0, added  # the bias's partial would be Sum(g, [0])
    with_labels = grad(g, ["loss"], ["w", "labels"])
    assert ops_of(with_labels, new_nodes(g, with_labels))["LogSoftmax"] == 1
    feeds = {"x:0": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
             "labels:0": np.array([[0.2, 0.3, 0.5], [1, 0, 0]], np.float32),
             "w:0": np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3)}
    gw, = Session(only_w).run(["grad/w"], feeds)
    gw2, gl = Session(with_labels).run(["grad/w", "grad/labels"], feeds)
    np.testing.assert_allclose(gw, gw2, rtol=1e-6)

    def loss(lab):
        z = feeds["x:0"].astype(np.float64) @ feeds["w:0"] + 1.0
        logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
        return -np.sum(lab * logp)

    np.testing.assert_allclose(gl, numeric_gradient(loss, feeds["labels:0"], 1e-4),
                               rtol=1e-3, atol=1e-4)
