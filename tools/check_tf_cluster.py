#!/usr/bin/env python3
"""The shared conformance in cluster mode with TensorFlow servers as the two workers.

    python3 tools/check_tf_cluster.py --tfg "python3 -m tfg" ../shared/conformance/*/

Starts two `tf.distribute.Server` tasks on loopback (tools/tf_server.py, run with
--tf-python, default $TFG_TF_PYTHON), then checks each case as check.py's `cluster` mode does
(`tfg partition --cluster SPEC | tfg run --cluster SPEC`), with TFG_ENGINE=tensorflow so that
`tfg run` drives the TensorFlow servers. check.py is the one beside the cases (or --check).
With --mixed task 1 is a `tfg worker` instead (it serves tensorflow.WorkerService too).
Prints one line per case and 'N passed, N failed'; exits 1 if any failed, 2 when TensorFlow
is missing.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load_check(path):
    spec = importlib.util.spec_from_file_location("conformance_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_tf_servers(tf_python, n, free_port, wait=120, tfg_tasks=(), tfg=None):
    """n tasks of job `worker` on loopback -> (SPEC, processes): TensorFlow servers, except
    the indices in `tfg_tasks`, which are `tfg worker`s (`tfg`: the command)."""
    ports = [free_port() for _ in range(n)]
    spec = "worker=" + ",".join(f"127.0.0.1:{p}" for p in ports)
    procs, tf_procs = [], []
    for i in range(n):
        if i in tfg_tasks:
            procs.append(subprocess.Popen(
                tfg.split() + ["worker", "--cluster", spec, "--job", "worker", "--task", str(i)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        else:
            procs.append(subprocess.Popen(
                [tf_python, os.path.join(HERE, "tf_server.py"), "--cluster", spec, "--task",
                 str(i)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
            tf_procs.append(procs[-1])
    deadline = time.time() + wait
    for p in tf_procs:  # "ready" once the server listens (TensorFlow's import takes a while)
        line = p.stdout.readline()
        if not line.startswith("ready") or time.time() > deadline:
            stop(procs)
            raise SystemExit(f"a TensorFlow server did not start ({line.strip() or 'no output'})")
    return spec, procs


def stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--tfg", default="tfg")
    ap.add_argument("--tf-python", default=os.environ.get("TFG_TF_PYTHON", sys.executable))
    ap.add_argument("--check", default=None, help="check.py (default: beside the cases)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--kinds", default="run,train,grad")
    ap.add_argument("--mixed", action="store_true", help="task 1 is a tfg worker")
    a = ap.parse_args()
    probe = subprocess.run([a.tf_python, "-c", "import tensorflow"], capture_output=True)
    if probe.returncode != 0:
        print(f"check_tf_cluster: {a.tf_python} cannot import tensorflow (set TFG_TF_PYTHON)",
              file=sys.stderr)
        return 2
    cases = sorted(c for c in a.cases if os.path.exists(os.path.join(c, "case.json")))
    if not cases:
        print("check_tf_cluster: no case folders given", file=sys.stderr)
        return 2
    check = load_check(a.check or os.path.join(os.path.dirname(os.path.abspath(
        cases[0].rstrip("/"))), "check.py"))
    os.environ["TFG_ENGINE"] = "tensorflow"
    spec, procs = start_tf_servers(a.tf_python, 2, check.free_port,
                                   tfg_tasks=(1,) if a.mixed else (), tfg=a.tfg)
    passed = failed = 0
    try:
        for d in cases:
            meta = check.json.load(open(os.path.join(d, "case.json")))
            if meta["kind"] not in a.kinds.split(","):
                continue
            name = os.path.basename(d.rstrip("/"))
            t = time.time()
            try:
                check.check_case(d, "cluster", a.tfg, a.timeout, spec)
                passed += 1
                print(f"PASS {name} ({time.time() - t:.1f}s)")
            except subprocess.TimeoutExpired:
                failed += 1
                print(f"FAIL {name}: timed out after {a.timeout:.0f}s")
            except check.Fail as e:
                failed += 1
                print(f"FAIL {name}: {e}")
            except Exception as e:  # noqa: BLE001 - a broken output file and the like
                failed += 1
                print(f"FAIL {name}: {type(e).__name__}: {e}")
            sys.stdout.flush()
    finally:
        stop(procs)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
