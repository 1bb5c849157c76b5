#!/usr/bin/env python3
"""Real transformer backbones from keras-hub (a library no one here wrote), frozen by
TensorFlow, in the real-model suite's case layout. NEEDS TENSORFLOW AND keras-hub (pip
`keras-hub`, installed into the TensorFlow environment only, never into tfg's):

    /work/tfvenv/bin/python tools/gen_real_models_hub.py          # tests/fixtures/real_models_hub
    /work/tfvenv/bin/python tools/gen_real_models_hub.py --extra --out D   # the other families
    /work/tfvenv/bin/python tools/gen_real_models_hub.py --only hub_gpt2_grad,hub_t5

Each backbone is built from its constructor with a tiny config and random weights (never a
preset: presets download weights), given a trained network's scale (`rescale`), and frozen
as tools/gen_real_models.py freezes Keras models (convert_variables_to_constants_v2 of a
tf.function with a fixed input signature). Feeds follow the model's inputs: int32 token ids
and padding masks (the second sequence padded at the end), segment ids, images or audio
features. The expected values are TensorFlow's, from running the written GraphDef.

Kinds: `run` fetches every output (a dict's values in key order); `lm` is a training graph,
keras-hub's CausalLM head over the backbone with next-token cross-entropy; `grad` is sum(y * y)
of the backbone's last output. Both gradient kinds hold TensorFlow's GradientTape gradients
w.r.t. five weights spread over the model (and any float input).

COMMITTED (under 1.5 MB together) run in tests/test_real_models_hub.py in every mode; EXTRA
(every other family that works) is made on demand by its slow test.
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from gen_real_models import freeze, keras_mods, write_case  # noqa: E402
from gen_real_models_more import tape_grad_case  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "real_models_hub")
BATCH, SEQ, VOCAB, PAD = 2, 12, 64, 4


def start(name):
    keras = keras_mods()
    keras.backend.clear_session()
    keras.utils.set_random_seed(sum(map(ord, name)))
    return np.random.default_rng(sum(map(ord, name)))


def rescale(model, rng):
    """A trained network's scale: keras-hub draws kernels at std 0.02, which makes every
    attention nearly uniform and every layer nearly linear. Kernels get std
    1/sqrt(largest input dim), embeddings std 0.5, norm scales and biases random values
    around their identity (a zero-initialized scale, Gemma's 1 + scale, stays around 0)."""
    for v in model.weights:
        if not v.trainable or v.dtype not in ("float32", "float64"):
            continue
        shape, name = tuple(v.shape), v.path
        if len(shape) >= 2:
            std = 0.5 if "embedding" in name else 1.0 / np.sqrt(max(shape[:-1]))
            value = rng.standard_normal(shape) * std
        elif np.all(v.numpy() == 1.0):
            value = rng.uniform(0.6, 1.4, shape)
        else:
            value = v.numpy() + rng.normal(0.0, 0.2, shape)
        v.assign(value.astype(v.dtype))


def model_feeds(model, rng):
    """A feed per model input: token ids in [1, VOCAB) and padding masks with the second
    sequence padded (id 0, mask 0) at the end, segment ids 0 then 1, floats N(0, 1)."""
    feeds = {}
    inputs = model.input if isinstance(model.input, dict) else {"images": model.input}
    for name, t in inputs.items():
        shape = [BATCH] + [SEQ if d is None else d for d in t.shape[1:]]
        if "float" in str(t.dtype):
            feeds[name] = rng.standard_normal(shape).astype(t.dtype)
            continue
        seq = shape[1]
        if name.endswith("token_ids"):
            v = rng.integers(1, VOCAB, shape)
            v[1, seq - PAD:] = 0
        elif name.endswith("padding_mask"):
            v = np.ones(shape)
            v[1, seq - PAD:] = 0
        elif name == "segment_ids":
            v = np.broadcast_to(np.arange(seq) >= seq // 2, shape)
        else:
            raise ValueError(f"no feed for input {name!r}")
        feeds[name] = np.asarray(v, np.int32)
    return feeds


def _specs(feeds):
    return [tf.TensorSpec(v.shape, tf.as_dtype(v.dtype), name=n) for n, v in feeds.items()]


def _call(model, feeds, args):
    """model(...) on the feeds' tensors: a dict when the model takes one."""
    if isinstance(model.input, dict):
        return model(dict(zip(feeds, args)), training=False)
    return model(args[0], training=False)


def run_case(out, name, model, feeds, family):
    def call(*args):
        y = _call(model, feeds, args)
        return [y[k] for k in sorted(y)] if isinstance(y, dict) else y

    gd, ins, outs = freeze(call, _specs(feeds))
    write_case(out, name, gd, dict(zip(ins, feeds.values())), family, fetches=outs)


def grad_case(out, name, model, feeds, family):
    def loss(*args):
        y = _call(model, feeds, args)
        y = y[sorted(y)[-1]] if isinstance(y, dict) else y
        return tf.reduce_sum(y * y)

    tape_grad_case(out, name, model, _specs(feeds), list(feeds.values()), family,
                   nweights=5, loss=loss, skip_noise=True)


def lm_case(out, name, lm, feeds, family):
    """Next-token cross-entropy of a CausalLM (labels: the ids shifted left)."""
    feeds = dict(feeds, labels=np.roll(feeds["token_ids"], -1, axis=1))

    def loss(*args):
        logits = lm(dict(zip(list(feeds)[:-1], args[:-1])), training=False)
        return tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
            args[-1], logits, from_logits=True))

    tape_grad_case(out, name, lm, _specs(feeds), list(feeds.values()), family, nweights=5,
                   loss=loss, skip_noise=True)


