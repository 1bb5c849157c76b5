"""Direct calls of ConcatV2, Slice, AddN, TensorArrayReadV3, TensorArrayWriteV3 and
TensorArrayGradV3 in compiled loop bodies (tfg/executor/loop_array_calls.py): the compiled
loop takes them (a test that fails if they silently stop applying), their values are the
node-by-node executor's and numpy's, a Slice whose begin changes each iteration reads each
iteration's, and what they do not take (shapes that do not match, an entry read twice, a
slice out of range) is the kernel's own error, naming the node."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor import Session
from tfg.schemas.dtypes import DType

F64 = DType.FLOAT
T, R, C = 5, 4, 6


def _loop_graph(read_twice=False, slice_at=0, concat_rows=R):
    """A TF1-style loop over an input TensorArray of x's T rows [R, C]:
        x_t = read(in, i); a = Slice(x_t, [0, 1], [-1, 3]); b = Slice(x_t, [0, i % 3 +
        slice_at], [R, 3]); c = ConcatV2([a, b[:concat_rows]], 1); acc' = AddN(c, x_t, acc);
        write(out, i, acc')
    then out gathered. `read_twice`: x_t read a second time (cleared after the first);
    `slice_at`: moves b's begin (3 is out of range at i % 3 == 2)."""
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [T, R, C], name="x")
        n = tb.constant(T)
        ta_in, flow_in = g.make_op("TensorArrayV3", [n], {"dtype": F64}, "in",
                                   out_dtypes=[DType.RESOURCE, F64]).outputs
        flow_in = g.make_op("TensorArrayScatterV3", [ta_in, tb.range(0, T), x, flow_in],
                            {"T": F64}, "scatter", out_dtypes=[F64]).outputs[0]
        ta_out, flow_out = g.make_op("TensorArrayV3", [n], {"dtype": F64}, "out",
                                     out_dtypes=[DType.RESOURCE, F64]).outputs

        def body(i, acc, flow):
            x_t = g.make_op("TensorArrayReadV3", [ta_in, i, flow_in], {"dtype": F64}, "x_t",
                            out_dtypes=[F64]).outputs[0]
            if read_twice:
                x_t = tb.add(x_t, g.make_op("TensorArrayReadV3", [ta_in, i, flow_in],
                                            {"dtype": F64}, "again", out_dtypes=[F64]).outputs[0])
            a = g.make_op("Slice", [x_t, tb.constant(np.array([0, 1], np.int32)),
                                    tb.constant(np.array([-1, 3], np.int32))],
                          {"T": F64, "Index": DType.INT32}, "a", out_dtypes=[F64]).outputs[0]
            begin = tb.stack([tb.constant(0), tb.add(tb.floormod(i, 3), slice_at)])
            b = g.make_op("Slice", [x_t, begin, tb.constant(np.array([R, 3], np.int32))],
                          {"T": F64, "Index": DType.INT32}, "b", out_dtypes=[F64]).outputs[0]
            if concat_rows != R:
                b = tb.reshape(tb.tile(b, [2, 1]), [2 * R, 3])
            c = g.make_op("ConcatV2", [a, b, tb.constant(1)],
                          {"T": F64, "N": 2, "Tidx": DType.INT32}, "c",
                          out_dtypes=[F64]).outputs[0]
            acc2 = g.make_op("AddN", [c, x_t, acc], {"T": F64, "N": 3}, "sum",
                             out_dtypes=[F64]).outputs[0]
            flow = g.make_op("TensorArrayWriteV3", [ta_out, i, acc2, flow], {"T": F64},
                             "write", out_dtypes=[F64]).outputs[0]
            return i + 1, acc2, flow

        _, _, flow = tb.while_loop(lambda i, acc, flow: i < T, body,
                                   [tb.constant(0), tb.zeros([R, C], tb.float32), flow_out],
                                   name="loop")
        g.make_op("TensorArrayGatherV3", [ta_out, tb.range(0, T), flow],
                  {"dtype": F64}, "ys", out_dtypes=[F64])
    return g.graph


