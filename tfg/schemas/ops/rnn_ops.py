"""Signatures of TensorFlow's fused RNN cell ops (rnn_ops.cc): the LSTM cell of one step
(LSTMBlockCell, TF1's LSTMBlockCell), the LSTM over a whole sequence (BlockLSTM, TF1's
LSTMBlockFusedCell, and BlockLSTMV2 with the IFCO gate layout), the GRU cell (GRUBlockCell),
and the backward ops their gradients emit.

    >>> get_op("LSTMBlockCell").attrs["cell_clip"].default
    3.0
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, merge_dim, with_rank

_LSTM_IN = ["w: T", "wci: T", "wcf: T", "wco: T", "b: T"]
_LSTM_OUT = ["i: T", "cs: T", "f: T", "o: T", "ci: T", "co: T", "h: T"]
_HALF_FLOAT = "T: {half, float}"


# --- shape functions (TensorFlow's, from rnn_ops.cc) --------------------------------------
def _lstm_cell(ctx):
    """Seven [batch, cell_size] outputs: batch from x, cell_size from cs_prev."""
    x = with_rank(ctx.shape(0), 2, "x")
    cs_prev = with_rank(ctx.shape(1), 2, "cs_prev")
    return [(x[0], cs_prev[1])] * 7


def _lstm_cell_grad(ctx):
    """cs_prev_grad [batch, cell], dicfo [batch, 4 * cell], three [cell] peephole grads."""
    x = with_rank(ctx.shape(0), 2, "x")
    cell = with_rank(ctx.shape(1), 2, "cs_prev")[1]
    four = None if cell is None else 4 * cell
    return [(x[0], cell), (x[0], four), (cell,), (cell,), (cell,)]


def _block_lstm(ctx):
    """Seven [timelen, batch, cell_size] outputs; cell_size is b's length / 4."""
    x = with_rank(ctx.shape(1), 3, "x")
    b = with_rank(ctx.shape(ctx.num_inputs - 1), 1, "b")
    cell = None
    if b[0] is not None:
        if b[0] % 4:
            raise ShapeError(f"b's length {b[0]} is not divisible by 4")
        cell = b[0] // 4
    return [(x[0], x[1], cell)] * 7


def _block_lstm_grad(ctx):
    """Each gradient has the shape of its input (x, cs_prev, h_prev, w, wci, wcf, wco, b)."""
    ranks = (3, 2, 2, 2, 1, 1, 1, 1)
    names = ("x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b")
    return [with_rank(ctx.shape(i + 1), r, n) for i, (r, n) in enumerate(zip(ranks, names))]


def _gru_cell(ctx):
    """Four [batch, cell_size] outputs: batch from x, cell_size from h_prev."""
    x = with_rank(ctx.shape(0), 2, "x")
    h_prev = with_rank(ctx.shape(1), 2, "h_prev")
    return [(x[0], h_prev[1])] * 4


def _gru_cell_grad(ctx):
    """d_x like x, d_h_prev and d_c_bar [batch, cell], d_r_bar_u_bar [batch, 2 * cell]."""
    x = with_rank(ctx.shape(0), 2, "x")
    h_prev = with_rank(ctx.shape(1), 2, "h_prev")
    w_ru = with_rank(ctx.shape(2), 2, "w_ru")
    batch, cell = merge_dim(x[0], h_prev[0]), h_prev[1]
    return [x, (batch, cell), (batch, cell), (batch, w_ru[1])]


# --- LSTM ----------------------------------------------------------------------------------
op("LSTMBlockCell",
   inputs=["x: T", "cs_prev: T", "h_prev: T"] + _LSTM_IN,
   outputs=_LSTM_OUT,
   attrs=["forget_bias: float = 1.0", "cell_clip: float = 3.0", "use_peephole: bool = false",
          _HALF_FLOAT],
   shape_fn=_lstm_cell)
op("LSTMBlockCellGrad",
   inputs=["x: T", "cs_prev: T", "h_prev: T"] + _LSTM_IN
   + ["i: T", "cs: T", "f: T", "o: T", "ci: T", "co: T", "cs_grad: T", "h_grad: T"],
   outputs=["cs_prev_grad: T", "dicfo: T", "wci_grad: T", "wcf_grad: T", "wco_grad: T"],
   attrs=["use_peephole: bool", _HALF_FLOAT],
   shape_fn=_lstm_cell_grad)
op("BlockLSTM",
   inputs=["seq_len_max: int64", "x: T", "cs_prev: T", "h_prev: T"] + _LSTM_IN,
   outputs=_LSTM_OUT,
   attrs=["forget_bias: float = 1.0", "cell_clip: float = 3.0", "use_peephole: bool = false",
          _HALF_FLOAT],
   shape_fn=_block_lstm)
op("BlockLSTMV2",
   inputs=["seq_len_max: int64", "x: T", "cs_prev: T", "h_prev: T"] + _LSTM_IN,
   outputs=_LSTM_OUT,
   attrs=["cell_clip: float = 0.0", "use_peephole: bool = false", _HALF_FLOAT],
   shape_fn=_block_lstm)
for _name in ("BlockLSTMGrad", "BlockLSTMGradV2"):
    op(_name,
       inputs=["seq_len_max: int64", "x: T", "cs_prev: T", "h_prev: T"] + _LSTM_IN
       + [f"{o}: T" for o in ("i", "cs", "f", "o", "ci", "co", "h")]
       + ["cs_grad: T", "h_grad: T"],
       outputs=["x_grad: T", "cs_prev_grad: T", "h_prev_grad: T", "w_grad: T", "wci_grad: T",
                "wcf_grad: T", "wco_grad: T", "b_grad: T"],
       attrs=["use_peephole: bool", _HALF_FLOAT],
       shape_fn=_block_lstm_grad)

# --- GRU -----------------------------------------------------------------------------------
op("GRUBlockCell",
   inputs=["x: T", "h_prev: T", "w_ru: T", "w_c: T", "b_ru: T", "b_c: T"],
   outputs=["r: T", "u: T", "c: T", "h: T"],
   attrs=["T: {float}"],
   shape_fn=_gru_cell)
op("GRUBlockCellGrad",
   inputs=["x: T", "h_prev: T", "w_ru: T", "w_c: T", "b_ru: T", "b_c: T", "r: T", "u: T",
           "c: T", "d_h: T"],
   outputs=["d_x: T", "d_h_prev: T", "d_c_bar: T", "d_r_bar_u_bar: T"],
   attrs=["T: {float}"],
   shape_fn=_gru_cell_grad)
