"""How many threads the BLAS library (numpy's OpenBLAS, or MKL/BLIS) may use while a step runs.

    >>> limit = resolve_blas_threads(None)   # the default: 'adaptive'
    >>> with blas_limit(limit):              # this step: as many BLAS threads as cores are free
    ...     sess_step()
    >>> # afterwards the library's own setting is back

Why: OpenBLAS splits a GEMM over its threads and its threads busy-wait, for each other inside a
call and for work between calls. On a quiet machine that is the fastest (an MLP step 0.8x
TensorFlow with BLAS on both of 2 cores, 1.4-1.8x with one); when other processes hold cores it
is a disaster: the thread that lands on a busy core is descheduled for whole time slices and
every call waits for it (keras MobileNetV2 b2 96x96 on a loaded 2-core machine: 1.2-1.4 s a
step with 2 BLAS threads, 0.15 s with 1). No fixed setting is right for both, so the default
('adaptive') re-decides at every step from measured contention (tfg/executor/contention.py:
the CPU time other processes used on this process's cores over the last 0.25 s): the cores
they leave free, at least 1. An int fixes the count; 'auto' is half the cores; 0 leaves BLAS
alone. An explicit BLAS setting in the environment (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS,
MKL_NUM_THREADS) is the user's choice and wins over 'adaptive' and 'auto'.

Concurrent sessions share one process-wide setting: the first step to start saves the
library's value and sets the limit, the last one to end restores it (steps wanting different
limits get the smallest). threadpoolctl is used when installed; otherwise OpenBLAS is found
among the loaded libraries (Linux /proc/self/maps) and driven through its C API. Without
either, the limit is not applied (`blas_control_available()` says so).
"""
import ctypes
import os
import threading

import numpy  # noqa: F401 - loads its BLAS, so that it shows in the process's maps

from tfg.errors import TfgInputError
from tfg.executor.blas_spin import shorten_idle_spin
from tfg.executor.contention import adaptive_threads, meter, usable_cores
from tfg.kernels import conv_threads, onednn

ADAPTIVE = "adaptive"
ENV_VAR = "TFG_BLAS_THREADS"
_USER_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS")
_SET_NAMES = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
              "scipy_openblas_set_num_threads", "openblas_set_num_threads64_")
_GET_NAMES = ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_",
              "scipy_openblas_get_num_threads", "openblas_get_num_threads64_")
_CORE_NAMES = ("openblas_get_corename", "scipy_openblas_get_corename64_",
               "scipy_openblas_get_corename", "openblas_get_corename64_")

_lock = threading.Lock()
_backend = None  # resolved once: a _Backend, or False when no BLAS can be controlled
_active = {}  # token -> limit of each step running now
_saved = None  # the library's setting before the first active step


class _Backend:
    """get() -> current threads; set(n)."""

    def __init__(self, get, set_):
        self.get = get
        self.set = set_


def _threadpoolctl_backend():
    try:
        from threadpoolctl import ThreadpoolController  # lazy: optional dependency
    except ImportError:
        return None
    libs = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    if not libs:
        return None

    def set_(n):
        for lib in libs:
            lib.set_num_threads(n)

    return _Backend(lambda: min(lib.get_num_threads() or 1 for lib in libs), set_)


