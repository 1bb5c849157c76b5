"""Op kernels per device type. Importing the package registers every kernel module."""
import importlib

from tfg.kernels.registry import (ALL_DEVICES, CPU, GPU, KernelDef, get_kernel,  # noqa: F401
                                  has_kernel, kernel)

_MODULES = ("basic", "math_ops", "nn_ops", "reduce_ops", "array_ops", "indexing_ops", "conv_ops",
            "conv3d_ops", "window_ops", "lrn_ops", "pool_ops", "batchnorm", "random_ops",
            "stateless_random", "state_ops", "training_ops", "stack_ops", "list_ops",
            "optional_ops", "tensor_array_ops", "sequence_ops", "list_bulk_ops", "linalg_ops",
            "queue_ops", "save_restore", "fused", "image_ops", "detection_ops", "detection_more",
            "morphology_ops", "color_ops",
            "spectral_ops", "space_batch_ops", "segment_ops", "unsorted_segment_ops",
            "tensor_scatter_ops", "special_math", "xla_ops", "rnn_ops",
            "scale_translate", "sparse_ops", "projective_transform",
            "quant_ops", "logging_ops", "ctc_ops", "string_ops", "unicode_ops",
            "lookup_ops", "hash_ops", "ragged_ops", "cross_ops", "scatter_ops")

# GPU kernels are these same modules' registrations with device_types=ALL_DEVICES (written
# against ctx.xp); they need no CuPy to register, so placement is the same on every machine.
for _m in _MODULES:
    importlib.import_module(f"tfg.kernels.{_m}")
