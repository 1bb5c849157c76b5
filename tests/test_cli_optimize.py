"""`tfg optimize` and `tfg prune` end to end, and every conformance graph optimized then run
with the Session: outputs must equal TensorFlow's."""
import json

import numpy as np
import pytest

from conftest import conformance_cases
from helpers import tfg_cli
from test_pass_manager import G
from tfg.graphdef import io
from tfg.passes.manager import optimize


def _save(tmp_path, b, name="g.pb"):
    path = tmp_path / name
    io.save(b.g, str(path))
    return path


def _graph(tmp_path):
    b = (G().const("a", 1.0).const("b", 2.0).op("c", "AddN", "a", "b", N=2)
         .ph("x", [2]).op("y", "Mul", "x", "c").op("z", "Neg", "x"))
    return _save(tmp_path, b)


def test_optimize_report_keep_and_output(tmp_path):
    src, dst = _graph(tmp_path), tmp_path / "o.pbtxt"
    p = tfg_cli("optimize", src, "--keep", "y", "--report", "-o", dst)
    err = p.stderr.decode()
    assert "constfold" in err and "nodes: 6 -> 3" in err
    g = io.load(str(dst))
    assert {n.name: n.op for n in g} == {"x": "Placeholder", "y": "Mul", "c": "Const"}


def test_optimize_list_and_passes(tmp_path):
    out = tfg_cli("optimize", "--list").stdout.decode()
    for name in ("prune", "cse", "constfold", "arith", "layout", "remap"):
        assert name in out
    src = _graph(tmp_path)
    data = tfg_cli("optimize", src, "--passes", "prune").stdout
    assert len(io.loads(data)) == 6  # pruning with no --keep deletes nothing


def test_optimize_and_prune_errors_exit_2(tmp_path):
    src = _graph(tmp_path)
    for args in (("optimize", src, "--keep", "nope"), ("optimize", src, "--passes", "bogus"),
                 ("prune", src, "--fetch", "nope"), ("prune", src)):
        p = tfg_cli(*args, check=False)
        assert p.returncode == 2 and b"Traceback" not in p.stderr
        assert len(p.stderr.decode().strip().splitlines()) == 1


def test_prune_cli(tmp_path):
    src, dst = _graph(tmp_path), tmp_path / "p.pb"
    tfg_cli("prune", src, "--fetch", "y:0", "--feed", "c", "-o", dst)
    g = io.load(str(dst))
    assert {n.name: n.op for n in g} == {"x": "Placeholder", "c": "Placeholder", "y": "Mul"}


def _run_cases():
    return [c for c in conformance_cases()
            if json.loads((c / "case.json").read_text())["kind"] == "run"]


@pytest.mark.parametrize("case", _run_cases(), ids=lambda c: c.name)
def test_conformance_graph_optimized_gives_tensorflow_outputs(case):
    from tfg.executor.session import Session
    meta = json.loads((case / "case.json").read_text())
    graph = io.load(str(case / "graph.pb"))
    keep = sorted({f.split(":")[0] for f in meta["fetches"]})
    out = optimize(graph, keep=keep, verify=True)
    assert len(out) <= meta["tf_node_count"]
    feeds = dict(np.load(case / "feeds.npz"))
    expected = np.load(case / "expected.npz")
    got = Session(out).run(meta["fetches"], feeds=feeds)
    for f, v in zip(meta["fetches"], got):
        np.testing.assert_allclose(np.asarray(v, np.float64), expected[f].astype(np.float64),
                                   rtol=meta["rtol"], atol=meta["atol"], err_msg=f)
