"""Chunked NHWC Conv2D (tfg/kernels/conv_chunks.py) and its intra-op threads
(conv_threads.py): the chunks (groups of images, or bands of one image's output rows) cover
every output once; the values are the by-definition convolution's and the one-GEMM path's
(within float32 rounding: OpenBLAS blocks a shorter M differently); _FusedConv2D's bias and
Relu/Relu6 applied per chunk give the unfused kernels' values; on two threads BLAS is put at
one thread and back, and a failing chunk's exception reaches the caller."""
import threading

import numpy as np
import pytest

from test_conv_fast_paths import reference
from tfg.executor import blas
from tfg.graphdef.graph import Graph
from tfg.kernels import clamp, conv_chunks, conv_gemm, conv_threads
from tfg.kernels.context import KernelContext
from tfg.kernels.conv_geom import Geom
from tfg.kernels.registry import get_kernel

# tfg's numpy convolution paths, also where oneDNN is installed (tests/test_onednn.py).
pytestmark = pytest.mark.usefixtures("numpy_convs")

rng = np.random.default_rng(21)

CASES = [  # x shape, filter shape, strides, H dilation, padding, chunk bytes
    ((5, 8, 7, 3), (3, 3, 3, 4), (1, 1), 1, "SAME", 2000),     # groups of 2 and 1 images
    ((2, 9, 8, 5), (3, 2, 5, 6), (1, 1), 1, "SAME", 1500),     # bands of 3 output rows
    ((2, 11, 10, 4), (3, 3, 4, 5), (2, 2), 1, "SAME", 800),    # strided bands
    ((3, 10, 9, 6), (2, 3, 6, 3), (2, 1), 2, "VALID", 3000),   # H-dilated, uneven bands
    ((1, 7, 7, 2), (5, 5, 2, 3), (1, 1), 1, "SAME", 100),      # one row a chunk (MIN_ROWS)
]
THIN = [False, True]  # patches [m, K] per chunk, or [K, m] (conv_gemm's 1-4 channel stems)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Tiny shapes take the chunked path (it needs 1 MB of patches by default)."""
    monkeypatch.setattr(conv_chunks, "MIN_PATCH_BYTES", 0)
    monkeypatch.setattr(conv_chunks, "MIN_ROWS", 1)
    yield
    conv_threads.configure(1)


def _geom(xs, ws, strides, dh, padding):
    return Geom({"padding": padding.encode(), "strides": [1, *strides, 1],
                 "dilations": [1, dh, 1, 1]}, xs[1], xs[2], ws[0], ws[1])


@pytest.mark.parametrize("thin", THIN)
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", CASES)
def test_chunked_conv_matches_the_definition_and_the_one_gemm_path(case, workers, thin,
                                                                   monkeypatch):
    xs, ws, strides, dh, padding, chunk = case
    monkeypatch.setattr(conv_chunks, "CHUNK_BYTES", chunk)
    g = _geom(xs, ws, strides, dh, padding)
    run = conv_chunks.prepared(xs, ws, g, np.float32, thin)
    assert isinstance(run, conv_chunks.ChunkedConv) and len(run.spans) > 1
    covered = np.zeros((xs[0], g.oh), int)  # each output row of each image exactly once
    for i, imgs, r0, rows in run.spans:
        covered[i:i + imgs, r0:r0 + rows] += 1
    assert (covered == 1).all()
    sets = []
    conv_threads.configure(workers, sets.append)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[3]).astype(np.float32)
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, (dh, 1), padding)
    for _ in range(2):  # the thread's buffer reused
        got = run(x, w)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got, conv_gemm.nhwc(x, w, g), rtol=1e-5, atol=1e-5)
    fused = run(x, w, b, clamp.relu6)
    np.testing.assert_allclose(fused, np.clip(want + b, 0, 6), rtol=1e-4, atol=1e-4)
    # two threads: BLAS at one thread around each call, then the step's count again
    assert sets == ([1, 2] * 3 if workers == 2 else [])


