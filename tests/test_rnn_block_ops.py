"""TensorFlow's fused RNN cells (LSTMBlockCell, BlockLSTM, BlockLSTMV2, GRUBlockCell) and
their Grad ops against TensorFlow (tests/fixtures/rnn_block, made by
tools/gen_rnn_block_fixtures.py): forward values, `tfg grad` against TensorFlow's
`tf.gradients`, TensorFlow's own gradient graphs (the Grad ops as TensorFlow emits them) run by
tfg, a TF1 while-loop RNN through the CLI; finite differences, shapes, refusals."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import numeric_gradient, tfg_cli
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

DIR = FIXTURES / "rnn_block"
CASES = json.loads((DIR / "cases.json").read_text())
GRAD_CASES = sorted(name for name, case in CASES.items() if case["xs"])


def _arrays(name):
    return dict(np.load(DIR / f"{name}.npz"))


def _feeds(arrays):
    return {f"{k[len('feed/'):]}:0": v for k, v in arrays.items() if k.startswith("feed/")}


def _close(got, want, case, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=case["rtol"], atol=case["atol"], err_msg=what)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_tensorflow(name):
    case, arrays = CASES[name], _arrays(name)
    graph = io.load(str(DIR / f"{name}.pb"))
    got = Session(graph).run([f"out_{k}:0" for k in case["outputs"]], _feeds(arrays))
    for k, value in zip(case["outputs"], got):
        want = arrays[f"out/{k}"]
        if "feed/seq_len_max" in arrays and k in ("i", "f", "o", "ci", "co"):
            # Past seq_len_max TensorFlow leaves these as the memory held; tfg writes zeros.
            n = int(arrays["feed/seq_len_max"])
            assert not value[n:].any(), f"{name}: {k} past seq_len_max"
            value, want = value[:n], want[:n]
        _close(value, want, case, f"{name}: {k}")


V2_CASES = [name for name in GRAD_CASES if "_v2" in name]


@pytest.mark.parametrize("name", [n for n in GRAD_CASES if n not in V2_CASES])
def test_tfg_grad_matches_tensorflow(name):
    """`tfg grad` of the forward graph emits TensorFlow's Grad op and gets its gradients."""
    case, arrays = CASES[name], _arrays(name)
    g2 = grad(io.load(str(DIR / f"{name}.pb")), ["loss:0"], [f"{x}:0" for x in case["xs"]])
    emitted = {n.op for n in g2.nodes}
    assert set(case["grad_ops"]) <= emitted, (case["grad_ops"], name)
    got = Session(g2).run([f"grad/{x}:0" for x in case["xs"]], _feeds(arrays))
    for x, value in zip(case["xs"], got):
        _close(value, arrays[f"grad/{x}"], case, f"{name}: d loss / d {x}")


