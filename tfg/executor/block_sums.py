"""A gradient loop's deferred sums (loop_accumulation.py) made in blocks of rows, on the side
worker while the loop still runs, so that its exit waits for the last block only.

    Before (the `rnn` benchmark's gradient loop, 50 iterations of 32 rows): at the exit,
      dW = acc + H^T G and dU = acc + X^T G, [128, 1600] x [1600, 128] each (one on the
      worker): about 1.1-1.3 ms in which the loop's thread waits.
    After: S_W = sum over blocks b of H_b^T G_b (blocks of 128 rows: 4 iterations), and
      S_U likewise, made by the worker as the rows come; at the exit the last block and
      dW = acc + S_W, dU = acc + S_U.

The blocks are fixed by the rows alone ([0, block), [block, 2 block), ..., the last one
shorter), and each is one `cblas_?gemm` call per member adding into S (beta 0 for the first,
1 after) in row order. The worker (tfg/kernels/block_sum_loop.py, compiled without the GIL)
and this module's loop-thread path make the same calls on the same operands, so the sums are
the same bits whoever makes each block: they depend on the rows, not on the machine's load
or on numba. They are not the one GEMM's bits (other partial sums: within float rounding,
as the deferral itself is against TensorFlow's one product per iteration).

Where: numpy's OpenBLAS (or another OpenBLAS loaded) with its cblas_sgemm/cblas_dgemm found,
and its integer size known from its config string; elsewhere (MKL, Accelerate)
`gemm_for(dtype)` is None and loop_accumulation.py makes one GEMM per sum at the exit, as
before. The worker is used where numba is (`jit.wanted()`, a Session's second step on),
loop_side.side_free() says a core is free, and the rows the loop made last run make two
blocks or more; otherwise the blocks are made here when the loop ends.
"""
import ctypes
import math
import sys

import numpy as np

from tfg.executor.blas import _function, _openblas_libraries
from tfg.executor.loop_side import side_free, submit
from tfg.kernels import jit
from tfg.kernels.conv_threads import with_one_blas_thread

# Rows a block: as many iterations' rows as make about this many multiply-adds over all the
# members (the rnn's dW and dU: 128 rows, 4 iterations). Smaller blocks leave less for the
# exit but cost more calls; at 4M a block's two GEMMs take about 0.13 ms here.
BLOCK_MACS = 4 * 2**20

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_RUNNING, _STOP = -1, -2  # ctl[1]'s states (block_sum_loop.RUNNING, STOP)
_GEMM_NAMES = {np.dtype(np.float32): ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm"),
               np.dtype(np.float64): ("scipy_cblas_dgemm64_", "cblas_dgemm64_", "cblas_dgemm")}
_CONFIG_NAMES = ("scipy_openblas_get_config64_", "openblas_get_config64_",
                 "scipy_openblas_get_config", "openblas_get_config")

_found = {}  # dtype -> _Gemm or None
_loop = []  # [block_sum_loop's sum_blocks, usleep's address] once loaded, [None] if not


class _Gemm:
    """cblas_?gemm of one dtype: `address` (for the compiled worker), `int_type` (a number of
    BLAS's integer type) and at_b(...) here (ctypes releases the GIL for the call)."""

    def __init__(self, fn, ilp64, dtype):
        self.address = ctypes.cast(fn, ctypes.c_void_p).value
        self.int_type = np.int64(0) if ilp64 else np.int32(0)
        self.zero, self.one = dtype.type(0), dtype.type(1)
        i = ctypes.c_int64 if ilp64 else ctypes.c_int
        f = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        p = ctypes.c_void_p
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i, i, i, f, p, i, p, i, f, p, i]
        self.fn = fn

    def at_b(self, m, n, k, a, b, beta, c):
        """c = a^T b + beta c: a [k, m], b [k, n], c [m, n], row-major, at addresses."""
        self.fn(_ROW_MAJOR, _TRANS, _NO_TRANS, m, n, k, 1.0, a, m, b, n, beta, c, n)


def gemm_for(dtype):
    """The _Gemm of `dtype` (float32 or float64), or None (no OpenBLAS with it found)."""
    dtype = np.dtype(dtype)
    if dtype not in _found:
        _found[dtype] = _lookup(dtype)
    return _found[dtype]


def _lookup(dtype):
    names = _GEMM_NAMES.get(dtype)
    if names is None:
        return None
    for lib in _openblas_libraries():
        fn, config = _function(lib, names), _function(lib, _CONFIG_NAMES)
        if fn is None or config is None:
            continue
        config.restype, config.argtypes = ctypes.c_char_p, []
        text = config() or b""
        # (the integer size must be known: a wrong one would pass garbage dimensions)
        return _Gemm(fn, b"USE64BITINT" in text, dtype)
    return None


def block_rows(n, widths, gw):
    """Rows a block for iterations of `n` rows, members of `widths` columns and G of `gw`:
    whole iterations making BLOCK_MACS or more. Before: (32, [128, 128], 128). After: 128."""
    n = max(n, 1)
    per_iteration = n * max(sum(widths), 1) * max(gw, 1)
    return n * max(1, math.ceil(BLOCK_MACS / per_iteration))


