"""CPU kernels of TensorFlow's fused RNN cells (tensorflow/core/kernels/rnn/lstm_ops.cc,
gru_ops.cc): LSTMBlockCell, BlockLSTM(V2), GRUBlockCell and their backward ops.

    i, cs, f, o, ci, co, h = LSTMBlockCell(x, cs_prev, h_prev, w, wci, wcf, wco, b)

The gates come from one GEMM, [x, h_prev] @ w + b, split in TensorFlow's gate layout: ICFO
(input, cell input, forget, output) for LSTMBlockCell and BlockLSTM, IFCO for BlockLSTMV2 (which
also has no forget_bias). The backward ops compute what TensorFlow's do, which ignores the cell
clip (the gradient flows through a clipped cs as if unclipped).

float16 (the LSTM ops' other type) is computed as Eigen does on the CPU: every elementwise step
rounds to half; the GEMMs accumulate in float32 and round once.
"""
import numpy as np

from tfg.kernels._util import errstate, fail
from tfg.kernels.registry import kernel

_F32 = np.float32
# Offsets, in cell_size units, of the i, c (cell input), f and o gates in the GEMM's output.
_ICFO = {"i": 0, "c": 1, "f": 2, "o": 3}
_IFCO = {"i": 0, "f": 1, "c": 2, "o": 3}


