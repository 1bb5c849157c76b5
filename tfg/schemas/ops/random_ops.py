"""Signatures of the random ops (TensorFlow's random_ops.cc). All are stateful: two runs give
different values, so no pass may fold or merge them. The stateless ones below (TensorFlow's
stateless_random_ops.cc, _v2.cc) are functions of their seed or key and counter instead.

    >>> get_op("RandomUniform").stateful
    True
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, from_shape_input, merge, scalar, with_rank

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
# tf.random.shuffle: the value's rows in a random order (random_shuffle_op.cc)
op("RandomShuffle",
   inputs=["value: T"],
   outputs=["output: T"],
   attrs=["seed: int = 0", "seed2: int = 0", "T: type"],
   stateful=True, shape_fn=lambda ctx: [ctx.shape(0)])


# --- stateless random ops (TensorFlow's stateless_random_ops.cc, stateless_random_ops_v2.cc):
# deterministic functions of (shape, seed) or (shape, key, counter, alg), so not stateful.
def _stateless_v1_shape(*scalar_inputs):
    """StatelessShape: seed a [2] vector, the listed inputs scalars, output = shape's value."""
    def fn(ctx):
        merge(with_rank(ctx.shape(1), 1, "seed"), (2,))
        for i in scalar_inputs:
            with_rank(ctx.shape(i), 0, ctx.sig.inputs[i].name)
        return [ctx.shape_tensor(0)]
    return fn


def _stateless_v2_shape(*scalar_inputs):
    """StatelessShapeV2: key a [1] vector, counter a vector, alg (and the listed inputs)
    scalars, output = shape's value."""
    def fn(ctx):
        merge(with_rank(ctx.shape(1), 1, "key"), (1,))
        with_rank(ctx.shape(2), 1, "counter")
        for i in (3,) + scalar_inputs:
            with_rank(ctx.shape(i), 0, ctx.sig.inputs[i].name)
        return [ctx.shape_tensor(0)]
    return fn


def _key_counter_shape(ctx):
    """StatelessRandomGetKeyCounter: key [1], counter [2] (Philox's) from a [2] seed."""
    merge(with_rank(ctx.shape(0), 1, "seed"), (2,))
    return [(1,), (2,)]


def _key_counter_alg_shape(ctx):
    """StatelessRandomGetKeyCounterAlg: key [1], counter [2], alg a scalar."""
    return _key_counter_shape(ctx) + [()]


def _multinomial_shape(ctx):
    """[batch, num_samples]: num_samples from input 1's value, so the memory guard sizes it."""
    logits = with_rank(ctx.shape(0), 2, "logits")
    with_rank(ctx.shape(1), 0, "num_samples")
    if len(ctx.input_shapes) > 2:  # StatelessMultinomial's seed (Multinomial has attrs)
        merge(with_rank(ctx.shape(2), 1, "seed"), (2,))
    n = ctx.scalar(1)
    if n is not None and n < 0:
        raise ShapeError(f"num_samples must be non-negative, got {n}")
    return [(logits[0], n)]


_FLOATS = "{half, bfloat16, float, double} = DT_FLOAT"
for _name in ("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"):
    op(_name,
       inputs=["shape: T", "seed: Tseed"],
       outputs=["output: dtype"],
       attrs=[f"dtype: {_FLOATS}", "T: {int32, int64} = DT_INT32",
              "Tseed: {int32, int64} = DT_INT64"],
       shape_fn=_stateless_v1_shape())
    op(_name + "V2",
       inputs=["shape: Tshape", "key: uint64", "counter: uint64", "alg: int32"],
       outputs=["output: dtype"],
       attrs=[f"dtype: {_FLOATS}", "Tshape: {int32, int64} = DT_INT32"],
       shape_fn=_stateless_v2_shape())
op("StatelessRandomUniformInt",
   inputs=["shape: T", "seed: Tseed", "minval: dtype", "maxval: dtype"],
   outputs=["output: dtype"],
   attrs=["dtype: {int32, int64}", "T: {int32, int64}", "Tseed: {int32, int64} = DT_INT64"],
   shape_fn=_stateless_v1_shape(2, 3))
op("StatelessRandomUniformIntV2",
   inputs=["shape: Tshape", "key: uint64", "counter: uint64", "alg: int32", "minval: dtype",
           "maxval: dtype"],
   outputs=["output: dtype"],
   attrs=["dtype: {int32, int64, uint32, uint64}", "Tshape: {int32, int64} = DT_INT32"],
   shape_fn=_stateless_v2_shape(4, 5))
op("StatelessRandomUniformFullIntV2",
   inputs=["shape: Tshape", "key: uint64", "counter: uint64", "alg: int32"],
   outputs=["output: dtype"],
   attrs=["dtype: {int32, int64, uint32, uint64} = DT_UINT64",
          "Tshape: {int32, int64} = DT_INT32"],
   shape_fn=_stateless_v2_shape())
op("StatelessRandomGetKeyCounter",
   inputs=["seed: Tseed"],
   outputs=["key: uint64", "counter: uint64"],
   attrs=["Tseed: {int32, int64} = DT_INT64"],
   shape_fn=_key_counter_shape)
op("StatelessRandomGetKeyCounterAlg",
   inputs=["seed: Tseed"],
   outputs=["key: uint64", "counter: uint64", "alg: int32"],
   attrs=["Tseed: {int32, int64} = DT_INT64"],
   shape_fn=_key_counter_alg_shape)
# Stateful in TensorFlow (its value depends on the device it runs on), so never folded.
op("StatelessRandomGetAlg", outputs=["alg: int32"], stateful=True, shape_fn=scalar)
# Multinomial (tf.random.categorical) is stateful, like the ops above.
op("Multinomial",
   inputs=["logits: T", "num_samples: int32"],
   outputs=["output: output_dtype"],
   attrs=["seed: int = 0", "seed2: int = 0", "T: realnumbertype",
          "output_dtype: {int32, int64} = DT_INT64"],
   stateful=True, shape_fn=_multinomial_shape)
op("StatelessMultinomial",
   inputs=["logits: T", "num_samples: int32", "seed: Tseed"],
   outputs=["output: output_dtype"],
   attrs=["T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, "
          "uint32, uint64}", "Tseed: {int32, int64} = DT_INT64",
          "output_dtype: {int32, int64} = DT_INT64"],
   shape_fn=_multinomial_shape)
