"""The side worker's loop for a gradient loop's deferred sums made in blocks while the loop
runs (tfg/executor/block_sums.py): compiled without the GIL, so the loop's own thread never
waits for the worker to take it or give it back.

    sum_blocks(ctl, gemm, int_type, usleep, a_bufs, g_buf, sums, block, zero, one)
    # ctl[0]: rows the loop has copied so far (the loop's thread writes it);
    # ctl[1]: RUNNING, STOP, or the loop's final row count; ctl[2]: rows summed (written here)

Each block of `block` rows [r, r + block) adds A_j[r:r+block]^T G[r:r+block] into S_j for
every member j (a_bufs and sums: tuples of C-contiguous matrices, g_buf one), one
`cblas_?gemm` call each (beta 0 for the first block, 1 after), in row order; the last block
may be shorter. block_sums.py makes the same calls in the same order
on the loop's thread where no worker runs, so the sums are the same bits whichever thread
makes them.

Why compiled: a Python worker thread takes the GIL to start each numpy call and to get its
result back, and each time it does, the loop's thread waits to get the GIL back (30-36 us a
wake-up on this project's 2-core VMs; docs/performance.md, stop 42: blocks on a Python
worker were no faster than one GEMM at the end). Here the worker holds no GIL from the
job's start to its end: it polls `ctl` between blocks, sleeping POLL_US between reads.

The BLAS function and usleep are called through their addresses (`gemm`, `usleep`: ints
from ctypes), so the machine code does not depend on the process and numba keeps it on
disk. `int_type` is a number of BLAS's integer type (numpy's OpenBLAS is built with 64-bit
integers, a system one with 32-bit): its type chooses the call's signature. `zero` and
`one` are of the arrays' dtype (float32: sgemm's signature, float64: dgemm's).
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

RUNNING, STOP = -1, -2
POLL_US = 20
# Polls without a new block before the worker gives up (about a second): a loop that has
# stopped (an error in its body) or runs very slow iterations; the loop's thread then makes
# the blocks left when the loop ends, the same ones.
MAX_IDLE_POLLS = 20000

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@intrinsic
def _gemm_at_b(typingctx, fn, int_type, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """cblas_?gemm(RowMajor, Trans, NoTrans, m, n, k, 1, a, lda, b, ldb, beta, c, ldc) at the
    address `fn`: c = a^T b + beta c, a [k, m] and b [k, n] row-major (a, b, c addresses)."""
    sig = types.void(fn, int_type, m, n, k, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        f, _, m_, n_, k_, a_, lda_, b_, ldb_, beta_, c_, ldc_ = args
        it = context.get_value_type(signature.args[1])
        ft = context.get_value_type(signature.args[9])
        i32, vp = ir.IntType(32), ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(),
                               [i32, i32, i32, it, it, it, ft, vp, it, vp, it, ft, vp, it])

        def blas_int(v):
            return builder.trunc(v, it) if v.type.width > it.width else v

        call_args = [ir.Constant(i32, _ROW_MAJOR), ir.Constant(i32, _TRANS),
                     ir.Constant(i32, _NO_TRANS), blas_int(m_), blas_int(n_), blas_int(k_),
                     ir.Constant(ft, 1.0), builder.inttoptr(a_, vp), blas_int(lda_),
                     builder.inttoptr(b_, vp), blas_int(ldb_), beta_,
                     builder.inttoptr(c_, vp), blas_int(ldc_)]
        builder.call(builder.inttoptr(f, fnty.as_pointer()), call_args)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _sleep(typingctx, fn, us):
    """usleep(us) through its address `fn`."""
    sig = types.void(fn, us)

    def codegen(context, builder, signature, args):
        f, us_ = args
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(i32, [i32])
        builder.call(builder.inttoptr(f, fnty.as_pointer()), [builder.trunc(us_, i32)])
        return context.get_dummy_value()
    return sig, codegen


def _compiled(fn):
    """njit without the GIL, kept on disk where numba finds a folder for it (as jit._njit)."""
    try:
        return njit(cache=True, nogil=True)(fn)
    except Exception:  # noqa: BLE001 - numba's "no locator available" RuntimeError
        return njit(nogil=True)(fn)


@_compiled
def sum_blocks(ctl, gemm, int_type, usleep, a_bufs, g_buf, sums, block, zero, one):
    """The blocks from ctl[2] on, as the rows come (module docstring) -> rows summed."""
    gw, size = g_buf.shape[1], g_buf.itemsize
    g_at = g_buf.ctypes.data
    done = ctl[2]
    idle = 0
    while True:
        state = ctl[1]
        if state == STOP:
            break
        rows = state if state >= 0 else ctl[0]
        stop = done + block
        if stop > rows:
            if state >= 0:
                if done >= rows:
                    break
                stop = rows  # (the loop has ended: its last, shorter block)
            else:
                if idle >= MAX_IDLE_POLLS:
                    break
                _sleep(usleep, np.int64(POLL_US))
                idle += 1
                continue
        beta = zero if done == 0 else one
        for j in range(len(a_bufs)):
            a = a_bufs[j]
            w = a.shape[1]
            _gemm_at_b(gemm, int_type, np.int64(w), np.int64(gw), np.int64(stop - done),
                       a.ctypes.data + done * w * size, np.int64(w), g_at + done * gw * size,
                       np.int64(gw), beta, sums[j].ctypes.data, np.int64(gw))
        done = stop
        ctl[2] = done
        idle = 0
    return done