@pytest.mark.parametrize("read_only", [True, False])
def test_bias_of_few_channels_added_from_a_tiled_copy(read_only, monkeypatch):
    """Few channels: the bias repeated to TILE_BYTES (rows of several pixels) plus the
    remainder rows broadcast; the same sums as a broadcast add, bit for bit. A read-only
    bias's tile is kept; a writable one's is made again (it may have changed)."""
    monkeypatch.setattr(conv_chunks, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(conv_chunks, "TILE_BYTES", 256)  # 16 rows of 4 channels a tile
    xs, ws = (3, 7, 5, 2), (3, 3, 2, 4)
    g = _geom(xs, ws, (1, 1), 1, "SAME")
    run = conv_chunks.prepared(xs, ws, g, np.float32)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    b.flags.writeable = not read_only
    plain = run(x, w)
    got = run(x, w, b)
    np.testing.assert_array_equal(got, plain + b)
    assert run.tiled[0] is b and run.tiled[1].size == 64
    if not read_only:
        b += 1
        np.testing.assert_array_equal(run(x, w, b), plain + b)


def test_chunked_conv_float64_and_other_dtypes_left_to_one_gemm():
    xs, ws = (2, 9, 8, 5), (3, 3, 5, 4)
    g = _geom(xs, ws, (1, 1), 1, "SAME")
    assert conv_chunks.prepared(xs, ws, g, np.float16) is None
    assert conv_chunks.prepared(xs, (1, 1, 5, 4), g, np.float32) is None  # 1x1: no patches
    run = conv_chunks.prepared(xs, ws, g, np.float64)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    np.testing.assert_allclose(run(x, w), reference(x, w, (1, 1), (1, 1), "SAME"),
                               rtol=1e-10, atol=1e-10)


def test_a_failing_chunk_raises_on_the_caller_and_restores_blas():
    sets = []
    conv_threads.configure(2, sets.append)
    seen = set()

    def chunk(span, buf):
        seen.add(threading.get_ident())
        if span == 3:
            raise ValueError("chunk 3")

    with pytest.raises(ValueError, match="chunk 3"):
        conv_threads.run_chunks(chunk, list(range(8)), 16, np.float32)
    assert sets == [1, 2]
    conv_threads.configure(1)
    conv_threads.run_chunks(lambda span, buf: seen.add(threading.get_ident()), [0, 1],
                            16, np.float32)  # serial: the caller only
    assert threading.get_ident() in seen


@pytest.mark.parametrize("act", ["Relu", "Relu6", None, "Elu"])
def test_fused_conv2d_applies_bias_and_activation_per_chunk(act):
    """_FusedConv2D on a chunked convolution: Relu/Relu6/bias alone inside the chunks, Elu
    (not per-chunk) after the whole convolution; the unfused kernels' values either way."""
    ops = [b"BiasAdd"] + ([act.encode()] if act else [])
    attrs = dict(strides=[1, 1, 1, 1], padding=b"SAME", dilations=[1, 1, 1, 1],
                 data_format=b"NHWC", fused_ops=ops, num_args=1, epsilon=1e-4)
    fused = get_kernel("_FusedConv2D").fn
    ctx = KernelContext(Graph().add_node("f", "_FusedConv2D"), attrs)
    conv = get_kernel("Conv2D").fn
    cctx = KernelContext(Graph().add_node("c", "Conv2D"), attrs)
    w = rng.standard_normal((3, 3, 4, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    for _ in range(3):
        x = rng.standard_normal((3, 6, 7, 4)).astype(np.float32)
        y = conv(cctx, x, w) + b
        want = {"Relu": np.maximum(y, 0), "Relu6": np.clip(y, 0, 6), None: y,
                "Elu": np.where(y < 0, np.expm1(np.minimum(y, 0)), y)}[act]
        np.testing.assert_allclose(fused(ctx, x, w, b), want, rtol=1e-5, atol=1e-5)
    key, run, _ = ctx.cache["chunked"]
    assert (run is not None) == (act != "Elu")


@pytest.mark.skipif(not blas.blas_control_available(), reason="BLAS threads not settable")
def test_steps_let_chunked_kernels_use_the_step_blas_count():
    assert conv_threads.workers() == 1
    with blas.blas_limit(2):
        assert conv_threads.workers() == 2
        with blas.blas_limit(1):  # concurrent steps: the smallest limit
            assert conv_threads.workers() == 1
        assert conv_threads.workers() == 2
    assert conv_threads.workers() == 1  # outside steps: the calling thread only


@pytest.mark.parametrize("op", ["MaxPool", "AvgPool"])
def test_large_pools_split_their_batch_over_two_threads(op, monkeypatch):
    """A pool of >= SPLIT_MIN_BYTES inside a two-core step: its batch halves on two threads,
    bit for bit the one-thread result."""
    from tfg.kernels import pool_fast
    monkeypatch.setattr(pool_fast, "SPLIT_MIN_BYTES", 0)
    fn = get_kernel(op).fn
    attrs = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding=b"SAME",
                 data_format=b"NHWC")
    x = rng.standard_normal((5, 9, 8, 3)).astype(np.float32)
    want = fn(KernelContext(Graph().add_node("p", op), attrs), x)
    sets = []
    conv_threads.configure(2, sets.append)
    ctx = KernelContext(Graph().add_node("q", op), attrs)
    for _ in range(2):
        np.testing.assert_array_equal(fn(ctx, x), want)
    assert sets == [1, 2, 1, 2]


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork")
def test_a_forked_child_starts_its_own_helper_threads():
    import os
    conv_threads.configure(2, lambda n: None)
    conv_threads.run_chunks(lambda span, buf: None, [0, 1], 4, np.float32)  # helpers started
    pid = os.fork()
    if pid == 0:  # child: the chunks must all run (no job lost in a dead thread's queue)
        seen = []
        try:
            conv_threads.run_chunks(lambda span, buf: seen.append(span), list(range(6)), 4,
                                    np.float32)
            code = 0 if sorted(seen) == list(range(6)) else 1
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_conv_threads_env_var_keeps_chunks_serial(monkeypatch):
    monkeypatch.setenv("TFG_CONV_THREADS", "0")
    conv_threads.configure(2, lambda n: None)
    assert conv_threads.workers() == 1
    monkeypatch.delenv("TFG_CONV_THREADS")
    conv_threads.configure(2, lambda n: None)
    assert conv_threads.workers() == 2