def case(kind, ctor, family, task=None, **config):
    """A case maker: keras_hub.models.<ctor>(**config) (under <task> for `lm`)."""
    def make(out, name):
        import keras_hub  # noqa: PLC0415
        rng = start(name)
        model = getattr(keras_hub.models, ctor)(**config)
        if task:
            model = getattr(keras_hub.models, task)(model, preprocessor=None)
        rescale(model, rng)
        feeds = model_feeds(model.backbone if task else model, rng)
        {"run": run_case, "grad": grad_case, "lm": lm_case}[kind](out, name, model, feeds,
                                                                  family)
    return make


TEXT = dict(vocabulary_size=VOCAB, num_layers=2, hidden_dim=32, intermediate_dim=64)
BERTLIKE = dict(TEXT, num_heads=4, max_sequence_length=SEQ)
GQA = dict(TEXT, num_query_heads=4, num_key_value_heads=2)
IMAGE = dict(image_shape=(32, 32, 3), patch_size=8, num_layers=2, num_heads=4, hidden_dim=32)

COMMITTED = {
    "hub_bert": case("run", "BertBackbone", "keras-hub BERT", **BERTLIKE),
    "hub_t5": case("run", "T5Backbone", "keras-hub T5 (encoder-decoder, relative buckets)",
                   num_heads=4, key_value_dim=8, **dict(TEXT, num_layers=1)),
    "hub_swin": case("run", "SwinTransformerBackbone",
                     "keras-hub Swin (shifted windows: Roll, XlaDynamicUpdateSlice)",
                     image_shape=(16, 16, 3), embed_dim=16, depths=[2], num_heads=[2],
                     window_size=4, patch_size=2, drop_path=0.0),
    "hub_gpt2_grad": case("lm", "GPT2Backbone", "keras-hub GPT-2 causal LM (tied embeddings)",
                          task="GPT2CausalLM", **BERTLIKE),
    "hub_llama_grad": case("lm", "LlamaBackbone",
                           "keras-hub Llama causal LM (RMSNorm, RoPE, GQA)",
                           task="LlamaCausalLM", **GQA),
    "hub_deberta_v3_grad": case("grad", "DebertaV3Backbone",
                                "keras-hub DeBERTa-v3 (relative buckets, batched gathers)",
                                bucket_size=6, **dict(BERTLIKE, num_layers=1)),
    "hub_fnet_grad": case("grad", "FNetBackbone", "keras-hub FNet (FFT2D token mixing)",
                          **dict(TEXT, max_sequence_length=SEQ)),
}

