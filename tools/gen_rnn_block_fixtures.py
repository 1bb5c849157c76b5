#!/usr/bin/env python3
"""TensorFlow's values and gradients of the fused RNN cells (LSTMBlockCell, BlockLSTM,
BlockLSTMV2, GRUBlockCell and their Grad ops), for tests/test_rnn_block_ops.py.
NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_rnn_block_fixtures.py

Writes tests/fixtures/rnn_block/: per case `<case>.pb` (the forward graph: placeholders, the
op, Identity `out_<k>` of each output and a scalar `loss` over cs and h) and, for a case with
gradients, `<case>_grad.pb` (the same plus TensorFlow's `tf.gradients` of loss, which emits the
Grad op, fetched as Identity `tfgrad_<input>`); `<case>.npz` (`feed/<placeholder>`,
`out/<k>`, `grad/<input>`); cases.json (per case: feeds, outputs, xs, tolerances).

BlockLSTM's steps from seq_len_max on: TensorFlow zeroes cs and h there but leaves i, f, o, ci
and co as the memory held (tfg writes zeros), so tests compare those outputs up to
seq_len_max only. In float16 it leaves even more unset: the half case runs every step.

TensorFlow 2 registers no gradient for LSTMBlockCell and GRUBlockCell; the ones registered
below are TF1's (tf.contrib.rnn lstm_ops.py and gru_ops.py), the functions that emitted
LSTMBlockCellGrad and GRUBlockCellGrad.
"""
import json
import os
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir  # noqa: E402
from tensorflow.python.framework import ops  # noqa: E402

OUT = fixture_dir("rnn_block")
R = tf.raw_ops
v1 = tf.compat.v1
LSTM_INPUTS = ("x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b")
LSTM_OUTPUTS = ("i", "cs", "f", "o", "ci", "co", "h")


# --- TF1's gradients of the one-step cells (tf.contrib.rnn) ----------------------------------
def _lstm_block_cell_grad(op, *grad):
    """tf.contrib.rnn.python.ops.lstm_ops._LSTMBlockCellGrad."""
    x, cs_prev, h_prev, w, wci, wcf, wco, b = op.inputs
    i, cs, f, o, ci, co, _ = op.outputs
    _, cs_grad, _, _, _, _, h_grad = grad
    batch_size = tf.shape(x)[0]
    input_size = x.shape[1]
    cell_size = cs_prev.shape[1]
    cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad = R.LSTMBlockCellGrad(
        x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci, wcf=wcf, wco=wco, b=b, i=i, cs=cs,
        f=f, o=o, ci=ci, co=co, cs_grad=cs_grad, h_grad=h_grad,
        use_peephole=op.get_attr("use_peephole"))
    xh_grad = tf.matmul(dicfo, w, transpose_b=True)
    x_grad = tf.slice(xh_grad, (0, 0), tf.stack([batch_size, input_size]))
    h_prev_grad = tf.slice(xh_grad, (0, input_size), tf.stack([batch_size, cell_size]))
    xh = tf.concat([x, h_prev], 1)
    w_grad = tf.matmul(xh, dicfo, transpose_a=True)
    b_grad = R.BiasAddGrad(out_backprop=dicfo)
    return (x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, wco_grad, b_grad)


def _gru_block_cell_grad(op, *grad):
    """tf.contrib.rnn.python.ops.gru_ops._GRUBlockCellGrad."""
    x, h_prev, w_ru, w_c, b_ru, b_c = op.inputs
    r, u, c, _ = op.outputs
    _, _, _, d_h = grad
    d_x, d_h_prev, d_c_bar, d_r_bar_u_bar = R.GRUBlockCellGrad(
        x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c, r=r, u=u, c=c, d_h=d_h)
    x_h_prev = tf.concat([x, h_prev], 1)
    d_w_ru = tf.matmul(x_h_prev, d_r_bar_u_bar, transpose_a=True)
    d_b_ru = R.BiasAddGrad(out_backprop=d_r_bar_u_bar)
    x_h_prevr = tf.concat([x, h_prev * r], 1)
    d_w_c = tf.matmul(x_h_prevr, d_c_bar, transpose_a=True)
    d_b_c = R.BiasAddGrad(out_backprop=d_c_bar)
    return d_x, d_h_prev, d_w_ru, d_w_c, d_b_ru, d_b_c


