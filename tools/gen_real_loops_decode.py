"""Autoregressive decoding loops for tools/gen_real_loops.py (imported by it, and by
gen_real_loops_tf1.py in its `--tf1` child for TF1_CASES), NEEDS TENSORFLOW; never imports tfg.

A GPT-style decoder written with plain tf ops (token + position embeddings, 2 pre-norm layers
of causal multi-head self-attention and a GELU FFN, a final layer norm, an output head),
generating GEN tokens greedily after a prompt:

- tf2_gpt_kvconcat_functional / _lowered: a tf.function `tf.while_loop` whose KV cache grows
  by `tf.concat` each step (shape_invariants with a None time dim), as are the emitted ids and
  every step's logits; frozen keeping the functional While, and lowered to v1 control flow.
- tf2_gpt_kvscatter_functional: the same decoder over a preallocated time-major cache
  written with `tf.tensor_scatter_nd_update` at the step's position, attention masked to the
  positions written so far, ids written into a preallocated [B, GEN] buffer the same way.
- tf2_gpt_teacher_forced_grad: a teacher-forced decode loop (the target token fed back, the
  KV cache grown by concat), loss the summed cross-entropy; TensorFlow's GradientTape
  through the While, and `tf2_gpt_teacher_forced_tfgrad`: that tape gradient taken inside
  the tf.function (TensorFlow's gradient While over the cache's TensorList accumulators).
- tf1_greedy_decode_xattn (TF1_CASES, v1 control flow): an encoder (embedding + one
  self-attention layer) and a greedy decoder cross-attending over the encoder outputs with
  a source-length mask, emitting ids into a TensorArray, maximum_iterations, stopping when
  every row has emitted the end token (rows then emit end).
- hub_gpt2_generate_functional (when keras-hub is installed): keras_hub's GPT2CausalLM from
  a tiny constructor config (random weights, never a preset), its `generate_step` with the
  greedy sampler: keras-hub's While over `call_with_cache`, whose cache update is
  keras.ops.slice_update (XlaDynamicUpdateSlice).

Greedy decoding is only deterministic where the top two logits are apart: every case
asserts a margin at each step (seeded weights chosen so it holds), so tfg's last-bit float
differences cannot flip an id.
"""
import numpy as np
import tensorflow as tf

from gen_real_models import freeze, write_case

tf1 = tf.compat.v1
V, D, H, NL, P, GEN, B = 16, 8, 2, 2, 3, 8, 2
DH = D // H
MARGIN = 1e-3


def _weights(seed, make=tf.Variable, nl=NL):
    rng = np.random.default_rng(seed)

    def w(*shape, std=None):
        std = 1.0 / np.sqrt(shape[0]) if std is None else std
        return make((rng.standard_normal(shape) * std).astype(np.float32))

    layers = [dict(g1=make(rng.uniform(0.7, 1.3, D).astype(np.float32)), b1=w(D, std=0.1),
                   qkv=w(D, 3 * D), bqkv=w(3 * D, std=0.1), o=w(D, D), bo=w(D, std=0.1),
                   g2=make(rng.uniform(0.7, 1.3, D).astype(np.float32)), b2=w(D, std=0.1),
                   f1=w(D, 4 * D), bf1=w(4 * D, std=0.1), f2=w(4 * D, D), bf2=w(D, std=0.1))
              for _ in range(nl)]
    return dict(wte=w(V, D, std=1.0), wpe=w(P + GEN, D, std=1.0), head=w(D, V, std=1.0),
                layers=layers,
                gf=make(rng.uniform(0.7, 1.3, D).astype(np.float32)), bf=w(D, std=0.1)), rng


def _read(wt):
    """Every weight read once at the top of the function: a ResourceGather inside the loop
    freezes into a Gather of a float the While's resource input no longer matches
    (TensorFlow then refuses its own frozen graph)."""
    return tf.nest.map_structure(tf.convert_to_tensor, wt)


def _ln(x, g, b):
    mean = tf.reduce_mean(x, -1, keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), -1, keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-5) * g + b


