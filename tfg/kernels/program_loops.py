"""One compiled loop that runs the elementwise part of a fused chain (an LSTM or GRU cell
after its MatMul) as a small program over float32 registers, for tfg/executor/chain_programs.py.

Importing this module imports numba: only chain_programs imports it, through
tfg/kernels/vector_math.py's gate (compiled loops wanted, a Session at its second step).

    code = [[LOAD, 0, 0, 0, 1, 0, 1, 0],      # r0 = xs[0][:, 0:C]
            [LOAD, 1, 1, 0, 1, 0, 1, 0],      # r1 = xs[1][:, 0:C]
            [ADD, 2, 0, 1, 0, 0, 0, 0],       # r2 = r0 + r1
            [SIGMOID, 3, 2, 0, 0, 0, 0, 0],   # r3 = sigmoid(r2)
            [STORE, 3, 0, C, 0, 0, 0, 0]]     # outs[0:R*C] = r3, rows of C
    run_program(code, xs, ms, outs, nregs, G, R, C)

Why: numpy costs about 1-3 us a call whatever the size, and a Keras cell's gates are 10 to 20
calls on 512-element arrays an iteration (a BiLSTM pair-iteration spent 45 of its 60 us
there). Here the whole chain is one call: each instruction one pass over R*G*C floats.

The program is data, not code: a row of eight integers per instruction, made by
chain_programs.py from the chain's nodes (nothing from a graph file is compiled). Each
instruction computes what the node's kernel computes on each element: IEEE add, subtract,
multiply and divide (numpy's float32 loops round the same), vector_loops.py's Sigmoid and
Tanh (the kernels' own compiled loops, inlined), a Select's pick. So the values are the
kernels' bit for bit (tests/test_chain_programs.py checks it against the steps).

Registers are rows of `regs` [n, G*R*C]; an element (g, r, j) is at (g*R + r)*C + j. Inputs
are C-contiguous 2D arrays: float32 in `xs`, bool in `ms` (masks), read with strides so that
one array serves a broadcast (a bias: row stride 0; a [B, 1] mask: column stride 0).

    LOAD    d, x, col, cstep, gstride, rstride     regs[d][(g*R+r)*C+j] = xs[x][g*gstride
                                                     + r*rstride, col + j*cstep]
    LOADM   the same from ms[x], as 1.0 or 0.0
    STORE   s, base, width, col                    outs[base + (g*R+r)*width + col + j] = regs[s]
    ADD SUB MUL DIV  d, a, b                        regs[d] = regs[a] op regs[b]
    NEG SIGMOID TANH d, a
    TANH_GRAD SIGMOID_GRAD d, y, dy                 regs[d] = TanhGrad / SigmoidGrad of y, dy
                                                     (vector_loops.py's loops, not inlined:
                                                     each product rounded as numpy's are)
    SELECT  d, m, a, b                              regs[d] = regs[a] where regs[m] else regs[b]
"""
import numpy as np
from numba import njit

from tfg.kernels.program_codes import (ADD, DIV, LOAD, LOADM, MUL, NEG, SELECT, SIGMOID,
                                       SIGMOID_GRAD, STORE, SUB, TANH, TANH_GRAD)
from tfg.kernels.vector_loops import (_OPTIONS, _compiled, _sigmoid, _tanh,
                                      sigmoid_grad_loop, tanh_grad_loop)

_ZERO = np.float32(0.0)


@njit(inline="always", **_OPTIONS)
def _load(d, src, ins, G, R, C):
    """LOAD and LOADM: register `d` from the 2D input `src` (float32, or bool: numba casts
    True and False to 1.0 and 0.0), rows g*gstride + r*rstride from column `col`, every
    column or (cstep 0) one."""
    col, cstep, gs, rs = ins[3], ins[4], ins[5], ins[6]
    for g in range(G):
        for r in range(R):
            at = (g * R + r) * C
            dst = d[at:at + C]
            if cstep:
                row = src[g * gs + r * rs, col:col + C]
                for j in range(C):
                    dst[j] = row[j]
            else:
                v = src[g * gs + r * rs, col]
                for j in range(C):
                    dst[j] = v


@_compiled(_OPTIONS)
def run_program(code, xs, ms, outs, nregs, G, R, C):
    """Run `code` ([k, WIDTH] int64) over the inputs `xs` (a tuple of float32 2D arrays) and
    `ms` (bool 2D arrays), `nregs` registers of G*R*C floats, into `outs` (float32, 1D). Each op's
    destination register is none of its operands (chain_programs.py gives every value its
    own), so LLVM's overlap check at run time lets the loops run vectorized."""
    n = G * R * C
    regs = np.empty((nregs, n), np.float32)
    for k in range(code.shape[0]):
        op = code[k, 0]
        a = code[k, 1]
        if op == LOAD:
            _load(regs[a], xs[code[k, 2]], code[k], G, R, C)
        elif op == LOADM:
            _load(regs[a], ms[code[k, 2]], code[k], G, R, C)
        elif op == STORE:
            s = regs[a]
            base, width, col = code[k, 2], code[k, 3], code[k, 4]
            for row in range(G * R):
                at = base + row * width + col
                dst, src = outs[at:at + C], s[row * C:row * C + C]
                for j in range(C):
                    dst[j] = src[j]
        elif op == SELECT:
            d, m, x, y = regs[a], regs[code[k, 2]], regs[code[k, 3]], regs[code[k, 4]]
            for i in range(n):
                d[i] = x[i] if m[i] != _ZERO else y[i]
        else:
            d, x = regs[a], regs[code[k, 2]]
            if op == SIGMOID:
                for i in range(n):
                    d[i] = _sigmoid(x[i])
            elif op == TANH:
                for i in range(n):
                    d[i] = _tanh(x[i])
            elif op == NEG:
                for i in range(n):
                    d[i] = -x[i]
            else:
                y = regs[code[k, 3]]
                if op == ADD:
                    for i in range(n):
                        d[i] = x[i] + y[i]
                elif op == SUB:
                    for i in range(n):
                        d[i] = x[i] - y[i]
                elif op == MUL:
                    for i in range(n):
                        d[i] = x[i] * y[i]
                elif op == TANH_GRAD:
                    tanh_grad_loop(x, y, d)  # (compiled on its own: numpy's roundings)
                elif op == SIGMOID_GRAD:
                    sigmoid_grad_loop(x, y, d)
                else:
                    for i in range(n):
                        d[i] = x[i] / y[i]