for _name, _fn in (("LSTMBlockCell", _lstm_block_cell_grad),
                   ("GRUBlockCell", _gru_block_cell_grad)):
    try:
        ops.RegisterGradient(_name)(_fn)
    except KeyError:  # a later TensorFlow registers its own
        pass


# --- inputs --------------------------------------------------------------------------------
def lstm_inputs(rng, batch, input_size, cell, dtype, timelen=None, scale=1.0):
    xs = (timelen, batch, input_size) if timelen is not None else (batch, input_size)
    v = {"x": rng.standard_normal(xs) * scale,
         "cs_prev": rng.standard_normal((batch, cell)),
         "h_prev": rng.standard_normal((batch, cell)),
         "w": rng.standard_normal((input_size + cell, 4 * cell)) * 0.6,
         "wci": rng.standard_normal(cell) * 0.5, "wcf": rng.standard_normal(cell) * 0.5,
         "wco": rng.standard_normal(cell) * 0.5, "b": rng.standard_normal(4 * cell) * 0.3}
    return {k: a.astype(dtype) for k, a in v.items()}


def gru_inputs(rng, batch, input_size, cell):
    v = {"x": rng.standard_normal((batch, input_size)),
         "h_prev": rng.standard_normal((batch, cell)),
         "w_ru": rng.standard_normal((input_size + cell, 2 * cell)) * 0.6,
         "w_c": rng.standard_normal((input_size + cell, cell)) * 0.6,
         "b_ru": rng.standard_normal(2 * cell) * 0.3, "b_c": rng.standard_normal(cell) * 0.3}
    return {k: a.astype(np.float32) for k, a in v.items()}


