#!/usr/bin/env python3
"""Make the real-model suite (issue 22): frozen graphs of models no one here wrote, with
TensorFlow's outputs, in the layout of the shared conformance cases.

NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_real_models.py                  # the committed cases
    /work/tfvenv/bin/python tools/gen_real_models.py --large --out D  # the full-size ones
    /work/tfvenv/bin/python tools/gen_real_models.py --only keras_lstm,tf1_beam_search

Each case is a folder <out>/<name>/ with graph.pb, feeds.npz, expected.npz and case.json,
exactly what /work/shared/conformance/check.py and tests/real_models_check.py read
(`kind` run or grad; grad cases name `ys` and `xs`, and the gradient of x is fetched as
`grad/<node>:0`). case.json also records the family, TensorFlow's node count and the ops.

Every model is built with fixed seeds and given a trained network's scale, so a near-zero
output cannot pass by accident: batch-norm gamma/beta are drawn at random and the moving
mean/variance are the batch statistics of a 16-image calibration batch (one forward pass in
training mode with momentum 0, so each layer sees the already-calibrated layers before it);
ConvNeXt's layer scales are raised from 1e-6 to ~0.5. Keras graphs are frozen with
convert_variables_to_constants_v2 (while loops lowered to v1 control flow, as TensorFlow's
own freezing does; `keras_lstm_functional` keeps the functional While and its library). The
TF1 cases (tf.compat.v1 graph mode, v1 control flow, weights as Consts: a frozen graph) run in
a child process (`--tf1`), since disabling control flow v2 is process-wide. The expected
values come from running the written GraphDef itself, imported into a fresh tf.Graph.

The committed cases are scaled-down members of each family (same layers and ops, fewer
channels and blocks, 32x32-64x64 inputs, batch 2, 10 classes) so the files stay < 3 MB; the
full-size keras.applications models (ResNet50, DenseNet121, InceptionV3, Xception, ...) are
`--large` and run by the slow test in tests/test_real_models.py.
"""
import argparse
import inspect
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "real_models")
BATCH, CALIB = 2, 16


# --------------------------------------------------------------------------- writing a case
def tf_run(graph_def, feeds, fetches, targets=(), init=(), steps=1):
    """Run a GraphDef as it is written: imported into a fresh graph, v1 Session; `init` once,
    then `steps` steps of fetches and targets together (the last step's fetches)."""
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf1.Session(graph=g) as sess:
            if init:
                sess.run(list(init))
            for _ in range(steps):
                values = sess.run([list(fetches), list(targets)], feeds)[0]
            return values


def tf_grads(graph_def, feeds, ys, xs):
    """tf.gradients of sum(ys) w.r.t. xs on the imported forward graph."""
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_def, name="")
        grads = tf1.gradients([g.get_tensor_by_name(y) for y in ys],
                              [g.get_tensor_by_name(x) for x in xs])
        with tf1.Session(graph=g) as sess:
            return sess.run([tf.convert_to_tensor(t) for t in grads], feeds)


