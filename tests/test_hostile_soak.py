"""Worker soak (issue 21), on demand: TFG_SOAK=1 python3 -m pytest -s tests/test_hostile_soak.py

50 `tfg run --cluster` runs of a graph with a 200 MB variable, then 10 masters killed with -9
mid-step: the worker's RSS returns to within 50 MB of where it stood after the first run, and
its session count to 0 (closed by the master, or expired after --idle-timeout). The sizes
shrink with TFG_SOAK_RUNS / TFG_SOAK_KILLS.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from hostile_helpers import gen_hostile, rss_bytes, worker_status
from tfg.executor.distributed.local import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600),
              pytest.mark.skipif(not os.environ.get("TFG_SOAK"),
                                 reason="soak: set TFG_SOAK=1 to run")]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIABLE_ELEMENTS = 50 * (1 << 20)  # float32: 200 MB


def test_worker_memory_and_sessions_return_after_runs_and_killed_masters(tmp_path):
    runs = int(os.environ.get("TFG_SOAK_RUNS", 50))
    kills = int(os.environ.get("TFG_SOAK_KILLS", 10))
    graph = gen_hostile.variable_graph(str(tmp_path), "soak.pbtxt", "w", VARIABLE_ELEMENTS)
    with LocalCluster(1, extra_args=["--idle-timeout", "3"]) as c:
        pid, address = c.procs[0].pid, c.addresses[0]
        cmd = [sys.executable, "-m", "tfg", "run", graph, "--cluster", c.spec, "--init", "init",
               "--target", "train", "--steps", "3"]
        rss = []
        started = time.monotonic()
        for i in range(runs):
            p = subprocess.run(cmd, capture_output=True, timeout=300, cwd=ROOT)
            assert p.returncode == 0, p.stderr
            assert worker_status(address).sessions == 0  # closed by the master
            rss.append(rss_bytes(pid))
        print(f"\n{runs} runs in {time.monotonic() - started:.0f} s; worker RSS after run 1: "
              f"{rss[0] >> 20} MB, after run {runs}: {rss[-1] >> 20} MB, max {max(rss) >> 20} MB")
        killed = 0
        for i in range(kills):
            p = subprocess.Popen(cmd[:-2] + ["--steps", "100000"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, cwd=ROOT)
            deadline = time.monotonic() + 120
            while worker_status(address).active_steps == 0:  # mid-step
                assert p.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            p.send_signal(signal.SIGKILL)
            p.wait()
            killed += 1
        deadline = time.monotonic() + 60
        while worker_status(address).sessions:
            assert time.monotonic() < deadline, "killed masters' sessions never expired"
            time.sleep(0.5)
        time.sleep(1.0)
        end = rss_bytes(pid)
        print(f"worker RSS after {killed} killed masters and expiry: {end >> 20} MB")
        assert end - rss[0] < 50 << 20