# --- one case ------------------------------------------------------------------------------
def build(name, op, arrays, attrs, out_names, loss_outputs, grad_xs, tol, index):
    """Write `name`'s graphs and arrays: op(**placeholders, **attrs), its outputs, loss =
    sum(weight_k * out_k) over loss_outputs, and TensorFlow's gradients of loss by grad_xs."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    g = tf.Graph()
    with g.as_default():
        phs = {k: v1.placeholder(tf.as_dtype(a.dtype), shape=a.shape, name=k)
               for k, a in arrays.items()}
        outs = op(**phs, **attrs)
        fetch = [tf.identity(t, name=f"out_{k}") for k, t in zip(out_names, outs)]
        terms = []
        weights = {}
        for k in loss_outputs:
            t = outs[out_names.index(k)]
            wk = rng.uniform(0.5, 1.5, t.shape).astype(t.dtype.as_numpy_dtype)
            weights[k] = wk
            terms.append(tf.reduce_sum(tf.cast(t * wk, tf.float32)))
        loss = tf.add_n(terms, name="loss") if terms else None
        fwd_def = g.as_graph_def()
        grads = tf.gradients(loss, [phs[x] for x in grad_xs]) if grad_xs else []
        grad_fetch = [tf.identity(t, name=f"tfgrad_{x}") for x, t in zip(grad_xs, grads)]
        with v1.Session() as s:
            vals = s.run(fetch + grad_fetch + ([loss] if loss is not None else []),
                         {phs[k]: a for k, a in arrays.items()})
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
        f.write(fwd_def.SerializeToString())
    if grad_xs:
        with open(os.path.join(OUT, f"{name}_grad.pb"), "wb") as f:
            f.write(g.as_graph_def().SerializeToString())
    npz = {f"feed/{k}": a for k, a in arrays.items()}
    npz.update({f"out/{k}": v for k, v in zip(out_names, vals)})
    npz.update({f"grad/{x}": v for x, v in zip(grad_xs, vals[len(fetch):])})
    np.savez_compressed(os.path.join(OUT, f"{name}.npz"), **npz)
    grad_ops = sorted({o.type for o in g.get_operations() if o.type.endswith("Grad")
                       or o.type.endswith("GradV2")})
    index[name] = {"outputs": list(out_names), "xs": list(grad_xs), "rtol": tol[0],
                   "atol": tol[1], "grad_ops": grad_ops}
    print(name, [tuple(v.shape) for v in vals], grad_ops)


def lstm_cell_case(index, name, rng, dtype, attrs, tol, batch=3, input_size=4, cell=5,
                   scale=1.0):
    arrays = lstm_inputs(rng, batch, input_size, cell, dtype, scale=scale)
    xs = list(LSTM_INPUTS) if attrs.get("use_peephole") else ["x", "cs_prev", "h_prev", "w",
                                                               "b"]
    build(name, R.LSTMBlockCell, arrays, attrs, LSTM_OUTPUTS, ("cs", "h"), xs, tol, index)


def block_case(index, name, rng, op, dtype, attrs, seq, tol, timelen=5, batch=2, input_size=3,
               cell=4, grads=True):
    arrays = {"seq_len_max": np.int64(seq)}
    arrays.update(lstm_inputs(rng, batch, input_size, cell, dtype, timelen=timelen))
    xs = [k for k in LSTM_INPUTS if attrs.get("use_peephole") or not k.startswith("wc")]
    build(name, op, arrays, attrs, LSTM_OUTPUTS, ("cs", "h"), xs if grads else [], tol, index)


def grad_op_cases(index, rng):
    """The Grad ops run directly on TensorFlow's forward values and random incoming
    gradients (BlockLSTMGradV2 is emitted by no TensorFlow gradient)."""
    for fwd, bwd, peep in (("BlockLSTMV2", "BlockLSTMGradV2", True),
                           ("BlockLSTM", "BlockLSTMGrad", True),
                           ("BlockLSTMV2", "BlockLSTMGradV2", False)):
        arrays = {"seq_len_max": np.int64(3)}
        arrays.update(lstm_inputs(rng, 2, 3, 4, np.float32, timelen=4))
        with tf.Graph().as_default(), v1.Session() as s:
            outs = s.run(getattr(R, fwd)(**arrays, use_peephole=peep, cell_clip=0.0))
        arrays.update(dict(zip(LSTM_OUTPUTS, outs)))
        arrays["cs_grad"] = rng.standard_normal(outs[0].shape).astype(np.float32)
        arrays["h_grad"] = rng.standard_normal(outs[0].shape).astype(np.float32)
        name = f"{bwd}_direct" + ("" if peep else "_nopeep")
        build(name, getattr(R, bwd), arrays, {"use_peephole": peep},
              ("x_grad", "cs_prev_grad", "h_prev_grad", "w_grad", "wci_grad", "wcf_grad",
               "wco_grad", "b_grad"), (), [], (1e-5, 1e-5), index)
    arrays = lstm_inputs(rng, 3, 2, 3, np.float32)
    with tf.Graph().as_default(), v1.Session() as s:
        outs = s.run(R.LSTMBlockCell(**arrays, use_peephole=False))
    arrays.update(dict(zip(LSTM_OUTPUTS[:6], outs[:6])))
    arrays["cs_grad"] = rng.standard_normal(outs[0].shape).astype(np.float32)
    arrays["h_grad"] = rng.standard_normal(outs[0].shape).astype(np.float32)
    build("LSTMBlockCellGrad_direct_nopeep", R.LSTMBlockCellGrad, arrays,
          {"use_peephole": False},
          ("cs_prev_grad", "dicfo", "wci_grad", "wcf_grad", "wco_grad"), (), [], (1e-5, 1e-5),
          index)
    arrays = gru_inputs(rng, 3, 4, 2)
    with tf.Graph().as_default(), v1.Session() as s:
        outs = s.run(R.GRUBlockCell(**arrays))
    arrays.update(dict(zip(("r", "u", "c"), outs[:3])))
    arrays["d_h"] = rng.standard_normal(outs[0].shape).astype(np.float32)
    build("GRUBlockCellGrad_direct", R.GRUBlockCellGrad, arrays, {},
          ("d_x", "d_h_prev", "d_c_bar", "d_r_bar_u_bar"), (), [], (1e-5, 1e-5), index)


def lstm_loop_case(index, rng, timelen=6, batch=2, input_size=3, cell=4):
    """A TF1 RNN as DeepSpeech-era code built it without tf.contrib: tf.compat.v1.while_loop
    over time, a TensorArray of the inputs and one of the outputs, LSTMBlockCell each step."""
    arrays = lstm_inputs(rng, batch, input_size, cell, np.float32, timelen=timelen)
    for k in ("cs_prev", "h_prev", "wci", "wcf", "wco"):
        arrays.pop(k)

    def rnn(x, w, b):
        inputs = tf.TensorArray(tf.float32, size=timelen).unstack(x)
        outputs = tf.TensorArray(tf.float32, size=timelen)
        zeros = tf.zeros([tf.shape(x)[1], cell])
        peep = tf.zeros([cell])

        def body(t, cs, h, out):
            step = R.LSTMBlockCell(x=inputs.read(t), cs_prev=cs, h_prev=h, w=w, wci=peep,
                                   wcf=peep, wco=peep, b=b, forget_bias=1.0, cell_clip=-1.0)
            return t + 1, step[1], step[6], out.write(t, step[6])

        _, cs, h, out = v1.while_loop(lambda t, *_: t < timelen, body,
                                      [tf.constant(0), zeros, zeros, outputs])
        return [out.stack(), cs, h]

    build("lstm_while_loop", rnn, arrays, {}, ("h_seq", "cs", "h"), ("h_seq", "cs"),
          ["x", "w", "b"], (1e-5, 1e-5), index)


def main():
    os.makedirs(OUT, exist_ok=True)
    v1.disable_eager_execution()
    v1.disable_control_flow_v2()  # TF1's Enter/Exit loops, as TF1 models were saved
    rng = np.random.default_rng(45)
    index = {}
    f32, f16 = (1e-5, 1e-5), (1e-2, 1e-2)
    lstm_cell_case(index, "lstm_cell_peephole", rng, np.float32,
                   {"use_peephole": True, "forget_bias": 0.5, "cell_clip": -1.0}, f32)
    # the defaults: no peepholes, forget_bias 1, cs clipped to [-3, 3] (large inputs clip it)
    lstm_cell_case(index, "lstm_cell_defaults_clipped", rng, np.float32, {}, f32, scale=4.0)
    lstm_cell_case(index, "lstm_cell_size1", rng, np.float32, {"use_peephole": True}, f32,
                   batch=1, input_size=1, cell=1)
    lstm_cell_case(index, "lstm_cell_half", rng, np.float16,
                   {"use_peephole": True, "cell_clip": 1.0}, f16)
    block_case(index, "block_lstm_peephole_short", rng, R.BlockLSTM, np.float32,
               {"use_peephole": True, "forget_bias": 0.7, "cell_clip": 1.5}, 3, f32)
    block_case(index, "block_lstm_defaults", rng, R.BlockLSTM, np.float32, {}, 5, f32)
    block_case(index, "block_lstm_zero_steps", rng, R.BlockLSTM, np.float32, {}, 0, f32)
    block_case(index, "block_lstm_empty_time", rng, R.BlockLSTM, np.float32, {}, 0, f32,
               timelen=0, grads=False)
    block_case(index, "block_lstm_half", rng, R.BlockLSTM, np.float16,
               {"use_peephole": True}, 5, f16)  # TF leaves steps past seq_len_max unset in half
    block_case(index, "block_lstm_v2_peephole", rng, R.BlockLSTMV2, np.float32,
               {"use_peephole": True, "cell_clip": 0.8}, 4, f32)
    block_case(index, "block_lstm_v2_defaults", rng, R.BlockLSTMV2, np.float32, {}, 5, f32)
    build("gru_cell", R.GRUBlockCell, gru_inputs(rng, 3, 4, 5), {}, ("r", "u", "c", "h"),
          ("h",), ["x", "h_prev", "w_ru", "w_c", "b_ru", "b_c"], f32, index)
    build("gru_cell_empty_batch", R.GRUBlockCell, gru_inputs(rng, 0, 2, 3), {},
          ("r", "u", "c", "h"), (), [], f32, index)
    grad_op_cases(index, rng)
    lstm_loop_case(index, rng)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
