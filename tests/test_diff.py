"""`tfg diff` and tfg.graphdef.diff: added/removed/changed nodes, what counts as equal, the
JSON form and the exit codes (0 equal, 1 different, 2 bad input)."""
import json

import numpy as np

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.graphdef import io
from tfg.graphdef.diff import diff, format_text
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType

FROZEN = FIXTURES / "savedmodel" / "frozen.pb"


def base_graph():
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT})
    g.add_node("w", "Const", attrs={"dtype": DType.FLOAT,
                                    "value": np.ones((2, 2), np.float32)})
    g.add_node("init", "NoOp")
    g.add_node("m", "MatMul", ["x", "w", "^init"], attrs={"T": DType.FLOAT})
    g.add_node("y", "Relu", ["m"], attrs={"T": DType.FLOAT})
    return g


def test_equal_graphs_and_equivalent_spellings():
    a, b = base_graph(), base_graph()
    assert diff(a, b).equal
    b["m"].inputs = ["x:0", "w", "^init"]  # `x:0` is `x`
    b["m"].set_attr("transpose_a", False)  # the registered default, written out
    assert diff(a, b).equal
    a["m"].inputs = ["x", "w", "^init", "^y"]
    b["m"].inputs = ["x", "w", "^y", "^init"]  # control inputs are a set
    assert diff(a, b).equal


def test_added_removed_changed():
    a, b = base_graph(), base_graph()
    b.remove_node("y")
    b.add_node("z", "Relu6", ["m"], attrs={"T": DType.FLOAT})
    b["m"].op = "_FusedMatMul"
    b["m"].set_attr("fused_ops", [b"BiasAdd"])
    b["m"].device = "/device:CPU:0"
    b["w"].set_attr("value", np.full((2, 2), 2, np.float32))
    b["x"].inputs = ["^init"]
    d = diff(a, b)
    assert not d.equal
    assert d.added == ["z"] and d.removed == ["y"]
    assert d.ops == {"z": "Relu6", "y": "Relu"}
    changes = {c.name: c for c in d.changed}
    assert set(changes) == {"m", "w", "x"}
    m = changes["m"]
    assert m.op == ("MatMul", "_FusedMatMul")
    assert m.device == ("", "/device:CPU:0")
    assert m.inputs is None
    assert m.attrs["fused_ops"][0] == "(absent)"
    assert "BiasAdd" in m.attrs["fused_ops"][1]
    assert changes["w"].attrs["value"] == ("tensor<float32>[2, 2] [1.,1.,1.,1.]",
                                           "tensor<float32>[2, 2] [2.,2.,2.,2.]")
    assert changes["x"].inputs == ([], ["^init"])
    text = format_text(d, "a.pb", "b.pb")
    assert text.splitlines()[:4] == ["--- a.pb", "+++ b.pb", "- y (Relu)", "+ z (Relu6)"]
    assert "    op: MatMul -> _FusedMatMul" in text
    assert text.splitlines()[-1] == "1 added, 1 removed, 3 changed"
    assert diff(a, b, ignore_device=True, ignore_attrs=["fused_ops"]).changed[0].device is None
    js = d.to_json()
    assert js["counts"] == {"added": 1, "removed": 1, "changed": 3}
    row = next(r for r in js["changed"] if r["name"] == "m")
    assert row["op"] == {"old": "MatMul", "new": "_FusedMatMul"}
    json.dumps(js)  # JSON-ready


def test_versions_and_library_are_compared():
    a, b = base_graph(), base_graph()
    b.versions.producer = 27
    d = diff(a, b)
    assert d.graph_changes == ["versions"] and not d.equal


def test_cli_exit_codes_and_json(tmp_path):
    opt = tmp_path / "opt.pb"
    tfg_cli("optimize", FROZEN, "--keep", "probs,classes,logits", "-o", opt)
    same = tfg_cli("diff", FROZEN, FROZEN)
    assert same.returncode == 0 and same.stdout.decode().strip().endswith("graphs are equal")
    p = tfg_cli("diff", FROZEN, opt, check=False)
    assert p.returncode == 1
    assert "added" in p.stdout.decode().splitlines()[-1]
    p = tfg_cli("diff", FROZEN, opt, "--json", check=False)
    assert p.returncode == 1
    js = json.loads(p.stdout)
    assert js["equal"] is False
    assert js["counts"]["removed"] >= 1
    assert {"name", "op"} <= set(js["removed"][0])
    # the graph through stdin on one side
    p = tfg_cli("diff", "-", FROZEN, input=FROZEN.read_bytes())
    assert p.returncode == 0
    assert tfg_cli("diff", FROZEN, opt, "-q", check=False).stdout == b""


def test_cli_bad_input(tmp_path):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x00\x01garbage")
    for args in ([FROZEN, tmp_path / "missing.pb"], [FROZEN, bad], ["-", "-"], [FROZEN]):
        p = tfg_cli("diff", *args, check=False, input=b"")
        assert p.returncode == 2, args
        assert b"Traceback" not in p.stderr


def test_savedmodel_against_frozen():
    """A SavedModel's graph against its frozen form: variables became Consts."""
    d = diff(io.load(str(FIXTURES / "savedmodel" / "mlp")), io.load(str(FROZEN)))
    changed = {c.name: c for c in d.changed}
    assert changed["w1"].op == ("VariableV2", "Const")
    assert "save/SaveV2" in d.removed


def test_attrs_print_as_tensorflow_prints_them():
    from tfg.graphdef.attrs import Shape

    a, b = Graph(), Graph()
    a.add_node("c", "Conv2D", ["x", "f"], attrs={"T": DType.FLOAT, "padding": b"SAME",
                                               "strides": [1, 1, 1, 1],
                                               "use_cudnn_on_gpu": True})
    b.add_node("c", "Conv2D", ["x", "f"], attrs={"T": DType.HALF, "padding": b"VALID",
                                               "strides": [1, 2, 2, 1],
                                               "use_cudnn_on_gpu": False})
    a.add_node("p", "Placeholder", attrs={"dtype": DType.FLOAT, "shape": Shape((None, 4))})
    b.add_node("p", "Placeholder", attrs={"dtype": DType.FLOAT, "shape": Shape((2, 4))})
    attrs = {c.name: c.attrs for c in diff(a, b).changed}
    assert attrs["c"] == {"T": ("DT_FLOAT", "DT_HALF"), "padding": ('"SAME"', '"VALID"'),
                          "strides": ("[1, 1, 1, 1]", "[1, 2, 2, 1]"),
                          "use_cudnn_on_gpu": ("true", "false")}
    assert attrs["p"] == {"shape": ("[?,4]", "[2,4]")}
    assert "b'" not in format_text(diff(a, b))