def _reference(x):
    acc, ys = np.zeros((R, C), np.float32), []
    for i in range(T):
        xt = x[i]
        c = np.concatenate([xt[:, 1:4], xt[:, i % 3:i % 3 + 3]], axis=1)
        acc = c + xt + acc
        ys.append(acc)
    return np.stack(ys)


def _x():
    return np.random.default_rng(0).standard_normal((T, R, C)).astype(np.float32)


def _direct_names(sess):
    return {getattr(c, "__name__", "") for prepared in sess.backend._cache.values()
            for plan in prepared.plans for prog in (plan.loops or {}).values()
            for c, _ in prog.body_rest}


def test_values_are_the_node_by_node_executors_and_numpys():
    x = _x()
    sess = Session(_loop_graph())
    got = [sess.run("ys", {"x": x}) for _ in range(2)]
    assert {"concat", "sliced", "addn", "read", "write"} <= _direct_names(sess)
    plain = Session(_loop_graph(), fast_path=False).run("ys", {"x": x})
    for g in got:
        np.testing.assert_array_equal(g, plain)
        np.testing.assert_allclose(g, _reference(x), rtol=1e-6)


# (the two reads of one index run in either order: the second is named)
@pytest.mark.parametrize("kw, words, nodes", [
    ({"read_twice": True}, "Could not read index 0 twice because it was cleared",
     ("'loop/again'", "'loop/x_t'")),
    ({"slice_at": 2}, "Expected begin[1] in [0, 6] and size[1] in [0,", ("'loop/b'",)),
    ({"concat_rows": 2 * R}, "ConcatOp: dimensions of inputs should match", ("'loop/c'",)),
])
def test_what_the_direct_calls_do_not_take_is_the_kernels_error(kw, words, nodes):
    sess = Session(_loop_graph(**kw))
    with pytest.raises(TfgRuntimeError) as e:
        sess.run("ys", {"x": _x()})
    assert words in str(e.value) and any(n in str(e.value) for n in nodes), str(e.value)
    assert {"concat", "sliced", "read"} <= _direct_names(sess)


def test_tensorflows_lstm_gradient_loop_takes_the_direct_calls():
    """TensorFlow's own gradient graph of a `dynamic_rnn` LSTM (tests/fixtures/tensor_array):
    its loops' TensorArray reads, writes and gradient arrays and the gradient's Slices and
    ConcatV2 run as direct calls, with the dataflow executor's values and TensorFlow's."""
    import json

    from conftest import FIXTURES
    from tfg.graphdef import io

    folder = FIXTURES / "tensor_array"
    entry = json.loads((folder / "cases.json").read_text())["lstm"]
    arrays = dict(np.load(folder / "lstm.npz"))
    feeds = {k[len("feed/"):]: v for k, v in arrays.items() if k.startswith("feed/")}
    graph = io.load(str(folder / "lstm_tfgrad.pb"))
    sess = Session(graph)
    got = sess.run(entry["tf_grads"], feeds)
    assert {"read", "write", "grad", "sliced", "concat"} <= _direct_names(sess)
    plain = Session(graph, fast_path=False).run(entry["tf_grads"], feeds)
    for x, a, b in zip(entry["xs"], got, plain):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(a, arrays[f"grad/{x}"], rtol=1e-5, atol=1e-5)


def _push_pop_graph(pops=T, steps=T, length_read=False):
    """A TF2 gradient loop's lists: a forward loop pushes x_t * 2 (t = i mod T) `steps`
    times onto a TensorList, a second loop pops `pops` items and sums them (more pops than
    pushes: the empty list's error). `length_read`: the forward body also reads the list
    (its length, added to a counter), so its pushes cannot change it in place."""
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [T, R, C], name="x")
        shape = tb.constant(np.array([R, C], np.int32))
        empty = g.make_op("EmptyTensorList", [shape, tb.constant(-1)],
                          {"element_dtype": F64, "shape_type": DType.INT32}, "empty",
                          out_dtypes=[DType.VARIANT]).outputs[0]

        def push(i, lst, n):
            if length_read:
                n = tb.add(n, g.make_op("TensorListLength", [lst], {}, "length",
                                        out_dtypes=[DType.INT32]).outputs[0])
            item = tb.multiply(tb.gather(x, tb.floormod(i, T)), 2.0)
            lst = g.make_op("TensorListPushBack", [lst, item], {"element_dtype": F64}, "push",
                            out_dtypes=[DType.VARIANT]).outputs[0]
            return i + 1, lst, n

        _, lst, n = tb.while_loop(lambda i, lst, n: i < steps, push,
                                  [tb.constant(0), empty, tb.constant(0)], name="fwd")

        def pop(i, lst, acc):
            lst, item = g.make_op("TensorListPopBack", [lst, shape], {"element_dtype": F64},
                                  "pop", out_dtypes=[DType.VARIANT, F64]).outputs
            return i + 1, lst, tb.add(acc, item)

        _, _, acc = tb.while_loop(lambda i, lst, acc: i < pops, pop,
                                  [tb.constant(0), lst, tb.zeros([R, C], tb.float32)],
                                  name="bwd")
        tb.identity(acc, name="total")
        tb.identity(n, name="lengths")
    return g.graph


