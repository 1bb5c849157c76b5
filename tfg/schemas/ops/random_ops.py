"""Signatures of the random ops (TensorFlow's random_ops.cc). All are stateful: two runs give
different values, so no pass may fold or merge them.

    >>> get_op("RandomUniform").stateful
    True
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import from_shape_input
op("RandomUniform",
   inputs=["shape: T"],
   outputs=["output: dtype"],
   attrs=["seed: int = 0", "seed2: int = 0", "dtype: floattype", "T: {int32, int64}"],
   stateful=True, shape_fn=from_shape_input(0))
op("RandomUniformInt",
   inputs=["shape: T", "minval: Tout", "maxval: Tout"],
   outputs=["output: Tout"],
   attrs=["seed: int = 0", "seed2: int = 0", "Tout: {int32, int64}", "T: {int32, int64}"],
   stateful=True, shape_fn=from_shape_input(0))
op("RandomStandardNormal",
   inputs=["shape: T"],
   outputs=["output: dtype"],
   attrs=["seed: int = 0", "seed2: int = 0", "dtype: floattype", "T: {int32, int64}"],
   stateful=True, shape_fn=from_shape_input(0))
op("TruncatedNormal",
   inputs=["shape: T"],
   outputs=["output: dtype"],
   attrs=["seed: int = 0", "seed2: int = 0", "dtype: floattype", "T: {int32, int64}"],
   stateful=True, shape_fn=from_shape_input(0))
