"""Property-based fuzzing of graph input: random bytes and text, truncated and bit-flipped
TensorFlow graphs, and structurally broken GraphDefs go through `tfg.graphdef.io.loads`,
`tfg info`, `tfg convert` and `tfg render`. Each must succeed or fail cleanly: exit 0, or exit 2
with exactly one line on stderr and no traceback, and no output file left behind on failure.

The bulk runs in-process (tfg.cli.main with swapped std streams); a handful as processes.
"""
import io as pyio
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, conformance_cases
from helpers import tfg_cli
from tfg.cli import main
from tfg.errors import TfgInputError
from tfg.graphdef import io
from tfg.schemas.proto import attr_value_pb2, graph_pb2

SEEDS = [p / "graph.pb" for p in conformance_cases()] or sorted(
    (FIXTURES / "frames").rglob("graph.pb"))
SEED_BYTES = [p.read_bytes() for p in SEEDS]
# TFG_FUZZ_EXAMPLES=600 for a longer hunt; the default keeps the file under ~30 s.
FUZZ = settings(deadline=None, max_examples=int(os.environ.get("TFG_FUZZ_EXAMPLES", 60)),
                derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def run_cli(argv, stdin=b""):
    """tfg.cli.main in-process: (exit code, stdout bytes, stderr text)."""
    old = sys.stdin, sys.stdout, sys.stderr
    out, err = pyio.BytesIO(), pyio.BytesIO()
    streams = (pyio.TextIOWrapper(pyio.BytesIO(stdin)),
               pyio.TextIOWrapper(out, write_through=True),
               pyio.TextIOWrapper(err, write_through=True))
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
        for s in streams:
            s.flush()
            s.detach()  # keep the BytesIO buffers open
    return code, out.getvalue(), err.getvalue().decode("utf-8", "replace")


def assert_clean(code, err, output=None):
    assert code in (0, 2), f"exit {code}: {err}"
    assert "Traceback" not in err
    if code == 2:
        assert err.startswith("tfg: error: ") and err.count("\n") == 1, err
        if output is not None:
            assert not output.exists(), "a failed command left an output file"
            assert not [p for p in output.parent.iterdir() if p.name.startswith(".tfg-")]


def check_bytes(data, tmp_path):
    """loads, then info/convert/render on the same bytes through the CLI."""
    try:
        io.loads(data)
        ok = True
    except TfgInputError as e:
        assert "\n" not in str(e).strip()
        ok = False
    code, _, err = run_cli(["info", "-", "--json"], stdin=data)
    assert_clean(code, err)
    if ok is False:
        assert code == 2
    for name in ("out.pbtxt", "out.dot"):
        out = tmp_path / name
        if out.exists():
            out.unlink()
        cmd = "convert" if name.endswith("pbtxt") else "render"
        code, _, err = run_cli([cmd, "-", "-o", out], stdin=data)
        assert_clean(code, err, out)
        if code == 0 and cmd == "convert":
            # Text cannot hold fields the schema does not know; everything else survives.
            want = io.loads(data).to_proto()
            want.DiscardUnknownFields()
            assert io.load(str(out)).to_proto() == want


# --- byte-level fuzzing -----------------------------------------------------------------------

@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes(tmp_path, data):
    check_bytes(data, tmp_path)


@FUZZ
@given(st.text(max_size=500))
def test_random_text(tmp_path, text):
    check_bytes(text.encode("utf-8"), tmp_path)


@FUZZ
@given(st.sampled_from(range(len(SEED_BYTES))), st.data())
def test_truncated_and_bitflipped(tmp_path, idx, data):
    raw = bytearray(SEED_BYTES[idx])
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    for _ in range(data.draw(st.integers(0, 8))):
        if raw:
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
    check_bytes(bytes(raw), tmp_path)


@FUZZ
@given(st.sampled_from(range(len(SEED_BYTES))), st.data())
def test_mutated_text_graphs(tmp_path, idx, data):
    text = bytearray(io.dumps(io.loads(SEED_BYTES[idx]), "pbtxt"))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text) - 1))
        text[i: i + data.draw(st.integers(0, 5))] = data.draw(
            st.sampled_from([b"", b"{", b"}", b'"', b"\\", b"-1", b"99999999999999999999",
                             b"\xff", b"attr {", b"DT_HALF", b"\n"]))
    check_bytes(bytes(text), tmp_path)


# --- structural mutations -------------------------------------------------------------------

def _attr(kind):
    av = attr_value_pb2.AttrValue()
    if kind == "s":
        av.s = b"\x00\xffjunk"
    elif kind == "i":
        av.i = -(1 << 62)
    elif kind == "f":
        av.f = float("nan")
    elif kind == "b":
        av.b = True
    elif kind == "type":
        av.type = 999
    elif kind == "shape":
        av.shape.dim.add().size = -7
    elif kind == "list":
        av.list.i.extend([1, -2, 3])
    elif kind == "empty":
        pass
    elif kind == "huge_tensor":
        av.tensor.dtype = 1
        for _ in range(3):
            av.tensor.tensor_shape.dim.add().size = 1 << 40
        av.tensor.float_val.append(1.0)
    elif kind == "neg_tensor":
        av.tensor.dtype = 3
        av.tensor.tensor_shape.dim.add().size = -3
    elif kind == "bad_content":
        av.tensor.dtype = 1
        av.tensor.tensor_shape.dim.add().size = 4
        av.tensor.tensor_content = b"\x01\x02\x03"
    return av


