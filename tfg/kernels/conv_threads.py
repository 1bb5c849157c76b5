"""Intra-op threads for chunked kernels (conv_chunks.py): the chunks of one call on up to
`workers` threads, each GEMM on one BLAS thread.

    configure(2, set_blas)              # the step driver: this step may use 2 cores
    run_chunks(fn, spans, rows * k, np.float32)   # fn(span, buf) for every span

Why: with two BLAS threads only a convolution's GEMM uses both cores; its patch copy, bias and
activation (a third to a half of its time on the cnn row's layers) run on one. TensorFlow
splits the whole kernel over its intra-op pool. numpy's copies, OpenBLAS's GEMM and the ufuncs
release the GIL, so Python threads can do the same. While they run, BLAS is set to one thread
(two threads each asking OpenBLAS for two would put four busy-waiting threads on two cores),
then back to the step's count; a set costs under 1 us.

The chunks are taken from a shared iterator, so a thread that another process deschedules
takes fewer of them instead of holding up the other (BLAS's threads wait for each other at
every block). Outside a step (`configure` not called, or called with 1) everything runs on
the calling thread. The helper threads are daemon threads started on first use, one buffer
each, kept per thread.
"""
import os
import queue
import threading

import numpy as np

ENV_VAR = "TFG_CONV_THREADS"
_workers = 1
_set_blas = None
_restore = 1
_helpers = []  # (task queue) per helper thread
_local = threading.local()
_start_lock = threading.Lock()
_inside = [0]  # threaded calls running now: BLAS goes back to the step's count after the last


def configure(workers, set_blas=None, blas_threads=None):
    """Let chunked kernels use `workers` threads (1: serial), calling `set_blas(n)` to put
    BLAS at one thread around a threaded call and back at `blas_threads` (default: `workers`)
    after. $TFG_CONV_THREADS = 0 keeps them serial (then a step's BLAS threads split each
    chunk's GEMM instead: the comparison for a quiet machine)."""
    global _workers, _set_blas, _restore
    off = os.environ.get(ENV_VAR) == "0"
    _workers = max(1, int(workers)) if set_blas is not None and not off else 1
    _set_blas = set_blas
    _restore = max(1, int(workers if blas_threads is None else blas_threads))


def workers():
    return _workers


def _buffer(size, dtype):
    buf = getattr(_local, "buf", None)
    if buf is None or buf.dtype != dtype or buf.size < size:
        buf = _local.buf = np.empty(size, dtype)
    return buf


def _after_fork_in_child():
    """A forked child has none of the parent's helper threads: start its own when needed
    (jobs queued for threads that do not exist would never run)."""
    global _start_lock
    _helpers.clear()
    _inside[0] = 0
    _start_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def with_one_blas_thread(run, *args):
    """run(*args) with BLAS at one thread while a step gives it more, then back at the step's
    count: the bookkeeping of a threaded chunk call below (concurrent calls restore it once,
    after the last). gemm_floor.py's small GEMMs run this way."""
    set_blas = _set_blas
    if _restore <= 1 or set_blas is None:
        return run(*args)
    _enter_serial(set_blas)
    try:
        return run(*args)
    finally:
        _leave_serial(set_blas)


def _enter_serial(set_blas):
    with _start_lock:
        if not _inside[0]:
            set_blas(1)
        _inside[0] += 1


def _leave_serial(set_blas):
    with _start_lock:
        _inside[0] -= 1
        if not _inside[0]:
            set_blas(_restore)


def _helper(tasks):
    while True:
        job = tasks.get()
        job()


def _ensure_helpers(n):
    with _start_lock:
        while len(_helpers) < n:
            tasks = queue.SimpleQueue()
            threading.Thread(target=_helper, args=(tasks,), daemon=True,
                             name=f"tfg-conv-{len(_helpers)}").start()
            _helpers.append(tasks)


def run_chunks(fn, spans, buf_size, dtype):
    """fn(span, buf) for each span, buf a flat scratch array (>= buf_size items) of this
    thread's; on up to `workers` threads (the caller one of them). The first exception is
    raised here."""
    n = min(_workers, len(spans))
    if n <= 1:
        buf = _buffer(buf_size, dtype)
        for span in spans:
            fn(span, buf)
        return
    _ensure_helpers(n - 1)
    it = iter(spans)
    lock = threading.Lock()
    errors = []
    done = threading.Semaphore(0)

    def work():
        try:
            buf = _buffer(buf_size, dtype)
            while True:
                with lock:
                    span = next(it, None)
                if span is None or errors:
                    return
                fn(span, buf)
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            errors.append(e)

    def helper_job():
        try:
            work()
        finally:
            done.release()

    set_blas = _set_blas
    _enter_serial(set_blas)
    try:
        for tasks in _helpers[:n - 1]:
            tasks.put(helper_job)
        work()
        for _ in range(n - 1):
            done.acquire()
    finally:
        _leave_serial(set_blas)
    if errors:
        raise errors[0]
