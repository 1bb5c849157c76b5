"""Optimizer updates: ApplyGradientDescent, ApplyMomentum, ApplyAdam, ApplyRMSProp,
ApplyAdagrad, ApplyCenteredRMSProp, ApplyAdadelta, ApplyAdagradV2, ApplyAdaMax on
reference variables, and their ResourceApply* forms on resource handles.

    ApplyGradientDescent(var, alpha, delta)   var <- var - alpha * delta, outputs var
    ApplyAdam(var, m, v, b1p, b2p, lr, b1, b2, eps, g):
        lr_t = lr * sqrt(1 - b2p) / (1 - b1p); m <- m + (g - m)(1 - b1);
        v <- v + (g^2 - v)(1 - b2); var <- var - lr_t m / (sqrt(v) + eps)

Each update runs under the variable's lock. The Apply* forms write the results into the
variable's and the slots' buffers, which reads of the refs share (TensorFlow's in-place
update, tfg/kernels/ref_updates.py); the ResourceApply* forms store new arrays (a resource
variable's read keeps the value it read).

ResourceSparseApplyAdagrad, ResourceSparseApplyAdagradV2 and ResourceSparseApplyMomentum
update only the rows `indices` names (CPU only).
"""
import numpy as np

from tfg.kernels import aligned, ref_updates
from tfg.kernels._util import fail
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.kernels.state_ops import resolve

# Where a rule's results go, one per variable/slot input: None for a new array; a reference
# variable's own buffer for TensorFlow's in-place update (each buffer written by the last
# operation of its own value, after every read of its old value).
_FRESH = (None,) * 4


def _gradient_descent(xp, attrs, var, alpha, delta, outs=_FRESH):
    if xp is not np:
        return (xp.subtract(var, xp.multiply(alpha, delta), out=outs[0]),)
    var, delta = np.asarray(var), np.asarray(delta)
    if var.ndim and var.shape == delta.shape and np.result_type(alpha, delta) == var.dtype:
        # The same arithmetic, into one fresh aligned array (the variable's next value, which
        # BLAS reads faster aligned): one large allocation a step, not two.
        out = aligned.empty(var.shape, var.dtype)
        np.multiply(alpha, delta, out=out)
        return (np.subtract(var, out, out=out if outs[0] is None else outs[0]),)
    return (np.subtract(var, np.multiply(alpha, delta), out=outs[0]),)


def _momentum(xp, attrs, var, accum, lr, grad, momentum, outs=_FRESH):
    accum = xp.add(accum * momentum, grad, out=outs[1])
    if attrs.get("use_nesterov", False):
        return xp.subtract(var, grad * lr + accum * (momentum * lr), out=outs[0]), accum
    return xp.subtract(var, lr * accum, out=outs[0]), accum


def _adam(xp, attrs, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
          outs=_FRESH):
    lr_t = lr * xp.sqrt(1 - beta2_power) / (1 - beta1_power)
    m = xp.add(m, (grad - m) * (1 - beta1), out=outs[1])
    v = xp.add(v, (grad * grad - v) * (1 - beta2), out=outs[2])
    if attrs.get("use_nesterov", False):
        step = (m * beta1 + grad * (1 - beta1)) * lr_t / (xp.sqrt(v) + epsilon)
    else:
        step = m * lr_t / (xp.sqrt(v) + epsilon)
    return xp.subtract(var, step, out=outs[0]), m, v


def _rmsprop(xp, attrs, var, ms, mom, lr, rho, momentum, epsilon, grad, outs=_FRESH):
    ms = xp.add(ms, (grad * grad - ms) * (1 - rho), out=outs[1])
    mom = xp.add(mom * momentum, lr * grad / xp.sqrt(ms + epsilon), out=outs[2])
    return xp.subtract(var, mom, out=outs[0]), ms, mom


def _adagrad(xp, attrs, var, accum, lr, grad, outs=_FRESH):
    if attrs.get("update_slots", True):
        accum = xp.add(accum, grad * grad, out=outs[1])
    return xp.subtract(var, lr * grad / xp.sqrt(accum), out=outs[0]), accum


