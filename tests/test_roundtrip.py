"""Reading then writing a graph gives back an equal GraphDef (binary and text), for every graph
TensorFlow made that the project holds, and attrs/fields tfg does not model survive verbatim."""
import pathlib

import pytest

from conftest import CONFORMANCE, FIXTURES, conformance_cases
from helpers import tfg_cli
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.schemas.proto import graph_pb2

# Every GraphDef fixture (SavedModels are MetaGraphDefs, with tests of their own; beside them a
# fingerprint.pb is a FingerprintDef).
GRAPHS = [p / "graph.pb" for p in conformance_cases()] + sorted(
    p for p in FIXTURES.rglob("*.pb") if p.name not in ("saved_model.pb", "fingerprint.pb"))
IDS = [str(p.relative_to(p.parents[1])) for p in GRAPHS]


def parsed(data):
    gd = graph_pb2.GraphDef()
    gd.ParseFromString(data)
    return gd


@pytest.mark.parametrize("path", GRAPHS, ids=IDS)
def test_binary_roundtrip(path):
    data = path.read_bytes()
    g = io.loads(data)
    original = parsed(data)
    assert g.to_proto() == original
    assert parsed(io.dumps(g, "binary")) == original
    assert g.copy().to_proto() == original
    assert [n.name for n in g] == [n.name for n in original.node]


@pytest.mark.parametrize("path", GRAPHS, ids=IDS)
def test_text_roundtrip(path):
    original = parsed(path.read_bytes())
    text = io.dumps(io.loads(path.read_bytes()), "pbtxt")
    assert io.loads(text).to_proto() == original
    assert io.dumps(io.loads(text), "pbtxt") == text  # text output is stable


@pytest.mark.skipif(not conformance_cases(), reason="../shared/conformance is not present")
@pytest.mark.parametrize("case", [p.name for p in conformance_cases()])
def test_tensorflow_text_equals_tensorflow_binary(case):
    text = (CONFORMANCE / case / "graph.pbtxt").read_bytes()
    g = io.loads(text)
    assert g.to_proto() == parsed((CONFORMANCE / case / "graph.pb").read_bytes())
    assert io.dumps(g, "pbtxt") == text  # same text TensorFlow wrote, byte for byte


def test_unknown_fields_and_attrs_survive():
    gd = graph_pb2.GraphDef()
    nd = gd.node.add(name="a", op="MyCustomOp")
    nd.attr["weird"].func.name = "f"
    nd.attr["_hidden"].list.s.extend([b"x", b"y"])
    nd.experimental_debug_info.original_node_names.append("orig")
    gd.versions.producer = 1234
    gd.library.function.add().signature.name = "fn"
    # Unknown fields: GraphDef field 99 and NodeDef field 77 (varint 5).
    node_bytes = nd.SerializeToString() + b"\xe8\x04\x05"
    data = b"\x0a" + bytes([len(node_bytes)]) + node_bytes
    data += gd.versions.SerializeToString() and b"\x22" + bytes(
        [len(gd.versions.SerializeToString())]) + gd.versions.SerializeToString()
    lib = gd.library.SerializeToString()
    data += b"\x12" + bytes([len(lib)]) + lib + b"\x98\x06\x07"
    g = io.loads(data)
    out = io.dumps(g, "binary")
    assert parsed(out) == parsed(data)
    assert b"\xe8\x04\x05" in out and b"\x98\x06\x07" in out
    # Editing a known field keeps the unknown ones.
    g["a"].device = "/device:CPU:0"
    out = io.dumps(g, "binary")
    assert b"\xe8\x04\x05" in out and parsed(out).node[0].device == "/device:CPU:0"


def test_edits_then_roundtrip():
    g = io.loads(GRAPHS[0].read_bytes()) if GRAPHS else Graph()
    g.add_node("extra", "NoOp", [f"^{n.name}" for n in list(g)[:3]])
    again = io.loads(io.dumps(g, "binary"))
    assert again.to_proto() == g.to_proto()
    assert again["extra"].control_inputs == [n.name for n in list(g)[:3]]


@pytest.mark.skipif(not conformance_cases(), reason="../shared/conformance is not present")
def test_cli_convert_roundtrip(tmp_path):
    src = CONFORMANCE / "nested_while" / "graph.pb"
    txt = tmp_path / "g.pbtxt"
    tfg_cli("convert", src, "-o", txt)
    back = tfg_cli("convert", txt, "--format", "pb").stdout
    assert parsed(back) == parsed(src.read_bytes())
    assert txt.read_bytes() == (CONFORMANCE / "nested_while" / "graph.pbtxt").read_bytes()
    assert pathlib.Path(txt).parent == tmp_path


@pytest.mark.parametrize("folder", sorted(p.parent for p in (FIXTURES / "frames").rglob(
    "graph.pbtxt")), ids=lambda p: p.name)
def test_tensorflow_text_with_experimental_type(folder):
    """TensorFlow writes NodeDef.experimental_type (a FullTypeDef) on some gradient nodes; its
    text form names FullTypeId values, so the message must be known to parse it."""
    text = (folder / "graph.pbtxt").read_bytes()
    g = io.loads(text)
    assert g.to_proto() == parsed((folder / "graph.pb").read_bytes())
    assert io.dumps(g, "pbtxt") == text