def write_case(out, name, graph_def, feeds, family, fetches=None, ys=None, xs=None,
               rtol=1e-3, atol_scale=2e-4, values=None, targets=(), init=(), steps=1):
    """Write one case; TensorFlow's values come from the GraphDef as written.

    atol is atol_scale times the smallest fetch's largest magnitude: a float32 deep net differs in
    the last bits from one conv algorithm to another, and a tolerance tied to the output's
    scale keeps a wrong (e.g. all-zero) answer failing. `values`: gradients TensorFlow
    computed in the graph that built the loops (an imported graph has lost its while
    contexts, so tf.gradients cannot differentiate it)."""
    if xs:
        values = tf_grads(graph_def, feeds, ys, xs) if values is None else values
        keys, kind = xs, "grad"
    else:
        values = tf_run(graph_def, feeds, fetches, targets, init, steps)
        keys, kind = fetches, "run"
    expected = {k: np.asarray(v) for k, v in zip(keys, values)}
    floats = [np.max(np.abs(v)) for v in expected.values() if v.dtype.kind == "f" and v.size]
    # The smallest output's scale: a tolerance sized by the largest gradient would let a
    # wrong smaller one pass; rtol covers the large values.
    scale = float(min(floats)) if floats else 1.0
    for k, v in expected.items():
        assert np.all(np.isfinite(v)), (name, k)
        if v.dtype.kind == "f":
            assert np.max(np.abs(v)) > 1e-6 * max(scale, 1e-30), f"{name}: {k} is all zeros"
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
    np.savez(os.path.join(d, "feeds.npz"), **feeds)
    np.savez(os.path.join(d, "expected.npz"), **expected)
    ops = sorted({n.op for n in graph_def.node}
                 | {n.op for fn in graph_def.library.function for n in fn.node_def})
    meta = {"kind": kind, "family": family, "feeds": sorted(feeds), "rtol": rtol,
            "atol": float(f"{atol_scale * max(scale, 1e-3):.3g}"),
            "tf_node_count": len(graph_def.node),
            "tf_function_count": len(graph_def.library.function), "ops": ops}
    if kind == "grad":
        meta.update(ys=list(ys), xs=list(xs))
    else:
        meta.update(fetches=list(fetches), targets=list(targets), init=list(init), steps=steps)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    size = sum(os.path.getsize(os.path.join(d, p)) for p in os.listdir(d))
    print(f"{name:28s} {kind:4s} {len(graph_def.node):5d} nodes {size / 1e6:6.2f} MB "
          f"max|out| {scale:.3g}", flush=True)


# --------------------------------------------------------------------------- Keras models
def keras_mods():
    import keras  # noqa: PLC0415  (only the Keras half needs it; the TF1 child does not)
    return keras


def calibrate(model, calib, rng):
    """Give batch norms a trained network's statistics: random gamma/beta, then one training
    pass with momentum 0 so moving mean/var become the calibration batch's statistics (each
    layer normalized by the ones before it, as in a trained model)."""
    keras = keras_mods()
    bns = [layer for layer in model._flatten_layers()
           if isinstance(layer, keras.layers.BatchNormalization)]
    for bn in bns:
        n, dt = bn.moving_mean.shape[0], np.dtype(bn.moving_mean.dtype)
        if bn.gamma is not None:  # None with scale=False (InceptionV3)
            bn.gamma.assign(rng.uniform(0.6, 1.4, n).astype(dt))
        if bn.beta is not None:
            bn.beta.assign(rng.normal(0.0, 0.2, n).astype(dt))
        bn.momentum = 0.0
    for layer in model._flatten_layers():
        if type(layer).__name__ == "LayerScale":  # ConvNeXt starts at 1e-6: blocks would vanish
            layer.gamma.assign(rng.uniform(0.3, 0.7, layer.gamma.shape).astype(np.float32))
    if bns:
        model(calib, training=True)
    for bn in bns:
        bn.momentum = 0.99
    return len(bns)


def freeze(fn, specs, lower=True):
    from tensorflow.python.framework.convert_to_constants import (  # noqa: PLC0415
        convert_variables_to_constants_v2)
    concrete = tf.function(fn).get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower)
    return (frozen.graph.as_graph_def(), [t.name for t in frozen.inputs],
            [t.name for t in frozen.outputs])