ATTR_KINDS = ["s", "i", "f", "b", "type", "shape", "list", "empty", "huge_tensor",
              "neg_tensor", "bad_content"]
MUTATIONS = ["dangling", "duplicate", "attr", "self_loop", "port", "control_missing",
             "cycle", "empty_op", "weird_name", "drop_node", "frame_name", "swap_inputs"]


def mutate(gd, data):
    nodes = gd.node
    if not nodes:
        return
    kind = data.draw(st.sampled_from(MUTATIONS))
    nd = nodes[data.draw(st.integers(0, len(nodes) - 1))]
    other = nodes[data.draw(st.integers(0, len(nodes) - 1))]
    if kind == "dangling":
        nd.input.append(data.draw(st.sampled_from(["nope", "nope:3", "^nope", ":", "^", ""])))
    elif kind == "duplicate":
        nodes.add().CopyFrom(other)
    elif kind == "attr":
        keys = list(nd.attr) + ["T", "dtype", "value", "shape", "frame_name", "N"]
        nd.attr[data.draw(st.sampled_from(keys))].CopyFrom(_attr(data.draw(
            st.sampled_from(ATTR_KINDS))))
    elif kind == "self_loop":
        nd.input.append(nd.name)
    elif kind == "port":
        nd.input.append(f"{other.name}:{data.draw(st.sampled_from([1, 7, 2**31, 2**70]))}")
    elif kind == "control_missing":
        nd.input.append("^" + other.name + "_missing")
    elif kind == "cycle":
        nd.input.append(other.name)
        other.input.append(nd.name)
    elif kind == "empty_op":
        nd.op = data.draw(st.sampled_from(["", "NoSuchOp", "Enter", "Exit", "Merge",
                                           "Switch", "NextIteration", "LoopCond"]))
    elif kind == "weird_name":
        nd.name = data.draw(st.sampled_from(["", "a:b", "^x", "x:0", "a\nb", "\u00e9/\u4e2d",
                                             "x" * 5000]))
    elif kind == "drop_node":
        del nodes[data.draw(st.integers(0, len(nodes) - 1))]
    elif kind == "frame_name":
        nd.op = "Enter"
        nd.attr["frame_name"].s = data.draw(st.sampled_from([b"", b"f", b"\xff\xfe"]))
    elif kind == "swap_inputs" and len(nd.input) > 1:
        nd.input[0], nd.input[-1] = nd.input[-1], nd.input[0]


@FUZZ
@given(st.sampled_from(range(len(SEED_BYTES))), st.data())
def test_structurally_mutated_graphs(tmp_path, idx, data):
    gd = graph_pb2.GraphDef()
    gd.ParseFromString(SEED_BYTES[idx])
    for _ in range(data.draw(st.integers(1, 4))):
        mutate(gd, data)
    check_bytes(gd.SerializeToString(), tmp_path)


# --- a few as real processes ----------------------------------------------------------------

@pytest.mark.parametrize("payload", [
    b"\x0a\x05\x0a\x01a",  # a node with a name and no op
    b"node { name: 'a' op: 'Const' attr { key: 'value' value { tensor { dtype: DT_FLOAT "
    b"tensor_shape { dim { size: 1099511627776 } dim { size: 1099511627776 } } "
    b"float_val: 1 } } } }",
    b"node { name: 'a' op: 'Exit' input: 'a' }",
    b"\xff\xfe\xfd" * 50,
    b"",
])
def test_cli_processes(tmp_path, payload):
    for args in (["info", "-"], ["convert", "-", "-o", tmp_path / "o.pb"],
                 ["render", "-", "-o", tmp_path / "o.dot"]):
        p = tfg_cli(*args, input=payload, check=False)
        err = p.stderr.decode("utf-8", "replace")
        assert_clean(p.returncode, err, tmp_path / "o.pb" if args[0] == "convert" else None)


def test_huge_const_is_refused_when_decoded():
    gd = graph_pb2.GraphDef()
    nd = gd.node.add(name="c", op="Const")
    nd.attr["value"].CopyFrom(_attr("huge_tensor"))
    nd.attr["dtype"].type = 1
    g = io.loads(gd.SerializeToString())  # loading never decodes values
    with pytest.raises(TfgInputError, match="too large"):
        g["c"].get_attr("value")
    nd.attr["value"].CopyFrom(_attr("neg_tensor"))
    with pytest.raises(TfgInputError, match="unknown shape|negative"):
        io.loads(gd.SerializeToString())["c"].get_attr("value")
