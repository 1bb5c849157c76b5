"""GPU against tfg's own CPU, on the same machine: an MLP SGD step (784-1024-1024-10, batch 128),
CNN inference (two conv/pool blocks, batch 64), keras.applications ResNet50 and
MobileNetV2 inference (batch 32, 224x224x3), and the elementwise part of an LSTM cell (batch
256 x 1024), also with fused elementwise kernels off (TFG_GPU_FUSE=0: `gpu_unfused_ms`), and
two loop cases of the real-model suite (a Keras LSTM, a TF1 dynamic_rnn gradient: loop_case).

    PYTHONPATH=. python3 benchmarks/bench_gpu.py [--rows mlp_sgd_step,cnn_infer,...]
        [--out benchmarks/results/gpu.json] [--cpu-steps 2] [--gpu-steps 10]

Needs CuPy and a GPU (with TFG_GPU_STANDIN=1 it runs on the numpy stand-in: a check that the
script works, not a measurement). Each row: median step time on `cpu:1` and on `gpu:1`, their
ratio, and for the Keras models the largest error against TensorFlow's output
(benchmarks/models/<model>_expected.npz). The Keras graphs are stored with their weights as
splats (tools/gen_keras_apps.py); `refill` gives them back seeded random values of each
tensor's original mean and deviation before anything is timed. Every graph is first run
through `tfg.optimize` (the same graph for both devices). A step is `Session.run` with the
feed and the fetch, so host->device and device->host copies are in the GPU's time.
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import tfg
from tfg import builder as tb
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.schemas.dtypes import DType

HERE = pathlib.Path(__file__).resolve().parent
MODELS = HERE / "models"


def mlp_sgd_graph(batch, sizes, scale, seed=0):
    """An MLP of `sizes` (ReLU between layers, sparse softmax cross-entropy `loss`), its
    gradient from tfg.grad and one ApplyGradientDescent per variable under the NoOp `train`;
    -> (graph, variable names, feeds of `batch` rows). The GPU tests train a small one."""
    rng = np.random.default_rng(seed)
    names = []
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [batch, sizes[0]], name="x")
        y = tb.placeholder(tb.int32, [batch], name="y")
        h = x
        for i in range(len(sizes) - 1):
            w = tb.Variable((rng.standard_normal(sizes[i:i + 2]) * scale).astype(np.float32),
                            name=f"w{i}")
            b = tb.Variable(np.zeros(sizes[i + 1], np.float32), name=f"b{i}")
            names += [f"w{i}", f"b{i}"]
            h = tb.bias_add(tb.matmul(h, w), b)
            h = tb.relu(h) if i < len(sizes) - 2 else h
        tb.reduce_mean(tb.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h),
                       name="loss")
        tb.global_variables_initializer()
    graph = tfg.grad(g.graph, ys=["loss"], xs=names)
    graph.add_node("lr", "Const", [], {"dtype": DType.FLOAT, "value": np.float32(0.1)})
    for v in names:
        graph.add_node(f"sgd/{v}", "ApplyGradientDescent", [v, "lr", f"grad/{v}"],
                       {"T": DType.FLOAT})
    graph.add_node("train", "NoOp", [f"^sgd/{v}" for v in names])
    feeds = {"x:0": rng.standard_normal((batch, sizes[0])).astype(np.float32),
             "y:0": rng.integers(0, sizes[-1], batch).astype(np.int32)}
    return graph, names, feeds


def mlp():
    """The MLP SGD step row: 784-1024-1024-10 at batch 128."""
    graph, _, feeds = mlp_sgd_graph(128, [784, 1024, 1024, 10], 0.03)
    return {"graph": graph, "fetches": ["loss:0"], "targets": ["train"], "feeds": feeds,
            "init": ["init"]}


def cnn():
    rng = np.random.default_rng(1)
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [64, 32, 32, 3], name="x")
        h = x
        for c_in, c_out in ((3, 32), (32, 64)):
            w = tb.constant((rng.standard_normal((3, 3, c_in, c_out)) * 0.1).astype(np.float32))
            h = tb.max_pool(tb.relu(tb.conv2d(h, w, [1, 1, 1, 1], "SAME")),
                            [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        h = tb.reshape(h, [64, -1])
        w = tb.constant((rng.standard_normal((8 * 8 * 64, 10)) * 0.01).astype(np.float32))
        tb.softmax(tb.matmul(h, w), name="probs")
    feeds = {"x:0": rng.standard_normal((64, 32, 32, 3)).astype(np.float32)}
    return {"graph": g.graph, "fetches": ["probs:0"], "targets": [], "feeds": feeds}


def lstm_gates():
    """c2 = sigmoid(f + bf) * c + sigmoid(x + bi) * tanh(x + bj), h = tanh(c2) * sigmoid(x + bo):
    14 elementwise nodes, fused on a GPU into two kernels (c2 is fetched and read by h)."""
    rng = np.random.default_rng(2)
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [256, 1024], name="x")
        c = tb.placeholder(tb.float32, [256, 1024], name="c")
        bi, bj, bf, bo = (tb.constant(rng.standard_normal(1024).astype(np.float32))
                          for _ in range(4))
        one = tb.constant(np.float32(1.0))
        forget = tb.sigmoid(tb.add(tb.add(x, bf), one))
        c2 = tb.add(tb.multiply(forget, c),
                    tb.multiply(tb.sigmoid(tb.add(x, bi)), tb.tanh(tb.add(x, bj))), name="c2")
        tb.multiply(tb.tanh(c2), tb.sigmoid(tb.add(x, bo)), name="h")
    feeds = {"x:0": rng.standard_normal((256, 1024)).astype(np.float32),
             "c:0": rng.standard_normal((256, 1024)).astype(np.float32)}
    return {"graph": g.graph, "fetches": ["h:0", "c2:0"], "targets": [], "feeds": feeds,
            "fuse_compare": True}


def refill(shape, mean, std, index):
    """The values a splatted constant gets back (the same as tools/gen_keras_apps.py's)."""
    rng = np.random.default_rng(1000 + index)
    return (mean + std * rng.standard_normal(shape)).astype(np.float32)


def keras_model(name):
    meta = json.loads((MODELS / f"{name}.json").read_text())
    graph = io.load(str(MODELS / f"{name}.pb"))
    for index, (node_name, mean, std) in enumerate(meta["splats"]):
        node = graph[node_name]
        node.set_attr("value", refill(node.get_attr("value").shape, mean, std, index))
    out = meta["output"]
    graph = tfg.optimize(graph, keep=[out.split(":")[0]])
    size, batch = meta["size"], meta["batch"]
    x = np.random.default_rng(0).standard_normal((batch, size, size, 3)).astype(np.float32)
    with np.load(MODELS / f"{name}_expected.npz") as f:
        expected = f["y"]
    return {"graph": graph, "fetches": [out], "targets": [], "feeds": {meta["input"]: x},
            "expected": expected}


FIXTURES = HERE.parent / "tests" / "fixtures" / "real_models"


def loop_case(name):
    """A real-model loop case (tests/fixtures/real_models/<name>: a Keras LSTM over
    TensorLists, a TF1 dynamic_rnn over TensorArrays with `tfg grad`). Their list and array
    ops have no GPU kernel: on `gpu:1` they run on the host's CPU and each iteration's
    values cross between host and GPU; `split_ms` times `cpu:1,gpu:1` (the cost model)."""
    folder = FIXTURES / name
    meta = json.loads((folder / "case.json").read_text())
    graph = io.load(str(folder / "graph.pb"))
    with np.load(folder / "feeds.npz") as f:
        feeds = {k: f[k] for k in f.files}
    with np.load(folder / "expected.npz") as f:
        if meta["kind"] == "grad":
            graph = tfg.grad(graph, ys=meta["ys"], xs=meta["xs"])
            fetches = [f"grad/{meta['xs'][0].split(':')[0]}:0"]
            expected = f[meta["xs"][0]]
        else:
            fetches, expected = meta["fetches"][:1], f[meta["fetches"][0]]
    return {"graph": graph, "fetches": fetches, "targets": [], "feeds": feeds,
            "expected": expected, "split": True,
            # small steps: enough of them on the CPU too, after the compiled loops warm up
            "cpu_steps": 10, "cpu_warmup": 3}


ROWS = {"mlp_sgd_step": mlp, "cnn_infer": cnn,
        "resnet50_b32_infer": lambda: keras_model("resnet50"),
        "mobilenetv2_b32_infer": lambda: keras_model("mobilenetv2"),
        "lstm_gates_b256x1024": lstm_gates,
        "keras_lstm_loop": lambda: loop_case("keras_lstm"),
        "tf1_dynamic_lstm_grad_loop": lambda: loop_case("tf1_dynamic_lstm_grad")}


def timed(row, devices, steps, warmup):
    s = Session(row["graph"], devices=devices)
    if row.get("init"):
        s.run(targets=row["init"])
    for _ in range(warmup):
        out = s.run(row["fetches"], feeds=row["feeds"], targets=row["targets"])
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        out = s.run(row["fetches"], feeds=row["feeds"], targets=row["targets"])
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3, out[0]


def device_name():
    from tfg.executor.devices import array_module
    xp = array_module("GPU")
    if not hasattr(xp, "cuda"):
        return "stand-in (numpy, TFG_GPU_STANDIN)"
    name = xp.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--out", default=str(HERE / "results" / "gpu.json"))
    ap.add_argument("--cpu-steps", type=int, default=2)
    ap.add_argument("--gpu-steps", type=int, default=10)
    a = ap.parse_args()
    res = {"device": device_name(), "rows": {}}
    for label in a.rows.split(","):
        try:
            row = ROWS[label]()
            cpu_ms, cpu_out = timed(row, "cpu:1", row.get("cpu_steps", a.cpu_steps),
                                    row.get("cpu_warmup", 1))
            gpu_ms, gpu_out = timed(row, "gpu:1", a.gpu_steps, 2)
            r = {"cpu_ms": round(cpu_ms, 2), "gpu_ms": round(gpu_ms, 2),
                 "gpu_speedup": round(cpu_ms / gpu_ms, 2)}
            if row.get("fuse_compare"):  # the same on gpu:1 with fused elementwise kernels off
                os.environ["TFG_GPU_FUSE"] = "0"
                try:
                    plain_ms, plain_out = timed(row, "gpu:1", a.gpu_steps, 2)
                finally:
                    del os.environ["TFG_GPU_FUSE"]
                r["gpu_unfused_ms"] = round(plain_ms, 2)
                r["fusion_speedup"] = round(plain_ms / gpu_ms, 2)
                r["fused_vs_unfused_max_abs_diff"] = float(np.max(np.abs(gpu_out - plain_out)))
            if row.get("split"):  # the same split by the cost model over cpu:1,gpu:1
                r["split_ms"] = round(timed(row, "cpu:1,gpu:1", a.gpu_steps, 2)[0], 2)
            if not row["targets"]:  # inference: both devices computed the same thing
                r["gpu_vs_cpu_max_abs_diff"] = float(np.max(np.abs(gpu_out - cpu_out)))
            if "expected" in row:
                want = row["expected"]
                err = float(np.max(np.abs(gpu_out - want)))
                r["gpu_vs_tensorflow_max_abs_err"] = err
                r["gpu_matches_tensorflow"] = bool(err <= 1e-3 * float(np.max(np.abs(want))))
        except Exception as e:  # noqa: BLE001 - one failing row must not lose the others
            r = {"error": f"{type(e).__name__}: {e}"[:500]}
        res["rows"][label] = r
        print(label, json.dumps(r), flush=True)
    out = pathlib.Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))
    return 0 if all("error" not in r for r in res["rows"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