# --- arithmetic in the op's dtype ----------------------------------------------------------
def _sigmoid(x):
    """The logistic function, computed in float32 and rounded to x's dtype."""
    v = x.astype(_F32, copy=False)
    e = np.exp(-np.abs(v))  # exp of a non-positive number: never overflows
    return np.where(v >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _tanh(x):
    return np.tanh(x.astype(_F32, copy=False)).astype(x.dtype, copy=False)


def _gemm(a, b, transpose_a=False, transpose_b=False):
    """a @ b accumulated in float32 (Eigen's half GEMM on the CPU), in a's dtype."""
    a32, b32 = a.astype(_F32, copy=False), b.astype(_F32, copy=False)
    out = (a32.T if transpose_a else a32) @ (b32.T if transpose_b else b32)
    return out.astype(a.dtype, copy=False)


def _gate(gates, layout, name, cell):
    k = layout[name]
    return gates[:, k * cell:(k + 1) * cell]


def _one(x):
    return x.dtype.type(1)


# --- argument checks (TensorFlow's messages) -----------------------------------------------
def _rank(t, r, name):
    if t.ndim != r:
        fail(f"{name} must be rank {r} but is rank {t.ndim}")


def _dim(t, axis, want, what):
    if t.shape[axis] != want:
        fail(f"{what}: {t.shape[axis]} vs. {want}")


def _check_lstm(x, cs_prev, h_prev, w, wci, wcf, wco, b, peepholes_checked):
    """batch, input and cell sizes of one LSTM step's arguments, refusing mismatched ones."""
    for t, r, name in ((x, 2, "x"), (cs_prev, 2, "cs_prev"), (h_prev, 2, "h_prev"),
                       (w, 2, "w"), (b, 1, "b")):
        _rank(t, r, f"{name}_tensor")
    batch, input_size = x.shape
    cell = cs_prev.shape[1]
    _dim(cs_prev, 0, batch, "cs_prev.dims(0) != batch_size")
    _dim(h_prev, 0, batch, "h_prev.dims(0) != batch_size")
    _dim(h_prev, 1, cell, "h_prev.dims(1) != cell_size")
    _dim(w, 0, input_size + cell, "w.dim_size(0) != input_size + cell_size")
    _dim(w, 1, 4 * cell, "w.dim_size(1) != cell_size * 4")
    _dim(b, 0, 4 * cell, "b.dim_size(0) != cell_size * 4")
    if peepholes_checked:
        for t, name in ((wci, "wci"), (wcf, "wcf"), (wco, "wco")):
            _rank(t, 1, f"{name}_tensor")
            _dim(t, 0, cell, f"{name}.dim_size(0) != cell_size")
    return batch, input_size, cell


def _check_dtypes(*tensors):
    dt = tensors[0].dtype
    if dt not in (np.float16, np.float32):
        fail(f"fused RNN cells take float16 or float32, got {dt}")
    return dt


def _check_seq_len_max(seq_len_max, timelen):
    """seq_len_max as an int in [0, timelen] (TensorFlow aborts the process outside it)."""
    seq = np.asarray(seq_len_max)
    if seq.ndim != 0:
        fail(f"`seq_len_max_tensor` must be rank 0 but is rank {seq.ndim}")
    n = int(seq)
    if not 0 <= n <= timelen:
        fail(f"seq_len_max must be in [0, timelen = {timelen}], got {n}")
    return n


# --- LSTM, one step ------------------------------------------------------------------------
def _lstm_fprop(x, cs_prev, h_prev, w, wci, wcf, wco, b, forget_bias, cell_clip,
                use_peephole, layout):
    """(i, cs, f, o, ci, co, h) of one step, in TensorFlow's order of operations."""
    cell = cs_prev.shape[1]
    gates = _gemm(np.concatenate([x, h_prev], axis=1), w) + b
    i_in, f_in = _gate(gates, layout, "i", cell), _gate(gates, layout, "f", cell)
    f_in = f_in + x.dtype.type(forget_bias)
    if use_peephole:
        i_in, f_in = i_in + cs_prev * wci, f_in + cs_prev * wcf
    i, f = _sigmoid(i_in), _sigmoid(f_in)
    ci = _tanh(_gate(gates, layout, "c", cell))
    cs = i * ci + f * cs_prev
    if cell_clip > 0:
        clip = x.dtype.type(cell_clip)
        cs = np.clip(cs, -clip, clip)
    co = _tanh(cs)
    o_in = _gate(gates, layout, "o", cell)
    o = _sigmoid(o_in + cs * wco if use_peephole else o_in)
    return i, cs, f, o, ci, co, o * co


def _lstm_bprop(cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad, use_peephole,
                layout):
    """(cs_prev_grad, dgates, di, df, do) of one step (TensorFlow's LSTMBlockCellBprop)."""
    one = _one(o)
    do = o * (one - o) * h_grad * co
    dcs = (one - co * co) * h_grad * o + cs_grad
    if use_peephole:
        dcs = dcs + do * wco
    dci = (one - ci * ci) * dcs * i
    df = f * (one - f) * dcs * cs_prev
    di = i * (one - i) * dcs * ci
    cell = cs.shape[1]
    dgates = np.empty((cs.shape[0], 4 * cell), cs.dtype)
    for name, part in (("i", di), ("c", dci), ("f", df), ("o", do)):
        _gate(dgates, layout, name, cell)[...] = part
    cs_prev_grad = dcs * f
    if use_peephole:
        cs_prev_grad = cs_prev_grad + di * wci + df * wcf
    return cs_prev_grad, dgates, di, df, do


def _lstm_attrs(ctx):
    a = ctx.attrs
    return (float(a.get("forget_bias", 0.0)), float(a.get("cell_clip", 0.0)),
            bool(a["use_peephole"]))


@kernel("LSTMBlockCell")
def lstm_block_cell(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b):
    _check_dtypes(x)
    forget_bias, cell_clip, use_peephole = _lstm_attrs(ctx)
    _check_lstm(x, cs_prev, h_prev, w, wci, wcf, wco, b, use_peephole)
    if cs_prev.size == 0:
        fail(f"cs_prev_tensor is empty, has shape: {tuple(cs_prev.shape)}")
    with errstate(np, over="ignore", invalid="ignore"):
        return _lstm_fprop(x, cs_prev, h_prev, w, wci, wcf, wco, b, forget_bias, cell_clip,
                           use_peephole, _ICFO)


@kernel("LSTMBlockCellGrad")
def lstm_block_cell_grad(ctx, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co,
                         cs_grad, h_grad):
    _check_dtypes(x)
    use_peephole = bool(ctx.attrs["use_peephole"])
    batch, _, cell = _check_lstm(x, cs_prev, h_prev, w, wci, wcf, wco, b, use_peephole)
    for t, name in ((i, "i"), (cs, "cs"), (f, "f"), (o, "o"), (ci, "ci"), (co, "co"),
                    (cs_grad, "cs_grad"), (h_grad, "h_grad")):
        if t.shape != (batch, cell):
            fail(f"{name} must have shape [batch_size, cell_size] = {[batch, cell]}, "
                 f"got {list(t.shape)}")
    with errstate(np, over="ignore", invalid="ignore"):
        cs_prev_grad, dicfo, di, df, do = _lstm_bprop(cs_prev, wci, wcf, wco, i, cs, f, o, ci,
                                                      co, cs_grad, h_grad, use_peephole, _ICFO)
        peeps = _peephole_grads(di, df, do, cs_prev, cs, cell, use_peephole)
    return (cs_prev_grad, dicfo) + peeps


def _peephole_grads(di, df, do, cs_prev, cs, cell, use_peephole):
    """(wci_grad, wcf_grad, wco_grad) of one step: zeros without peepholes."""
    if not use_peephole:
        return tuple(np.zeros(cell, cs.dtype) for _ in range(3))
    return ((di * cs_prev).sum(axis=0), (df * cs_prev).sum(axis=0), (do * cs).sum(axis=0))


# --- LSTM over a sequence ------------------------------------------------------------------
def _check_block(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b):
    """(steps to run, batch, input size, cell size) of a BlockLSTM's arguments."""
    _check_dtypes(x)
    _rank(x, 3, "x")
    n = _check_seq_len_max(seq_len_max, x.shape[0])
    step_x = np.empty(x.shape[1:], x.dtype)  # one step's x, for its shape
    batch, input_size, cell = _check_lstm(step_x, cs_prev, h_prev, w, wci, wcf, wco, b, True)
    return n, batch, input_size, cell


@kernel(["BlockLSTM", "BlockLSTMV2"])
def block_lstm(ctx, seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b):
    n, batch, _, cell = _check_block(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b)
    forget_bias, cell_clip, use_peephole = _lstm_attrs(ctx)
    layout = _IFCO if ctx.node.op == "BlockLSTMV2" else _ICFO
    # Steps from seq_len_max on are zeros in every output.
    outs = [np.zeros((x.shape[0], batch, cell), x.dtype) for _ in range(7)]
    cs_t, h_t = cs_prev, h_prev
    with errstate(np, over="ignore", invalid="ignore"):
        for t in range(n):
            step = _lstm_fprop(x[t], cs_t, h_t, w, wci, wcf, wco, b, forget_bias, cell_clip,
                               use_peephole, layout)
            for out, value in zip(outs, step):
                out[t] = value
            cs_t, h_t = step[1], step[6]
    return tuple(outs)


@kernel(["BlockLSTMGrad", "BlockLSTMGradV2"])
def block_lstm_grad(ctx, seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci,
                    co, h, cs_grad, h_grad):
    n, batch, input_size, cell = _check_block(seq_len_max, x, cs_prev, h_prev, w, wci, wcf,
                                              wco, b)
    want = (x.shape[0], batch, cell)
    for t, name in ((i, "i"), (cs, "cs"), (f, "f"), (o, "o"), (ci, "ci"), (co, "co"),
                    (h, "h"), (cs_grad, "cs_grad"), (h_grad, "h_grad")):
        if t.shape != want:
            fail(f"{name} must have shape [timelen, batch_size, cell_size] = {list(want)}, "
                 f"got {list(t.shape)}")
    use_peephole = bool(ctx.attrs["use_peephole"])
    layout = _IFCO if ctx.node.op == "BlockLSTMGradV2" else _ICFO
    with errstate(np, over="ignore", invalid="ignore"):
        return _block_bprop(n, x, cs_prev, h_prev, w, wci, wcf, wco,
                            (i, cs, f, o, ci, co, h), cs_grad, h_grad, use_peephole, layout)


def _block_bprop(n, x, cs_prev, h_prev, w, wci, wcf, wco, fwd, cs_grad, h_grad, use_peephole,
                 layout):
    """TensorFlow's BlockLSTMGradOp: steps n-1 .. 0, each adding the later step's cs and h
    gradients to its own; x_grad is zero from step n on."""
    i, cs, f, o, ci, co, h = fwd
    dt, cell, input_size = x.dtype, cs_prev.shape[1], x.shape[2]
    x_grad = np.zeros_like(x)
    w_grad = np.zeros(w.shape, dt)
    b_grad = np.zeros(4 * cell, dt)
    peep_grads = [np.zeros(cell, dt) for _ in range(3)]
    cs_prev_grad, h_prev_grad = np.zeros_like(cs_prev), np.zeros_like(h_prev)
    for t in range(n - 1, -1, -1):
        cs_before = cs_prev if t == 0 else cs[t - 1]
        h_before = h_prev if t == 0 else h[t - 1]
        cs_prev_grad, dgates, di, df, do = _lstm_bprop(
            cs_before, wci, wcf, wco, i[t], cs[t], f[t], o[t], ci[t], co[t],
            cs_prev_grad + cs_grad[t], h_prev_grad + h_grad[t], use_peephole, layout)
        xh_grad = _gemm(dgates, w, transpose_b=True)
        x_grad[t] = xh_grad[:, :input_size]
        h_prev_grad = xh_grad[:, input_size:]
        xh = np.concatenate([x[t], h_before], axis=1)
        w_grad = w_grad + _gemm(xh, dgates, transpose_a=True)
        b_grad = b_grad + dgates.sum(axis=0)
        if use_peephole:
            for k, part in enumerate(_peephole_grads(di, df, do, cs_before, cs[t], cell, True)):
                peep_grads[k] = peep_grads[k] + part
    return (x_grad, cs_prev_grad, h_prev_grad, w_grad, *peep_grads, b_grad)



# --- GRU -----------------------------------------------------------------------------------
def _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c):
    """(batch, input size, cell size) of a GRU cell's arguments, refusing mismatched ones."""
    if x.dtype != np.float32:
        fail(f"GRUBlockCell takes float32, got {x.dtype}")
    for t, r, name in ((x, 2, "x"), (h_prev, 2, "h_prev"), (w_ru, 2, "w_ru"), (w_c, 2, "w_c")):
        _rank(t, r, name)
    for t, name in ((b_ru, "b_ru"), (b_c, "b_c")):
        if t.ndim != 1:
            fail(f"Rank of {name} must be 1, got {t.ndim}")
    batch, input_size = x.shape
    cell = h_prev.shape[1]
    _dim(h_prev, 0, batch, "h_prev.dims(0) != batch_size")
    _dim(w_ru, 0, input_size + cell, "w_ru.dim_size(0) != input_size + cell_size")
    _dim(w_ru, 1, 2 * cell, "w_ru.dim_size(1) != cell_size * 2")
    _dim(w_c, 0, input_size + cell, "w_c.dim_size(0) != input_size + cell_size")
    _dim(w_c, 1, cell, "w_c.dim_size(1) != cell_size")
    _dim(b_ru, 0, 2 * cell, "b_ru.dim_size(0) != cell_size * 2")
    _dim(b_c, 0, cell, "b_c.dim_size(0) != cell_size")
    return batch, input_size, cell


