"""The quantization-aware-training ops (FakeQuant*, QuantizeAndDequantizeV2/V3/V4/V4Grad) and
the printing ops (StringFormat, PrintV2, Print) against TensorFlow 2.21
(tests/fixtures/quant_print, written by tools/gen_quant_print_fixtures.py): values bit for bit
on float32, `tfg grad` against tf.gradients, the text TensorFlow prints, TensorFlow's errors,
shape inference, and the CLI end to end (prints go to stderr, results stay on stdout)."""
import re

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import output_shapes
from tfg.graphdef.io import load, save
from tfg.passes.grad import get_gradient, grad
from tfg.schemas.dtypes import DType

HERE = FIXTURES / "quant_print"
DATA = np.load(HERE / "cases.npz")
CASES = sorted({k.split("/")[0] for k in DATA.files})
VALUE_CASES = [c for c in CASES if f"{c}/out_0" in DATA.files]
ERROR_CASES = [c for c in CASES if f"{c}/error" in DATA.files]
GRAD_CASES = [c for c in CASES if f"{c}/xs" in DATA.files]
PRINT_CASES = [c for c in CASES if f"{c}/stderr" in DATA.files]


@pytest.fixture(scope="module")
def graph():
    return load(str(HERE / "graph.pb"))


@pytest.fixture(scope="module")
def session(graph):
    return Session(graph)


def _feeds(name):
    out, k = {}, 0
    while f"{name}/feed_{k}" in DATA.files:
        v = DATA[f"{name}/feed_{k}"]
        out[f"{name}/in_{k}:0"] = v.astype(object) if v.dtype.kind == "S" else v
        k += 1
    return out


def test_fixtures_cover_every_kind():
    assert len(VALUE_CASES) > 40 and len(ERROR_CASES) >= 10 and len(GRAD_CASES) >= 15
    assert PRINT_CASES == ["print_v1", "print_v2"]


@pytest.mark.parametrize("name", VALUE_CASES)
def test_values_match_tensorflow(session, name):
    fetches = [str(t) for t in DATA[f"{name}/fetch"]]
    got = session.run(fetches, _feeds(name))
    for j, (g, f) in enumerate(zip(got, fetches)):
        want = DATA[f"{name}/out_{j}"]
        g = np.asarray(g)
        if want.dtype.kind == "S":
            assert g.reshape(()).item() == want.item(), f"{name}: {g!r} != {want!r}"
            continue
        assert g.shape == want.shape and g.dtype == want.dtype, f"{name} {f}"
        # float32 bit for bit (the nudged-range arithmetic is TensorFlow's, step by step)
        np.testing.assert_array_equal(g, want, err_msg=f"{name} {f}")


@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradients_match_tensorflow(graph, name):
    """`tfg grad` of sum(w * y) against TensorFlow's tf.gradients of the same loss."""
    fetch = str(DATA[f"{name}/fetch"][0])
    xs = [str(t) for t in DATA[f"{name}/xs"]]
    g = graph.copy()
    w = DATA[f"{name}/w"]
    g.add_node(f"{name}/tfg_w", "Placeholder", [], {"dtype": DType.from_numpy(w.dtype)})
    g2 = grad(g, [fetch], xs, grad_ys=[f"{name}/tfg_w:0"])
    outs = [f"grad/{x.rsplit(':', 1)[0]}:0" for x in xs]
    got = Session(g2).run(outs, {**_feeds(name), f"{name}/tfg_w:0": w})
    for k, (x, v) in enumerate(zip(xs, got)):
        want = DATA[f"{name}/grad_{k}"]
        np.testing.assert_allclose(v, want, rtol=1e-6, atol=1e-6, err_msg=f"{name}: d/d{x}")
        assert np.asarray(v).shape == want.shape


@pytest.mark.parametrize("name", ERROR_CASES)
def test_errors_match_tensorflow(session, name):
    op_node = _op_node(session.graph, name)
    want = str(DATA[f"{name}/error"])
    with pytest.raises(TfgError) as info:
        session.run([], _feeds(name), targets=[op_node])
    assert want in str(info.value), f"{name}: {info.value}"