def _centered_rmsprop(xp, attrs, var, mg, ms, mom, lr, rho, momentum, epsilon, grad,
                      outs=_FRESH):
    # TensorFlow's order: the mean gradient mg centres the second moment ms.
    ms = xp.add(ms, (grad * grad - ms) * (1 - rho), out=outs[2])
    mg = xp.add(mg, (grad - mg) * (1 - rho), out=outs[1])
    mom = xp.add(mom * momentum, grad * lr / xp.sqrt(ms - mg * mg + epsilon), out=outs[3])
    return xp.subtract(var, mom, out=outs[0]), mg, ms, mom


def _adadelta(xp, attrs, var, accum, accum_update, lr, rho, epsilon, grad, outs=_FRESH):
    accum = xp.add(accum * rho, grad * grad * (1 - rho), out=outs[1])
    update = xp.sqrt(accum_update + epsilon) / xp.sqrt(accum + epsilon) * grad
    # (accum_update's old value is read by `update` above and by its own sum, written last)
    return (xp.subtract(var, update * lr, out=outs[0]), accum,
            xp.add(accum_update * rho, update * update * (1 - rho), out=outs[2]))


def _adagrad_v2(xp, attrs, var, accum, lr, epsilon, grad, outs=_FRESH):
    if attrs.get("update_slots", True):
        accum = xp.add(accum, grad * grad, out=outs[1])
    return xp.subtract(var, lr * grad / (xp.sqrt(accum) + epsilon), out=outs[0]), accum


def _adamax(xp, attrs, var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad, outs=_FRESH):
    m = xp.add(m, (grad - m) * (1 - beta1), out=outs[1])
    v = xp.maximum(beta2 * v, xp.abs(grad), out=outs[2])
    return xp.subtract(var, lr / (1 - beta1_power) * (m / (v + epsilon)), out=outs[0]), m, v


# op -> (update rule, number of variable/slot inputs, index of the gradient among the rest)
RULES = {
    "GradientDescent": (_gradient_descent, 1, 1),
    "Momentum": (_momentum, 2, 1),
    "Adam": (_adam, 3, 6),
    "RMSProp": (_rmsprop, 3, 4),
    "Adagrad": (_adagrad, 2, 1),
    "CenteredRMSProp": (_centered_rmsprop, 4, 4),
    "Adadelta": (_adadelta, 3, 3),
    "AdagradV2": (_adagrad_v2, 2, 2),
    "AdaMax": (_adamax, 3, 5),
}


def _apply(ctx, refs, args, rule, grad_index, in_place):
    xp = ctx.xp
    var = refs[0]
    with var.lock:
        values = [xp.asarray(r.get()) for r in refs]
        grad = xp.asarray(args[grad_index])
        if values[0].shape != grad.shape:
            fail(f"var and grad do not have the same shape: {list(values[0].shape)} "
                 f"{list(grad.shape)}")
        for r, v in zip(refs[1:], values[1:]):
            if v.shape != values[0].shape:
                fail(f"var and {r.name} do not have the same shape: "
                     f"{list(values[0].shape)} {list(v.shape)}")
        outs = _FRESH
        if in_place and xp.result_type(*values, *args) == values[0].dtype:
            outs = tuple(v if ref_updates.writable(xp, v) else None for v in values) + _FRESH
        new = rule(xp, ctx.attrs, *values, *args, outs=outs)
        for r, old, value in zip(refs, values, new):
            if value is old:
                continue  # (written in place already)
            value = xp.asarray(value).astype(old.dtype, copy=False)
            if in_place:
                ref_updates.write(xp, r, value, lambda v: v)  # (value is a new array)
            else:
                r.assign(value)


def _register(name, rule, nvars, grad_index):
    @kernel("Apply" + name, device_types=ALL_DEVICES, ref_inputs=tuple(range(nvars)))
    def apply_ref(ctx, *inputs):
        _apply(ctx, inputs[:nvars], inputs[nvars:], rule, grad_index, True)
        return inputs[0]

    @kernel("ResourceApply" + name, device_types=ALL_DEVICES)
    def apply_resource(ctx, *inputs):
        _apply(ctx, [resolve(h) for h in inputs[:nvars]], inputs[nvars:], rule, grad_index,
               False)
        return ()


for _name, (_rule, _n, _g) in RULES.items():
    _register(_name, _rule, _n, _g)
ref_updates.writes_in_place(*("Apply" + name for name in RULES))


