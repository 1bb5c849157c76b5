"""Signatures of the special functions Lgamma and Digamma (math_ops.cc in TensorFlow; kept
apart from math_ops.py because their kernels are not numpy ufuncs).

    >>> get_op("Lgamma").has("elementwise")
    True
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import unchanged

for _name in ("Lgamma", "Digamma"):
    op(_name,
       inputs=["x: T"],
       outputs=["y: T"],
       attrs=["T: {bfloat16, half, float, double}"],
       shape_fn=unchanged,
       traits=["elementwise"])
