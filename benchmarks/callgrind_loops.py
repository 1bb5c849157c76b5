#!/usr/bin/env python3
"""Instructions per step of the loop cases (valgrind's callgrind): a measure of tfg's work
that does not move with the machine's load, for A/B comparisons of loop changes.

    python3 benchmarks/bench_loops.py --cases lstm,gru,bilstm --save /tmp/cases
    python3 benchmarks/callgrind_loops.py /tmp/cases --cases lstm,gru,bilstm [--steps 5]
    python3 benchmarks/callgrind_loops.py /tmp/rnn --cases rnn --keep /tmp/cg.out
    python3 benchmarks/bench_keras.py --models nasnetmobile --keep   # prints its folder
    python3 benchmarks/callgrind_loops.py /tmp/tfgkerasXXXX --cases nasnetmobile
    callgrind_annotate /tmp/cg.out | head -40      # where the instructions go, by function

For each case saved by bench_loops.py's --save, runs the Session under callgrind with the
instrumentation off, switches it on (callgrind_control) after 3 warm-up steps for `--steps`
steps, and prints the instructions per step, and per loop iteration for the Keras cells (20
time steps; the BiLSTM's two loops count 40). BLAS at one thread. Case `rnn` takes a folder
`bench_rnn.py --save` wrote (the 50-step RNN and its `tfg grad` loop); a keras.applications
model, a folder `bench_keras.py --keep` wrote (its input fed, its output fetched). Needs valgrind on PATH;
run from the checkout whose tfg is measured. Repeat runs agree within about 0.1%.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ITERATIONS = {"lstm": 20, "gru": 20, "bilstm": 40}


def child(folder, case, steps, sync):
    """Warm up, then run `steps` steps between the parent's two callgrind_control toggles
    (files in `sync` say when)."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(HERE))
    if case == "rnn":  # (a folder bench_rnn.py --save wrote: its forward and gradient loops)
        from bench_rnn import FETCHES, load_case as rnn_case
        sess, feeds, _, _, _ = rnn_case(folder, 1)
        fetches = FETCHES
    elif os.path.exists(os.path.join(folder, case + "_x.npy")):  # bench_keras.py --keep
        import json

        import numpy as np

        import tfg
        from tfg.executor import Session
        meta = json.load(open(os.path.join(folder, case + ".json")))
        sess = Session(tfg.load(os.path.join(folder, case + ".pb")), blas_threads=1)
        feeds = {meta["input"]: np.load(os.path.join(folder, case + "_x.npy"))}
        fetches = meta["output"]
    else:
        from bench_loops import load_case
        sess, feeds, fetches, _, _ = load_case(folder, case, 1)
    for _ in range(3):
        sess.run(fetches, feeds)
    _signal(sync, "ready", str(os.getpid()))
    _wait(sync, "go")
    for _ in range(steps):
        sess.run(fetches, feeds)
    _signal(sync, "done")
    _wait(sync, "end")


def _signal(sync, name, text=""):
    with open(os.path.join(sync, name), "w") as f:
        f.write(text)


def _wait(sync, name, proc=None):
    while not os.path.exists(os.path.join(sync, name)):
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"callgrind_loops.py: the measured process ended early: "
                             f"{proc.stderr.read()[-300:]}")
        time.sleep(0.05)


def instructions(folder, case, steps, keep=None):
    """Instructions of `steps` steps alone: instrumentation on only around them (after the
    warm-up, so neither the import, the load nor the compile counts). `keep`: a file for
    callgrind's profile (for callgrind_annotate), else none is written."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as sync:
        proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                 "--callgrind-out-file=" + (keep or "/dev/null"), sys.executable,
                                 os.path.abspath(__file__), "--child", folder, case,
                                 str(steps), sync],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=env)
        _wait(sync, "ready", proc)
        pid = open(os.path.join(sync, "ready")).read()
        subprocess.run(["callgrind_control", "-i", "on", pid], capture_output=True)
        _signal(sync, "go")
        _wait(sync, "done", proc)
        subprocess.run(["callgrind_control", "-i", "off", pid], capture_output=True)
        _signal(sync, "end")
        _, err = proc.communicate()
    for line in err.splitlines():
        if "Collected" in line:
            return int(line.split()[-1])
    raise SystemExit(f"callgrind_loops.py: valgrind failed on {case}: {err[-300:]}")


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="cases saved by bench_loops.py --save")
    ap.add_argument("--cases", default="lstm,gru,bilstm")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--keep", metavar="FILE", help="keep callgrind's profile of the (last) "
                    "case in FILE, for callgrind_annotate")
    a = ap.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("callgrind_loops.py: valgrind is not installed", file=sys.stderr)
        return 2
    for case in a.cases.split(","):
        if not os.path.exists(os.path.join(a.folder, case + ".pb")):
            print(f"callgrind_loops.py: no case {case!r} in {a.folder}", file=sys.stderr)
            return 2
        per_step = instructions(a.folder, case, a.steps, a.keep) // a.steps
        iters = ITERATIONS.get(case)
        extra = f", {per_step // iters:,} per iteration" if iters else ""
        print(f"{case:10} {per_step:,} instructions per step{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