def _list_copies(monkeypatch):
    """[count]: the lists made by TensorList.with_items (a push or pop's new list)."""
    from tfg.kernels.list_ops import TensorList
    made, real = [0], TensorList.with_items

    def counted(self, items):
        made[0] += 1
        return real(self, items)
    monkeypatch.setattr(TensorList, "with_items", counted)
    return made


@pytest.mark.parametrize("length_read", [False, True])
def test_list_pushes_and_pops_are_made_in_place(length_read, monkeypatch):
    """50 pushes and 50 pops a run: changed in place from the second iteration of each run
    (6 new lists a run, not one a push or pop: no n^2 copies), unless the body reads the list
    too (then its pushes make a list each); the values the dataflow executor's and numpy's
    in every run."""
    x = _x()
    sess = Session(_push_pop_graph(pops=50, steps=50, length_read=length_read))
    sess.run("total", {"x": x})
    made = _list_copies(monkeypatch)
    got = [sess.run(["total", "lengths"], {"x": x}) for _ in range(2)]
    names = _direct_names(sess)
    if length_read:
        assert "push" in names and "write" in names and made[0] >= 2 * 50
    else:
        # (a run: the first iteration's push and pop, the second's and their copies)
        assert made[0] <= 2 * 6 and {"push", "pop"}.isdisjoint(names)
    plain = Session(_push_pop_graph(pops=50, steps=50, length_read=length_read),
                    fast_path=False).run(["total", "lengths"], {"x": x})
    want = 2 * sum(x[t % T] for t in range(50))
    for total, lengths in got:
        np.testing.assert_array_equal(total, plain[0])
        np.testing.assert_allclose(total, want, rtol=1e-5)
        assert lengths == plain[1] == (sum(range(50)) if length_read else 0)


def test_a_pop_from_an_empty_list_is_the_kernels_error():
    sess = Session(_push_pop_graph(pops=T + 1))
    with pytest.raises(TfgRuntimeError) as e:
        sess.run("total", {"x": _x()})
    assert "Trying to pop from an empty list." in str(e.value) and "'bwd/pop'" in str(e.value)


def test_an_identity_n_in_a_loop_body_shares_its_inputs_slots():
    """IdentityN (a TF2 gradient loop forwards its loop values through one) runs no call:
    each output is its input's value."""
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [R, C], name="x")

        def body(i, a, b):
            a2, b2 = g.make_op("IdentityN", [tb.add(a, x), tb.multiply(b, 2.0)],
                               {"T": [F64, F64]}, "both", out_dtypes=[F64, F64]).outputs
            return i + 1, a2, b2

        _, a, b = tb.while_loop(lambda i, a, b: i < T, body,
                                [tb.constant(0), tb.zeros([R, C], tb.float32),
                                 tb.ones([R, C], tb.float32)], name="loop")
        tb.identity(tb.add(a, b), name="out")
    sess = Session(g.graph)
    x = _x()[0]
    got = sess.run("out", {"x": x})
    ops = {it.op for prepared in sess.backend._cache.values() for plan in prepared.plans
           for prog in (plan.loops or {}).values() for _, it in prog.body_rest}
    assert ops and "IdentityN" not in ops
    np.testing.assert_allclose(got, T * x + 2.0 ** T, rtol=1e-6)
