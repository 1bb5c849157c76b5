"""Op kernels per device type. Importing the package registers every kernel module."""
import importlib

from tfg.kernels.registry import CPU, GPU, KernelDef, get_kernel, has_kernel, kernel  # noqa: F401

_MODULES = ("basic", "math_ops", "nn_ops", "reduce_ops", "array_ops", "indexing_ops", "conv_ops",
            "batchnorm", "random_ops", "state_ops", "training_ops", "stack_ops", "list_ops",
            "tensor_array_ops", "sequence_ops", "list_bulk_ops",
            "queue_ops", "save_restore", "fused")

for _m in _MODULES:
    importlib.import_module(f"tfg.kernels.{_m}")

try:  # GPU kernels only where CuPy imports (CPU-only machines never load it)
    import cupy  # noqa: F401
except Exception:  # ImportError, or a CUDA runtime that fails to load
    cupy = None
if cupy is not None:
    importlib.import_module("tfg.kernels.gpu")
