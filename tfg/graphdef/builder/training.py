"""Training helpers: gradient-descent updates on reference variables.

Gradients themselves come from `tfg grad` / `tfg.grad` (a graph pass), or are written by hand:

    >>> g_w = tb.matmul(x, err, transpose_a=True) * (2.0 / n)
    >>> train = tb.train.gradient_descent(0.1, [(g_w, w), (g_b, b)], name="train")
    # train/learning_rate (Const), train/update_w/ApplyGradientDescent (on the ref w),
    # train/update_b/..., and the NoOp `train` after all updates (TensorFlow's layout)
"""
from tfg.graphdef.builder.control_flow import group
from tfg.graphdef.builder.core import get_default_builder
from tfg.graphdef.builder.constants import convert_to_tensor
from tfg.graphdef.builder.math_ops import make
from tfg.graphdef.builder.state_ops import _ref_of


def apply_gradient_descent(var, alpha, delta, use_locking=False, name=None):
    """var -= alpha * delta (ApplyGradientDescent); returns the updated reference."""
    b = get_default_builder()
    r = _ref_of(var)
    with b.name_scope(name or "ApplyGradientDescent") as scope:
        a = convert_to_tensor(alpha, r.dtype.base, name="alpha")
        d = convert_to_tensor(delta, r.dtype.base, name="delta")
        with b.colocate_with(r):
            return make("ApplyGradientDescent", [r, a, d],
                        {"T": r.dtype.base, "use_locking": bool(use_locking)},
                        scope, [r.dtype]).outputs[0]


def gradient_descent(learning_rate, grads_and_vars, name="GradientDescent", gate=True):
    """One SGD step for each (gradient, variable); returns the NoOp that runs them all.

    With `gate` (the default) every update waits for every gradient: an update is in place,
    and a gradient that reads a variable (d_h = d_logits @ w2^T) must not see it half-trained.
    TensorFlow's optimizer leaves that race open; gate=False builds exactly its layout.
    """
    b = get_default_builder()
    pairs = [(convert_to_tensor(g), v) for g, v in grads_and_vars]
    with b.name_scope(name) as scope:
        dt = _ref_of(pairs[0][1]).dtype.base if pairs else None
        lr = convert_to_tensor(learning_rate, dt, name="learning_rate")
        updates = []
        with b.control_dependencies([g for g, _ in pairs] if gate else []):
            for g, v in pairs:
                with b.name_scope("update_" + _ref_of(v).op.name):
                    updates.append(apply_gradient_descent(v, lr, g))
        return group(*updates, name=scope)


__all__ = ["apply_gradient_descent", "gradient_descent"]
