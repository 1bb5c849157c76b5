"""keras-hub's transformer backbones (tools/gen_real_models_hub.py: BERT, T5, Swin, GPT-2 and
Llama causal-LM training graphs, DeBERTa-v3, FNet), frozen by TensorFlow, through the tfg CLI
in the real-model suite's modes (tests/test_real_models.py's helpers, tests/case_check.py);
the `_grad` cases through `tfg grad` first, against TensorFlow's GradientTape gradients.

What runs where (about a minute on the shared 2-core machine, TensorFlow absent):
- every committed case in `run` and `optimize` mode, two in `pipeline` and `cluster` mode
  (PIPELINE_CI, CLUSTER_CI); every other (case, mode) pair is `slow`, TFG_REAL_MODELS=full;
- where TensorFlow is installed, what `tfg optimize`, `place` and `partition` write of each
  case runs in TensorFlow (test_real_models.check_tensorflow_runs);
- the other families (EXTRA: DistilBERT, RoBERTa, ALBERT, ELECTRA, BART, Mistral, Gemma,
  Gemma3, GPT-NeoX, BLOOM, Phi-3, Qwen2/3, Qwen3-MoE, Mixtral, gpt-oss, Falcon, OPT, XLNet,
  RoFormer-v2, ESM-2, RWKV-7, Whisper, ViT, DeiT, DINOv2/v3, MiT, a two-stage Swin) are made
  on demand by TFG_TF_PYTHON (with keras-hub installed) and run in every mode by the slow
  test at the end (TFG_REAL_MODELS=full too).

What these models found: XlaDynamicUpdateSlice (Swin's mask), BroadcastGradientArgs of equal
shapes (MiT's and Gemma3's attention gradients), GatherV2's gradient with batch_dims
(DeBERTa), FFT2D's gradient (FNet).
"""
import pytest

from case_check import check_case, load_meta
from conftest import FIXTURES
from test_real_models import (FULL, MODES, TF_PYTHON, TF_STAGES, check_tensorflow_runs,
                              made_on_demand)
from test_real_models import cluster  # noqa: F401  (the module's two-worker fixture)

CASE_ROOT = FIXTURES / "real_models_hub"
CASES = sorted(p.name for p in CASE_ROOT.iterdir() if (p / "case.json").exists())
PIPELINE_CI = {"hub_llama_grad"}
CLUSTER_CI = {"hub_t5"}
EXTRA = ["hub_gemma", "hub_distilbert", "hub_roberta", "hub_albert", "hub_electra_grad",
         "hub_bart_grad", "hub_mistral", "hub_gemma_grad", "hub_gemma3_grad",
         "hub_gpt_neox_grad", "hub_bloom_grad", "hub_phi3", "hub_qwen2", "hub_qwen3_grad",
         "hub_falcon", "hub_opt", "hub_xlnet_grad", "hub_roformer_grad", "hub_esm2_grad",
         "hub_mixtral_grad", "hub_qwen3_moe", "hub_gpt_oss_grad", "hub_rwkv7_grad",
         "hub_whisper", "hub_vit_grad", "hub_deit", "hub_dinov2_grad", "hub_dinov3",
         "hub_mit_grad", "hub_swin_grad"]


def _params():
    out = []
    for case in CASES:
        for mode in MODES:
            ci = mode in ("run", "optimize") or (mode == "pipeline" and case in PIPELINE_CI) \
                or (mode == "cluster" and case in CLUSTER_CI)
            marks = [] if ci else [pytest.mark.slow, pytest.mark.skipif(
                not FULL, reason="set TFG_REAL_MODELS=full")]
            out.append(pytest.param(case, mode, marks=marks, id=f"{case}-{mode}"))
    return out


@pytest.mark.parametrize("case,mode", _params())
def test_hub_model(case, mode, request):
    spec = request.getfixturevalue("cluster") if mode == "cluster" else None
    check_case(str(CASE_ROOT / case), mode, cluster=spec)


def test_suite_covers_the_families():
    """Encoder, encoder-decoder, image and causal-LM training graphs, and the ops they
    brought; small enough to commit."""
    metas = {c: load_meta(str(CASE_ROOT / c)) for c in CASES}
    assert {c for c, m in metas.items() if m["kind"] == "grad"} >= {
        "hub_gpt2_grad", "hub_llama_grad", "hub_deberta_v3_grad", "hub_fnet_grad"}
    ops = set().union(*(m["ops"] for m in metas.values()))
    for op in ("XlaDynamicUpdateSlice", "Roll", "FFT2D", "Einsum", "BatchMatMulV2", "Softmax",
               "Rsqrt", "Sin", "Cos", "GatherV2", "Sign", "Log"):
        assert op in ops, op
    size = sum(f.stat().st_size for f in CASE_ROOT.rglob("*") if f.is_file())
    assert size < 1_500_000, size


@pytest.mark.skipif(TF_PYTHON is None, reason="needs TensorFlow (TFG_TF_PYTHON)")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stage", TF_STAGES)
def test_tensorflow_runs_what_tfg_writes_of_hub_models(case, stage, tmp_path):
    check_tensorflow_runs(CASE_ROOT / case, stage, tmp_path)


@pytest.fixture(scope="module")
def extra_cases(tmp_path_factory):
    return made_on_demand(tmp_path_factory, "the other families", "gen_real_models_hub.py",
                          "--extra", needs="keras_hub")


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not FULL, reason="set TFG_REAL_MODELS=full (and TFG_TF_PYTHON)")
@pytest.mark.parametrize("name", EXTRA)
def test_other_hub_families_every_mode(name, extra_cases, request):
    spec = request.getfixturevalue("cluster")
    for mode in MODES:
        check_case(str(extra_cases / name), mode, cluster=spec)
