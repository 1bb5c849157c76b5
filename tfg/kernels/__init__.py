"""Op kernels per device type. Importing the package registers every kernel module."""
from tfg.kernels.registry import CPU, GPU, KernelDef, get_kernel, has_kernel, kernel  # noqa: F401
from tfg.kernels import basic, math_ops, nn_ops, reduce_ops, array_ops, indexing_ops, conv_ops, batchnorm, random_ops, state_ops, training_ops  # noqa: F401,E402

try:  # Grappler's fused ops (_FusedConv2D, _FusedMatMul, ...), made by the remap pass.
    from tfg.kernels import fused  # noqa: F401,E402
except ImportError:  # pragma: no cover
    pass
