"""A numpy-backed stand-in for CuPy, so CI runs the GPU kernels without a GPU.

Its arrays are their own type (`standin.ndarray`), strict where CuPy is strict and stricter
where CuPy would hide a mistake:

    >>> import tfg.kernels.gpu.standin as xp
    >>> a = xp.asarray(np.ones(3, np.float32))     # host -> "device" (counted in COUNTS)
    >>> xp.tanh(a) * 2                              # device maths: a standin.ndarray
    >>> np.tanh(a)                                  # TypeError: numpy called on a device array
    >>> np.ones(3) + a                              # TypeError: host array mixed with device one
    >>> a.get()                                     # device -> host (counted)

Select it with `TFG_GPU_STANDIN=1` (tfg.executor.devices): `gpu:1` then names one stand-in
device, and every GPU registration runs on it. COUNTS records host<->device copies, so a test
can check that copies happen only at partition borders, feeds and fetches.
"""
import sys

import numpy as np

from tfg.kernels import memory

COUNTS = {"h2d": 0, "d2h": 0, "pinned": 0, "fused": 0}
# numpy names CuPy lacks: a kernel that uses them on a device would fail on a real GPU.
_MISSING = frozenset({"errstate", "seterr", "vectorize", "frompyfunc", "add_at", "nditer"})


def reset_counts():
    for key in COUNTS:
        COUNTS[key] = 0


def _host_operand(value):
    if type(value) is np.ndarray:
        raise TypeError("a numpy array was mixed with a device array (copy it with xp.asarray "
                        "first: CuPy does not take numpy arrays)")
    return value


def _unwrap(value):
    t = type(value)
    if t is ndarray:
        return value._a
    if t is list or t is tuple:
        return t(_unwrap(v) for v in value)
    return _host_operand(value)


def _wrap(value):
    t = type(value)
    if t is np.ndarray:
        return ndarray(value)
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_)):
        return ndarray(np.asarray(value))  # CuPy reductions give 0-d arrays, not scalars
    if t is tuple or t is list:
        return t(_wrap(v) for v in value)
    return value


def _device_fn(fn, name):
    def call(*args, **kwargs):
        args, kwargs = _unwrap(args), {k: _unwrap(v) for k, v in kwargs.items()}
        with np.errstate(all="ignore"):  # CuPy has no floating-point warnings
            return _wrap(fn(*args, **kwargs))
    call.__name__ = name
    return call


