"""Signatures of the special functions Lgamma, Digamma, Erfinv, Ndtri, the Bessel I's, Zeta,
Polygamma, the incomplete gamma functions Igamma, Igammac, IgammaGradA, and Dawsn, Expint,
FresnelCos, FresnelSin, Spence
(math_ops.cc and special_math_ops.cc in TensorFlow; kept
apart from math_ops.py because their kernels are not numpy ufuncs).

    >>> get_op("Lgamma").has("elementwise")
    True
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import broadcast_binary, unchanged

# Erfinv and Ndtri (inverse error function, inverse normal CDF) and the modified Bessel
# functions of the first kind I0, I1 and their exponentially scaled forms I0e, I1e
# (special_math_ops.cc) too, and the integrals of tf.math.special (special_math_ops.cc):
# Dawson's, the exponential integral Ei, the Fresnel integrals and Spence's (the dilogarithm)
for _name in ("Lgamma", "Digamma", "Erfinv", "Ndtri", "BesselI0", "BesselI1", "BesselI0e",
              "BesselI1e", "Dawsn", "Expint", "FresnelCos", "FresnelSin", "Spence"):
    op(_name,
       inputs=["x: T"],
       outputs=["y: T"],
       attrs=["T: {bfloat16, half, float, double}"],
       shape_fn=unchanged,
       traits=["elementwise"])

# The two-argument special functions (math_ops.cc): broadcasting binary ops.
op("Zeta",
   inputs=["x: T", "q: T"],
   outputs=["z: T"],
   attrs=["T: {float, double}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
op("Polygamma",
   inputs=["a: T", "x: T"],
   outputs=["z: T"],
   attrs=["T: {float, double}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
for _name, _types in (("Igamma", "bfloat16, half, float, double"),
                      ("Igammac", "bfloat16, half, float, double"),
                      ("IgammaGradA", "float, double")):
    op(_name,
       inputs=["a: T", "x: T"],
       outputs=["z: T"],
       attrs=[f"T: {{{_types}}}"],
       shape_fn=broadcast_binary,
       traits=["elementwise"])