def _openblas_paths():
    try:
        with open("/proc/self/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
        base = os.path.basename(path)
        if "openblas" in base and ".so" in base and path not in paths:
            paths.append(path)
    return paths


def _openblas_libraries():
    """Each OpenBLAS this process has loaded, opened through ctypes."""
    for path in _openblas_paths():
        try:
            yield ctypes.CDLL(path)
        except OSError:
            continue


def _function(lib, names):
    """The first of `names` that `lib` exports, or None."""
    return next((getattr(lib, n) for n in names if hasattr(lib, n)), None)


def _ctypes_backend():
    for lib in _openblas_libraries():
        get, set_ = _function(lib, _GET_NAMES), _function(lib, _SET_NAMES)
        if get is None or set_ is None:
            continue
        get.restype, get.argtypes = ctypes.c_int, []
        set_.restype, set_.argtypes = None, [ctypes.c_int]
        return _Backend(get, lambda n, f=set_: f(int(n)))
    return None


def openblas_core():
    """The CPU kernels OpenBLAS chose when it loaded ('Haswell', 'SkylakeX', 'Zen', ...), or
    None (another BLAS, or none found). Timings from machines with other kernels do not
    compare (an AVX-512 host runs TensorFlow's oneDNN and OpenBLAS on wider vectors than an
    AVX2 one): the benchmarks record it beside their numbers."""
    for lib in _openblas_libraries():
        fn = _function(lib, _CORE_NAMES)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_char_p, []
            name = fn()
            text = name.decode("ascii", "replace").strip() if name else ""
            return text or None
    return None


def _get_backend(prefer_threadpoolctl=True):
    global _backend
    if _backend is None:
        b = _threadpoolctl_backend() if prefer_threadpoolctl else None
        _backend = b or _ctypes_backend() or False
    return _backend or None


def blas_control_available():
    """Whether this process's BLAS thread count can be set (threadpoolctl or OpenBLAS)."""
    return _get_backend() is not None


def current_blas_threads():
    """The BLAS library's thread count now, or None when it cannot be read."""
    b = _get_backend()
    return b.get() if b is not None else None


def _user_chose():
    return any(os.environ.get(k) for k in _USER_ENV)


def _auto():
    if _user_chose():
        return None  # the user chose BLAS's threads already
    return max(1, (os.cpu_count() or 1) // 2)


def resolve_blas_threads(value, name="blas_threads"):
    """The BLAS thread limit a Session uses: an int >= 1, ADAPTIVE, or None (leave BLAS alone).

    `value`: None (the default: $TFG_BLAS_THREADS if set, else 'adaptive'), 'adaptive' (the
    cores other processes leave free, re-measured per step; nothing when the user set a BLAS
    variable), 'auto' (half the cores; likewise), an int (0 = leave BLAS alone), or a string
    of one. `name` is what an error calls the setting.
    Before: resolve_blas_threads("auto") on 2 cores.  After: 1.
    """
    source = name
    if value is None:
        value = os.environ.get(ENV_VAR)
        if value is None:
            return None if _user_chose() else ADAPTIVE
        source = f"${ENV_VAR}"
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return _auto()
        if text == ADAPTIVE:
            return None if _user_chose() else ADAPTIVE
        try:
            value = int(text)
        except ValueError:
            raise TfgInputError(f"{source}: expected a thread count (an integer >= 0, 0 = "
                                f"leave BLAS alone), 'adaptive' or 'auto', got {value!r}"
                                ) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TfgInputError(f"{source}: expected an integer >= 0 (0 = leave BLAS alone), "
                            f"'adaptive' or 'auto', got {value!r}")
    return value or None


class blas_limit:
    """Context manager: BLAS uses at most `limit` threads inside (None: no change; ADAPTIVE:
    the count contention.adaptive_threads() gives as the block starts).

    Re-entrant and thread-safe: see the module docstring.
    """

    __slots__ = ("limit", "token")

    def __init__(self, limit):
        self.limit = limit
        self.token = None

    def __enter__(self):
        global _saved
        if self.limit is None:
            return self
        backend = _get_backend()
        if backend is None:
            return self
        limit = adaptive_threads() if self.limit == ADAPTIVE else self.limit
        # Chunked kernels' threads take their chunks from a shared queue, so a thread that
        # another process deschedules only takes fewer: unlike BLAS's threads, which wait for
        # each other at every block, they pay under load too (the cnn row at --load 2: 1.2-1.4x
        # faster on two threads than on one). Adaptive gives them every usable core.
        chunks = usable_cores() if self.limit == ADAPTIVE else limit
        with _lock:
            self.token = object()
            if not _active:
                shorten_idle_spin(_openblas_paths)  # once: see blas_spin.py
                _saved = backend.get()
                meter().start()  # contention is measured while steps run
            _active[self.token] = (limit, chunks)
            want = min(v[0] for v in _active.values())
            if backend.get() != want:
                backend.set(want)
            conv_threads.configure(min(v[1] for v in _active.values()), backend.set, want)
            onednn.set_threads(want)  # its OpenMP team waits at barriers as BLAS's threads do
        return self

    def __exit__(self, *exc):
        if self.token is None:
            return False
        backend = _get_backend()
        with _lock:
            del _active[self.token]
            self.token = None
            if not _active:
                meter().stop()
            want = min(v[0] for v in _active.values()) if _active else _saved
            if want is not None and backend.get() != want:
                backend.set(want)
            # Outside steps, chunked kernels run on the calling thread only.
            chunks = min(v[1] for v in _active.values()) if _active else 1
            conv_threads.configure(chunks, backend.set, want)
            onednn.set_threads(want)
        return False
