"""Real-model loops split over devices: a step on `cpu:2` and on a 2-worker local cluster with
placement's default (each loop nest on one device, tfg/passes/place/simulate.py) against
`--spread-loops` (a loop's nodes placed one by one, crossing devices every iteration), and
on `cpu:1` for scale. Four loop cases of the real-model suite (benchmarks/bench_gpu.py's
loop_case: a Keras LSTM and BiLSTM over TensorLists, TF1 dynamic_rnn and bidirectional
gradients over TensorArrays and stacks); median of 15 steps after 3.

    PYTHONPATH=. python3 benchmarks/bench_loop_placement.py [--out FILE]
"""
import argparse
import json
import statistics
import sys
import time

from bench_gpu import loop_case
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.session import Session
from tfg.passes.partition import partition

CASES = ["keras_lstm", "tf1_dynamic_lstm_grad", "keras_bilstm_masked",
         "tf1_bidirectional_lstm_grad"]


def step_ms(graph, fetches, feeds, **where):
    s = Session(graph, **where)
    for _ in range(3):
        s.run(fetches, feeds=feeds)
    times = []
    for _ in range(15):
        t = time.perf_counter()
        s.run(fetches, feeds=feeds)
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1e3, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = {}
    quiet = lambda *args: None  # noqa: E731 - soft-placement warnings
    with LocalCluster(2) as cluster:
        for name in CASES:
            row = loop_case(name)
            g, f, x = row["graph"], row["fetches"], row["feeds"]
            r = {"cpu:1": step_ms(g, f, x, devices="cpu:1")}
            for spread in (False, True):
                tag = "spread" if spread else "together"
                r[f"cpu:2 {tag}"] = step_ms(partition(g, "cpu:2", spread_loops=spread,
                                                      warn=quiet), f, x, devices="cpu:2")
                r[f"cluster {tag}"] = step_ms(partition(g, cluster=cluster.spec,
                                                        spread_loops=spread, warn=quiet),
                                              f, x, cluster=cluster.spec)
            rows[name] = r
            print(name, json.dumps(r), flush=True)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
