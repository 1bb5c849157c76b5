"""ConcatV2 chains appended into one buffer in the fast program (tfg/executor/concat_append.py),
the `_FusedConv2D` quick path after a prepared GEMM (kernels/fused.py `_whole`) and the
prepared zero Pad (kernels/array_ops.py): every value bit for bit the plain program's
(TFG_FAST_PROGRAM=0, one call per node) over several steps, TensorFlow's on its DenseNet."""
import json
import os

import numpy as np
import pytest

from conftest import FIXTURES
from test_pass_manager import G
import tfg
from tfg.executor import Session, concat_append
from tfg.graphdef.graph import Graph
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.schemas.dtypes import DType

RNG = np.random.default_rng(29)
I32 = DType.INT32


def _concat(b, name, *inputs, axis="ax", T=DType.FLOAT):
    return b.op(name, "ConcatV2", *inputs, axis, N=len(inputs), Tidx=I32, T=T)


def _dense(axis=3, second_reader=False, dtype=DType.FLOAT):
    """x -> c1 = concat(x, relu(x)) -> c2 = concat(c1, neg(c1)) -> c3 = concat(c2, y) and
    readers of each: a DenseNet block in miniature (each concat read by the next one and by an
    elementwise op)."""
    b = G().ph("x", [None, 3, 4, 2], dtype).ph("y", [None, None, None, None], dtype)
    b.const("ax", np.int32(axis))
    b.op("r", "Relu", "x", T=dtype)
    _concat(b, "c1", "x", "r", T=dtype)
    b.op("n1", "Neg", "c1", T=dtype)
    _concat(b, "c2", "c1", "n1", T=dtype)
    b.op("s2", "Square", "c2", T=dtype)
    _concat(b, "c3", "c2", "y", T=dtype)
    b.op("out", "Mul", "c3", "c3", T=dtype)
    if second_reader:  # a second concat appending to c1: both would write past it
        _concat(b, "c2b", "c1", "r", T=dtype)
    return b


def _programs(g, fetches, feed_list):
    """Values of each feed dict in turn, fast program and plain; the fast Session too."""
    out = {}
    for mode in ("1", "0"):
        old = os.environ.get("TFG_FAST_PROGRAM")
        os.environ["TFG_FAST_PROGRAM"] = mode
        try:
            sess = Session(g, graph_rewrites=False)
            out[mode] = [sess.run(fetches, dict(f)) for f in feed_list]
        finally:
            if old is None:
                del os.environ["TFG_FAST_PROGRAM"]
            else:
                os.environ["TFG_FAST_PROGRAM"] = old
        if mode == "1":
            fast = sess
    return out["1"], out["0"], fast


def _same(a, b):
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            u, v = np.asarray(u), np.asarray(v)
            assert u.dtype == v.dtype and u.shape == v.shape
            assert u.tobytes() == v.tobytes()


def _kinds(sess):
    sched = next(iter(sess._cache.values())).schedules[0]
    return sorted(getattr(e[0], "__name__", "") for e in sched.fast.entries
                  if getattr(e[0], "__name__", "").startswith("concat_"))


def _feeds(n, dtype=np.float32, extra=0):
    x = RNG.standard_normal((n, 3, 4, 2)).astype(dtype)
    x.reshape(-1)[::5] = -0.0
    return {"x:0": x, "y:0": RNG.standard_normal((n, 3, 4, 5 + extra)).astype(dtype)}


def test_a_growing_concat_is_appended_into_one_buffer():
    """Steps 2.. append (step 1 learns the shapes); a batch change learns again; every value
    bit for bit the plain program's, and results of earlier steps never change."""
    b = _dense()
    fetches = ["out", "s2", "n1"]
    feeds = [_feeds(2), _feeds(2), _feeds(2), _feeds(3), _feeds(3), _feeds(2)]
    fast, plain, sess = _programs(b.g, fetches, feeds)
    _same(fast, plain)
    assert _kinds(sess) == ["concat_final", "concat_head", "concat_link"]
    kept = [[v.copy() for v in step] for step in fast]
    sess.run(fetches, _feeds(2))
    _same(kept, fast)  # a later step's buffer is a new one


def test_appending_keeps_each_view_unchanged_for_its_late_readers():
    """c1's reader runs after c2 and c3 were appended (schedule order is file order here):
    it still sees c1's values."""
    b = _dense()
    b.op("late", "Neg", "c1")  # added last: scheduled after c3
    fast, plain, _ = _programs(b.g, ["late", "out"], [_feeds(2)] * 4)
    _same(fast, plain)


@pytest.mark.parametrize("kw,kinds", [
    ({"fetch_mid": True}, []),  # c2 fetched: neither c1 -> c2 nor c2 -> c3
    ({"second_reader": True}, ["concat_final", "concat_head"]),  # c1 read by two concats
])
def test_not_appended_where_a_view_could_be_seen_or_written_twice(kw, kinds):
    b = _dense(second_reader=kw.get("second_reader", False))
    fetches = ["out"] + (["c2"] if kw.get("fetch_mid") else []) + (
        ["c2b"] if kw.get("second_reader") else [])
    fast, plain, sess = _programs(b.g, fetches, [_feeds(2)] * 3)
    _same(fast, plain)
    assert _kinds(sess) == kinds
    if kw.get("fetch_mid"):
        assert fast[-1][1].flags.c_contiguous  # a fetched concat is its own array


def test_a_fetched_last_concat_is_not_a_view():
    b = _dense()
    fast, plain, sess = _programs(b.g, ["c3"], [_feeds(2)] * 3)
    _same(fast, plain)
    assert _kinds(sess) == ["concat_final", "concat_head"]  # c1 -> c2 only
    assert fast[-1][0].flags.c_contiguous and fast[-1][0].base is None


