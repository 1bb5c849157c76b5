"""The call paths this round made cheaper for keras.applications models: the `_FusedConv2D`
quick path after a prepared GEMM (kernels/fused.py `_whole`), the prepared zero Pad
(kernels/array_ops.py) and, in tfg's Session, chains with tiled per-channel Consts
(executor/chain_tiles.py): every value bit for bit the unfused kernels' / the plain
program's (TFG_FAST_PROGRAM=0), TensorFlow's on its small real models."""

import numpy as np
import pytest

from case_check import load_run_case
from conftest import FIXTURES
from tfg.executor import Session
from tfg.graphdef.graph import Graph
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel

RNG = np.random.default_rng(29)


@pytest.mark.parametrize("name", ["densenet_small", "nasnet_small", "resnet_small"])
def test_real_models_match_tensorflow_and_the_plain_program(name, monkeypatch):
    """TensorFlow's small DenseNet, NASNet and ResNet (tools/gen_real_models.py) in tfg's
    Session: batch-norm chains with tiled per-channel operands, fused convolutions' quick
    path, prepared Pads, NASNet's sampled crops; over three steps the values TensorFlow's
    within the suite's tolerance and bit for bit the plain program's (TFG_FAST_PROGRAM=0)."""
    meta, g, feeds, expected = load_run_case(FIXTURES / "real_models" / name)
    fetches = meta["fetches"]
    # one BLAS thread count for every step: adaptive's trial (blas_trial.py) times steps on
    # one and on two threads, and OpenBLAS's sums differ in the last bits between them
    monkeypatch.setenv("TFG_BLAS_TRIAL", "0")
    # numpy's kernels on every step: where numba is installed a node's compiled loop
    # (kernels/jit.py) takes over from its second call, within float rounding of numpy's
    monkeypatch.setenv("TFG_JIT", "0")
    # tfg's convolutions too: where oneDNN is installed, a fused convolution's bias is added
    # in oneDNN's accumulator, the unfused BiasAdd after it (kernels/onednn.py)
    monkeypatch.setenv("TFG_ONEDNN", "0")
    # and one fixed count: 'adaptive' follows the contention meter step by step, and another
    # test busy on the other core moved some steps to one thread (a CI run of stop 44)
    fast = Session(g, blas_threads=1)
    outs = [fast.run(fetches, feeds) for _ in range(3)]
    monkeypatch.setenv("TFG_FAST_PROGRAM", "0")
    plain = Session(g, blas_threads=1).run(fetches, feeds)
    for out in outs:
        for got, want, p in zip(out, expected, plain):
            assert got.tobytes() == p.tobytes()
            np.testing.assert_allclose(got, want, rtol=meta["rtol"], atol=meta["atol"])


@pytest.mark.parametrize("act", ["Relu", "Relu6", None])
@pytest.mark.parametrize("shape", [(2, 6, 6, 8), (1, 3, 3, 5)])
def test_fused_conv_quick_path_is_the_unfused_kernels(act, shape):
    """_FusedConv2D (BiasAdd [+ Relu/Relu6]) of an unchunked GEMM path: from its second call
    the prepared GEMM then the bias (tiled from the third) and activation in place; bit for
    bit Conv2D + BiasAdd + the activation kernel, over calls, a change of input shape and
    new values in the bias array."""
    ops = [b"BiasAdd"] + ([act.encode()] if act else [])
    attrs = dict(strides=[1, 1, 1, 1], padding=b"VALID", dilations=[1, 1, 1, 1],
                 data_format=b"NHWC", fused_ops=ops, num_args=1, epsilon=1e-4)
    fused = get_kernel("_FusedConv2D").fn
    ctx = KernelContext(Graph().add_node("f", "_FusedConv2D"), attrs)
    conv = get_kernel("Conv2D").fn
    cctx = KernelContext(Graph().add_node("c", "Conv2D"), attrs)
    bias_add = get_kernel("BiasAdd").fn
    bctx = KernelContext(Graph().add_node("b", "BiasAdd"), {"data_format": b"NHWC"})
    w = RNG.standard_normal((1, 1, shape[3], 7)).astype(np.float32)
    b = RNG.standard_normal(7).astype(np.float32)
    for i, n in enumerate((shape[0],) * 4 + (shape[0] + 1,) * 3):
        x = RNG.standard_normal((n,) + shape[1:]).astype(np.float32)
        if i in (3, 6):  # the same bias array with other values: tiled again, not reused
            b[:] = RNG.standard_normal(7).astype(np.float32)
        y = bias_add(bctx, conv(cctx, x, w), b)
        if act:
            y = get_kernel(act).fn(KernelContext(Graph().add_node("a", act), {}), y)
        got = fused(ctx, x, w, b)
        assert got.dtype == y.dtype and got.tobytes() == y.tobytes()
    assert ctx.cache["chunked"][1] is not None  # the quick path was taken


@pytest.mark.parametrize("shape,pads", [
    ((2, 5, 5, 3), [[0, 0], [1, 1], [1, 1], [0, 0]]),
    ((2, 4, 4, 3), [[0, 0], [0, 0], [0, 0], [0, 0]]),
    ((1, 64, 64, 32), [[0, 0], [2, 1], [0, 3], [0, 0]]),  # above _ZEROS_MAX: empty + slabs
    ((3, 2), [[1, 0], [0, 2]]),
])
def test_prepared_pad_is_np_pad(shape, pads):
    """Pad prepared per node and signature: np.pad's values over calls, and a new paddings
    value or input shape prepares again."""
    fn = get_kernel("Pad").fn
    ctx = KernelContext(Graph().add_node("p", "Pad"), {})
    p = np.array(pads, np.int32)
    for k in range(3):
        x = RNG.standard_normal(shape).astype(np.float32)
        x.reshape(-1)[::3] = np.nan
        assert fn(ctx, x, p).tobytes() == np.pad(x, pads).tobytes()
        other = np.array([[k, 0]] + pads[1:], np.int64)
        assert fn(ctx, x, other).tobytes() == np.pad(x, other.tolist()).tobytes()
    with pytest.raises(Exception, match="paddings"):
        fn(ctx, x, np.array(pads, np.int32).reshape(-1))
