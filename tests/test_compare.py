"""`tfg compare` and `--random-feeds` (issue 15, item 4): values, exit codes, --bisect."""
import json
import subprocess
import sys

import numpy as np
import pytest

from helpers import tfg_cli
from tfg import builder as tb
from tfg.executor import compare as C
from tfg.executor.sample_feeds import random_feeds
from tfg.graphdef import io


def chain_graph(scale=2.0):
    """x [?, 3] -> h = x * 3 -> s = h * scale -> out = tanh(s) + 1; and a `count` int input."""
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [None, 3], name="x")
        n = tb.placeholder(tb.int32, [2], name="n")
        h = tb.multiply(x, tb.constant(3.0, name="three"), name="h")
        s = tb.multiply(h, tb.constant(scale, name="scale"), name="s")
        tb.add(tb.tanh(s, name="t"), tb.constant(1.0, name="one"), name="out")
        tb.identity(n, name="count")
    return g.graph


@pytest.fixture
def graphs(tmp_path):
    a, b, c = tmp_path / "a.pb", tmp_path / "b.pb", tmp_path / "c.pb"
    io.save(chain_graph(2.0), str(a))
    io.save(chain_graph(2.0), str(b))
    io.save(chain_graph(2.001), str(c))
    return str(a), str(b), str(c)


def test_compare_values_tolerances_nan_and_shape():
    assert C.compare_values("y", [1.0, 2.0], [1.0, 2.0]).ok
    d = C.compare_values("y", [1.0, 2.0001], [1.0, 2.0], rtol=1e-5, atol=1e-5)
    assert not d.ok and d.max_abs == pytest.approx(1e-4) and d.max_rel == pytest.approx(5e-5)
    assert C.compare_values("y", [1.0, 2.0001], [1.0, 2.0], rtol=1e-3, atol=0).ok
    assert C.compare_values("y", [np.nan, 1.0], [np.nan, 1.0]).ok
    assert not C.compare_values("y", [np.nan], [1.0]).ok
    d = C.compare_values("y", np.zeros((2, 3)), np.zeros((3, 2)))
    assert not d.ok and d.problem == "shape [2, 3] vs [3, 2]"
    assert not C.compare_values("y", np.array([1]), np.array([True])).ok


def test_random_feeds_dtype_shape_dims_and_seed():
    g = chain_graph()
    feeds = random_feeds(g, ["out", "count"], seed=5, dims={"x": 7})
    assert feeds["x:0"].dtype == np.float32 and feeds["x:0"].shape == (7, 3)
    assert ((feeds["x:0"] >= 0) & (feeds["x:0"] < 1)).all()
    assert feeds["n:0"].dtype == np.int32 and set(np.unique(feeds["n:0"])) <= {0, 1}
    again = random_feeds(g, ["out", "count"], seed=5, dims={"x": 7})
    assert np.array_equal(feeds["x:0"], again["x:0"])
    assert not np.array_equal(feeds["x:0"], random_feeds(g, ["out"], seed=6,
                                                          dims={"x": 7})["x:0"])
    # only what the fetches need, never what is fed already; unknown dims default to 1
    assert set(random_feeds(g, ["out"])) == {"x:0"}
    assert random_feeds(g, ["out"])["x:0"].shape == (1, 3)
    assert random_feeds(g, ["out", "count"], fed=["x"]).keys() == {"n:0"}


def test_random_feeds_reach_placeholders_behind_a_recv():
    # A partitioned graph: `out` on CPU:0 reads x (on CPU:1) through a _Send/_Recv pair.
    from tfg.passes.partition import partition
    g = chain_graph()
    for node in g:
        node.device = "/job:localhost/replica:0/task:0/device:CPU:%d" % (node.name == "x")
    parts = partition(g)
    assert any(n.op == "_Recv" for n in parts)
    assert set(random_feeds(parts, ["out"])) == {"x:0"}


def test_compare_equal_graphs_exit_0(graphs):
    a, b, _ = graphs
    p = tfg_cli("compare", a, b, "--random-feeds", "--fetch", "out", "--json")
    doc = json.loads(p.stdout)
    assert doc["ok"] and doc["outputs"][0]["max_abs"] == 0.0


