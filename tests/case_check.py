"""Run one TensorFlow-made case folder through the tfg CLI, the way the shared conformance
checker (../shared/conformance/check.py) does, so the project's own cases
(tests/fixtures/real_models/) run in a clone that has no ../shared.

A case folder holds graph.pb, feeds.npz, expected.npz and case.json (`kind` run or grad;
grad cases name `ys` and `xs`, and the gradient of x is fetched as `grad/<node>:0`).
Modes, how the graph reaches `tfg run` (all through pipes between CLI processes):

    run        tfg run on the graph as it is (grad cases: tfg grad first)
    optimize   tfg optimize --keep <fetch nodes> first
    pipeline   tfg grad | tfg optimize | tfg partition --devices cpu:3 | tfg run --devices cpu:3
    partition  tfg grad | tfg partition --devices cpu:2 --spread-loops | tfg run --devices
               cpu:2 (not optimized first: the graph's own loops, split node by node across
               two devices; by default placement keeps each loop nest on one device)
    cluster    tfg partition --cluster SPEC | tfg run --cluster SPEC (two `tfg worker`s)
    gpu        tfg run --devices gpu:1 (ops without a GPU kernel placed on the host's CPU)
    gpu_split  tfg partition --devices cpu:1,gpu:1 | tfg run --devices cpu:1,gpu:1 (the
               cost model splits the graph, loops included, between the CPU and the GPU)

`check_case` raises CaseFailure with one line saying what differed.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

TFG = f"{shlex.quote(sys.executable)} -m tfg"


class CaseFailure(AssertionError):
    pass


def node_of(tensor):
    name = tensor.lstrip("^")
    return name.rsplit(":", 1)[0] if ":" in name else name


def grad_name(x, prefix="grad"):
    node, _, port = x.partition(":")
    return f"{prefix}/{node}:0" if port in ("", "0") else f"{prefix}/{node}_{port}:0"


def load_meta(case_dir):
    with open(os.path.join(case_dir, "case.json")) as f:
        return json.load(f)


def load_run_case(case_dir):
    """A run case's (meta, graph, feeds, expected values in fetch order), for tests that run
    it in a Session of their own."""
    import tfg  # lazy: check.py's modes run the CLI only and never import the package
    meta = load_meta(case_dir)
    graph = tfg.load(os.path.join(case_dir, "graph.pb"))
    with np.load(os.path.join(case_dir, "feeds.npz")) as f:
        feeds = {k: f[k] for k in f.files}
    with np.load(os.path.join(case_dir, "expected.npz")) as f:
        expected = [f[k] for k in meta["fetches"]]
    return meta, graph, feeds, expected


def pipeline_command(case_dir, meta, mode, out, cluster=None, tfg=TFG):
    """The shell pipeline check.py runs for this case and mode; returns (command, fetches,
    expected keys)."""
    q = shlex.quote
    feeds = os.path.join(case_dir, "feeds.npz")
    graph = os.path.join(case_dir, "graph.pb")
    if meta["kind"] == "grad":
        fetches = [grad_name(x) for x in meta["xs"]]
        keys = meta["xs"]
        stage0 = f"{tfg} grad {q(graph)} --ys {','.join(meta['ys'])} --xs {','.join(meta['xs'])}"
    else:
        fetches = keys = meta["fetches"]
        stage0 = f"cat {q(graph)}"
    keep = ",".join(sorted({node_of(f) for f in fetches} | set(meta.get("targets", []))
                           | set(meta.get("init", []))))
    run_args = f"--feeds {q(feeds)} " + " ".join(f"--fetch {q(f)}" for f in fetches)
    run_args += "".join(f" --target {q(t)}" for t in meta.get("targets", []))
    run_args += "".join(f" --init {q(t)}" for t in meta.get("init", []))
    if meta.get("steps", 1) > 1:
        run_args += f" --steps {meta['steps']}"
    run_args += f" -o {q(out)}"
    if mode == "run":
        pipe = f"{stage0} | {tfg} run - {run_args}"
    elif mode == "optimize":
        pipe = f"{stage0} | {tfg} optimize - --keep {keep} | {tfg} run - {run_args}"
    elif mode == "pipeline":
        pipe = (f"{stage0} | {tfg} optimize - --keep {keep} | {tfg} partition - --devices cpu:3 "
                f"| {tfg} run - --devices cpu:3 {run_args}")
    elif mode == "partition":
        pipe = (f"{stage0} | {tfg} partition - --devices cpu:2 --spread-loops "
                f"| {tfg} run - --devices cpu:2 {run_args}")
    elif mode == "gpu":
        pipe = f"{stage0} | {tfg} run - --devices gpu:1 {run_args}"
    elif mode == "gpu_split":
        pipe = (f"{stage0} | {tfg} partition - --devices cpu:1,gpu:1 "
                f"| {tfg} run - --devices cpu:1,gpu:1 {run_args}")
    elif mode == "cluster":
        pipe = (f"{stage0} | {tfg} partition - --cluster {cluster} "
                f"| {tfg} run - --cluster {cluster} {run_args}")
    else:
        raise ValueError(f"unknown mode {mode}")
    return f"set -o pipefail; {pipe}", fetches, keys


def check_case(case_dir, mode, cluster=None, timeout=300, tfg=TFG):
    """Run the case in `mode` and compare with TensorFlow's values (case.json's tolerances;
    integer outputs exactly)."""
    meta = load_meta(case_dir)
    with tempfile.TemporaryDirectory(prefix="tfgcase") as tmp:
        out = os.path.join(tmp, "out.npz")
        cmd, fetches, keys = pipeline_command(case_dir, meta, mode, out, cluster, tfg)
        p = subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=timeout)
        if p.returncode != 0:
            err = p.stderr.decode(errors="replace").strip().splitlines()
            raise CaseFailure(f"exit {p.returncode}: {' | '.join(err[-3:])[:600]}")
        got = np.load(out)
        expected = np.load(os.path.join(case_dir, "expected.npz"))
        rtol, atol = meta.get("rtol", 1e-4), meta.get("atol", 1e-5)
        for f, k in zip(fetches, keys):
            if f not in got.files:
                raise CaseFailure(f"output has no {f!r} (has {got.files[:6]})")
            a, b = np.asarray(got[f]), expected[k]
            if a.shape != b.shape:
                raise CaseFailure(f"{f}: shape {a.shape} != expected {b.shape}")
            if b.dtype.kind in "biu":
                if not np.array_equal(a, b):
                    raise CaseFailure(f"{f}: {a.ravel()[:6]} != {b.ravel()[:6]}")
            elif not np.allclose(a, b, rtol=rtol, atol=atol):
                err = np.max(np.abs(a.astype(np.float64) - b))
                raise CaseFailure(f"{f}: max abs error {err:.3g} (atol {atol}, rtol {rtol})")
