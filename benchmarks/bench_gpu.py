"""GPU vs CPU: an MLP SGD step (784-1024-1024-10, batch 128) and CNN inference.

Needs CuPy and a GPU:  PYTHONPATH=. python3 benchmarks/bench_gpu.py  (writes results/gpu.json)
"""
import json
import pathlib
import time

import numpy as np

from tfg import builder as tb
from tfg.executor.session import Session


def mlp():
    """Forward MLP from the builder, its gradient from tfg.grad, and one SGD update per
    variable (ApplyGradientDescent) grouped under the NoOp `train`."""
    import tfg
    from tfg.schemas.dtypes import DType

    rng = np.random.default_rng(0)
    names = []
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [128, 784], name="x")
        y = tb.placeholder(tb.int32, [128], name="y")
        h, sizes = x, [784, 1024, 1024, 10]
        for i in range(3):
            w = tb.Variable((rng.standard_normal(sizes[i:i + 2]) * 0.03).astype(np.float32),
                            name=f"w{i}")
            b = tb.Variable(np.zeros(sizes[i + 1], np.float32), name=f"b{i}")
            names += [f"w{i}", f"b{i}"]
            h = tb.bias_add(tb.matmul(h, w), b)
            h = tb.relu(h) if i < 2 else h
        tb.reduce_mean(tb.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h),
                       name="loss")
        tb.global_variables_initializer()
    graph = tfg.grad(g.graph, ys=["loss"], xs=names)
    graph.add_node("lr", "Const", [], {"dtype": DType.FLOAT, "value": np.float32(0.1)})
    for v in names:
        graph.add_node(f"sgd/{v}", "ApplyGradientDescent", [v, "lr", f"grad/{v}"],
                       {"T": DType.FLOAT})
    graph.add_node("train", "NoOp", [f"^sgd/{v}" for v in names])
    feeds = {"x:0": rng.standard_normal((128, 784)).astype(np.float32),
             "y:0": rng.integers(0, 10, 128).astype(np.int32)}
    return graph, ["loss:0"], ["train"], feeds


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
    return g.graph, ["probs:0"], [], {"x:0": rng.standard_normal((64, 32, 32, 3)).astype(np.float32)}


def timed(make, devices, steps=20):
    g, fetches, targets, feeds = make()
    s = Session(g, devices=devices)
    init = [n.name for n in g if n.name == "init"]
    if init:
        s.run(targets=init)
    for _ in range(3):
        s.run(fetches, feeds=feeds, targets=targets)
    t = time.perf_counter()
    for _ in range(steps):
        s.run(fetches, feeds=feeds, targets=targets)
    return (time.perf_counter() - t) / steps * 1e3


def main():
    import cupy
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    res = {"device": name}
    for label, make in (("mlp_sgd_step_ms", mlp), ("cnn_infer_ms", cnn)):
        res[label] = {"cpu": round(timed(make, "cpu:1"), 2), "gpu": round(timed(make, "gpu:1"), 2)}
        print(label, res[label], flush=True)
    out = pathlib.Path(__file__).parent / "results" / "gpu.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