def test_compare_mismatch_exit_1_and_tolerance(graphs):
    a, _, c = graphs
    p = tfg_cli("compare", a, c, "--random-feeds", "1", "--dim", "x=4", "--fetch", "s",
                check=False)
    assert p.returncode == 1, p.stderr
    assert p.stdout.decode().startswith("FAIL  s  max abs")
    # |s_a - s_c| = 3x * 0.001 < 0.003: within atol 0.01
    p = tfg_cli("compare", a, c, "--random-feeds", "--fetch", "s", "--atol", "0.01")
    assert "1 of 1 outputs match" in p.stdout.decode()


def test_compare_default_fetches_are_the_outputs(graphs):
    a, b, _ = graphs
    doc = json.loads(tfg_cli("compare", a, b, "--random-feeds", "--json").stdout)
    assert sorted(o["name"] for o in doc["outputs"]) == ["count", "out"]


def test_bisect_finds_the_first_differing_node(graphs):
    a, _, c = graphs
    p = tfg_cli("compare", a, c, "--random-feeds", "--fetch", "out", "--bisect", "--json",
                check=False)
    doc = json.loads(p.stdout)
    # scale differs (a Const) and everything after it; x, three, h agree
    assert doc["first_difference"]["node"] == "scale"
    assert doc["first_difference"]["diff"]["max_abs"] == pytest.approx(0.001, rel=1e-3)
    a_graph, c_graph = io.load(a), io.load(c)
    feeds = random_feeds(a_graph, ["out"], seed=0)
    first = C.first_difference(a_graph, c_graph, feeds)
    assert first.node == "scale" and first.op == "Const" and first.checked >= 1


def test_compare_against_expected_npz(graphs, tmp_path):
    a, _, c = graphs
    expected = tmp_path / "expected.npz"
    tfg_cli("run", a, "--random-feeds", "--fetch", "out", "-o", expected)
    tfg_cli("compare", a, expected, "--random-feeds")
    p = tfg_cli("compare", c, expected, "--random-feeds", check=False)
    assert p.returncode == 1
    p = tfg_cli("compare", a, expected, "--random-feeds", "--fetch", "nosuch", check=False)
    assert p.returncode == 2 and b"no node named 'nosuch'" in p.stderr


def test_run_random_feeds_and_refusals(graphs, tmp_path):
    a, _, _ = graphs
    out = json.loads(tfg_cli("run", a, "--random-feeds", "--dim", "*=5", "--fetch", "out",
                             "--json").stdout)
    assert out["out"]["shape"] == [5, 3]
    g = tb.Graph()
    with g:
        tb.identity(tb.placeholder(tb.string, [2], name="s"), name="y")
    path = tmp_path / "s.pb"
    io.save(g.graph, str(path))
    p = tfg_cli("run", path, "--random-feeds", "--fetch", "y", check=False)
    assert p.returncode == 2
    assert p.stderr.decode().strip() == ("tfg: error: --random-feeds: placeholder 's' is "
                                         "string; feed it with --feed")
    p = tfg_cli("run", a, "--dim", "x=3", "--fetch", "out", "--feed", "x=[[1,2,3]]",
                check=False)
    assert p.returncode == 2 and b"--dim applies to --random-feeds" in p.stderr


def test_bisect_never_runs_state_updates(tmp_path):
    """A training graph compared with itself: fetching Assign/ApplyGradientDescent would update
    the variables mid-comparison, so --bisect leaves them out and everything matches."""
    from conftest import ROOT

    graph, feeds = tmp_path / "mlp.pb", tmp_path / "feeds.npz"
    subprocess.run([sys.executable, str(ROOT / "examples/mlp/build.py"), "-o", str(graph),
                    "--feeds", str(feeds)], check=True, capture_output=True)
    doc = json.loads(tfg_cli("compare", graph, graph, "--feeds", feeds, "--init", "init",
                             "--bisect", "--json").stdout)
    assert doc["ok"] and doc["first_difference"] is None