def _heads(x):  # [B, T, D] -> [B, H, T, DH]
    return tf.transpose(tf.reshape(x, [tf.shape(x)[0], -1, H, DH]), [0, 2, 1, 3])


def _attend(q, k, v, mask):
    """q [B,H,T,DH] over k, v [B,H,S,DH]; mask broadcast to [.., T, S] (True: may attend)."""
    s = tf.matmul(q, k, transpose_b=True) * (1.0 / np.sqrt(DH))
    s = tf.where(mask, s, -1e9)
    y = tf.matmul(tf.nn.softmax(s), v)
    return tf.reshape(tf.transpose(y, [0, 2, 1, 3]), [tf.shape(q)[0], -1, D])


def _layer(lw, x, attn):
    """One pre-norm block; attn(q, k, v) -> [B, T, D] holds the cache logic."""
    h = _ln(x, lw["g1"], lw["b1"])
    q, k, v = tf.split(tf.einsum("btd,de->bte", h, lw["qkv"]) + lw["bqkv"], 3, -1)
    x = x + tf.einsum("btd,de->bte", attn(_heads(q), _heads(k), _heads(v)), lw["o"]) + lw["bo"]
    h = _ln(x, lw["g2"], lw["b2"])
    f = tf.nn.gelu(tf.einsum("btd,df->btf", h, lw["f1"]) + lw["bf1"])
    return x + tf.einsum("btf,fd->btd", f, lw["f2"]) + lw["bf2"]


def _logits(wt, x):
    return tf.einsum("bd,dv->bv", _ln(x, wt["gf"], wt["bf"]), wt["head"])


def _embed(wt, ids, pos):
    return tf.gather(wt["wte"], ids) + tf.gather(wt["wpe"], pos)


def _prefill(wt, prompt):
    """The prompt through the model with a causal mask: ([B, V] last logits, [k], [v])."""
    x = _embed(wt, prompt, tf.range(P))
    causal = tf.linalg.band_part(tf.ones([P, P], tf.bool), -1, 0)
    ks, vs = [], []
    for lw in wt["layers"]:
        def attn(q, k, v):
            ks.append(k)
            vs.append(v)
            return _attend(q, k, v, causal)
        x = _layer(lw, x, attn)
    return _logits(wt, x[:, -1]), ks, vs


def _check_margins(logits, what):
    top = np.sort(np.asarray(logits), -1)
    gap = float(np.min(top[..., -1] - top[..., -2]))
    assert gap > MARGIN, f"{what}: greedy margin {gap:.2g}; pick another seed"


def _prompt(rng):
    return rng.integers(0, V, (B, P)).astype(np.int32)


def gpt_concat_fn(weights, batch=B):
    def fn(prompt):
        wt = _read(weights)
        logits, ks, vs = _prefill(wt, prompt)
        tok = tf.argmax(logits, -1, output_type=tf.int32)
        ids, steps = tok[:, None], logits[:, None]

        def body(t, tok, ids, steps, ks, vs):
            x = _embed(wt, tok[:, None], (P + t)[None])
            new_k, new_v = [], []
            for lw, k_c, v_c in zip(wt["layers"], ks, vs):
                x = _layer(lw, x, _concat_attn(k_c, v_c, new_k, new_v))
            logits = _logits(wt, x[:, 0])
            tok = tf.argmax(logits, -1, output_type=tf.int32)
            return (t + 1, tok, tf.concat([ids, tok[:, None]], 1),
                    tf.concat([steps, logits[:, None]], 1), new_k, new_v)

        cache = tf.TensorShape([batch, H, None, DH])
        _, _, ids, steps, ks, vs = tf.while_loop(
            lambda t, *_: t < GEN - 1, body, (tf.constant(0), tok, ids, steps, ks, vs),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([batch]),
                              tf.TensorShape([batch, None]), tf.TensorShape([batch, None, V]),
                              [cache] * len(ks), [cache] * len(vs)))
        return ids, steps, ks[-1], vs[0]
    return fn