def _op_node(graph, name):
    """The case's op node: the one under its scope that is not a placeholder."""
    nodes = [n for n in graph.nodes if n.name.startswith(f"{name}/")
             and n.op not in ("Placeholder",)]
    return nodes[-1].name


@pytest.mark.parametrize("name", PRINT_CASES)
def test_printed_text_matches_tensorflow(session, name, capsys):
    session.run([], _feeds(name), targets=[_op_node(session.graph, name)])
    captured = capsys.readouterr()
    assert captured.err == str(DATA[f"{name}/stderr"])
    assert captured.out == ""


# --- behaviour TensorFlow's fixtures do not show --------------------------------------------
def _graph(op, dtypes, attrs, extra_inputs=()):
    g = Graph()
    names = []
    for k, dt in enumerate(dtypes):
        g.add_node(f"in_{k}", "Placeholder", [], {"dtype": dt})
        names.append(f"in_{k}:0")
    g.add_node("op", op, names + list(extra_inputs), attrs)
    return g


def test_print_v2_to_stdout_goes_to_stderr(capsys):
    """stdout carries `tfg run`'s results, so every print is written to stderr."""
    g = _graph("PrintV2", [DType.STRING], {"output_stream": b"stdout", "end": b"!\n"})
    Session(g).run([], {"in_0:0": np.array(b"hello", object)}, targets=["op"])
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "hello!\n"


@pytest.mark.parametrize("stream, words", [(b"file:///tmp/x", "does not write files"),
                                           (b"printer", "Unknown output stream: printer")])
def test_print_v2_refuses_files_and_unknown_streams(stream, words):
    g = _graph("PrintV2", [DType.STRING], {"output_stream": stream})
    with pytest.raises(TfgError, match=words):
        Session(g).run([], {"in_0:0": np.array(b"x", object)}, targets=["op"])


def test_a_summary_too_large_to_print_is_refused_naming_its_size():
    """summarize=-1 over 5M elements: refused before any text is made; the default
    summarize of a large tensor (6 elements a dim) prints as TensorFlow does."""
    g = _graph("StringFormat", [DType.FLOAT], {"T": [DType.FLOAT], "summarize": -1})
    big = np.zeros(5_000_000, np.float32)
    with pytest.raises(TfgError, match="summarizing 5000000 elements"):
        Session(g).run(["op:0"], {"in_0:0": big})
    g = _graph("StringFormat", [DType.FLOAT], {"T": [DType.FLOAT]})
    (text,) = Session(g).run(["op:0"], {"in_0:0": big})
    assert text == b"[0 0 0 ... 0 0 0]"


def test_print_first_n_counts_runs(capsys):
    g = _graph("Print", [DType.FLOAT, DType.FLOAT],
               {"T": DType.FLOAT, "U": [DType.FLOAT], "message": b"m", "first_n": 2})
    sess = Session(g)
    for _ in range(3):
        out = sess.run(["op:0"], {"in_0:0": np.float32([1, 2]), "in_1:0": np.float32(0.5)})
        np.testing.assert_array_equal(out[0], [1, 2])
    assert capsys.readouterr().err == "m[0.5]\nm[0.5]\n"


def test_gradients_registered_as_tensorflow():
    for op in ("FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars",
               "FakeQuantWithMinMaxVarsPerChannel", "QuantizeAndDequantizeV2",
               "QuantizeAndDequantizeV3", "QuantizeAndDequantizeV4", "Print"):
        assert get_gradient(op).fn is not None, op
    for op in ("FakeQuantWithMinMaxArgsGradient", "FakeQuantWithMinMaxVarsGradient",
               "FakeQuantWithMinMaxVarsPerChannelGradient", "PrintV2", "StringFormat"):
        assert get_gradient(op).fn is None, op


