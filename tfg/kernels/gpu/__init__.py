"""GPU kernels on CuPy. Imported by tfg.kernels only when `import cupy` works.

Hand-written kernels (kernels.py) come first; wrap.register_wrapped() then gives every other
wrappable CPU kernel a GPU form (numpy maths on CuPy arrays, host fallback per node).
"""
from tfg.kernels.gpu import kernels  # noqa: F401  (registers)
from tfg.kernels.gpu.wrap import register_wrapped, to_host  # noqa: F401

register_wrapped()
