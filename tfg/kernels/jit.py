"""Compiled loops through numba, where it is installed (the optional `perf` extra:
`pip install 'tfg[perf]'`); tfg runs the same graphs without it, on numpy.

    loop = jit.function(depthwise_loops.depthwise_nhwc)   # None: numba absent, or off
    if loop is not None and jit.tier_up(ctx.cache, key, loop):  # from a node's 2nd call on
        done = jit.call(loop, x, w, out, ...)                   # False: numba failed

Why: numpy's calls cost per call and per pass over the data, which is most of a small
kernel's time where TensorFlow runs one compiled loop (a depthwise convolution of a 6x6x88
map: 45 us in numpy's einsum, 17 in a plain compiled loop; docs/performance.md).

Cost, and who pays it: the first compile of a function takes seconds (about 4 s here), after
which numba keeps the machine code on disk (`cache=True`: beside the module, or in the
user's cache folder where the package's folder is read-only), so later processes load it in
about 0.5 s, plus about 0.25 s to import numba once. A one-shot run would pay that for a
single step, so a kernel switches to its compiled loop only from a node's second call
(`tier_up`): `tfg run` of one step never imports numba. A compile that fails (a numba that
does not support this numpy) turns compiled loops off for the process, with one line on
stderr; the numpy kernels run as before. `TFG_JIT=0` turns them off.

What is compiled here is only this package's own functions: nothing from a graph file is
ever compiled or run as code.
"""
import importlib.util
import os
import sys
import threading

ENV_VAR = "TFG_JIT"
TIER_UP_CALLS = 2  # a node's first call runs numpy: one-shot runs never load numba

_state = {}  # "found": numba installed; "numba": the module, or None after a failure
_compiled = {}  # python function -> its Compiled
_lock = threading.Lock()


def wanted():
    """Whether compiled loops may be used: TFG_JIT is not 0 and numba is installed (looked
    for without importing it)."""
    if os.environ.get(ENV_VAR, "1") == "0":
        return False
    if "numba" in _state:
        return _state["numba"] is not None
    found = _state.get("found")
    if found is None:
        try:
            found = importlib.util.find_spec("numba") is not None
        except (ImportError, ValueError):
            found = False
        _state["found"] = found
    return found


def _numba():
    if "numba" not in _state:
        try:
            import numba  # lazy: ~0.25 s to import, and optional
        except Exception as e:  # noqa: BLE001 - not installed, or built for another numpy
            _off(f"numba could not be imported ({type(e).__name__}: {e})")
            return None
        _state["numba"] = numba
    return _state["numba"]


def turn_off(why):
    """Compiled loops off for this process, with `why` on stderr (a loop that would not load)."""
    _off(why)


def _off(why):
    _state["numba"] = None
    print(f"tfg: compiled kernels off, numpy kernels used instead: {why}", file=sys.stderr)


class Compiled:
    """`py_func` as numba compiles it (nopython, no GIL held, kept on disk), numba imported
    and the dispatcher made at the first call: a Session that prepares a node but runs it
    once never imports numba. Compiled per argument types at their first call."""

    __slots__ = ("py_func", "dispatcher", "_ready")

    def __init__(self, py_func):
        self.py_func = py_func
        self.dispatcher = None
        self._ready = False

    @property
    def ready(self):
        """Whether some argument types are compiled already (in this process). Once true it
        stays true, and is kept: numba's `signatures` builds a list of typed signatures at
        each read (hashing every argument type), 5-30 us a call for the AvgPools that asked
        through jit.tier_up at every call."""
        if not self._ready:
            self._ready = self.dispatcher is not None and bool(self.dispatcher.signatures)
        return self._ready

    def __call__(self, *args):
        if self.dispatcher is None:
            with _lock:
                if self.dispatcher is None:
                    numba = _numba()
                    if numba is None:
                        raise _Off()
                    self.dispatcher = _njit(numba, self.py_func)
        return self.dispatcher(*args)


def _njit(numba, py_func):
    """numba.njit of `py_func`, kept on disk; without the disk where numba finds no folder
    to keep it in (it refuses at decoration: a read-only package and no writable cache
    folder), so every process compiles it again."""
    try:
        return numba.njit(cache=True, nogil=True)(py_func)
    except Exception:  # noqa: BLE001 - numba's "no locator available" RuntimeError
        return numba.njit(nogil=True)(py_func)


class _Off(Exception):
    """numba could not be imported (already reported)."""


def function(py_func):
    """The Compiled of `py_func` (one per function and process), or None where compiled
    loops are not wanted or numba failed."""
    if not wanted():
        return None
    hit = _compiled.get(py_func)
    if hit is None:
        hit = _compiled.setdefault(py_func, Compiled(py_func))
    return hit


def call(dispatcher, *args):
    """dispatcher(*args) -> True, or False where compiling for these argument types failed
    (then compiled loops are off for the process and the caller runs its numpy kernel), or
    where they were turned off since the caller got the dispatcher. The loops compiled here
    raise nothing themselves (no checks, no raise), so any exception is numba's: a typing,
    lowering or LLVM error, or a cache it could not read."""
    if _state.get("numba", True) is None:
        return False
    try:
        dispatcher(*args)
        return True
    except _Off:
        return False
    except Exception as e:  # noqa: BLE001 - see above: never a value error of the graph's
        _off(f"{type(e).__name__} compiling {dispatcher.py_func.__name__}")
        return False


def mark_warm():
    """A Session has started its second step: this process runs steps again and again, so
    loops compiled for any node pay back (tfg/kernels/vector_math.py waits for this)."""
    _state["warm"] = True


def warm():
    """Whether mark_warm() was called in this process."""
    return _state.get("warm", False)


def tier_up(cache, key, dispatcher):
    """Whether a node's kernel should take `dispatcher`'s compiled loop now: at once where
    this process has compiled it already (another node paid), else from the node's
    TIER_UP_CALLS-th call on (its calls counted under `key` in its `cache`, ctx.cache)."""
    if dispatcher.ready:
        return True
    n = cache.get(key, 0) + 1
    if n < TIER_UP_CALLS:
        cache[key] = n
        return False
    return True
