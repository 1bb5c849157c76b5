"""The real-model sweep's Keras/TF2 cases (imported by tools/gen_real_models.py), NEEDS
TENSORFLOW. Each is a model whose graph tfg could not run or differentiate before:

    keras_unet_grad        U-Net decoder: Conv2DTranspose, bilinear and nearest UpSampling2D
                           (ResizeBilinear / ResizeNearestNeighbor and their gradients)
    keras_deeplab_grad     DeepLab-style atrous convs (Keras writes SpaceToBatchND /
                           BatchToSpaceND around a dilated Conv2D), pixel shuffle
                           (DepthToSpace / SpaceToDepth), Resizing, CenterCrop
    tf2_signal_ops_grad    tf.signal.stft (RFFT, ComplexAbs), exclusive reverse cumsum,
                           einsum, FusedBatchNorm in training mode, causal MultiHeadAttention,
                           gather_nd, bilinear / nearest / bicubic tf.image.resize

Gradient cases: the frozen graph of sum(y * y); TensorFlow's values come from a GradientTape
on the Keras model (tf.gradients cannot differentiate the frozen graph's lowered loops, and
the tape is what a Keras user gets), w.r.t. a few weights (spread over the model) and the
input.
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from gen_real_models import BATCH, keras_mods, write_case


def tape_grad_case(out, name, model, specs, feeds, family, nweights=4, loss=None,
                   skip_noise=False):
    """`loss(*feeds)`: the scalar to differentiate (sum(y * y) of the model's output by
    default); the gradients are w.r.t. a few of the model's weights (those the loss depends
    on; skip_noise: nor one whose gradient is rounding noise, as a key projection's bias,
    which cancels in the softmax) and its float inputs."""
    def sum_of_squares(*args):
        y = model(list(args) if len(args) > 1 else args[0], training=False)
        return tf.reduce_sum(y * y)

    loss = loss or sum_of_squares

    concrete = tf.function(loss).get_concrete_function(*specs)
    captured = {id(ext): internal.op.name for ext, internal in concrete.graph.captures}
    frozen = convert_variables_to_constants_v2(concrete)
    gd = frozen.graph.as_graph_def()
    consts = {n.name for n in gd.node if n.op == "Const"}
    args = [tf.constant(f) for f in feeds]
    floats = [i for i, a in enumerate(args) if a.dtype.is_floating]
    weights = [v for v in model.trainable_variables
               if captured.get(id(v.handle)) in consts]
    with tf.GradientTape() as tape:
        for i in floats:
            tape.watch(args[i])
        value = loss(*args)
    grads = tape.gradient(value, weights + [args[i] for i in floats])
    norms = [None if g is None else float(tf.reduce_max(tf.abs(tf.convert_to_tensor(g))))
             for g in grads[:len(weights)]]
    floor = 1e-5 * max(n for n in norms if n is not None)  # a noise gradient's atol is ~0
    live = [i for i, n in enumerate(norms)
            if n is not None and (not skip_noise or n > floor)]
    pick = [live[i] for i in sorted(set(np.linspace(0, len(live) - 1,
                                                    min(nweights, len(live))).astype(int)))]
    xs = [captured[id(weights[i].handle)] + ":0" for i in pick]
    grads = [grads[i] for i in pick] + grads[len(weights):]
    xs += [frozen.inputs[i].name for i in floats]
    write_case(out, name, gd, {t.name: f for t, f in zip(frozen.inputs, feeds)}, family,
               ys=[frozen.outputs[0].name], xs=xs, atol_scale=1e-4,
               values=[tf.convert_to_tensor(g).numpy() for g in grads])


def _start(name):
    keras = keras_mods()
    keras.backend.clear_session()
    keras.utils.set_random_seed(sum(map(ord, name)))
    return keras, keras.layers, np.random.default_rng(sum(map(ord, name)))


def unet(out, name):
    keras, L, rng = _start(name)
    inp = keras.Input((16, 16, 3))
    c1 = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    c2 = L.Conv2D(16, 3, padding="same", activation="relu")(L.MaxPooling2D()(c1))
    b = L.Conv2D(16, 3, padding="same", activation="gelu")(L.MaxPooling2D()(c2))
    u2 = L.Conv2DTranspose(16, 2, strides=2, padding="same")(b)
    c3 = L.Conv2D(16, 3, padding="same", activation="relu")(L.Concatenate()([u2, c2]))
    up_bilinear = L.UpSampling2D(interpolation="bilinear")(c3)
    up_nearest = L.UpSampling2D()(c3)
    c4 = L.Conv2D(8, 3, padding="same", activation="relu")(
        L.Concatenate()([up_bilinear, up_nearest, c1]))
    model = keras.Model(inp, L.Conv2D(2, 1)(c4))
    x = rng.standard_normal((BATCH, 16, 16, 3)).astype(np.float32)
    tape_grad_case(out, name, model, [tf.TensorSpec(x.shape, tf.float32, name="x")], [x],
                   "U-Net (Conv2DTranspose, UpSampling2D)")


def deeplab(out, name):
    keras, L, rng = _start(name)
    inp = keras.Input((16, 16, 3))
    x = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    b1 = L.Conv2D(8, 3, padding="same", dilation_rate=2, activation="relu")(x)
    b2 = L.Conv2D(8, 3, padding="same", dilation_rate=4, activation="relu")(x)
    b3 = L.DepthwiseConv2D(3, padding="same", dilation_rate=2)(x)
    x = L.Conv2D(8, 1)(L.Concatenate()([b1, b2, b3]))
    x = L.Lambda(lambda t: tf.nn.depth_to_space(t, 2))(x)
    x = L.Lambda(lambda t: tf.nn.space_to_depth(t, 4))(x)
    x = L.CenterCrop(10, 10)(L.Resizing(12, 12, interpolation="bilinear")(x))
    model = keras.Model(inp, L.Conv2D(3, 1)(x))
    x = rng.standard_normal((BATCH, 16, 16, 3)).astype(np.float32)
    tape_grad_case(out, name, model, [tf.TensorSpec(x.shape, tf.float32, name="x")], [x],
                   "DeepLab-style atrous convs, pixel shuffle")


def signal_ops(out, name):
    keras, L, rng = _start(name)
    w = tf.Variable(rng.standard_normal((8, 6)).astype(np.float32))

    class Model(keras.Model):
        def __init__(self):
            super().__init__()
            self.w = w
            self.mha = L.MultiHeadAttention(2, 4)

        def call(self, x, training=False):
            spec = tf.signal.stft(x, frame_length=16, frame_step=8, fft_length=16)
            mag = tf.math.log1p(tf.abs(spec))                                  # (2, 7, 9)
            c = tf.math.cumsum(mag, axis=1, exclusive=True, reverse=True)
            h = keras.ops.einsum("btf,fg->btg", c[:, :, :8], self.w)           # (2, 7, 6)
            h4, _, _ = tf.compat.v1.nn.fused_batch_norm(
                tf.reshape(h, [2, 7, 1, 6]), tf.constant([1.2] * 6),
                tf.constant([0.1] * 6), is_training=True)
            h = tf.reshape(h4, [2, 7, 6])
            h = h + self.mha(h, h, use_causal_mask=True)
            g = tf.gather_nd(h, [[0, 1], [1, 3], [1, 0]])
            im = tf.reshape(h[:, :6, :], [2, 6, 6, 1])
            parts = [tf.image.resize(im, [9, 11], "bilinear"),
                     tf.image.resize(im, [4, 5], "nearest"),
                     tf.image.resize(im, [8, 8], "bicubic")]
            return tf.concat([tf.reshape(p, [2, -1]) for p in parts]
                             + [tf.reshape(g, [2, -1])[:, :8]], 1)

    model = Model()
    x = rng.standard_normal((BATCH, 64)).astype(np.float32)
    model(x)
    tape_grad_case(out, name, model, [tf.TensorSpec(x.shape, tf.float32, name="x")], [x],
                   "tf.signal / image / BN-training ops")


CASES = {"keras_unet_grad": unet, "keras_deeplab_grad": deeplab,
         "tf2_signal_ops_grad": signal_ops}
