"""How long OpenBLAS's idle worker threads busy-wait for the next call before they sleep.

    >>> shorten_idle_spin(find_openblas)    # before the first step that limits BLAS
    True                                     # workers now sleep ~25 us after a call, not 0.1 s

Why: after every multi-threaded call, OpenBLAS's pthreads server keeps its workers spinning
for 2^28 CPU cycles (about 0.1 s) unless OPENBLAS_THREAD_TIMEOUT, read once when the library
loads, says otherwise. A tfg step that used two BLAS threads therefore left a core busy for
0.1 s after it ended, taking it from whatever ran next: another process (a keras ResNet50 step
in TensorFlow measured 71 ms right after a tfg step, 41 ms with the workers asleep), or tfg's
own next step under a one-thread limit (its process CPU was twice its wall). Spinning longer
than a wake-up costs does not pay, so the workers spin 2^16 cycles (tens of microseconds: back
to back calls still find them awake) and then sleep; a step's own wall time did not move
(ResNet50, EfficientNetB0, NASNetMobile; see docs/performance.md).

The timeout can only change when the thread server starts, so the library re-reads its
environment and restarts its workers, the sequence its own fork handler runs. That is unsafe
while another thread may be inside BLAS, so it is done only while no other Python thread runs;
`tfg` on the command line sets the variable before numpy loads instead (tfg/cli/__init__.py). A user's
OPENBLAS_THREAD_TIMEOUT is their choice and is left alone; other BLAS libraries (MKL, BLIS)
have no such server and are left alone too.
"""
import ctypes
import os
import threading

ENV_VAR = "OPENBLAS_THREAD_TIMEOUT"
SPIN_LOG2_CYCLES = 16  # OpenBLAS clamps the exponent to 4..30
_NEEDED = ("openblas_read_env", "blas_thread_shutdown_", "blas_thread_init")

_done = False


def shorten_idle_spin(find_paths):
    """Restart the thread server of each OpenBLAS that `find_paths()` lists with the short
    spin, once per process -> whether any was restarted. Nothing when the user set the
    variable or a library lacks the functions needed; while another Python thread is alive,
    nothing yet (a later call tries again)."""
    global _done
    if _done:
        return False
    if os.environ.get(ENV_VAR):
        _done = True
        return False
    if threading.active_count() != 1:
        return False
    _done = True
    libraries = []
    for path in find_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if all(hasattr(lib, name) for name in _NEEDED):
            libraries.append(lib)
    if not libraries:
        return False
    os.environ[ENV_VAR] = str(SPIN_LOG2_CYCLES)
    try:
        for lib in libraries:
            lib.openblas_read_env()
            lib.blas_thread_shutdown_()
            lib.blas_thread_init()
    finally:
        # Only the libraries read it; child processes get the user's environment back.
        del os.environ[ENV_VAR]
    return True
