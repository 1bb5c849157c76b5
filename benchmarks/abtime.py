"""A B A B timing of TensorFlow against several tfg settings, for benchmarks/run.py's rows.

    tf_s, tfg_s = ab_medians(tf_time, {"default": step, "blas=1": step1}, reps=7, warmup=2)
    summary = settings_summary(tf_s, tfg_s)   # ratio of each, the best, default / best

`tf_time()` returns one TensorFlow step's seconds (timed in its own process); each tfg entry is
a callable running one step. Each repetition runs TensorFlow's step before every tfg setting
(A B A C A D: each tfg step has the same predecessor), with the settings' order rotating from
one repetition to the next, so a load that comes and goes lands on all of them alike. (Why
not A B C D: a step right after a 2-thread BLAS step measured up to 1.25x slower than the
same setting elsewhere, most likely OpenBLAS's worker still spinning after its call.)
Medians of `reps` (>= 5) are returned.
"""
import os
import statistics
import subprocess
import time


def ab_medians(tf_time, steps, reps, warmup):
    """(TensorFlow's median s, {label: tfg median s}) over max(5, reps) interleaved rounds."""
    def timed(step):
        t = time.perf_counter()
        step()
        return time.perf_counter() - t

    for _ in range(warmup):
        tf_time()
        for step in steps.values():
            step()
    tf_t, tfg_t = [], {k: [] for k in steps}
    order = list(steps)
    for r in range(max(5, reps)):
        for k in order[r % len(order):] + order[:r % len(order)]:
            tf_t.append(tf_time())
            tfg_t[k].append(timed(steps[k]))
    return statistics.median(tf_t), {k: statistics.median(v) for k, v in tfg_t.items()}


def settings_summary(tf_s, tfg_s, default="default"):
    """Row fields: tfg's default median and ratio, every setting's ratio, the best setting and
    how far the default is from it (the threading goal: default / best <= 1.2)."""
    best = min(tfg_s, key=tfg_s.get)
    return {"tf_median_s": tf_s, "tfg_median_s": tfg_s[default],
            "ratio": tfg_s[default] / tf_s,
            "tfg_by_setting_s": dict(tfg_s),
            "ratio_by_setting": {k: v / tf_s for k, v in tfg_s.items()},
            "best_setting": best, "default_vs_best": tfg_s[default] / tfg_s[best]}


def start_tf_worker(argv, what="TensorFlow worker"):
    """Start a TensorFlow timing worker (a script that prints "ready", then answers each graph
    name on stdin with its step time on stdout, optionally followed by the step's process CPU
    time) -> (process, tf_time(name)); the CPU times are appended to `tf_time.cpu`."""
    worker = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if worker.stdout.readline().strip() != "ready":
        raise SystemExit(f"the {what} failed to start")

    def tf_time(name):
        worker.stdin.write(name + "\n")
        worker.stdin.flush()
        fields = worker.stdout.readline().split()
        if len(fields) > 1:
            tf_time.cpu.append(float(fields[1]))
        return float(fields[0])

    tf_time.cpu = []
    return worker, tf_time


def switch_ab(folder, name, env_var, make_session, pairs):
    """One model of a folder `bench_keras.py --keep` wrote, in two tfg Sessions: one prepared
    with $`env_var` = "0" and one with "1" (the switch is read when a node is prepared), then
    `pairs` rounds of one step each, in alternating order. Returns ({"0": median ms, "1": ...},
    {"0": max error against TensorFlow's output relative to its largest value, "1": ...})."""
    import json

    import numpy as np

    import tfg
    meta = json.load(open(os.path.join(folder, name + ".json")))
    x = np.load(os.path.join(folder, name + "_x.npy"))
    y = np.load(os.path.join(folder, name + "_y.npy"))
    graph = tfg.load(os.path.join(folder, name + ".pb"))
    feeds = {meta["input"]: x}
    sessions = {f: make_session(graph) for f in ("0", "1")}
    errs = {}
    old = os.environ.get(env_var)
    try:
        for f, s in sessions.items():
            os.environ[env_var] = f
            for _ in range(4):  # prepared with the switch set, and warm
                got = s.run(meta["output"], feeds)
            errs[f] = float(np.abs(got - y).max() / max(1e-12, float(np.abs(y).max())))
    finally:
        if old is None:
            os.environ.pop(env_var, None)
        else:
            os.environ[env_var] = old
    times = {f: [] for f in sessions}
    for r in range(pairs):
        for f in (("0", "1") if r % 2 else ("1", "0")):
            t = time.perf_counter()
            sessions[f].run(meta["output"], feeds)
            times[f].append(time.perf_counter() - t)
    return {f: statistics.median(v) * 1e3 for f, v in times.items()}, errs