def gpt_concat(out, name, lower):
    """The functional case takes any batch size (fed 3 rows): its shapes are all unknown."""
    wt, rng = _weights(301)
    batch = B if lower else None
    prompt = rng.integers(0, V, (B if lower else 3, P)).astype(np.int32)
    fn = gpt_concat_fn(wt, batch)
    _check_margins(fn(tf.constant(prompt))[1], name)
    gd, ins, outs = freeze(fn, [tf.TensorSpec([batch, P], tf.int32, name="prompt")],
                           lower=lower)
    write_case(out, name, gd, {ins[0]: prompt}, "GPT greedy decode, KV cache grown by concat"
               + (" (lowered)" if lower else ""), fetches=outs, atol_scale=1e-4)


def _write(cache, pos, kv):
    """kv [B, H, n, DH] written into the time-major cache [T, B, H, DH] at pos.. pos+n-1."""
    idx = (pos + tf.range(tf.shape(kv)[2]))[:, None]
    return tf.tensor_scatter_nd_update(cache, idx, tf.transpose(kv, [2, 0, 1, 3]))


def _preallocated(ks, vs, tmax=P + GEN):
    zeros = tf.zeros([tmax, B, H, DH])
    return [_write(zeros, 0, k) for k in ks], [_write(zeros, 0, v) for v in vs]


def _scatter_attn(pos, k_c, v_c, new_k, new_v, tmax=P + GEN):
    """The step's k, v written into the preallocated caches at pos; attention over the
    positions written so far."""
    def attn(q, k, v):
        k_all, v_all = _write(k_c, pos, k), _write(v_c, pos, v)
        new_k.append(k_all)
        new_v.append(v_all)
        return _attend(q, tf.transpose(k_all, [1, 2, 0, 3]), tf.transpose(v_all, [1, 2, 0, 3]),
                       tf.range(tmax) <= pos)
    return attn


def _concat_attn(k_c, v_c, new_k, new_v):
    """The step's k, v appended to the caches by concat; attention over all of them."""
    def attn(q, k, v):
        k, v = tf.concat([k_c, k], 2), tf.concat([v_c, v], 2)
        new_k.append(k)
        new_v.append(v)
        return _attend(q, k, v, tf.constant(True))
    return attn


def gpt_scatter(out, name):
    weights, rng = _weights(311)
    prompt = _prompt(rng)

    def fn(prompt):
        wt = _read(weights)
        logits, ks, vs = _prefill(wt, prompt)
        ks, vs = _preallocated(ks, vs)
        tok = tf.argmax(logits, -1, output_type=tf.int32)
        rows = tf.range(B)
        ids = tf.tensor_scatter_nd_update(tf.zeros([B, GEN], tf.int32),
                                          tf.stack([rows, tf.zeros_like(rows)], 1), tok)
        step_ta = tf.TensorArray(tf.float32, GEN).write(0, logits)

        def body(t, tok, ids, step_ta, ks, vs):
            x = _embed(wt, tok[:, None], (P + t)[None])
            new_k, new_v = [], []
            for lw, k_c, v_c in zip(wt["layers"], ks, vs):
                x = _layer(lw, x, _scatter_attn(P + t, k_c, v_c, new_k, new_v))
            logits = _logits(wt, x[:, 0])
            tok = tf.argmax(logits, -1, output_type=tf.int32)
            ids = tf.tensor_scatter_nd_update(
                ids, tf.stack([rows, tf.fill([B], t + 1)], 1), tok)
            return t + 1, tok, ids, step_ta.write(t + 1, logits), new_k, new_v

        _, _, ids, step_ta, ks, vs = tf.while_loop(
            lambda t, *_: t < GEN - 1, body, (tf.constant(0), tok, ids, step_ta, ks, vs))
        return ids, tf.transpose(step_ta.stack(), [1, 0, 2]), ks[-1], vs[0]

    _check_margins(fn(tf.constant(prompt))[1], name)
    gd, ins, outs = freeze(fn, [tf.TensorSpec([B, P], tf.int32, name="prompt")], lower=False)
    write_case(out, name, gd, {ins[0]: prompt}, "GPT greedy decode, preallocated KV cache "
               "(tensor_scatter_nd_update)", fetches=outs, atol_scale=1e-4)