def _worker_loop():
    """block_sum_loop.sum_blocks (compiled) and usleep's address, or None where numba is not
    wanted, not warm yet, or failed."""
    if _loop:
        return _loop[0]
    if not (jit.warm() and jit.wanted()) or jit._numba() is None:
        return None
    try:
        from tfg.kernels import block_sum_loop  # lazy: imports numba
        usleep = ctypes.cast(ctypes.CDLL(None).usleep, ctypes.c_void_p).value
        probe = np.array([0, 0, 0, 0], np.int64)  # (ended at 0 rows: compiles, returns)
        for dtype in _GEMM_NAMES:
            gemm = gemm_for(dtype)
            if gemm is not None:
                m = np.zeros((1, 1), dtype)
                for members in (1, 2):  # (the usual counts; others compile at their use)
                    block_sum_loop.sum_blocks(probe, gemm.address, gemm.int_type, usleep,
                                              (m,) * members, m, (m,) * members, 1,
                                              gemm.zero, gemm.one)
        _loop.append((block_sum_loop.sum_blocks, usleep))
    except Exception as e:  # noqa: BLE001 - a numba that cannot compile it: none, reported
        jit.turn_off(f"the blocked sums' loop could not load ({type(e).__name__}: {e})")
        _loop.append(None)
    return _loop[0]


class BlockSums:
    """The blocked sums of one run's accumulations that share G (module docstring): `sums`,
    one S per member; `done`, the rows summed so far; the worker's job while it runs."""

    __slots__ = ("gemm", "block", "sums", "done", "abufs", "gbuf", "ctl", "job")

    def __init__(self, gemm, block, sums):
        self.gemm, self.block, self.sums = gemm, block, sums
        self.done = 0
        self.abufs = self.gbuf = self.ctl = self.job = None

    def start(self, abufs, gbuf, rows, expected_rows):
        """The rows live in `abufs` and `gbuf` (the first `rows` of them copied already): hand
        the blocks to the worker where it may take them and `expected_rows` (the last run's)
        make two blocks or more."""
        self.abufs, self.gbuf = abufs, gbuf
        if expected_rows < 2 * self.block or not side_free():
            return
        loop = _worker_loop()
        if loop is None:
            return
        sum_blocks, usleep = loop
        self.ctl = ctl = np.array([rows, _RUNNING, self.done, 0], np.int64)
        g = self.gemm
        # (the arrays in the job's arguments: alive, and not handed out again by the buffer
        # pool, until the worker has returned)
        self.job = submit(sum_blocks, ctl, g.address, g.int_type, usleep, tuple(abufs), gbuf,
                          tuple(self.sums), self.block, g.zero, g.one)

    def copied(self, rows):
        """The loop's thread copied rows up to `rows` (the worker reads ctl[0] after)."""
        self.ctl[0] = rows

    def stop(self):
        """The worker stops after its block (buffers about to move, or a stale run's)."""
        if self.job is not None:
            self.ctl[1] = _STOP
            self._join()

    def finish(self, rows):
        """The sums over `rows` rows: the worker's blocks, then any left made here."""
        if self.job is not None:
            self.ctl[1] = rows  # (the loop ended: the worker makes the rest, the last too)
            self._join()
        sums = self.sums
        if rows == 0:
            for s in sums:
                s[...] = 0
        elif self.done < rows:
            # (on one BLAS thread, as the worker's calls run: the same bits whichever thread
            # makes a block, and under 4M multiply-adds a second thread costs more than it
            # brings, tfg/kernels/gemm_floor.py: a GRUCell's exit sums 143 -> 111 us)
            with_one_blas_thread(self._make_here, rows)
        # (the buffers go back to the pool once the caller has read the sums)
        self.sums, self.abufs, self.gbuf = None, None, None
        return sums

    def _make_here(self, rows):
        """The blocks from `done` to `rows` on this thread."""
        g, done, block, gw, size = self.gemm, self.done, self.block, self.gbuf.shape[1], \
            self.gbuf.itemsize
        while done < rows:
            stop = min(done + block, rows)
            beta = g.zero if done == 0 else g.one
            for a, s in zip(self.abufs, self.sums):
                w = a.shape[1]
                g.at_b(w, gw, stop - done, a.ctypes.data + done * w * size,
                       self.gbuf.ctypes.data + done * gw * size, beta, s.ctypes.data)
            done = stop
        self.done = done

    def _join(self):
        """Wait for the worker's job (once, from whichever thread gets here first). A job that
        failed (numba compiling it for new argument types) leaves the blocks it did not
        finish to this thread, and the worker off for the process, with one line on stderr."""
        job, ctl = self.job, self.ctl
        if job is None:
            return
        self.job = None
        try:
            job.wait()
        except Exception as e:  # noqa: BLE001 - numba's, never the graph's: blocks made here
            _loop[:] = [None]
            print(f"tfg: the blocked sums' worker is off ({type(e).__name__}: {e}); the loop's "
                  "thread makes them", file=sys.stderr)
        self.done = int(ctl[2])