@pytest.mark.parametrize("name", V2_CASES)
def test_tfg_grad_of_block_lstm_v2_is_the_true_gradient(name):
    """TensorFlow's V2 gradient is BlockLSTM's (ICFO on V2's IFCO weights: wrong); tfg emits
    BlockLSTMGradV2, which finite differences confirm and which so differs from TF's w."""
    case, arrays = CASES[name], _arrays(name)
    graph = io.load(str(DIR / f"{name}.pb"))
    g2 = grad(graph, ["loss:0"], ["w:0"])
    assert "BlockLSTMGradV2" in {n.op for n in g2.nodes}
    feeds = _feeds(arrays)
    got = Session(g2).run("grad/w:0", feeds)
    assert not np.allclose(got, arrays["grad/w"], rtol=1e-2, atol=1e-2)
    clip = next(n for n in graph.nodes if n.op == "BlockLSTMV2").get_attr("cell_clip")
    if clip <= 0 or np.abs(arrays["out/cs"]).max() < clip:  # (the backward ignores a clip)
        _numeric_graph_check(graph, feeds, ["x", "w", "b"], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", GRAD_CASES)
def test_tensorflow_gradient_graph_runs(name):
    """TensorFlow's own backward graph (its Grad ops and their wiring) run by tfg."""
    case, arrays = CASES[name], _arrays(name)
    graph = io.load(str(DIR / f"{name}_grad.pb"))
    got = Session(graph).run([f"tfgrad_{x}:0" for x in case["xs"]], _feeds(arrays))
    for x, value in zip(case["xs"], got):
        _close(value, arrays[f"grad/{x}"], case, f"{name}: tfgrad_{x}")


# --- finite differences --------------------------------------------------------------------
def _call(op, attrs, *inputs):
    node = Graph().add_node("n", op)
    return get_kernel(op).fn(KernelContext(node, attrs), *inputs)


def _lstm_arrays(rng, timelen=None, batch=2, input_size=3, cell=2):
    xs = (batch, input_size) if timelen is None else (timelen, batch, input_size)
    shapes = [xs, (batch, cell), (batch, cell), (input_size + cell, 4 * cell), (cell,),
              (cell,), (cell,), (4 * cell,)]
    return [rng.standard_normal(s).astype(np.float32) * 0.5 for s in shapes]


def test_block_lstm_v2_grad_op_is_the_true_gradient():
    """BlockLSTMGradV2 is V2's backward (finite differences). TensorFlow's registered V2
    gradient, BlockLSTMGrad (ICFO), is not: its w gradient has the f and c columns swapped."""
    rng = np.random.default_rng(5)
    args = _lstm_arrays(rng, timelen=4)
    seq = np.int64(3)
    attrs = {"cell_clip": 0.0, "use_peephole": True}
    weights = [rng.uniform(0.5, 1.5, (4, 2, 2)) for _ in range(2)]

    def loss(w):
        outs = _call("BlockLSTMV2", attrs, seq, *args[:3], w.astype(np.float32), *args[4:])
        return np.sum(outs[1] * weights[0]) + np.sum(outs[6] * weights[1])

    outs = _call("BlockLSTMV2", attrs, seq, *args)
    cs_grad, h_grad = (w.astype(np.float32) for w in weights)
    numeric = numeric_gradient(loss, args[3].astype(np.float64), eps=1e-3)
    right = _call("BlockLSTMGradV2", {"use_peephole": True}, seq, *args, *outs, cs_grad, h_grad)
    np.testing.assert_allclose(right[3], numeric, rtol=2e-3, atol=2e-3)
    wrong = _call("BlockLSTMGrad", {"use_peephole": True}, seq, *args, *outs, cs_grad, h_grad)
    assert not np.allclose(wrong[3], numeric, rtol=2e-2, atol=2e-2)


def _numeric_graph_check(graph, feeds, xs, rtol=2e-3, atol=2e-3):
    """tfg grad of `loss` against central differences of the forward graph (float64)."""
    g2 = grad(graph, ["loss:0"], [f"{x}:0" for x in xs])
    got = Session(g2).run([f"grad/{x}:0" for x in xs], feeds)
    fwd = Session(graph)
    for x, value in zip(xs, got):
        def f(v, x=x):
            return float(fwd.run(["loss:0"], {**feeds, f"{x}:0": v.astype(np.float32)})[0])
        numeric = numeric_gradient(f, feeds[f"{x}:0"], eps=1e-2)
        np.testing.assert_allclose(value, numeric, rtol=rtol, atol=atol, err_msg=x)


@pytest.mark.parametrize("name,xs", [("lstm_cell_peephole", ["x", "cs_prev", "wci", "b"]),
                                     ("gru_cell", ["h_prev", "w_c", "b_ru"]),
                                     ("block_lstm_defaults", ["x", "w"])])
def test_gradients_match_finite_differences(name, xs):
    arrays = _arrays(name)
    if "out/cs" in arrays:  # the clip (3 by default) must not bite: its gradient ignores it
        assert np.abs(arrays["out/cs"]).max() < 3
    _numeric_graph_check(io.load(str(DIR / f"{name}.pb")), _feeds(arrays), xs,
                         rtol=1e-2, atol=1e-2)


# --- shapes, refusals, the CLI -------------------------------------------------------------
def _placeholder_graph(op, shapes, attrs, dtype=DType.FLOAT):
    g = Graph()
    names = []
    for k, shape in shapes.items():
        t = DType.INT64 if k == "seq_len_max" else dtype
        g.add_node(k, "Placeholder", attrs={"dtype": t, "shape": shape})
        names.append(f"{k}:0")
    g.add_node("op", op, names, {"T": dtype, **attrs})
    return g


def _lstm_shapes(x, cell, input_size, seq=False):
    shapes = {"seq_len_max": []} if seq else {}
    batch = x[-2]
    shapes.update(x=x, cs_prev=[batch, cell], h_prev=[batch, cell],
                  w=[None if input_size is None else input_size + cell, 4 * cell],
                  wci=[cell], wcf=[cell], wco=[cell], b=[4 * cell])
    return shapes


def test_shape_inference():
    info = infer(_placeholder_graph("LSTMBlockCell", _lstm_shapes([-1, 3], 5, 3), {}))
    assert [info[("op", k)].shape for k in range(7)] == [(None, 5)] * 7
    info = infer(_placeholder_graph("BlockLSTM", _lstm_shapes([7, -1, 3], 4, 3, True), {}))
    assert info[("op", 6)].shape == (7, None, 4)
    g = _placeholder_graph("LSTMBlockCellGrad", {**_lstm_shapes([2, 3], 4, 3), **{
        k: [2, 4] for k in ("i", "cs", "f", "o", "ci", "co", "cs_grad", "h_grad")}},
        {"use_peephole": False})
    info = infer(g)
    assert [info[("op", k)].shape for k in range(5)] == [(2, 4), (2, 16), (4,), (4,), (4,)]
    g = _placeholder_graph("GRUBlockCellGrad", {
        "x": [2, 3], "h_prev": [2, 5], "w_ru": [8, 10], "w_c": [8, 5], "b_ru": [10],
        "b_c": [5], "r": [2, 5], "u": [2, 5], "c": [2, 5], "d_h": [2, 5]}, {})
    info = infer(g)
    assert [info[("op", k)].shape for k in range(4)] == [(2, 3), (2, 5), (2, 5), (2, 10)]


def test_block_lstm_bias_not_divisible_by_4_is_a_shape_error():
    shapes = _lstm_shapes([5, 2, 3], 4, 3, True)
    shapes["b"] = [15]
    errors = []
    infer(_placeholder_graph("BlockLSTM", shapes, {}), errors=errors)
    assert any("not divisible by 4" in e for e in errors)


def _block_args(rng, timelen=3):
    return [np.int64(timelen)] + _lstm_arrays(rng, timelen=timelen)


@pytest.mark.parametrize("change,message", [
    (lambda a: a.__setitem__(0, np.int64(4)), r"seq_len_max must be in \[0, timelen = 3\]"),
    (lambda a: a.__setitem__(0, np.int64(-1)), r"seq_len_max must be in \[0, timelen = 3\]"),
    (lambda a: a.__setitem__(0, np.int64([1])), "must be rank 0 but is rank 1"),
    (lambda a: a.__setitem__(4, a[4][:, :7]), r"w.dim_size\(1\) != cell_size \* 4: 7 vs. 8"),
    (lambda a: a.__setitem__(5, a[5][:1]), r"wci.dim_size\(0\) != cell_size: 1 vs. 2"),
    (lambda a: a.__setitem__(3, a[3][:1]), r"h_prev.dims\(0\) != batch_size: 1 vs. 2"),
    (lambda a: a.__setitem__(8, a[8][None]), "b_tensor must be rank 1 but is rank 2"),
])
def test_block_lstm_refuses_bad_inputs(change, message):
    args = _block_args(np.random.default_rng(0))
    change(args)
    for op in ("BlockLSTM", "BlockLSTMV2"):
        with pytest.raises(TfgError, match=message):
            _call(op, {"use_peephole": False, "cell_clip": 0.0}, *args)


def test_cells_refuse_bad_inputs():
    rng = np.random.default_rng(1)
    args = _lstm_arrays(rng)
    with pytest.raises(TfgError, match=r"cs_prev_tensor is empty, has shape: \(0, 2\)"):
        _call("LSTMBlockCell", {"use_peephole": False},
              *[a[:0] if a.ndim == 2 and k < 3 else a for k, a in enumerate(args)])
    with pytest.raises(TfgError, match=r"wco.dim_size\(0\) != cell_size: 3 vs. 2"):
        _call("LSTMBlockCell", {"use_peephole": True}, *args[:6], np.zeros(3, np.float32),
              args[7])
    x, h = np.zeros((2, 3), np.float32), np.zeros((2, 2), np.float32)
    good = [np.zeros((5, 4), np.float32), np.zeros((5, 2), np.float32),
            np.zeros(4, np.float32), np.zeros(2, np.float32)]
    with pytest.raises(TfgError, match=r"b_c.dim_size\(0\) != cell_size: 3 vs. 2"):
        _call("GRUBlockCell", {}, x, h, *good[:3], np.zeros(3, np.float32))
    with pytest.raises(TfgError, match="Rank of b_ru must be 1, got 2"):
        _call("GRUBlockCell", {}, x, h, good[0], good[1], good[2][None], good[3])
    with pytest.raises(TfgError, match="GRUBlockCell takes float32"):
        _call("GRUBlockCell", {}, x.astype(np.float16), h.astype(np.float16),
              *[a.astype(np.float16) for a in good])


def test_lstm_ops_run_without_peephole_weights():
    """Without peepholes LSTMBlockCell never reads wci/wcf/wco: empty ones are fine."""
    args = _lstm_arrays(np.random.default_rng(2))
    empty = np.zeros(0, np.float32)
    a = _call("LSTMBlockCell", {"use_peephole": False}, *args[:4], empty, empty, empty, args[7])
    b = _call("LSTMBlockCell", {"use_peephole": False}, *args)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_memory_guard_sizes_block_lstm_outputs():
    """7 outputs of [timelen, batch, cell] (from x's and b's shapes) are sized before the
    kernel runs: a long sequence with a wide cell is refused, not allocated."""
    timelen, cell = 20000, 64
    g = _placeholder_graph("BlockLSTM", _lstm_shapes([timelen, 1, 1], cell, 1, True), {})
    feeds = {"seq_len_max:0": np.int64(timelen),
             "x:0": np.zeros((timelen, 1, 1), np.float32),
             "cs_prev:0": np.zeros((1, cell), np.float32),
             "h_prev:0": np.zeros((1, cell), np.float32),
             "w:0": np.zeros((1 + cell, 4 * cell), np.float32),
             **{f"{k}:0": np.zeros(cell, np.float32) for k in ("wci", "wcf", "wco")},
             "b:0": np.zeros(4 * cell, np.float32)}
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run(["op:6"], feeds)


def test_while_loop_rnn_through_the_cli(tmp_path):
    """The TF1 while-loop RNN (TensorArrays, LSTMBlockCell each step) run by `tfg run`."""
    arrays = _arrays("lstm_while_loop")
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, **_feeds(arrays))
    out = tmp_path / "out.npz"
    tfg_cli("run", DIR / "lstm_while_loop.pb", "--feeds", feeds, "--fetch", "out_h_seq,out_cs",
            "-o", out)
    got = np.load(out)
    np.testing.assert_allclose(got["out_h_seq"], arrays["out/h_seq"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["out_cs"], arrays["out/cs"], rtol=1e-5, atol=1e-5)


def test_cli_refusals_are_one_line(tmp_path):
    """A seq_len_max past the sequence (TensorFlow aborts the process) is a kernel error
    (exit 1); a feed of the wrong shape is a bad input (exit 2); one stderr line each."""
    arrays = _arrays("block_lstm_defaults")
    feeds = _feeds(arrays)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{**feeds, "seq_len_max:0": np.int64(9)})
    p = tfg_cli("run", DIR / "block_lstm_defaults.pb", "--feeds", bad, "--fetch", "out_h",
                check=False)
    err = p.stderr.decode().strip()
    assert p.returncode == 1 and len(err.splitlines()) == 1, err
    assert "seq_len_max must be in [0, timelen = 5], got 9" in err and "BlockLSTM" in err
    np.savez(bad, **{**feeds, "x:0": feeds["x:0"][:, :, :2]})
    p = tfg_cli("run", DIR / "block_lstm_defaults.pb", "--feeds", bad, "--fetch", "out_h",
                check=False)
    err = p.stderr.decode().strip()
    assert p.returncode == 2 and len(err.splitlines()) == 1, err
