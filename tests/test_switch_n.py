"""TensorFlow's own lowering of a Case (`_SwitchN`, tfg.graphdef.lower_switch_n) against
TensorFlow's values (tests/fixtures/switch_n, written by tools/gen_switch_n_fixtures.py): every
branch, an index out of range (the default, last branch), two inputs and two outputs, a case
inside a while loop; `tfg grad` through it against TensorFlow's tape gradient; the rewrite's
structure; malformed nodes; the CLI with --devices and after `tfg optimize`."""
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES
from tfg.errors import TfgInputError
from tfg.executor.session import Session
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.graph import Graph
from tfg.graphdef.io import load
from tfg.graphdef.lower_switch_n import lower_switch_n
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

HERE = FIXTURES / "switch_n"
CASES = ["three_way", "two_inputs_two_outputs", "in_a_loop"]


def _case(name):
    data = np.load(HERE / f"{name}.npz")
    inputs, outputs = list(data["inputs"]), list(data["outputs"])
    runs = []
    k = 0
    while f"out_{k}_0" in data:
        feeds = {t: data[f"feed_{k}_{t.split(':')[0]}"] for t in inputs}
        expected = [data[f"out_{k}_{j}"] for j in range(len(outputs))]
        runs.append((feeds, expected))
        k += 1
    return load(str(HERE / f"{name}.pb")), outputs, runs


@pytest.mark.parametrize("name", CASES)
def test_values_equal_tensorflows(name):
    graph, outputs, runs = _case(name)
    sess = Session(graph)
    for feeds, expected in runs:
        got = sess.run(outputs, feeds)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


def test_the_rewrite_leaves_switches_that_the_branches_read():
    graph, _, _ = _case("three_way")
    n_switch_n = sum(n.op == "_SwitchN" for n in graph)
    arms = sum(n.get_attr("num_outs") for n in graph if n.op == "_SwitchN")
    canon = canonicalize(graph)
    assert n_switch_n and not any(n.op == "_SwitchN" for n in canon)
    assert any(n.op == "_SwitchN" for n in graph)  # (the input graph is not modified)
    switches = [n for n in canon if n.op == "Switch" and "/switch_" in n.name]
    assert len(switches) == arms
    for sw in switches:  # only the true side of each is read
        assert all(c.input_refs[i].port == 1 for c, i in canon.consumers(sw.name))


def test_tfg_grad_through_the_case_equals_tensorflows_tape_gradient():
    graph, outputs, runs = _case("three_way")
    y, tf_grad = outputs
    g = grad(graph, ys=y, xs="x", warn=lambda m: None)
    sess = Session(g)
    for feeds, expected in runs:
        np.testing.assert_allclose(sess.run("grad/x", feeds), expected[1], rtol=1e-6)


def _switch_n_graph(num_outs=2, read_port=1, controls=False):
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT})
    g.add_node("i", "Placeholder", attrs={"dtype": DType.INT32})
    g.add_node("s", "_SwitchN", ["x", "i"], attrs={"num_outs": num_outs, "T": DType.FLOAT})
    g.add_node("y", "Neg", [f"s:{read_port}"], attrs={"T": DType.FLOAT})
    if controls:
        g.add_node("after", "Identity", ["x", "^s"], attrs={"T": DType.FLOAT})
    return g


def test_one_output_always_takes_the_value_and_control_edges_follow():
    g = _switch_n_graph(num_outs=1, read_port=0, controls=True)
    sess = Session(g)
    for i in (-3, 0, 9):
        y, after = sess.run(["y", "after"], {"x": np.float32(2), "i": np.int32(i)})
        assert y == -2 and after == 2


def test_an_untaken_output_is_dead():
    sess = Session(_switch_n_graph(num_outs=3, read_port=1))
    assert sess.run("y", {"x": np.float32(2), "i": np.int32(1)}) == -2
    with pytest.raises(Exception, match="dead|not computed|no value"):
        sess.run("y", {"x": np.float32(2), "i": np.int32(0)})


@pytest.mark.parametrize("graph, message", [
    (_switch_n_graph(num_outs=2, read_port=2), "reads output 2 of node 's'"),
    (_switch_n_graph(num_outs=0, read_port=0), "num_outs must be an int >= 1"),
])
def test_malformed_nodes_are_input_errors(graph, message):
    with pytest.raises(TfgInputError, match=message):
        lower_switch_n(graph.copy())


def _tfg(*args):
    return subprocess.run([sys.executable, "-m", "tfg", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_run_partitioned_and_optimized(tmp_path):
    pb = str(HERE / "three_way.pb")
    feeds = ["--feed", "i=7", "--feed", "x=[0.5,-1,2]"]
    plain = _tfg("run", pb, *feeds, "--fetch", "Identity", "-o", str(tmp_path / "a.npz"))
    assert plain.returncode == 0, plain.stderr
    np.testing.assert_allclose(np.load(tmp_path / "a.npz")["Identity"], [11.5, 7, 16])
    opt = _tfg("optimize", pb, "-o", str(tmp_path / "opt.pb"))
    assert opt.returncode == 0, opt.stderr
    assert not any(n.op == "_SwitchN" for n in load(str(tmp_path / "opt.pb")))
    part = _tfg("partition", str(tmp_path / "opt.pb"), "--devices", "cpu:2",
                "-o", str(tmp_path / "part.pb"))
    assert part.returncode == 0, part.stderr
    run = _tfg("run", str(tmp_path / "part.pb"), "--devices", "cpu:2", *feeds,
               "--fetch", "Identity", "-o", str(tmp_path / "b.npz"))
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(tmp_path / "b.npz")["Identity"], [11.5, 7, 16])


def test_cli_refuses_a_malformed_switch_n_in_one_line(tmp_path):
    path = tmp_path / "bad.pbtxt"
    path.write_text(_switch_n_graph(num_outs=2, read_port=5).to_proto().__str__())
    got = _tfg("run", str(path), "--feed", "x=1", "--feed", "i=0", "--fetch", "y")
    assert got.returncode == 2
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and "reads output 5 of node 's'" in lines[0], got.stderr
