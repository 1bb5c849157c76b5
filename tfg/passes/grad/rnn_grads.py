"""Gradients of the fused RNN cells (signatures in tfg/schemas/ops/rnn_ops.py).

BlockLSTM: TensorFlow's tensorflow/python/ops/rnn_grad.py, one BlockLSTMGrad. BlockLSTMV2:
BlockLSTMGradV2, its true backward. TensorFlow registers BlockLSTM's function for V2 too, so
its V2 gradient applies the ICFO layout to V2's IFCO weights (the f and c gate columns of
w_grad and b_grad trade places, x_grad and h_prev_grad are off accordingly: wrong by finite
differences); tfg's `grad` gives the correct one, so it differs from `tf.gradients` there.

LSTMBlockCell and GRUBlockCell: TensorFlow 2 registers no gradient; these are TF1's
(tf.contrib.rnn's lstm_ops.py and gru_ops.py, which registered them): the cell's backward op,
then the weight, bias and input gradients from its gate gradients with MatMul, BiasAddGrad and
Slice. As there, only cs and h (LSTM) or h (GRU) pass a gradient back; a loss reading a gate
output (i, f, o, ci, co; r, u, c) gets none through it.
"""
import numpy as np

from tfg.passes.grad.registry import gradient
from tfg.schemas.dtypes import DType


def _peephole_attr(op):
    return {"use_peephole": bool(op.attr("use_peephole", False))}


@gradient("BlockLSTM", "BlockLSTMV2")
def _block_lstm(b, op, grads):
    cs_grad, h_grad = grads[1], grads[6]
    backward = "BlockLSTMGradV2" if op.type == "BlockLSTMV2" else "BlockLSTMGrad"
    g = b.op(backward, list(op.inputs) + list(op.outputs) + [cs_grad, h_grad],
             _peephole_attr(op))
    return [None] + [b.out(g, k) for k in range(8)]


def _split_columns(b, t, left, right):
    """t[:, :cols(left)] and t[:, cols(left):], shaped like left and right (Slice nodes)."""
    i32 = DType.INT32
    left_shape = b.shape(left)
    begin = b.op("Mul", [left_shape, b.const(np.int32([0, 1]), i32)])  # [0, cols(left)]
    return (b.op("Slice", [t, b.const(np.int32([0, 0]), i32), left_shape]),
            b.op("Slice", [t, begin, b.shape(right)]))


@gradient("LSTMBlockCell")
def _lstm_block_cell(b, op, grads):
    x, cs_prev, h_prev, w, wci, wcf, wco, bias = op.inputs
    i, cs, f, o, ci, co, _ = op.outputs
    cs_grad, h_grad = grads[1], grads[6]
    g = b.op("LSTMBlockCellGrad", [x, cs_prev, h_prev, w, wci, wcf, wco, bias,
                                   i, cs, f, o, ci, co, cs_grad, h_grad], _peephole_attr(op))
    dicfo = b.out(g, 1)
    xh_grad = b.op("MatMul", [dicfo, w], {"transpose_a": False, "transpose_b": True})
    x_grad, h_prev_grad = _split_columns(b, xh_grad, x, h_prev)
    xh = b.op("ConcatV2", [x, h_prev, b.const(1, DType.INT32)])
    w_grad = b.op("MatMul", [xh, dicfo], {"transpose_a": True, "transpose_b": False})
    b_grad = b.op("BiasAddGrad", [dicfo])
    return [x_grad, b.out(g, 0), h_prev_grad, w_grad, b.out(g, 2), b.out(g, 3), b.out(g, 4),
            b_grad]


@gradient("GRUBlockCell")
def _gru_block_cell(b, op, grads):
    x, h_prev, w_ru, w_c, b_ru, b_c = op.inputs
    r, u, c, _ = op.outputs
    g = b.op("GRUBlockCellGrad", [x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, grads[3]])
    d_c_bar, d_r_bar_u_bar = b.out(g, 2), b.out(g, 3)
    axis = b.const(1, DType.INT32)
    x_h_prev = b.op("ConcatV2", [x, h_prev, axis])
    d_w_ru = b.op("MatMul", [x_h_prev, d_r_bar_u_bar], {"transpose_a": True,
                                                        "transpose_b": False})
    d_b_ru = b.op("BiasAddGrad", [d_r_bar_u_bar])
    x_h_prevr = b.op("ConcatV2", [x, b.op("Mul", [h_prev, r]), axis])
    d_w_c = b.op("MatMul", [x_h_prevr, d_c_bar], {"transpose_a": True, "transpose_b": False})
    d_b_c = b.op("BiasAddGrad", [d_c_bar])
    return [b.out(g, 0), b.out(g, 1), d_w_ru, d_w_c, d_b_ru, d_b_c]
