"""Reverse-mode automatic differentiation of GraphDefs, through v1 control flow.

    >>> from tfg.passes.grad import grad
    >>> g2 = grad(g, ys=["loss"], xs=["w"])    # adds gradients/... and the Identity grad/w

Modules: registry (the `@gradient("Op")` table and rule helpers); math_grads,
reduction_grads, nn_grads, rnn_grads, array_grads, gather_grads, image_grads, spectral_grads,
segment_grads, linalg_grads, list_grads, sequence_grads, sparse_grads, tensor_array_grads,
random_grads, optional_grads, control_flow_grads (one per op family, named after the signature
modules in tfg/schemas/ops; control_flow_grads: Switch, Merge, Enter, Exit, NextIteration);
loops (counters and stacks of a while loop's gradient); emitter (where backward nodes go); core
(the backward pass itself).
"""
from tfg.passes.grad import (  # noqa: F401
    array_grads, control_flow_grads, gather_grads, image_grads, linalg_grads, list_grads,
    math_grads, nn_grads, optional_grads, random_grads, reduction_grads, rnn_grads, scatter_grads,
    segment_grads, sequence_grads, sparse_grads, spectral_grads, tensor_array_grads)
from tfg.passes.grad import quant_grads  # noqa: F401,E402
from tfg.passes.grad import ctc_grads  # noqa: F401,E402
from tfg.passes.grad import string_grads  # noqa: F401,E402
from tfg.passes.grad import ragged_grads  # noqa: F401,E402
from tfg.passes.grad import lookup_grads  # noqa: F401,E402
from tfg.passes.grad import detection_grads  # noqa: F401,E402
from tfg.passes.grad.core import GradientWarning, grad  # noqa: F401
from tfg.passes.grad.registry import (  # noqa: F401
    get_gradient, gradient, has_gradient, no_gradient, registered)

__all__ = ["grad", "gradient", "no_gradient", "get_gradient", "has_gradient", "registered",
           "GradientWarning"]