def image_case(out, name, make, size, family, scale=1.0, grad=False, dtype="float32"):
    """A keras.applications-style classifier on (BATCH, size, size, 3), logits out.

    dtype float64 for a gradient case: in float32 the two correct answers (TensorFlow's and
    tfg's conv algorithms) differ by ~4e-5 at MobileNetV2's last layer, and among its 10^5
    pre-activations some always lie that close to a ReLU6 kink, so the masks differ and
    every gradient below moves by a few percent; in float64 they agree."""
    keras = keras_mods()
    keras.backend.clear_session()
    keras.utils.set_random_seed(sum(map(ord, name)))
    keras.backend.set_floatx(dtype)
    try:
        model = make((size, size, 3))
    finally:
        keras.backend.set_floatx("float32")
    rng = np.random.default_rng(sum(map(ord, name)))
    calib = (rng.standard_normal((CALIB, size, size, 3)) * scale).astype(dtype)
    nbn = calibrate(model, calib, rng)
    x = (rng.standard_normal((BATCH, size, size, 3)) * scale).astype(dtype)
    spec = tf.TensorSpec([BATCH, size, size, 3], dtype, name="x")
    if not grad:
        gd, ins, outs = freeze(lambda x: model(x, training=False), [spec])
        write_case(out, name, gd, {ins[0]: x}, family, fetches=outs)
        return
    labels = rng.integers(0, 10, BATCH).astype(np.int32)

    def loss(x, labels):
        logits = model(x, training=False)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))

    gd, ins, outs = freeze(loss, [spec, tf.TensorSpec([BATCH], tf.int32, name="labels")])
    xs = pick_weights(gd) + [ins[0]]
    feeds = stable_feeds(gd, outs, xs, {ins[0]: x, ins[1]: labels}, ins[0], rng, scale,
                         nudge=1e-4 if dtype == "float32" else 1e-9)
    write_case(out, name, gd, feeds, family, ys=outs, xs=xs)
    del nbn


def stable_feeds(gd, ys, xs, feeds, image, rng, scale, nudge, tries=10):
    """Feeds whose gradients do not hinge on a ReLU mask: a pre-activation within rounding
    noise of a kink (0 or 6) flips the mask between two correct implementations and moves
    every gradient below it (MobileNetV2's last Relu6 feeds all of them). Keep the first
    image whose gradients stay within the case's tolerance when it is perturbed by a relative
    `nudge`, more than the forward pass's rounding differences."""
    for _ in range(tries):
        base = tf_grads(gd, feeds, ys, xs)
        tol = 2e-4 * min(np.max(np.abs(g)) for g in base)
        for _ in range(3):
            x = feeds[image]
            nudged = dict(feeds, **{image: (x * (1 + nudge * rng.standard_normal(x.shape)))
                                    .astype(x.dtype)})
            if not all(np.allclose(a, b, rtol=1e-3, atol=tol)
                       for a, b in zip(base, tf_grads(gd, nudged, ys, xs))):
                break
        else:
            return feeds
        feeds = dict(feeds, **{image: (rng.standard_normal(feeds[image].shape) * scale)
                               .astype(feeds[image].dtype)})
    raise SystemExit("no feed with gradients away from every ReLU kink")


