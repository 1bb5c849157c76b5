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