def test_fallbacks_keep_the_kernels_values():
    """Along another axis (0: the batch) it appends too; a batch change, a piece wider than
    the learned buffer, float64 after float32: the ordinary kernels' values, and errors, as
    before."""
    feeds = [{"x:0": f["x:0"], "y:0": f["y:0"][..., :2]} for f in
             (_feeds(2), _feeds(2), _feeds(2), _feeds(1))]
    fast, plain, sess = _programs(_dense(axis=0).g, ["out", "n1"], feeds)
    _same(fast, plain)
    assert _kinds(sess) == ["concat_final", "concat_head", "concat_link"]
    # y wider than the buffer learned from the first steps: c3 copies, then learns again
    b = _dense()
    feeds = [_feeds(2), _feeds(2), _feeds(2, extra=3), _feeds(2, extra=3), _feeds(2),
             _feeds(2)]
    fast, plain, _ = _programs(b.g, ["out"], feeds)
    _same(fast, plain)
    # float64 feeds: a graph of doubles, and float32 values fed to it are converted
    fast, plain, _ = _programs(_dense(dtype=DType.DOUBLE).g, ["out"],
                               [_feeds(2, np.float64)] * 3)
    _same(fast, plain)
    # a bad piece still fails as the kernel fails, naming the node
    sess = Session(b.g, graph_rewrites=False)
    for _ in range(3):
        sess.run("out", _feeds(2))
    bad = _feeds(2)
    bad["y:0"] = bad["y:0"][:, :2]
    with pytest.raises(Exception, match="c3"):
        sess.run("out", bad)
    np.testing.assert_array_equal(sess.run("out", _feeds(2)).shape, (2, 3, 4, 13))


def test_densenet_small_matches_tensorflow_and_the_plain_program():
    """TensorFlow's DenseNet ([2, 2, 2, 2] blocks; tools/gen_real_models.py): its growing
    concats appended, the values TensorFlow's within the suite's tolerance and bit for bit
    the plain program's."""
    case = FIXTURES / "real_models" / "densenet_small"
    meta = json.loads((case / "case.json").read_text())
    g = tfg.load(str(case / "graph.pb"))
    with np.load(case / "feeds.npz") as f:
        feeds = {k: f[k] for k in f.files}
    with np.load(case / "expected.npz") as f:
        expected = [f[name] for name in meta["fetches"]]
    fetches = meta["fetches"]
    fast = Session(g)
    outs = [fast.run(fetches, feeds) for _ in range(3)]
    assert "concat_head" in _kinds(fast)
    os.environ["TFG_FAST_PROGRAM"] = "0"
    try:
        plain = Session(g).run(fetches, feeds)
    finally:
        del os.environ["TFG_FAST_PROGRAM"]
    for out in outs:
        for got, want, p in zip(out, expected, plain):
            assert got.tobytes() == p.tobytes()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", ["Relu", "Relu6", None])
@pytest.mark.parametrize("shape", [(2, 6, 6, 8), (1, 3, 3, 5)])
def test_fused_conv_quick_path_is_the_unfused_kernels(act, shape):
    """_FusedConv2D (BiasAdd [+ Relu/Relu6]) of an unchunked GEMM path: from its second call
    the prepared GEMM then the bias and activation in place; bit for bit Conv2D + BiasAdd +
    the activation kernel, over calls and a change of input shape."""
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
    for n in (shape[0], shape[0], shape[0], shape[0] + 1, shape[0] + 1):
        x = RNG.standard_normal((n,) + shape[1:]).astype(np.float32)
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


def test_a_link_appends_only_to_the_view_this_step_returned():
    """The chain's kernels called directly: after learning, a link given any array other than
    the view its head returned (another step's, interleaved as two threads would) copies, as
    np.concatenate; each step's values are its own."""
    class Item:
        def __init__(self, i):
            self.id = i
    made = concat_append.kernels([Item(0), Item(1), Item(2)])
    calls = []

    def base(ctx, *a):
        calls.append(len(a))
        return np.concatenate(a[:-1], axis=int(a[-1]))
    head, link, last = (made[i](base) for i in range(3))
    ax = np.array(-1, np.int32)

    def parts(k):
        return [np.full((2, 3, 2), k + i, np.float32) for i in range(4)]

    def step(p):
        c1 = head(None, p[0], p[1], ax)
        c2 = link(None, c1, p[2], ax)
        return c1, c2, last(None, c2, p[3], ax)
    step(parts(0))  # learns the shapes
    calls.clear()
    c1, c2, c3 = step(parts(10))
    assert not calls and c1.base is c3.base is not None  # appended: one buffer
    np.testing.assert_array_equal(c3, np.concatenate(parts(10), -1))
    a, b = parts(20), parts(30)
    a1, b1 = head(None, a[0], a[1], ax), head(None, b[0], b[1], ax)  # interleaved steps
    a2 = link(None, a1, a[2], ax)  # a1 is not the latest head's view: copies
    b2 = link(None, b1, b[2], ax)
    a3, b3 = last(None, a2, a[3], ax), last(None, b2, b[3], ax)
    np.testing.assert_array_equal(a3, np.concatenate(a, -1))
    np.testing.assert_array_equal(b3, np.concatenate(b, -1))
    np.testing.assert_array_equal(c3, np.concatenate(parts(10), -1))  # unchanged
    other = c1 + 1  # another array than the head's view, same shape
    h = head(None, *parts(40)[:2], ax)
    assert h.base is not None
    np.testing.assert_array_equal(link(None, other, parts(40)[2], ax),
                                  np.concatenate([other, parts(40)[2]], -1))