def pick_weights(gd):
    """Weights to differentiate: the filters of the first and a middle Conv2D, of the first
    and last DepthwiseConv2dNative, and the classifier's MatMul kernel."""
    by_op = {}
    for n in gd.node:
        by_op.setdefault(n.op, []).append(n)
    chosen = []
    convs, dws, mms = by_op.get("Conv2D", []), by_op.get("DepthwiseConv2dNative", []), \
        by_op.get("MatMul", [])
    for n in [convs[0], convs[len(convs) // 2], dws[0], dws[-1], mms[-1]]:
        t = n.input[1]
        chosen.append(t if ":" in t else t + ":0")
    return chosen


def app(ctor, **kw):
    def make(shape):
        return ctor(weights=None, input_shape=shape, classes=10, classifier_activation=None,
                    **kw)
    return make


def small_resnet(shape):
    from keras.src.applications import resnet  # noqa: PLC0415

    def stack_fn(x):
        x = resnet.stack_residual_blocks_v1(x, 16, 2, stride1=1, name="conv2")
        x = resnet.stack_residual_blocks_v1(x, 32, 2, name="conv3")
        return resnet.stack_residual_blocks_v1(x, 48, 2, name="conv4")
    return resnet.ResNet(stack_fn, False, True, weights=None, input_shape=shape, classes=10,
                         classifier_activation=None, name="resnet_small")


def small_densenet(shape):
    from keras.src.applications import densenet  # noqa: PLC0415
    return densenet.DenseNet([2, 2, 2, 2], weights=None, input_shape=shape, classes=10,
                             classifier_activation=None, name="densenet_small")


def small_efficientnet(shape):
    from keras.src.applications import efficientnet  # noqa: PLC0415
    return efficientnet.EfficientNet(0.4, 0.5, 64, dropout_rate=0.0, drop_connect_rate=0.0,
                                     weights=None, input_shape=shape, classes=10,
                                     classifier_activation=None, name="efficientnet_small")


def small_efficientnet_v2(shape):
    from keras.src.applications import efficientnet_v2  # noqa: PLC0415
    return efficientnet_v2.EfficientNetV2(
        0.4, 0.5, 64, dropout_rate=0.0, drop_connect_rate=0.0,
        blocks_args=efficientnet_v2.DEFAULT_BLOCKS_ARGS["efficientnetv2-b0"],
        weights=None, input_shape=shape, classes=10, classifier_activation=None,
        name="efficientnetv2_small")


def small_convnext(shape):
    from keras.src.applications import convnext  # noqa: PLC0415
    return convnext.ConvNeXt([1, 1, 2, 1], [16, 32, 48, 64], weights=None, input_shape=shape,
                             classes=10, classifier_activation=None, name="convnext_small")


def small_nasnet(shape):
    from keras.src.applications import nasnet  # noqa: PLC0415
    return nasnet.NASNet(input_shape=shape, penultimate_filters=96, num_blocks=1,
                         stem_block_filters=8, skip_reduction=False, filter_multiplier=2,
                         weights=None, classes=10, classifier_activation=None,
                         default_size=shape[0], name="nasnet_small")


def regnet_grouped(shape, width=(16, 32, 48), group=8):
    """RegNetX-style (Keras 3 has no RegNet): stem, then per stage a bottleneck of 1x1 conv,
    3x3 grouped Conv2D (groups = width / group), 1x1 conv, with batch norms and a residual."""
    keras = keras_mods()
    L = keras.layers
    inp = keras.Input(shape)
    x = L.ReLU()(L.BatchNormalization()(L.Conv2D(16, 3, 2, "same", use_bias=False)(inp)))
    for i, w in enumerate(width):
        stride = 1 if i == 0 else 2
        y = L.ReLU()(L.BatchNormalization()(L.Conv2D(w, 1, use_bias=False)(x)))
        y = L.Conv2D(w, 3, stride, "same", groups=w // group, use_bias=False,
                     name=f"stage{i}_grouped")(y)
        y = L.ReLU()(L.BatchNormalization()(y))
        y = L.BatchNormalization()(L.Conv2D(w, 1, use_bias=False)(y))
        skip = x if (stride == 1 and x.shape[-1] == w) else L.BatchNormalization()(
            L.Conv2D(w, 1, stride, use_bias=False)(x))
        x = L.ReLU()(L.Add()([y, skip]))
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(inp, L.Dense(10)(x), name="regnetx_grouped")


def transformer_case(out, name="keras_transformer", b=2, src=8, tgt=6, d=32, heads=4):
    """One encoder block (self-attention, exact-gelu FFN) and one decoder block (causal
    self-attention, cross-attention, tanh-gelu FFN), post-LayerNorm, logits over 12 tokens."""
    keras = keras_mods()
    L = keras.layers
    keras.backend.clear_session()
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(7)
    enc_in, dec_in = keras.Input((src, d)), keras.Input((tgt, d))
    gelu_exact = L.Activation(lambda t: keras.activations.gelu(t, approximate=False))
    gelu_tanh = L.Activation(lambda t: keras.activations.gelu(t, approximate=True))
    h = L.MultiHeadAttention(heads, d // heads)(enc_in, enc_in)
    h = L.LayerNormalization()(enc_in + h)
    f = L.Dense(d)(gelu_exact(L.Dense(2 * d)(h)))
    mem = L.LayerNormalization()(h + f)
    s = L.MultiHeadAttention(heads, d // heads)(dec_in, dec_in, use_causal_mask=True)
    s = L.LayerNormalization()(dec_in + s)
    c = L.MultiHeadAttention(heads, d // heads)(s, mem)
    c = L.LayerNormalization()(s + c)
    f = L.Dense(d)(gelu_tanh(L.Dense(2 * d)(c)))
    y = L.Dense(12)(L.LayerNormalization()(c + f))
    model = keras.Model([enc_in, dec_in], y)
    for layer in model._flatten_layers():
        if isinstance(layer, L.LayerNormalization):
            layer.gamma.assign(rng.uniform(0.6, 1.4, d).astype(np.float32))
            layer.beta.assign(rng.normal(0, 0.2, d).astype(np.float32))
    specs = [tf.TensorSpec([b, src, d], tf.float32, name="source"),
             tf.TensorSpec([b, tgt, d], tf.float32, name="target")]
    gd, ins, outs = freeze(lambda a, t: model([a, t], training=False), specs)
    feeds = {ins[0]: rng.standard_normal((b, src, d)).astype(np.float32),
             ins[1]: rng.standard_normal((b, tgt, d)).astype(np.float32)}
    write_case(out, name, gd, feeds, "Keras Transformer", fetches=outs)


def rnn_case(out, name, kind, lower=True, b=2, t=7, f=8, units=16, grad=False):
    """Keras LSTM / GRU stacks (return_sequences then last state), or a masked
    bidirectional LSTM over an Embedding with mask_zero (padded ids). grad: the frozen graph
    of sum(logits**2), differentiated w.r.t. the input and the weight Consts; TensorFlow's
    values come from a GradientTape on the Keras model (the frozen graph's loops have no
    while contexts for tf.gradients)."""
    keras = keras_mods()
    L = keras.layers
    keras.backend.clear_session()
    keras.utils.set_random_seed(sum(map(ord, name)))
    rng = np.random.default_rng(sum(map(ord, name)))
    if kind == "gru_simplernn":  # GRU(reset_after=False) then SimpleRNN, masked ids
        inp = keras.Input((t,), dtype="int32")
        x = L.Embedding(20, f, mask_zero=True)(inp)
        x = L.GRU(units, reset_after=False, return_sequences=True)(x)
        x = L.SimpleRNN(units)(x)
        model = keras.Model(inp, L.Dense(5)(x))
        ids = rng.integers(1, 20, (b, t)).astype(np.int32)
        ids[0, 5:] = 0
        ids[1, 2:] = 0
        spec = tf.TensorSpec([b, t], tf.int32, name="ids")
        feed = ids
    elif kind == "bilstm_masked":
        inp = keras.Input((t,), dtype="int32")
        x = L.Embedding(20, f, mask_zero=True)(inp)
        x = L.Bidirectional(L.LSTM(units, return_sequences=True))(x)
        x = L.Bidirectional(L.LSTM(units))(x)
        model = keras.Model(inp, L.Dense(5)(x))
        ids = rng.integers(1, 20, (b, t)).astype(np.int32)
        ids[0, 5:] = 0  # padding at the end of the first sequence
        ids[1, 3:] = 0
        spec = tf.TensorSpec([b, t], tf.int32, name="ids")
        feed = ids
    else:
        cell = L.LSTM if kind == "lstm" else L.GRU
        inp = keras.Input((t, f))
        x = cell(units, return_sequences=True)(inp)
        x = cell(units)(x)
        model = keras.Model(inp, L.Dense(5)(x))
        spec = tf.TensorSpec([b, t, f], tf.float32, name="x")
        feed = rng.standard_normal((b, t, f)).astype(np.float32)
    # A trained model's scale: embeddings ~N(0, 1) (Keras draws them in +-0.05) and a
    # classifier whose logits are O(1) rather than O(0.1).
    for layer in model._flatten_layers():
        if isinstance(layer, L.Embedding):
            layer.embeddings.assign(rng.standard_normal((20, f)).astype(np.float32))
    head = model.layers[-1]
    head.kernel.assign(head.kernel.numpy() * 6.0)
    if grad:
        keras_grad_case(out, name, model, spec, feed)
        return
    gd, ins, outs = freeze(lambda x: model(x, training=False), [spec], lower=lower)
    write_case(out, name, gd, {ins[0]: feed}, "Keras RNN", fetches=outs, atol_scale=1e-4)


def keras_grad_case(out, name, model, spec, feed):
    from tensorflow.python.framework.convert_to_constants import (  # noqa: PLC0415
        convert_variables_to_constants_v2)

    def loss(x):
        y = model(x, training=False)
        return tf.reduce_sum(y * y)

    concrete = tf.function(loss).get_concrete_function(spec)
    # The placeholder each variable is captured as becomes the Const of the same name.
    captured = {id(ext): internal.op.name for ext, internal in concrete.graph.captures}
    weights = [v for v in model.trainable_variables if len(v.shape) == 2]
    frozen = convert_variables_to_constants_v2(concrete)
    gd = frozen.graph.as_graph_def()
    consts = {n.name for n in gd.node if n.op == "Const"}
    xs = [captured[id(v.handle)] + ":0" for v in weights]
    assert all(x[:-2] in consts for x in xs), xs
    x = tf.constant(feed)
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = loss(x)
    grads = tape.gradient(value, weights + [x])
    xs.append(frozen.inputs[0].name)
    write_case(out, name, gd, {frozen.inputs[0].name: feed}, "Keras RNN",
               ys=[frozen.outputs[0].name], xs=xs, atol_scale=1e-4,
               values=[tf.convert_to_tensor(g).numpy() for g in grads])


SMALL = {
    "resnet_small": lambda o, n: image_case(o, n, small_resnet, 32, "ResNet (v1 bottleneck)"),
    "densenet_small": lambda o, n: image_case(o, n, small_densenet, 32, "DenseNet"),
    "mobilenetv2": lambda o, n: image_case(
        o, n, app(keras_mods().applications.MobileNetV2, alpha=0.35), 32, "MobileNetV2"),
    "mobilenetv3small": lambda o, n: image_case(
        o, n, app(keras_mods().applications.MobileNetV3Small, alpha=0.5), 32,
        "MobileNetV3Small", scale=60.0),
    "efficientnet_small": lambda o, n: image_case(o, n, small_efficientnet, 32,
                                                  "EfficientNet (B0 blocks)", scale=60.0),
    "efficientnetv2_small": lambda o, n: image_case(o, n, small_efficientnet_v2, 32,
                                                    "EfficientNetV2 (B0 blocks)", scale=60.0),
    "nasnet_small": lambda o, n: image_case(o, n, small_nasnet, 32, "NASNet (mobile cells)"),
    "convnext_small": lambda o, n: image_case(o, n, small_convnext, 32, "ConvNeXt", scale=60.0),
    "regnetx_grouped": lambda o, n: image_case(o, n, regnet_grouped, 32,
                                               "RegNetX-style grouped conv"),
    "mobilenetv2_grad": lambda o, n: image_case(
        o, n, app(keras_mods().applications.MobileNetV2, alpha=0.35), 32, "MobileNetV2",
        grad=True, dtype="float64"),
    "keras_transformer": lambda o, n: transformer_case(o, n),
    "keras_lstm": lambda o, n: rnn_case(o, n, "lstm"),
    "keras_gru": lambda o, n: rnn_case(o, n, "gru"),
    "keras_bilstm_masked": lambda o, n: rnn_case(o, n, "bilstm_masked"),
    "keras_lstm_functional": lambda o, n: rnn_case(o, n, "lstm", lower=False),
    "keras_lstm_grad": lambda o, n: rnn_case(o, n, "lstm", grad=True),
    "keras_gru_grad": lambda o, n: rnn_case(o, n, "gru", grad=True),
    "keras_gru_simplernn_functional": lambda o, n: rnn_case(o, n, "gru_simplernn",
                                                            lower=False),
}


def _more(out, name):
    import gen_real_models_more  # noqa: PLC0415  (it imports this module's helpers)
    gen_real_models_more.CASES[name](out, name)


# The real-model sweep's cases (tools/gen_real_models_more.py): U-Net, DeepLab-style, tf.signal
for _name in ("keras_unet_grad", "keras_deeplab_grad", "tf2_signal_ops_grad"):
    SMALL[_name] = _more
TF1 = ["tf1_dynamic_lstm_grad", "tf1_bidirectional_lstm_grad", "tf1_beam_search",
       "tf1_attention_seq2seq_grad", "tf1_train_step", "tf1_atrous_sparse_grad",
       "tf1_nested_while_grad"]


def large_apps():
    A = keras_mods().applications
    return {
        "resnet50": (A.ResNet50, 64, 1.0), "densenet121": (A.DenseNet121, 64, 1.0),
        "mobilenetv2_full": (A.MobileNetV2, 64, 1.0),
        "mobilenetv3small_full": (A.MobileNetV3Small, 64, 60.0),
        "efficientnetb0": (A.EfficientNetB0, 64, 60.0),
        "efficientnetv2b0": (A.EfficientNetV2B0, 64, 60.0),
        "inceptionv3": (A.InceptionV3, 75, 1.0), "xception": (A.Xception, 71, 1.0),
        "nasnetmobile": (A.NASNetMobile, 64, 1.0), "convnexttiny": (A.ConvNeXtTiny, 64, 60.0)}


LARGE = ["resnet50", "densenet121", "mobilenetv2_full", "mobilenetv3small_full",
         "efficientnetb0", "efficientnetv2b0", "inceptionv3", "xception", "nasnetmobile",
         "convnexttiny"]


def large_case(out, name):
    ctor, size, scale = large_apps()[name]
    # Older Keras took drop_connect_rate in EfficientNetB0 (a training-time layer: the
    # frozen inference graph is the same without it); Keras 3 no longer accepts it.
    kw = {}
    if name == "efficientnetb0" and "drop_connect_rate" in inspect.signature(ctor).parameters:
        kw = {"drop_connect_rate": 0.0}

    def make(shape):
        return ctor(weights=None, input_shape=shape, classes=1000, classifier_activation=None,
                    **kw)
    image_case(out, name, make, size, f"keras.applications {ctor.__name__}", scale=scale)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--large", action="store_true", help="the full-size keras.applications")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--tf1", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    only = [n for n in a.only.split(",") if n]
    if a.tf1:
        import gen_real_models_tf1  # noqa: PLC0415  (v1 control flow: this process only)
        gen_real_models_tf1.main(a.out, only or TF1)
        return
    names = LARGE if a.large else list(SMALL) + TF1
    if only:
        unknown = set(only) - set(LARGE) - set(SMALL) - set(TF1)
        if unknown:
            raise SystemExit(f"unknown case(s): {sorted(unknown)}")
        names = only
    os.makedirs(a.out, exist_ok=True)
    for n in names:
        if n in SMALL:
            SMALL[n](a.out, n)
        elif n in LARGE:
            large_case(a.out, n)
    tf1_names = [n for n in names if n in TF1]
    if tf1_names:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--tf1", "--out", a.out,
                        "--only", ",".join(tf1_names)], check=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
