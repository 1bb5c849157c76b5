"""`tfg optimize --report --json`: one JSON document on stderr whose counts chain from pass to
pass and match the graphs; stdout still carries the optimized graph."""
import json

from helpers import tfg_cli
from test_pass_manager import G
from tfg.graphdef import io


def _graph(tmp_path):
    # c = AddN(a, b) folds; the duplicate Neg goes to CSE; y and z2 are the outputs.
    b = (G().const("a", 1.0).const("b", 2.0).op("c", "AddN", "a", "b", N=2)
         .ph("x", [2]).op("y", "Mul", "x", "c").op("z", "Neg", "x").op("z_dup", "Neg", "x")
         .op("z2", "Add", "z", "z_dup"))
    path = tmp_path / "g.pb"
    io.save(b.g, str(path))
    return path


def test_report_json_on_stderr_graph_on_stdout(tmp_path):
    src = _graph(tmp_path)
    p = tfg_cli("optimize", src, "--keep", "y,z2", "--report", "--json")
    doc = json.loads(p.stderr.decode())  # the whole of stderr is one JSON document
    out = io.loads(p.stdout)  # stdout: a loadable GraphDef, as without --report
    plain = io.loads(tfg_cli("optimize", src, "--keep", "y,z2").stdout)
    assert sorted(n.name for n in out) == sorted(n.name for n in plain)

    passes, totals = doc["passes"], doc["totals"]
    assert set(passes[0]) == {"name", "round", "nodes_before", "nodes_after", "seconds",
                              "changed", "error"}
    assert passes[0]["name"] == "prune" and passes[0]["round"] == 1
    assert totals["nodes_before"] == len(io.load(str(src))) == passes[0]["nodes_before"]
    assert totals["nodes_after"] == len(out) == passes[-1]["nodes_after"]
    for prev, nxt in zip(passes, passes[1:]):  # each pass starts from the last one's graph
        assert nxt["nodes_before"] == prev["nodes_after"]
    for r in passes:
        assert r["seconds"] >= 0 and r["error"] is None
        assert r["changed"] or r["nodes_before"] == r["nodes_after"]
    assert totals["passes_run"] == len(passes)
    assert totals["passes_changed"] == sum(r["changed"] for r in passes) >= 2
    assert totals["rolled_back"] == 0
    assert totals["rounds"] == max(r["round"] for r in passes)
    assert totals["seconds"] >= sum(r["seconds"] for r in passes) * 0.99
    by_name = {r["name"]: r for r in passes if r["round"] == 1}
    assert by_name["cse"]["nodes_after"] < by_name["cse"]["nodes_before"]  # z_dup merged
    assert by_name["constfold"]["changed"]  # AddN(a, b) became one Const


def test_report_json_passes_and_rounds(tmp_path):
    src = _graph(tmp_path)
    doc = json.loads(tfg_cli("optimize", src, "--passes", "prune,constfold", "--rounds", "3",
                             "--report", "--json", "-o", tmp_path / "o.pb").stderr)
    names = [(r["name"], r["round"]) for r in doc["passes"]]
    assert names[:2] == [("prune", 1), ("constfold", 1)]
    assert set(n for n, _ in names) == {"prune", "constfold"}
    # the pipeline stops after the first round that changes nothing
    last_round = [r for r in doc["passes"] if r["round"] == doc["totals"]["rounds"]]
    assert doc["totals"]["rounds"] == 3 or not any(r["changed"] for r in last_round)
    assert doc["totals"]["nodes_after"] == len(io.load(str(tmp_path / "o.pb")))


def test_text_report_unchanged_and_json_needs_report(tmp_path):
    src = _graph(tmp_path)
    err = tfg_cli("optimize", src, "--keep", "y,z2", "--report", "-o", tmp_path / "o.pb"
                  ).stderr.decode()
    assert err.splitlines()[0].split() == ["pass", "round", "before", "after", "ms"]
    assert err.splitlines()[-1].startswith("nodes: 8 -> ")
    p = tfg_cli("optimize", src, "--json", "-o", tmp_path / "j.pb", check=False)
    assert p.returncode == 2 and b"--json" in p.stderr and b"Traceback" not in p.stderr
    assert len(p.stderr.decode().strip().splitlines()) == 1
    assert not (tmp_path / "j.pb").exists()  # no partial output


def test_list_json():
    doc = json.loads(tfg_cli("optimize", "--list", "--json").stdout)
    names = [p["name"] for p in doc["passes"]]
    assert doc["pipeline"][:3] == ["prune", "cse", "constfold"] and doc["rounds"] == 2
    assert set(doc["pipeline"]) <= set(names)
    assert all(p["doc"] and p["default"] == (p["name"] in doc["pipeline"])
               for p in doc["passes"])


# A pass that raises, registered in the child before the CLI runs: the manager rolls it back
# and the JSON report carries the error instead of a warning line.
_FAILING_PASS = """
import sys
from tfg.passes.manager import register_pass
@register_pass("broken", "test pass: raises")
def broken(graph, opts):
    graph.remove_node(next(iter(graph)).name)
    raise RuntimeError("boom")
from tfg.cli import main
main(sys.argv[1:])
"""


def test_report_json_rolled_back_pass(tmp_path):
    import subprocess
    import sys

    src = _graph(tmp_path)
    p = subprocess.run([sys.executable, "-c", _FAILING_PASS, "optimize", str(src), "--passes",
                        "cse,broken", "--keep", "y,z2", "--report", "--json"],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stderr.decode())  # no warning line around the document
    broken = [r for r in doc["passes"] if r["name"] == "broken"]
    assert broken and all("boom" in r["error"] and not r["changed"] for r in broken)
    assert all(r["nodes_after"] == r["nodes_before"] for r in broken)  # rolled back
    assert doc["totals"]["rolled_back"] == len(broken)
    assert doc["totals"]["nodes_after"] == len(io.loads(p.stdout))
