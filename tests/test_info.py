"""`tfg info` and tfg.graphdef.summary on TensorFlow-made graphs."""
import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import CONFORMANCE, FIXTURES, ROOT
from helpers import tfg_cli
from tfg.cli import cli
from tfg.graphdef import io, summary
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType

# case -> [(frame, parent, loop vars, parallel_iterations)] in file order
WHILE_FRAMES = {
    "while_simple": [("while/while_context", None, 1, 10), ("while_1/while_context", None, 1, 10)],
    "while_accum": [("while/while_context", None, 3, 10)],
    "while_zero_iter": [("while/while_context", None, 3, 10)],
    "nested_while": [("while/while_context", None, 2, 10),
                     ("while/while/while_context", "while/while_context", 2, 10)],
    "grad_while": [("while/while_context", None, 2, 10)],
    "tf_grad_graph_while": [("while/while_context", None, 3, 10),
                            ("gradients/while/while_context", None, 3, 10)],
}


def graph_path(case):
    path = CONFORMANCE / case / "graph.pb"
    if not path.exists():
        pytest.skip("../shared/conformance is not present")
    return str(path)


def info_json(*args):
    result = CliRunner().invoke(cli, ["info", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("case", sorted(WHILE_FRAMES))
def test_while_frames(case):
    data = info_json(graph_path(case))
    got = [(f["name"], f["parent"], f["loop_vars"], f["parallel_iterations"])
           for f in data["while_loops"]]
    assert sorted(got, key=str) == sorted(WHILE_FRAMES[case], key=str)
    assert data["control_flow_error"] is None
    if case == "nested_while":
        assert [f["depth"] for f in data["while_loops"]] == [1, 2]
        assert data["while_loops"][0]["children"] == ["while/while/while_context"]


def test_placeholders_outputs_and_run_line():
    path = graph_path("mlp_infer")
    data = info_json(path)
    assert data["nodes"] == 18 and data["ops"]["MatMul"] == 3
    assert data["inputs"] == [{"name": "x", "op": "Placeholder", "dtype": "float32",
                               "shape": [None, 20]}]
    assert data["outputs"] == [{"name": "pred", "op": "ArgMax", "dtype": "int64",
                                "shape": [None]}]
    assert data["run_command"] == f"tfg run {path} --random-feeds --fetch pred"
    assert data["devices"] == {"": 18} and data["while_loops"] == [] and data["conds"] == 0


def test_variables_parameters_and_init():
    data = info_json(graph_path("train_sgd"))
    assert [(v["name"], v["shape"], v["params"]) for v in data["variables"]] == [
        ("w", [3, 1], 3), ("b", [], 1)]
    assert data["parameters"] == 4 and data["variable_bytes"] == 16
    assert data["constant_bytes"] > 16  # initial values, learning rate, shapes
    assert "--init init" in data["run_command"]
    assert "loss" in [o["name"] for o in data["outputs"]]
    # Assign/NoOp/init nodes without consumers are not outputs.
    assert not {"init", "train"} & {o["name"] for o in data["outputs"]}


def test_devices_and_conds():
    data = info_json(graph_path("multi_device"))
    assert set(data["devices"]) == {"", "/device:CPU:0", "/device:CPU:1"}
    assert info_json(graph_path("cond_simple_0"))["conds"] == 2


def test_text_output_nested_loops():
    result = CliRunner().invoke(cli, ["info", graph_path("nested_while")])
    assert result.exit_code == 0
    out = result.output
    assert "while loops (2):" in out
    assert "\n    while/while/while_context: 2 loop vars" in out  # indented under its parent
    assert "inputs (1):\n  n: int32 []" in out
    assert out.rstrip().endswith("--random-feeds --fetch tot")
    assert "\n  tot: int32 []  (Identity)\n" in out


def custom_graph():
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT, "shape": Shape((2, 2))})
    g.add_node("y", "MyCustomOp", ["x", "missing:1"], attrs={"T": DType.FLOAT})
    g.add_node("bad_exit", "Exit", ["y"], attrs={"T": DType.FLOAT})
    return g


def test_unknown_ops_and_malformed_control_flow(tmp_path):
    path = tmp_path / "custom.pbtxt"
    io.save(custom_graph(), str(path))
    data = info_json(str(path))
    assert data["unknown_ops"] == {"MyCustomOp": 1}
    assert "bad_exit" in data["control_flow_error"]
    assert data["dangling_inputs"] == [{"node": "y", "input": "missing:1"}]
    assert data["run_command"].endswith("--random-feeds --fetch bad_exit")
    text = summary.format_text(summary.summarize(custom_graph()))
    assert "ops tfg has no signature for: MyCustomOp (1)" in text
    assert "control flow: malformed" in text


