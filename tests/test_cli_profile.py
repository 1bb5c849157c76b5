"""`tfg run --profile FILE` writes the measured cost model that `place`/`partition`
`--cost-model FILE` read (issue 15, item 3)."""
import json

import numpy as np

from helpers import tfg_cli
from tfg import builder as tb
from tfg.graphdef import io


def two_branches(path):
    """x [64, 64] -> h = tanh(x) -> a = h @ wa, b = h @ wb (independent) -> out = a + b."""
    g = tb.Graph()
    with g:
        x = tb.tanh(tb.placeholder(tb.float32, [64, 64], name="x"), name="h")
        rng = np.random.default_rng(0)
        a = tb.matmul(x, tb.constant(rng.random((64, 32), dtype=np.float32), name="wa"),
                      name="a")
        b = tb.matmul(x, tb.constant(rng.random((64, 32), dtype=np.float32), name="wb"),
                      name="b")
        tb.add(a, b, name="out")
    io.save(g.graph, str(path))


def test_profile_records_every_node_over_the_steps(tmp_path):
    graph, cost = tmp_path / "g.pb", tmp_path / "cost.json"
    two_branches(graph)
    tfg_cli("run", graph, "--random-feeds", "--fetch", "out", "--steps", "7",
            "--profile", cost)
    doc = json.loads(cost.read_text())
    assert doc["format"] == "tfg.cost_model" and doc["steps"] == 7
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert {"a", "b", "out", "wa", "wb"} <= set(nodes)
    for name in ("a", "b", "out"):
        assert nodes[name]["count"] == 7 and nodes[name]["total_us"] > 0
        assert nodes[name]["output_bytes"] == [64 * 32 * 4]  # float32 [64, 32]
        assert nodes[name]["device"].endswith("CPU:0")
    assert nodes["a"]["op"] == "MatMul"


def test_cost_model_from_the_profile_changes_placement(tmp_path):
    graph, cost = tmp_path / "g.pb", tmp_path / "cost.json"
    two_branches(graph)
    tfg_cli("run", graph, "--random-feeds", "--fetch", "out", "--profile", cost)

    def devices_of(cost_file):
        args = ["place", graph, "--devices", "cpu:2", "--format", "pbtxt"]
        placed = io.loads(tfg_cli(*args, *(["--cost-model", cost_file] if cost_file else []))
                          .stdout)
        return {n.name: n.device[-5:] for n in placed if n.name in ("a", "b")}

    assert set(devices_of(cost)) == {"a", "b"}  # the measured file itself is accepted
    # The same profile with both MatMuls measured as slow (a second each) or as nearly free:
    # the placer runs slow ones in parallel on the two devices, and keeps free ones together
    # (a copy between devices would cost more than they do).
    doc = json.loads(cost.read_text())
    placements = []
    for us in (1e6, 0.01):
        for n in doc["nodes"]:
            if n["name"] in ("a", "b", "out"):
                n["total_us"] = us * doc["steps"]
        edited = tmp_path / f"cost_{us}.json"
        edited.write_text(json.dumps(doc))
        placements.append(len(set(devices_of(edited).values())))
    assert placements == [2, 1]


def test_bad_cost_model_file_is_one_line(tmp_path):
    graph, bad = tmp_path / "g.pb", tmp_path / "bad.json"
    two_branches(graph)
    bad.write_text("{not json")
    p = tfg_cli("place", graph, "--devices", "cpu:2", "--cost-model", bad, check=False)
    assert p.returncode == 2 and p.stderr.decode().count("\n") == 1
    assert b"is not JSON" in p.stderr
