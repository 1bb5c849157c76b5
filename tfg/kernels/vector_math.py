"""Float32 Sigmoid, swish and Tanh (and MobileNetV3's hard swish and hard sigmoid, TanhGrad and
SigmoidGrad) on compiled loops (tfg/kernels/vector_loops.py) where numba is installed, from a
Session's second step on; numpy's functions before, and everywhere else.

    y = vector_math.sigmoid(x)            # None: numpy's turn (not float32, not warm, no numba)
    vector_math.swish(x, out=x)           # into `out` (x's own memory allowed)

Why: numpy's float32 exp and tanh run one element at a time on the wheels' builds here
(2-4 ns an element), where TensorFlow's kernels run eight at once. EfficientNetB0's 49
swishes took 6.1 of its 18.6 ms a step on one thread; the rnn row's Tanh 17 us of each
iteration's 4096 values (docs/performance.md, stop 35). The hard activations are cheap
arithmetic, but four numpy passes with a temporary: MobileNetV3Small's 19 hard swishes took
0.74 ms a step, in one pass 0.14 (their bits are numpy's: the same roundings), as are
the gradients' (TanhGrad of 4096 values: 5.1 -> 2.9 us).

When: a float32 numpy array (any shape, any strides: a strided one is copied first), once
`jit.warm()` (a Session began its second step: a one-shot `tfg run` never imports numba) and
compiled loops are wanted (`TFG_JIT`, jit.py). The choice depends on nothing else, not the
size, so a value is the same whichever path (kernel, fused loop chain, batched cells) makes
it once warm; its last bit may differ from the first step's numpy one (at most about 2 ulp
apart, vector_loops.py), as with tfg's other compiled loops. A compile that fails turns
compiled loops off for the process, with one line on stderr, and numpy runs.
"""
import numpy as np

from tfg.kernels import jit

_F32 = np.dtype(np.float32)
_loaded = []  # [the vector_loops module] once imported; checked first, at every call


def _loops():
    """The vector_loops module, or None where its turn has not come. TFG_JIT is read until
    the module loads (it costs 1.6 us a read, more than a small array's loop)."""
    if _loaded:
        return _loaded[0]
    if not (jit.warm() and jit.wanted()) or jit._numba() is None:
        return None  # (numba not importable: reported once, compiled loops off)
    try:
        from tfg.kernels import vector_loops  # lazy: imports numba
    except Exception as e:  # noqa: BLE001 - a numba without what the loops use
        jit.turn_off(f"the float32 exp loops could not load ({type(e).__name__}: {e})")
        return None
    _loaded.append(vector_loops)
    return vector_loops


def _run(name, x, out):
    """`name`'s loop over float32 `x` into `out` (None: a fresh array; x itself: in place)
    -> the result, or None where numpy must run (see the module docstring). jit.call is
    False once compiled loops are off (a compile failed): numpy from then on."""
    if type(x) is not np.ndarray or x.dtype != _F32:
        return None
    loops = _loaded[0] if _loaded else _loops()
    if loops is None:
        return None
    src = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    if out is None:
        dst = out = np.empty(x.shape, _F32)
    else:
        dst = out if out.flags.c_contiguous and out.dtype == _F32 else np.empty(x.shape, _F32)
        if src is not dst and np.may_share_memory(src, dst):
            np.copyto(dst, src)  # `out` is x's own memory (or overlaps it): in place
            src = dst
    if src is dst:
        done = jit.call(getattr(loops, name + "_inplace"), dst)
    else:
        done = jit.call(getattr(loops, name + "_loop"), src, dst)
    if not done:
        return None
    if dst is not out:
        np.copyto(out, dst)
    return out


def sigmoid(x, out=None):
    """1 / (1 + e^-x) of a float32 array, into `out` or a fresh array; None: use numpy."""
    return _run("sigmoid", x, out)


def swish(x, out=None):
    """x / (1 + e^-x) of a float32 array, into `out` or a fresh array; None: use numpy."""
    return _run("swish", x, out)


def tanh(x, out=None):
    """tanh(x) of a float32 array, into `out` or a fresh array; None: use numpy."""
    return _run("tanh", x, out)


def hard_swish(x, out=None):
    """x * (relu6(x + 3) * (1/6)) of a float32 array (numpy's bits: the same roundings),
    into `out` or a fresh array; None: use numpy."""
    return _run("hard_swish", x, out)


def hard_sigmoid(x, out=None):
    """relu6(x) * (1/6) of a float32 array (numpy's bits), into `out` or a fresh array;
    None: use numpy."""
    return _run("hard_sigmoid", x, out)


def _run_grad(name, y, dy, out=None):
    """`name`'s loop over float32 `y` and `dy` of one shape into `out` (a C-contiguous
    float32 array of that shape that shares no memory with them) or a fresh array, or None."""
    if (type(y) is not np.ndarray or type(dy) is not np.ndarray or y.dtype != _F32
            or dy.dtype != _F32 or y.shape != dy.shape):
        return None
    loops = _loaded[0] if _loaded else _loops()
    if loops is None:
        return None
    if (out is None or type(out) is not np.ndarray or out.dtype != _F32
            or out.shape != y.shape or not out.flags.c_contiguous or not _apart(out, y, dy)):
        out = np.empty(y.shape, _F32)
    if jit.call(getattr(loops, name + "_loop"), np.ascontiguousarray(y),
                np.ascontiguousarray(dy), out):
        return out
    return None


def _apart(out, *arrays):
    """Whether `out` shares no memory with `arrays`. Where its memory is an allocation of
    numpy's own (a fused chain's buffer), only views of that same array can share it: an
    identity test, where np.may_share_memory costs about 0.6 us a pair."""
    owner = out if out.base is None else out.base
    if type(owner) is np.ndarray and owner.flags.owndata:
        return all(owner is not (a if a.base is None else a.base) for a in arrays)
    return not any(np.may_share_memory(out, a) for a in arrays)


def tanh_grad(y, dy, out=None):
    """dy * (1 - y*y) of float32 arrays of one shape (numpy's bits), into `out` where it
    may be written (_run_grad) or a fresh array; None: use numpy."""
    return _run_grad("tanh_grad", y, dy, out)


def sigmoid_grad(y, dy, out=None):
    """dy * (y * (1 - y)) of float32 arrays of one shape (numpy's bits), or None."""
    return _run_grad("sigmoid_grad", y, dy, out)