EXTRA = {
    "hub_gemma": case("run", "GemmaBackbone", "keras-hub Gemma (soft caps, sliding window)",
                      head_dim=8, attention_logit_soft_cap=20.0, final_logit_soft_cap=30.0,
                      use_post_ffw_norm=True, use_post_attention_norm=True,
                      use_sliding_window_attention=True, sliding_window_size=6,
                      **dict(GQA, num_key_value_heads=1)),
    "hub_distilbert": case("run", "DistilBertBackbone", "keras-hub DistilBERT", **BERTLIKE),
    "hub_roberta": case("run", "RobertaBackbone", "keras-hub RoBERTa", **BERTLIKE),
    "hub_albert": case("run", "AlbertBackbone", "keras-hub ALBERT (factorized, shared)",
                       embedding_dim=16, **BERTLIKE),
    "hub_electra_grad": case("grad", "ElectraBackbone", "keras-hub ELECTRA", vocab_size=VOCAB,
                             num_layers=2, hidden_dim=32, intermediate_dim=64, embedding_dim=16,
                             num_heads=4, max_sequence_length=SEQ),
    "hub_bart_grad": case("grad", "BartBackbone", "keras-hub BART (encoder-decoder)",
                          **BERTLIKE),
    "hub_mistral": case("run", "MistralBackbone", "keras-hub Mistral (sliding window)",
                        sliding_window=5, **GQA),
    "hub_gemma_grad": case("grad", "GemmaBackbone", "keras-hub Gemma", head_dim=8,
                           attention_logit_soft_cap=20.0, final_logit_soft_cap=30.0,
                           **dict(GQA, num_key_value_heads=1)),
    "hub_gemma3_grad": case("grad", "Gemma3Backbone", "keras-hub Gemma3 (QK norm)",
                            image_size=None, head_dim=8, use_sliding_window_attention=True,
                            sliding_window_size=6, **dict(GQA, num_key_value_heads=1)),
    "hub_gpt_neox_grad": case("grad", "GPTNeoXBackbone", "keras-hub GPT-NeoX (partial rotary)",
                              **BERTLIKE),
    "hub_bloom_grad": case("grad", "BloomBackbone", "keras-hub BLOOM (ALiBi)", num_heads=4,
                           **TEXT),
    "hub_phi3": case("run", "Phi3Backbone", "keras-hub Phi-3", **GQA),
    "hub_qwen2": case("run", "Qwen2Backbone", "keras-hub Qwen2", **GQA),
    "hub_qwen3_grad": case("grad", "Qwen3Backbone", "keras-hub Qwen3", head_dim=8, **GQA),
    "hub_falcon": case("run", "FalconBackbone", "keras-hub Falcon", num_attention_heads=4,
                       **TEXT),
    "hub_opt": case("run", "OPTBackbone", "keras-hub OPT", **BERTLIKE),
    "hub_xlnet_grad": case("grad", "XLNetBackbone", "keras-hub XLNet (relative attention)",
                           num_heads=4, **TEXT),
    "hub_roformer_grad": case("grad", "RoformerV2Backbone", "keras-hub RoFormer-v2",
                              num_heads=4, head_size=8, **TEXT),
    "hub_esm2_grad": case("grad", "ESM2Backbone", "keras-hub ESM-2 (rotary)", num_heads=4,
                          **TEXT),
    "hub_mixtral_grad": case("grad", "MixtralBackbone", "keras-hub Mixtral (MoE: TopKV2)",
                             num_experts=4, top_k=2, **GQA),
    "hub_qwen3_moe": case("run", "Qwen3MoeBackbone", "keras-hub Qwen3-MoE",
                          moe_intermediate_dim=32, num_experts=4, top_k=2, head_dim=8, **GQA),
    "hub_gpt_oss_grad": case("grad", "GptOssBackbone", "keras-hub gpt-oss (MoE, sinks)",
                             num_experts=4, top_k=2, head_dim=8, **GQA),
    # float64: its channel mix squares relus, and the float32 rounding of the large sums
    # in one weight's gradient exceeds a tolerance sized by the smallest gradient
    "hub_rwkv7_grad": case("grad", "RWKV7Backbone", "keras-hub RWKV-7 (a recurrence)",
                           dtype="float64", hidden_size=32, head_size=8, num_layers=2,
                           vocabulary_size=VOCAB, intermediate_dim=64, gate_lora=8,
                           mv_lora=8, aaa_lora=8, decay_lora=8),
    "hub_whisper": case("run", "WhisperBackbone", "keras-hub Whisper (Conv1D encoder)",
                        num_heads=4, num_mels=8, max_encoder_sequence_length=16,
                        max_decoder_sequence_length=SEQ, **TEXT),
    "hub_vit_grad": case("grad", "ViTBackbone", "keras-hub ViT", mlp_dim=64, **IMAGE),
    "hub_deit": case("run", "DeiTBackbone", "keras-hub DeiT", intermediate_dim=64, **IMAGE),
    "hub_dinov2_grad": case("grad", "DINOV2Backbone", "keras-hub DINOv2", patch_size=8,
                            num_layers=2, hidden_dim=32, num_heads=4, intermediate_dim=64,
                            image_shape=(32, 32, 3), position_embedding_shape=(32, 32, 3)),
    "hub_dinov3": case("run", "DINOV3Backbone", "keras-hub DINOv3 (2-D rotary)", patch_size=8,
                       num_layers=2, hidden_dim=32, num_heads=4, intermediate_dim=64,
                       image_shape=(32, 32, 3)),
    "hub_mit_grad": case("grad", "MiTBackbone", "keras-hub MiT / SegFormer encoder",
                         layerwise_depths=[1, 1], num_layers=2, layerwise_num_heads=[1, 2],
                         layerwise_sr_ratios=[2, 1], max_drop_path_rate=0.0,
                         layerwise_patch_sizes=[7, 3], layerwise_strides=[4, 2],
                         image_shape=(32, 32, 3), hidden_dims=[16, 32]),
    "hub_swin_grad": case("grad", "SwinTransformerBackbone", "keras-hub Swin, two stages",
                          image_shape=(16, 16, 3), embed_dim=16, depths=[2, 2],
                          num_heads=[2, 4], window_size=4, patch_size=2, drop_path=0.0),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--extra", action="store_true", help="the families not committed")
    ap.add_argument("--only", default="", help="comma-separated case names")
    a = ap.parse_args()
    cases = dict(COMMITTED, **EXTRA)
    only = [n for n in a.only.split(",") if n]
    unknown = set(only) - set(cases)
    if unknown:
        raise SystemExit(f"unknown case(s): {sorted(unknown)}")
    os.makedirs(a.out, exist_ok=True)
    for n in only or (EXTRA if a.extra else COMMITTED):
        cases[n](a.out, n)


if __name__ == "__main__":
    main()