def teacher_forced_loss(weights, prompt, targets, scatter=False):
    """Mean cross-entropy of GEN next-token predictions after the prompt, each step fed the
    target token (teacher forcing), the KV cache grown by concat (scatter: preallocated)."""
    wt = _read(weights)
    logits, ks, vs = _prefill(wt, prompt)
    if scatter:
        ks, vs = _preallocated(ks, vs)
    ce = lambda lg, t: tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(t, lg))
    loss = ce(logits, targets[:, 0])

    def body(t, loss, ks, vs):
        x = _embed(wt, targets[:, t][:, None], (P + t)[None])
        new_k, new_v = [], []
        for lw, k_c, v_c in zip(wt["layers"], ks, vs):
            x = _layer(lw, x, _scatter_attn(P + t, k_c, v_c, new_k, new_v) if scatter
                       else _concat_attn(k_c, v_c, new_k, new_v))
        return t + 1, loss + ce(_logits(wt, x[:, 0]), targets[:, t + 1]), new_k, new_v

    cache = tf.TensorShape([GEN + P, B, H, DH] if scatter else [B, H, None, DH])
    _, loss, _, _ = tf.while_loop(lambda t, *_: t < GEN - 1, body,
                                  (tf.constant(0), loss, ks, vs),
                                  shape_invariants=(tf.TensorShape([]), tf.TensorShape([]),
                                                    [cache] * len(ks), [cache] * len(vs)))
    return loss / (B * GEN)


def _tf_inputs(rng):
    return _prompt(rng), rng.integers(0, V, (B, GEN)).astype(np.int32)


def gpt_teacher_forced(out, name, scatter=False, lower=True):
    """Frozen lowered to v1 control flow by TensorFlow (lower) or with its functional While
    (tfg lowers it), differentiated by tfg grad w.r.t. seven weights."""
    from tensorflow.python.framework.convert_to_constants import (  # noqa: PLC0415
        convert_variables_to_constants_v2)
    wt, rng = _weights(321)
    prompt, targets = _tf_inputs(rng)
    fn = lambda p, t: teacher_forced_loss(wt, p, t, scatter)
    specs = [tf.TensorSpec([B, P], tf.int32, name="prompt"),
             tf.TensorSpec([B, GEN], tf.int32, name="targets")]
    concrete = tf.function(fn).get_concrete_function(*specs)
    captured = {id(ext): internal.op.name for ext, internal in concrete.graph.captures}
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower)
    gd = frozen.graph.as_graph_def()
    l0, l1 = wt["layers"]
    weights = [wt["wte"], wt["wpe"], l0["qkv"], l0["g1"], l1["o"], l1["f2"], wt["head"]]
    with tf.GradientTape() as tape:
        value = fn(tf.constant(prompt), tf.constant(targets))
    grads = tape.gradient(value, weights)
    feeds = {t.name: f for t, f in zip(frozen.inputs, (prompt, targets))}
    write_case(out, name, gd, feeds, "GPT teacher-forced decode loss " + (
        "(preallocated KV cache, functional While)" if scatter else "(KV concat, lowered)"),
               ys=[frozen.outputs[0].name], xs=[captured[id(w.handle)] + ":0" for w in weights],
               atol_scale=1e-4, values=[tf.convert_to_tensor(g).numpy() for g in grads])


def gpt_teacher_forced_tfgrad(out, name):
    """The tape gradient taken inside the tf.function, functional While kept (one layer:
    TensorFlow's gradient functions are ~150 KB a layer)."""
    wt, rng = _weights(321, make=tf.constant, nl=1)
    prompt, targets = _tf_inputs(rng)
    l0, = wt["layers"]

    def fn(p, t):
        ws = [wt["wte"], wt["head"], l0["qkv"], l0["f2"]]
        with tf.GradientTape() as tape:
            tape.watch(ws)
            loss = teacher_forced_loss(wt, p, t)
        return [loss] + tape.gradient(loss, ws)

    specs = [tf.TensorSpec([B, P], tf.int32, name="prompt"),
             tf.TensorSpec([B, GEN], tf.int32, name="targets")]
    gd, ins, outs = freeze(fn, specs, lower=False)
    write_case(out, name, gd, dict(zip(ins, (prompt, targets))), "GPT teacher-forced decode "
               "loss with its GradientTape in the tf.function (TensorFlow's gradient While)",
               fetches=outs, atol_scale=1e-4)


