#!/usr/bin/env bash
# Everything tfg checks on a GPU machine, in one run of at most ~9 minutes; results in $OUT.
#
#   cp -r ../shared/conformance .conformance      # (beforehand, where the cases are)
#   OUT=/some/dir bash tools/gpu_check.sh         # from the repository root, on the GPU machine
#
# No network is needed: tfg runs from this checkout (PYTHONPATH=.); wheels in .whl/ are
# installed into /tmp/site when protobuf/grpcio/click are missing. Each section has its own
# time limit, cut further so the whole run stays under BUDGET seconds, and a failing or hung
# section does not stop the next. Files written under $OUT (at most 7):
#   summary.txt        one line per section: exit status and seconds
#   env.txt            nvidia-smi, Python/CuPy/numpy versions, the GPU CuPy sees
#   pytest_gpu.txt     tests/test_gpu.py on CuPy: every GPU kernel against TensorFlow's fixture
#                      or the CPU kernel, MLP/CNN/variables/stacks, conformance on gpu:1 and
#                      cpu:1,gpu:1 (in process), with tfg grad for the grad cases
#   bench.txt, bench.json   benchmarks/bench_gpu.py, one row per process: MLP SGD step, CNN
#                      inference, ResNet50 and MobileNetV2 b32 on gpu:1 against cpu:1, and
#                      LSTM-cell gates b256x1024 with fused elementwise kernels on and off,
#                      two real-model loops (Keras LSTM, TF1 dynamic_rnn gradient) on cpu:1,
#                      gpu:1 and cpu:1,gpu:1
#   conformance.txt    the shared checker (check.py --mode run) through the CLI, `tfg run
#                      --devices gpu:1` for every case (tools/tfg_devices.sh adds the option)
#   real_graphs.txt    tests/test_real_graphs_gpu.py: the real-model and real-loop suites
#                      through the CLI on gpu:1 and split over cpu:1,gpu:1 (8 processes)
#   pytest_standin.txt tests/test_gpu_standin.py (the numpy stand-in, as CI runs it)
# ONLY=env,real_graphs (section names, as in summary.txt) runs just those sections.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# protobuf/grpcio/click/google-crc32c as wheels carried in .whl/ when the machine lacks them (no network).
if [ -d .whl ] && ! python3 -c "import google.protobuf, grpc, click, google_crc32c" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
        >> "$OUT/env.txt" 2>&1
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
export TFG_CONFORMANCE="$PWD/.conformance"
unset TFG_GPU_STANDIN
# GPU_CHECK_DRY=1 tries this script on a machine without a GPU (the numpy stand-in as `gpu:1`).
if [ -n "${GPU_CHECK_DRY:-}" ]; then export TFG_GPU_STANDIN=1; fi
BUDGET="${BUDGET:-560}"
START=$(date +%s)

# section NAME CAP RESERVE FILE CMD...: run CMD with a limit of CAP seconds, less if the time
# left minus RESERVE (kept for the sections after it) is smaller; output appended to FILE.
section() {
    local name=$1 cap=$2 reserve=$3 file=$4
    shift 4
    if [ -n "${ONLY:-}" ]; then
        [[ ",$ONLY," == *",$name,"* ]] || return
        reserve=0  # (the reserves are sized for every section; ONLY runs a few)
    fi
    local left=$(( BUDGET - ($(date +%s) - START) - reserve ))
    local limit=$(( cap < left ? cap : left ))
    if (( limit < 5 )); then
        echo "$name: skipped (no time left)" >> "$OUT/summary.txt"
        return
    fi
    local t0=$(date +%s)
    echo "=== $name (limit ${limit}s): $*" >> "$OUT/$file"
    timeout -k 5 "$limit" "$@" >> "$OUT/$file" 2>&1
    local rc=$?
    local note=""
    (( rc == 124 || rc == 137 )) && note=" (timed out)"
    echo "$name: exit $rc$note, $(( $(date +%s) - t0 ))s" >> "$OUT/summary.txt"
}

: > "$OUT/summary.txt"
section env 20 300 env.txt bash -c '
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
    python3 -c "import sys, numpy, cupy; print(sys.version); print(\"numpy\", numpy.__version__, \"cupy\", cupy.__version__); print(\"gpu\", cupy.cuda.runtime.getDeviceProperties(0)[\"name\"]); print(\"cases\", len([d for d in __import__(\"os\").listdir(\".conformance\")]))"
    nproc'
section pytest_gpu 120 190 pytest_gpu.txt python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py
section bench_mlp 30 160 bench.txt python3 benchmarks/bench_gpu.py --rows mlp_sgd_step \
    --out "$OUT/bench_mlp.json"
section bench_cnn 30 130 bench.txt python3 benchmarks/bench_gpu.py --rows cnn_infer \
    --out "$OUT/bench_cnn.json"
section bench_resnet50 70 60 bench.txt python3 benchmarks/bench_gpu.py \
    --rows resnet50_b32_infer --out "$OUT/bench_resnet50.json"
section bench_lstm_gates 20 40 bench.txt python3 benchmarks/bench_gpu.py \
    --rows lstm_gates_b256x1024 --out "$OUT/bench_lstm_gates.json"
section bench_mobilenetv2 45 40 bench.txt python3 benchmarks/bench_gpu.py \
    --rows mobilenetv2_b32_infer --out "$OUT/bench_mobilenetv2.json"
section bench_loops 60 40 bench.txt python3 benchmarks/bench_gpu.py \
    --rows keras_lstm_loop,tf1_dynamic_lstm_grad_loop --out "$OUT/bench_loops.json"
section conformance_cli 75 0 conformance.txt python3 .conformance/check.py --mode run \
    --timeout 60 --tfg "bash tools/tfg_devices.sh gpu:1" .conformance/*/
section real_graphs 200 40 real_graphs.txt python3 -m pytest -q -p no:cacheprovider -n 8 \
    tests/test_real_graphs_gpu.py
section pytest_standin 40 0 pytest_standin.txt env TFG_GPU_STANDIN=1 \
    python3 -m pytest -q -p no:cacheprovider tests/test_gpu_standin.py -k "not conformance"

# The benchmark rows as one file (at most 8 files come back).
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
merged = {"rows": {}}
for path in sorted(glob.glob(os.path.join(out, "bench_*.json"))):
    with open(path) as f:
        part = json.load(f)
    merged["device"] = part.get("device")
    merged["rows"].update(part.get("rows", {}))
    os.remove(path)
with open(os.path.join(out, "bench.json"), "w") as f:
    json.dump(merged, f, indent=2)
PY
echo "total: $(( $(date +%s) - START ))s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
