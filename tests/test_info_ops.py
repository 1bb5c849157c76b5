"""`tfg info GRAPH --ops` (tfg/cli/census.py: graph_support): per op type of a graph as tfg runs
it, its count and whether tfg runs, differentiates and places it; what the front door lowered;
a verdict line; exit 0 even when ops are unsupported; `--json`."""
import json

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.cli.census import format_support, graph_support
from tfg.graphdef import io
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.kernels.registry import CPU, registered_ops
from tfg.passes.grad import has_gradient
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import has_op

LSTM = FIXTURES / "functional" / "lstm_while.pb"
F = DType.FLOAT


def test_functional_lstm_is_fully_supported():
    p = tfg_cli("info", LSTM, "--ops", "--json")
    data = json.loads(p.stdout)
    assert data["graph"] == str(LSTM)
    assert data["supported"] and data["differentiable"]
    assert data["lowered"] == {"While": 2} and data["not_inlined"] == {}
    ops = data["ops"]
    assert "While" not in ops  # reported as tfg runs it: lowered to the v1 primitives
    assert ops["Enter"]["executor"] and ops["Enter"]["count"] == 20
    assert ops["TensorListSetItem"] == {"count": 2, "signature": True, "runs": ["CPU", "GPU"],
                                        "executor": False, "gradient": "yes",
                                        "places": ["CPU", "GPU"]}
    assert ops["Const"]["gradient"] == "none"  # not differentiable by declaration
    assert sum(r["count"] for r in ops.values()) == data["nodes"]
    assert list(ops) == sorted(ops, key=lambda op: (-ops[op]["count"], op))
    text = tfg_cli("info", LSTM, "--ops").stdout.decode()
    assert "lowered by the front door: While (2)" in text
    assert text.strip().splitlines()[-1].startswith("supported: yes")
    piped = tfg_cli("info", "-", "--ops", input=LSTM.read_bytes()).stdout.decode()
    assert piped.strip().splitlines()[-1] == text.strip().splitlines()[-1]


def _graph_with_gaps():
    """x -> MyCustomOp (no signature, no kernel) and x -> an op with a CPU kernel but no
    gradient registered (chosen from the registries, so the test follows them)."""
    no_grad = next(op for op in registered_ops(CPU) if has_op(op) and not has_gradient(op))
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": F, "shape": Shape((2,))})
    g.add_node("custom", "MyCustomOp", ["x"])
    g.add_node("other", no_grad, [])
    return g, no_grad


def test_unsupported_ops_are_listed_and_exit_0(tmp_path):
    g, no_grad = _graph_with_gaps()
    report = graph_support(g)
    assert not report["supported"] and not report["differentiable"]
    assert report["unsupported"] == {"MyCustomOp": "no signature, no kernel, no device to "
                                                   "place it on"}
    assert report["ops"]["MyCustomOp"]["places"] == [] and \
        report["ops"]["MyCustomOp"]["runs"] == []
    assert report["no_gradient"] == {"MyCustomOp": 1, no_grad: 1}
    path = tmp_path / "g.pb"
    io.save(g, str(path))
    p = tfg_cli("info", path, "--ops")  # a report: exit 0
    text = p.stdout.decode()
    assert "unsupported ops: MyCustomOp (1): no signature, no kernel" in text
    assert "MyCustomOp (no signature)" in text
    assert f"ops without a gradient: MyCustomOp (1), {no_grad} (1)" in text or \
        f"ops without a gradient: {no_grad} (1), MyCustomOp (1)" in text
    assert text.strip().splitlines()[-1] == format_support(report).splitlines()[-1]
    assert text.strip().splitlines()[-1].startswith("supported: NO: 1 op type(s)")


def test_saved_model_reports_what_was_not_inlined():
    data = json.loads(tfg_cli("info", FIXTURES / "savedmodel" / "keras_lstm", "--ops",
                              "--json").stdout)
    assert data["lowered"]["SavedModel calls, inlined on load"] > 0
    # the saver's save function, while tfg lacks one of its ops (StaticRegexFullMatch): kept
    # as a call, said why, and counted as unsupported
    for name, why in data["not_inlined"].items():
        assert why and data["ops"]["StatefulPartitionedCall"]["runs"] == []
        assert "StatefulPartitionedCall" in data["unsupported"] and not data["supported"]
    assert data["ops"]["TensorListStack"]["places"] == ["CPU", "GPU"]


def test_without_graph_lists_every_op():
    data = json.loads(tfg_cli("info", "--ops", "--json").stdout)
    assert set(data) == {"ops"} and "MatMul" in data["ops"]