class ndarray:
    """A device array: a numpy array only this module's functions and methods may touch."""

    __slots__ = ("_a",)

    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion of a device array to a NumPy array is not allowed "
                        "(stand-in for CuPy); use .get()")

    def __array_ufunc__(self, ufunc, method, *args, **kwargs):
        # `np.float32(2) * device_array` comes here (numpy's scalar operator): CuPy computes
        # it, and so does the stand-in. A numpy function on device arrays alone, or a numpy
        # array mixed in, is refused.
        scalar = any(isinstance(a, (np.generic, int, float, bool)) for a in args)
        if method != "__call__" or not scalar or kwargs:
            raise TypeError(f"numpy.{ufunc.__name__} was called on a device array; kernels "
                            "must use ctx.xp")
        args = _unwrap(args)
        with np.errstate(all="ignore"):
            return _wrap(ufunc(*args))

    def __array_function__(self, func, types, args, kwargs):
        raise TypeError(f"numpy.{func.__name__} was called on a device array; kernels must use "
                        "ctx.xp")

    def get(self, out=None):
        COUNTS["d2h"] += 1
        if out is None:
            return self._a.copy()
        if type(out) is not np.ndarray or out.shape != self._a.shape or out.dtype != self.dtype:
            raise ValueError("get(out=): a numpy array of the same shape and dtype is needed")
        np.copyto(out, self._a)
        return out

    def set(self, host):
        """cupy.ndarray.set: copy a numpy array of the same shape and dtype in."""
        if type(host) is not np.ndarray or host.shape != self._a.shape or host.dtype != self.dtype:
            raise ValueError("set(): a numpy array of the same shape and dtype is needed")
        COUNTS["h2d"] += 1
        np.copyto(self._a, host)

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: ndarray(self._a.T))

    def __getattr__(self, name):
        if name.startswith("__"):  # __array_interface__ & co. would hand numpy the memory
            raise AttributeError(name)
        attr = getattr(self._a, name)
        return _device_fn(attr, name) if callable(attr) else _wrap(attr)

    def __getitem__(self, key):
        return _wrap(self._a[_index(key)])

    def __setitem__(self, key, value):
        self._a[_index(key)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (_wrap(v) for v in self._a)

    def __bool__(self):
        return bool(self._a)

    def __int__(self):
        return int(self._a)

    def __float__(self):
        return float(self._a)

    def __index__(self):
        return self._a.__index__()

    def __repr__(self):
        return f"standin.{self._a!r}"

    def __hash__(self):
        raise TypeError("unhashable type: 'standin.ndarray'")


def _index(key):
    # CuPy accepts numpy index arrays (it copies them); so does the stand-in.
    if type(key) is tuple:
        return tuple(k._a if type(k) is ndarray else k for k in key)
    return key._a if type(key) is ndarray else key


def _operator(name):
    def op(self, *others):
        others = _unwrap(others)
        with np.errstate(all="ignore"):
            return _wrap(getattr(self._a, name)(*others))
    op.__name__ = name
    return op


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand",
              "or", "ror", "xor", "rxor", "lshift", "rshift", "lt", "le", "gt", "ge", "eq", "ne",
              "neg", "pos", "abs", "invert", "iadd", "isub", "imul", "itruediv", "ifloordiv",
              "imod", "ipow", "iand", "ior", "ixor"):
    setattr(ndarray, f"__{_name}__", _operator(f"__{_name}__"))


class _Namespace:
    """numpy's functions (or a submodule's) on device arrays."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        if name in _MISSING:
            raise AttributeError(f"CuPy has no {name!r} (stand-in)")
        attr = getattr(self._module, name)
        if isinstance(attr, type) or not callable(attr):
            value = attr  # dtypes, constants
        elif isinstance(attr, np.ufunc):
            value = _device_fn(attr, name)  # no .reduce/.at: CuPy's ufuncs differ there
        else:
            value = _device_fn(attr, name)
        self.__dict__[name] = value
        return value


_numpy = _Namespace(np)
linalg = _Namespace(np.linalg)
fft = _Namespace(np.fft)


def __getattr__(name):  # module attributes: numpy's functions on device arrays
    return getattr(_numpy, name)


def asarray(value, dtype=None):
    if type(value) is ndarray:
        return value if dtype is None else ndarray(value._a.astype(dtype, copy=False))
    COUNTS["h2d"] += 1
    return ndarray(np.array(value, dtype=dtype))


def array(value, dtype=None, copy=True):
    if type(value) is ndarray:
        return ndarray(np.array(value._a, dtype=dtype, copy=copy))
    COUNTS["h2d"] += 1
    return ndarray(np.array(value, dtype=dtype))


def asnumpy(value):
    return value.get() if type(value) is ndarray else np.asarray(value)


def empty_pinned(shape, dtype=np.float32):
    """cupyx.empty_pinned: a numpy array in page-locked memory; here a plain numpy array whose
    allocations are counted (COUNTS["pinned"]), so a test can see copies take this path."""
    COUNTS["pinned"] += 1
    return np.empty(shape, dtype)


def get_array_module(*args):
    return sys.modules[__name__]


def scatter_add(target, indices, values):
    """cupyx.scatter_add: target[indices] += values, repeated indices accumulating."""
    np.add.at(target._a, _index(indices), _unwrap(values) if type(values) is not np.ndarray
              else values)


ndarray.__module__ = "tfg.kernels.gpu.standin"
memory.register_device(sys.modules[__name__], ndarray, empty_pinned)