def test_functional_control_flow_is_not_an_unknown_op():
    """A graph that keeps TensorFlow's functional While / StatelessWhile (control flow v2 and
    its gradient) has nothing tfg cannot run: info must not list those ops as unknown."""
    data = info_json(str(FIXTURES / "real_loops" / "tf1_cfv2_tfgrad" / "graph.pb"))
    assert data["ops"].get("StatelessWhile") == 2 and data["unknown_ops"] == {}


def test_ops_and_devices_lists():
    data = info_json("--ops", "--devices")
    assert "/job:localhost/replica:0/task:0/device:CPU:0" in data["devices"]
    ops = data["ops"]
    assert ops and all(set(row) == {"signature", "kernels"} for row in ops.values())
    assert all(k in ("CPU", "GPU") for row in ops.values() for k in row["kernels"])
    text = CliRunner().invoke(cli, ["info", "--ops"]).output
    assert text.startswith(f"ops ({len(ops)};")


def test_run_line_feeds_strings_from_files_and_names_devices():
    g = Graph()
    g.add_node("s", "Placeholder", attrs={"dtype": DType.STRING, "shape": Shape(())})
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT, "shape": Shape((None, 2))})
    g.add_node("y", "StringLength", ["s"], device="/job:localhost/replica:0/task:0/device:CPU:1")
    g.add_node("z", "Neg", ["x"], attrs={"T": DType.FLOAT},
               device="/job:localhost/replica:0/task:0/device:CPU:0")
    line = summary.summarize(g, source="g.pb")["run_command"]
    assert line == ("tfg run g.pb --random-feeds --feed s=@s.npy --devices cpu:2 --fetch y "
                    "--fetch z")
    assert summary.devices_flag({"": 3}) == []
    assert summary.devices_flag({"/job:localhost/replica:0/task:0/device:GPU:0": 1,
                                 "/job:localhost/replica:0/task:0/device:CPU:0": 1}) == [
        "--devices", "cpu:1,gpu:1"]


def test_readme_run_line_runs_in_an_empty_folder(tmp_path):
    """The README's mlp.pb: the line `tfg info` prints runs as it is, with no files."""
    graph = tmp_path / "build" / "mlp.pb"
    graph.parent.mkdir()
    subprocess.run([sys.executable, str(ROOT / "examples/mlp/build.py"), "-o", str(graph)],
                   check=True, capture_output=True, cwd=graph.parent)
    empty = tmp_path / "empty"
    empty.mkdir()
    data = json.loads(tfg_cli("info", graph, "--json").stdout)
    assert data["run_command"] == (f"tfg run {graph} --random-feeds --init init --fetch loss "
                                   "--fetch accuracy")
    assert [(o["name"], o["dtype"], o["shape"]) for o in data["outputs"]] == [
        ("loss", "float32", []), ("accuracy", "float32", [])]
    p = subprocess.run([sys.executable, "-m", "tfg", *shlex.split(data["run_command"])[1:]],
                       capture_output=True, cwd=empty, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(b"loss = array(") and list(empty.iterdir()) == []
    # partitioned: the line names the devices and fetches no _Send
    parts = tmp_path / "parts.pb"
    tfg_cli("partition", graph, "--devices", "cpu:2", "-o", parts)
    line = json.loads(tfg_cli("info", parts, "--json").stdout)["run_command"]
    assert "--devices cpu:2" in line and "/_" not in line
    p = subprocess.run([sys.executable, "-m", "tfg", *shlex.split(line)[1:]],
                       capture_output=True, cwd=empty, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr


def test_info_as_a_process_reads_stdin():
    data = open(graph_path("while_accum"), "rb").read()
    p = tfg_cli("info", "-", "--json", input=data)
    assert json.loads(p.stdout)["while_loops"][0]["loop_vars"] == 3
    p = tfg_cli("info", "/nonexistent.pb", check=False)
    assert p.returncode == 2 and p.stderr.decode().count("\n") == 1


def test_run_line_runs(tmp_path):
    """The printed `tfg run` line is accepted by `tfg run` as it is."""
    pytest.importorskip("tfg.cli.run")
    data = info_json(graph_path("nested_while"))
    argv = shlex.split(data["run_command"])[1:] + ["-o", str(tmp_path / "out.npz")]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0, result.output
    assert set(np.load(tmp_path / "out.npz").files) == {"tot"}


def test_frames_fixture_summaries():
    g = io.load(FIXTURES / "frames" / "while_in_cond" / "graph.pb")
    s = summary.summarize(g)
    assert [f["name"] for f in s["while_loops"]] == ["cond/while/while_context"]
    assert s["conds"] == 1