# --------------------------------------------------------------- sparse resource updates
# ResourceSparseApply*: only rows `indices` of the variable and its slots change, row
# indices[i] by grad[i], in TensorFlow's per-row arithmetic (training_ops.cc).
def _sparse_adagrad(attrs, var, accum, lr, grad):
    if attrs.get("update_slots", True):
        accum = accum + grad * grad
    return var - lr * grad * (1 / np.sqrt(accum)), accum


def _sparse_adagrad_v2(attrs, var, accum, lr, epsilon, grad):
    if attrs.get("update_slots", True):
        accum = accum + grad * grad
    return var - lr * grad / (np.sqrt(accum) + epsilon), accum


def _sparse_momentum(attrs, var, accum, lr, momentum, grad):
    accum = accum * momentum + grad
    if attrs.get("use_nesterov", False):
        return var - (grad * lr + accum * lr * momentum), accum
    return var - accum * lr, accum


def _check_sparse(op, values, names, scalars, grad, indices):
    var = values[0]
    for name, v in zip(names[1:], values[1:]):
        if v.shape != var.shape:
            fail(f"{op}: var and {name} do not have the same shape {list(var.shape)} "
                 f"{list(v.shape)}")
    if var.ndim < 1:
        fail(f"{op}: var must be at least 1 dimensional")
    for name, s in scalars.items():
        if np.ndim(s):
            fail(f"{op}: {name} is not a scalar: {list(np.shape(s))}")
    if indices.ndim != 1:
        fail(f"{op}: indices must be one-dimensional")
    if grad.ndim != var.ndim or grad.shape[1:] != var.shape[1:]:
        fail(f"{op}: var and grad must match in every dimension but the first: "
             f"{list(var.shape)} {list(grad.shape)}")
    if grad.shape[0] != indices.shape[0]:
        fail(f"{op}: grad must be the same size as indices in the first dimension.")
    bad = np.flatnonzero((indices < 0) | (indices >= var.shape[0]))
    if bad.size:
        fail(f"{op}: Index {int(indices[bad[0]])} at offset {int(bad[0])} in indices is out "
             "of range")


def _sparse_apply(ctx, op, handles, names, scalars, grad, indices, rule):
    """Rows of the variable and its slots through `rule`; repeated indices one after another
    (each sees the rows the previous wrote), as TensorFlow's CPU loop over indices."""
    refs = [resolve(h) for h in handles]
    grad, indices = np.asarray(grad), np.asarray(indices)
    with refs[0].lock:
        values = [np.asarray(r.get()) for r in refs]
        _check_sparse(op, values, names, scalars, grad, indices)
        new = [v.copy() for v in values]
        dtype = values[0].dtype
        args = [np.asarray(s, dtype) for s in scalars.values()]
        if np.unique(indices).size == indices.size:
            steps = [(indices, grad)]
        else:
            steps = [(indices[i:i + 1], grad[i:i + 1]) for i in range(indices.size)]
        for rows, g in steps:
            out = rule(ctx.attrs, *[v[rows] for v in new], *args, g)
            for v, o in zip(new, out):
                v[rows] = o
        for r, v in zip(refs, new):
            r.assign(v)
    return ()


@kernel("ResourceSparseApplyAdagrad")
def resource_sparse_apply_adagrad(ctx, var, accum, lr, grad, indices):
    return _sparse_apply(ctx, "ResourceSparseApplyAdagrad", [var, accum], ["var", "accum"],
                         {"lr": lr}, grad, indices, _sparse_adagrad)


@kernel("ResourceSparseApplyAdagradV2")
def resource_sparse_apply_adagrad_v2(ctx, var, accum, lr, epsilon, grad, indices):
    return _sparse_apply(ctx, "ResourceSparseApplyAdagradV2", [var, accum], ["var", "accum"],
                         {"lr": lr, "epsilon": epsilon}, grad, indices, _sparse_adagrad_v2)


@kernel("ResourceSparseApplyMomentum")
def resource_sparse_apply_momentum(ctx, var, accum, lr, grad, indices, momentum):
    return _sparse_apply(ctx, "ResourceSparseApplyMomentum", [var, accum], ["var", "accum"],
                         {"lr": lr, "momentum": momentum}, grad, indices, _sparse_momentum)