@kernel("GRUBlockCell")
def gru_block_cell(ctx, x, h_prev, w_ru, w_c, b_ru, b_c):
    """r, u = sigmoid([x, h_prev] @ w_ru + b_ru); c = tanh([x, r * h_prev] @ w_c + b_c);
    h = u * (h_prev - c) + c (TensorFlow's GRUBlockCellFprop)."""
    _, _, cell = _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c)
    with errstate(np, over="ignore", invalid="ignore"):
        r_u_bar = _gemm(np.concatenate([x, h_prev], axis=1), w_ru) + b_ru
        r, u = _sigmoid(r_u_bar[:, :cell]), _sigmoid(r_u_bar[:, cell:])
        c = _tanh(_gemm(np.concatenate([x, h_prev * r], axis=1), w_c) + b_c)
        return r, u, c, u * (h_prev - c) + c


@kernel("GRUBlockCellGrad")
def gru_block_cell_grad(ctx, x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h):
    """(d_x, d_h_prev, d_c_bar, d_r_bar_u_bar): TensorFlow's GRUBlockCellBprop."""
    batch, input_size, cell = _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c)
    for t, name in ((r, "r"), (u, "u"), (c, "c"), (d_h, "d_h")):
        if t.shape != (batch, cell):
            fail(f"{name} must have shape [batch_size, cell_size] = {[batch, cell]}, "
                 f"got {list(t.shape)}")
    one = _one(u)
    with errstate(np, over="ignore", invalid="ignore"):
        d_c_bar = d_h * (one - u) * (one - c * c)
        d_u_bar = d_h * (h_prev - c) * u * (one - u)
        d_x2_hr = _gemm(d_c_bar, w_c, transpose_b=True)
        d_hr = d_x2_hr[:, input_size:]
        d_r_bar = d_hr * h_prev * r * (one - r)
        d_r_bar_u_bar = np.concatenate([d_r_bar, d_u_bar], axis=1)
        d_x1_h1 = _gemm(d_r_bar_u_bar, w_ru, transpose_b=True)
        d_x = d_x1_h1[:, :input_size] + d_x2_hr[:, :input_size]
        d_h_prev = d_x1_h1[:, input_size:] + d_hr * r + d_h * u
    return d_x, d_h_prev, d_c_bar, d_r_bar_u_bar