def hub_gpt2_generate(out, name, seq=10, prompt_len=3):
    """keras_hub GPT2CausalLM.generate_step (greedy, stop tokens that end both rows early)
    frozen with its While kept; also the logits of the final ids (a float output)."""
    import keras  # noqa: PLC0415  (keras-hub cases only)
    import keras_hub  # noqa: PLC0415  (optional: only this case needs it)
    keras.backend.clear_session()
    keras.utils.set_random_seed(331)
    rng = np.random.default_rng(331)
    backbone = keras_hub.models.GPT2Backbone(vocabulary_size=V, num_layers=2, num_heads=2,
                                             hidden_dim=8, intermediate_dim=16,
                                             max_sequence_length=seq, dropout=0.0)
    for v in backbone.weights:  # a trained network's scale (see gen_real_models_hub.rescale)
        shape = tuple(v.shape)
        if len(shape) >= 2:
            std = 0.7 if "embedding" in v.path else 1.0 / np.sqrt(max(shape[:-1]))
            v.assign((rng.standard_normal(shape) * std).astype(np.float32))
        else:
            v.assign((v.numpy() + rng.normal(0.0, 0.2, shape)).astype(np.float32))
    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    lm.compile(sampler="greedy")
    ids = np.zeros((B, seq), np.int32)
    mask = np.zeros((B, seq), bool)
    ids[:, :prompt_len] = rng.integers(1, V, (B, prompt_len))
    mask[:, :prompt_len] = True

    free = lm.generate_step({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
    free = np.asarray(free["token_ids"])
    # stop at row 0's third new token and row 1's fifth, if neither comes earlier
    stops = (int(free[0, prompt_len + 2]), int(free[1, prompt_len + 4]))

    def fn(token_ids, padding_mask):
        out_ = lm.generate_step({"token_ids": token_ids, "padding_mask": padding_mask},
                                stop_token_ids=stops)
        hidden, cache = lm._build_cache(out_["token_ids"])  # the final ids' logits too
        return out_["token_ids"], out_["padding_mask"], lm.backbone.token_embedding(
            hidden, reverse=True)

    specs = [tf.TensorSpec([B, seq], tf.int32, name="token_ids"),
             tf.TensorSpec([B, seq], tf.bool, name="padding_mask")]
    got = fn(tf.constant(ids), tf.constant(mask))
    _check_margins(got[2][:, prompt_len - 1:-1], name)
    assert not np.all(got[1]), f"{name}: no row stopped early ({stops}, {free})"
    gd, ins, outs = freeze(fn, specs, lower=False)
    write_case(out, name, gd, dict(zip(ins, (ids, mask))), "keras_hub GPT2CausalLM greedy "
               "generate_step (call_with_cache, slice_update)", fetches=outs, atol_scale=1e-4)


def tf1_greedy_xattn(out, name, b=3, src=6, units=8, vocab=9, end=1, max_len=10):
    from gen_real_loops_tf1 import session_case  # noqa: PLC0415  (the TF1 child only)
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(341)
        c = lambda *s, std=None: tf.constant(
            (rng.randn(*s) * (1.0 / np.sqrt(s[0]) if std is None else std)).astype(np.float32))
        source = tf1.placeholder(tf.int32, (b, src), name="source")
        src_len = tf1.placeholder(tf.int32, (b,), name="source_lengths")
        emb_src, emb_tgt = c(vocab, units, std=1.0), c(vocab, units, std=1.0)
        wq, wk, wv, wo = (c(units, units) for _ in range(4))
        xq, xk, xv = (c(units, units) for _ in range(3))
        w_h, w_out = c(2 * units, units), c(units, vocab)
        mask = tf.sequence_mask(src_len, src)
        x = tf.gather(emb_src, source)
        att = lambda q, k, m: tf.nn.softmax(tf.where(
            m, tf.matmul(q, k, transpose_b=True) / np.sqrt(units), -1e9))
        self_a = att(tf.tensordot(x, wq, 1), tf.tensordot(x, wk, 1), mask[:, None, :])
        memory = tf.nn.relu(x + tf.tensordot(tf.matmul(self_a, tf.tensordot(x, wv, 1)), wo, 1))
        keys, values = tf.tensordot(memory, xk, 1), tf.tensordot(memory, xv, 1)
        h0 = tf.reduce_sum(memory * tf.cast(mask, tf.float32)[:, :, None], 1) / tf.cast(
            src_len, tf.float32)[:, None]
        ids_ta = tf1.TensorArray(tf.int32, size=0, dynamic_size=True, name="ids")
        logits_ta = tf1.TensorArray(tf.float32, size=0, dynamic_size=True, name="logits")
        bonus = tf.one_hot(end, vocab) * 0.6  # a length bonus for `end`: rows finish

        def body(t, h, token, done, length, ids_ta, logits_ta):
            q = tf.matmul(tf.tanh(h + tf.gather(emb_tgt, token)), xq)[:, None]
            alpha = att(q, keys, mask[:, None, :])
            context = tf.matmul(alpha, values)[:, 0]
            h = tf.tanh(tf.matmul(tf.concat([h, context], 1), w_h))
            logits = tf.matmul(h, w_out) + tf.cast(t, tf.float32) * bonus
            new = tf.argmax(logits, 1, output_type=tf.int32)
            new = tf.where(done, tf.fill([b], end), new)
            length = length + tf.cast(tf.logical_not(done), tf.int32)
            return (t + 1, h, new, tf.logical_or(done, tf.equal(new, end)), length,
                    ids_ta.write(t, new), logits_ta.write(t, tf.where(done[:, None], 0.0,
                                                                       logits)))

        loop = tf1.while_loop(
            lambda t, h, tok, done, *_: tf.logical_not(tf.reduce_all(done)), body,
            (tf.constant(0), h0, tf.zeros([b], tf.int32), tf.zeros([b], tf.bool),
             tf.zeros([b], tf.int32), ids_ta, logits_ta), maximum_iterations=max_len)
        fetches = [tf.transpose(loop[5].stack(), name="decoded_ids"),
                   tf.identity(loop[4], name="lengths"), tf.identity(loop[0], name="steps"),
                   tf.identity(loop[1], name="final_state"),
                   tf.transpose(loop[6].stack(), [1, 0, 2], name="step_logits")]
        feeds = {"source:0": rng.randint(0, vocab, (b, src)).astype(np.int32),
                 "source_lengths:0": np.array([6, 2, 4], np.int32)}
        with tf1.Session(graph=g) as sess:
            steps, lengths, logits = sess.run([fetches[2], fetches[1], fetches[4]], feeds)
    assert steps < max_len and len(set(lengths)) > 1, (steps, lengths)
    for row, n in zip(logits, lengths):  # rows past their end emit zeros, not argmaxes
        _check_margins(row[:n], name)
    session_case(out, name, g, feeds, "TF1 greedy decoder, cross-attention, early stop",
                 fetches=fetches, atol_scale=1e-4)


CASES = {"tf2_gpt_kvconcat_functional": lambda o, n: gpt_concat(o, n, False),
         "tf2_gpt_kvconcat_lowered": lambda o, n: gpt_concat(o, n, True),
         "tf2_gpt_kvscatter_functional": gpt_scatter,
         "tf2_gpt_teacher_forced_grad": gpt_teacher_forced,
         "tf2_gpt_kvscatter_teacher_forced_grad": lambda o, n: gpt_teacher_forced(
             o, n, scatter=True, lower=False),
         "tf2_gpt_teacher_forced_tfgrad": gpt_teacher_forced_tfgrad,
         "hub_gpt2_generate_functional": hub_gpt2_generate}
TF1_CASES = {"tf1_greedy_decode_xattn": tf1_greedy_xattn}
