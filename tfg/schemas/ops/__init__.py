"""Op signatures for every op tfg understands, one module per op family.

Importing this package registers them all; look one up with `get_op(name)`, and ask which ops
have a trait with `ops_with(trait)` (see registry.TRAITS).

    >>> get_op("MatMul").attrs["transpose_a"].default
    False
    >>> get_op("MatMul").has("blas"), "Relu" in ops_with("layout_agnostic")
    (True, True)
"""
from tfg.schemas.ops.registry import (  # noqa: F401
    NO_DEFAULT, TRAITS, ArgDef, AttrDef, OpSignature, all_ops, alias, control_flow_names,
    fed_placeholder_ops, get_op, has_op, has_trait, op, ops_with, ref_variable_ops)
from tfg.schemas.ops import (  # noqa: F401  (each module registers its family)
    array_ops, comm_ops, control_flow_ops, image_ops, linalg_ops, list_ops, math_ops, nn_ops,
    optional_ops, random_ops, reduction_ops, rnn_ops, segment_ops, sequence_ops, space_batch_ops,
    sparse_ops, special_math_ops, spectral_ops, state_ops, tensor_array_ops, training_ops)
from tfg.schemas.ops import logging_ops, quantization_ops  # noqa: F401,E402
from tfg.schemas.ops import ctc_ops  # noqa: F401,E402
from tfg.schemas.ops import string_ops  # noqa: F401,E402
from tfg.schemas.ops import unicode_ops  # noqa: F401,E402
from tfg.schemas.ops import ragged_ops  # noqa: F401,E402  (with the string-hashing ops)
from tfg.schemas.ops import lookup_ops  # noqa: F401,E402
from tfg.schemas.ops import cross_ops  # noqa: F401,E402
from tfg.schemas.ops import fused, signature  # noqa: F401  (Grappler's fused ops)
from tfg.schemas.ops.shape_fns import InferenceContext, ShapeError  # noqa: F401
