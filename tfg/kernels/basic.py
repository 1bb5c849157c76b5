"""Constants, placeholders and the identity family, plus the checking ops (EnsureShape,
CheckNumerics, Assert).

    Const(value=[1, 2])          -> array([1, 2])   (the same read-only array every step)
    Placeholder (not fed)        -> error "You must feed a value for placeholder tensor 'x' ..."
    CheckNumerics([1, nan], "m") -> error "m : Tensor had NaN values"
"""
import numpy as np

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.kernels import aligned
from tfg.kernels._util import fail, shape_of, tf_name
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.schemas.dtypes import DType


@kernel("Const", device_types=ALL_DEVICES)
def const(ctx):
    """The attr's tensor, decoded once per node. On a GPU it is copied to the device once and
    kept there (int32 and string constants stay on the host, as TensorFlow keeps them)."""
    value = ctx.cache.get("value")
    if value is None:
        value = np.asarray(ctx.attrs["value"])
        want = ctx.attrs.get("dtype")
        if isinstance(want, DType) and want != DType.STRING and value.dtype != want.np:
            value = value.astype(want.np)
        # 64-byte aligned, as TensorFlow's tensors: BLAS reads aligned weights faster.
        value = aligned.copy(value)
        # Every step shares this array: a kernel writing into its input would corrupt the
        # constant, so make that fail loudly instead. The arrays it views too (the aligned
        # copy's buffer, the decoded flat array): nothing can then write the constant's
        # memory, which is what lets a loop keep a copy made of it once (W^T in
        # direct_calls.matmul_call).
        view = value
        while isinstance(view, np.ndarray):
            view.setflags(write=False)
            view = view.base
        if ctx.xp is not np:
            value = ctx.xp.asarray(value)
        ctx.cache["value"] = value
    return value


def shape_string(shape):
    """PartialTensorShape::DebugString: `[?,2]`, `[]`, `<unknown>`."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None or d < 0 else str(d) for d in shape) + "]"


@kernel("Placeholder", device_types=ALL_DEVICES)
def placeholder(ctx):
    dtype = ctx.attrs.get("dtype")
    dt = dtype.tf_name if isinstance(dtype, DType) else "?"
    raise TfgInputError(
        f"You must feed a value for placeholder tensor '{ctx.name}' with dtype {dt} and shape "
        f"{shape_string(ctx.attrs.get('shape'))}")


@kernel(["Identity", "PlaceholderWithDefault", "StopGradient", "PreventGradient",
         "RefIdentity"], device_types=ALL_DEVICES, forwards_input=True)
def identity(ctx, x):
    return x


@kernel("IdentityN", device_types=ALL_DEVICES, forwards_input=True)
def identity_n(ctx, *xs):
    return list(xs)


@kernel("Snapshot", device_types=ALL_DEVICES)
def snapshot(ctx, x):
    return ctx.xp.array(x, copy=True)


@kernel("NoOp", device_types=ALL_DEVICES)
def no_op(ctx, *inputs):
    return ()


def shape_compatible(actual, expected):
    """Whether `actual` (a concrete shape) matches `expected` (None/-1 dims or rank unknown)."""
    if expected is None:
        return True
    if len(actual) != len(expected):
        return False
    return all(e is None or e < 0 or e == a for a, e in zip(actual, expected))


@kernel("EnsureShape", device_types=ALL_DEVICES, forwards_input=True)
def ensure_shape(ctx, x):
    want = ctx.attrs.get("shape")
    have = shape_of(x)
    if not shape_compatible(have, want):
        fail(f"Shape of tensor {ctx.name} {shape_string(have)} is not compatible with "
             f"expected shape {shape_string(want)}.")
    return x


def _non_finite_kinds(xp, x, signed):
    """What x holds that is not finite, in TensorFlow's words: ["Inf", "NaN"] (CheckNumerics)
    or, signed, ["-Inf", "+Inf", "NaN"] (CheckNumericsV2), each only if present."""
    kinds = []
    if signed:
        kinds += ["-Inf"] * bool(xp.any(x == -np.inf)) + ["+Inf"] * bool(xp.any(x == np.inf))
    else:
        kinds += ["Inf"] * bool(xp.isinf(x).any())
    return kinds + ["NaN"] * bool(xp.isnan(x).any())


def _check_numerics(ctx, x, op, signed):
    xp = ctx.xp
    x = xp.asarray(x)
    if x.dtype.kind not in "fc":
        fail(f"{op} does not support dtype {tf_name(x)}")
    if not bool(xp.isfinite(x).all()):
        msg = ctx.attrs.get("message", b"")
        msg = msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)
        kinds = _non_finite_kinds(xp, x, signed)
        what = (" and ".join(kinds) if len(kinds) < 3
                else ", ".join(kinds[:-1]) + ", and " + kinds[-1])
        raise TfgRuntimeError(f"{msg} : Tensor had {what} values")
    return x


@kernel("CheckNumerics", device_types=ALL_DEVICES, forwards_input=True)
def check_numerics(ctx, x):
    return _check_numerics(ctx, x, "CheckNumerics", signed=False)


@kernel("CheckNumericsV2", device_types=ALL_DEVICES, forwards_input=True)
def check_numerics_v2(ctx, x):
    """CheckNumerics telling -Inf from +Inf: "Tensor had -Inf, +Inf, and NaN values"."""
    return _check_numerics(ctx, x, "CheckNumericsV2", signed=True)


@kernel("GuaranteeConst", device_types=ALL_DEVICES, forwards_input=True)
def guarantee_const(ctx, x):
    """The identity (a hint to XLA that x is constant, left in frozen graphs)."""
    return x


@kernel("ToBool")
def to_bool(ctx, x):
    """A scalar's truth (a number nonzero, NaN included; a string non-empty), or whether a
    non-scalar has any elements (their values do not matter)."""
    x = np.asarray(x)
    if x.ndim:
        return np.bool_(x.size > 0)
    v = x.item()
    return np.bool_(len(v) > 0 if isinstance(v, (bytes, str)) else v != 0)


def _summarize(x, n):
    x = np.asarray(x)
    flat = x.reshape(-1)
    items = [v.decode(errors="replace") if isinstance(v, bytes) else str(v)
             for v in flat[:n].tolist()]
    more = "..." if flat.size > n else ""
    if x.ndim == 0:
        return items[0] if items else ""
    return "[" + " ".join(items) + more + "]"


@kernel("Assert", device_types=ALL_DEVICES, host_only=True)
def assert_(ctx, condition, *data):
    cond = np.asarray(condition)
    if cond.dtype != np.bool_ or cond.size != 1:
        fail(f"Assert condition should be a bool scalar, got {tf_name(cond)} of shape "
             f"{cond.shape}")
    if not bool(cond.reshape(())):
        n = int(ctx.attrs.get("summarize", 3))
        raise TfgRuntimeError("assertion failed: " + " ".join(_summarize(d, n) for d in data))
    return ()
