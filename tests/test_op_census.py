"""Every op in the graphs of real models (tests/fixtures/census/census.json, written by
`tools/op_census.py build` under TensorFlow; table in docs/ops.md) has a signature, a CPU
kernel and, for the forward graphs, a gradient; every op of TensorFlow's own gradient graphs
has a kernel. A registry change that drops one fails here, naming the op and the models."""
import importlib.util
import json

from conftest import FIXTURES, ROOT

CENSUS = FIXTURES / "census" / "census.json"


def _tool():
    spec = importlib.util.spec_from_file_location("op_census", ROOT / "tools" / "op_census.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_census_covers_the_model_families():
    census = json.loads(CENSUS.read_text())
    built = {name for name, entry in census.items() if "error" not in entry}
    assert len(built) >= 15, sorted(census)
    for family in ("ResNet50", "MobileNetV2", "EfficientNetB0", "ConvNeXtTiny", "Transformer",
                   "KerasLSTM", "tf1_beam", "tf1_attention"):
        assert family in built


def test_every_census_op_is_supported(capsys):
    assert _tool().check(str(CENSUS), markdown=False) == 0, capsys.readouterr().out


def test_check_names_an_unsupported_op(tmp_path, capsys):
    fake = tmp_path / "census.json"
    fake.write_text(json.dumps({"m": {"nodes": 2, "forward": ["MatMul", "NoSuchOp"],
                                      "gradient": ["NoSuchGradOp"]}}))
    assert _tool().check(str(fake), markdown=False) == 1
    out = capsys.readouterr().out
    assert "NoSuchOp: no signature, kernel, gradient (m)" in out
    assert "NoSuchGradOp: no signature, kernel (m)" in out