def test_shapes_inferred(graph):
    def shapes(node):
        return output_shapes(graph, node, strict=True)

    assert shapes("fq_channel_rank4/FakeQuantWithMinMaxVarsPerChannel") == [(2, 3, 2, 5)]
    assert shapes("fq_vars_grad_op/FakeQuantWithMinMaxVarsGradient") == [(7,), (), ()]
    assert shapes("fq_channel_grad_op/FakeQuantWithMinMaxVarsPerChannelGradient") == [
        (3, 5), (5,), (5,)]
    assert shapes("qdq4_grad_op/QuantizeAndDequantizeV4Grad") == [(3, 4), (4,), (4,)]
    assert shapes("sf_two/StringFormat") == [()]


def test_string_format_shape_function_counts_placeholders():
    g = _graph("StringFormat", [DType.INT32], {"T": [DType.INT32], "template": "%s and %s"})
    with pytest.raises(TfgError, match="num placeholders in template and num inputs"):
        output_shapes(g, "op", strict=True)


# --- the CLI ---------------------------------------------------------------------------------
def _cli_graph(tmp_path):
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": DType.FLOAT})
    g.add_node("lo", "Placeholder", [], {"dtype": DType.FLOAT})
    g.add_node("fq", "FakeQuantWithMinMaxVars", ["x:0", "lo:0", "hi:0"], {"num_bits": 4})
    g.add_node("hi", "Const", [], {"dtype": DType.FLOAT, "value": np.array(1, np.float32)})
    g.add_node("fmt", "StringFormat", ["fq:0"], {"T": [DType.FLOAT], "template": "fq: %s"})
    g.add_node("print", "PrintV2", ["fmt:0"], {"output_stream": b"stdout"})
    g.add_node("y", "Identity", ["fq:0", "^print"], {"T": DType.FLOAT})
    path = tmp_path / "g.pb"
    save(g, str(path))
    return path


def test_cli_prints_to_stderr_and_results_to_stdout(tmp_path):
    path = _cli_graph(tmp_path)
    np.savez(tmp_path / "f.npz", x=np.float32([-2, 0.3, 0.5]), lo=np.float32(-1))
    p = tfg_cli("run", path, "--feeds", tmp_path / "f.npz", "--fetch", "y", "--format", "json")
    # [-1, 1] in 4 bits: zero point 7.4999995 rounds to 7, the range nudged to [-14/15, 16/15]
    assert p.stderr.decode().splitlines()[-1] == "fq: [-0.933333397 0.266666681 0.533333361]"
    assert b"fq:" not in p.stdout and b"0.2666" in p.stdout
    tfg_cli("run", path, "--feeds", tmp_path / "f.npz", "--fetch", "y", "-o",
            tmp_path / "out.npz")
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"],
                                  np.float32([-0.9333334, 0.26666668, 0.53333336]))


def test_cli_bad_range_is_one_line_and_exit_1(tmp_path):
    """A FakeQuant min of the wrong rank, one line: the shape function names it once the fed
    shapes are known (exit 2; the kernel's own words, exit 1, where inference cannot tell)."""
    path = _cli_graph(tmp_path)
    np.savez(tmp_path / "bad.npz", x=np.float32([1]), lo=np.float32([-1, 0]))
    p = tfg_cli("run", path, "--feeds", tmp_path / "bad.npz", "--fetch", "y", check=False)
    err = p.stderr.decode().strip()
    assert p.returncode in (1, 2) and len(err.splitlines()) == 1, err
    assert re.search(r"min (and max )?must be (a )?scalars?", err) and "Traceback" not in err


def test_cli_bad_feed_dtype_is_exit_2(tmp_path):
    path = _cli_graph(tmp_path)
    np.savez(tmp_path / "bad.npz", x=np.array(["a"]), lo=np.float32(-1))
    p = tfg_cli("run", path, "--feeds", tmp_path / "bad.npz", "--fetch", "y", check=False)
    err = p.stderr.decode().strip()
    assert p.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
