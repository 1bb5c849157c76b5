"""Run a tfg command on a hostile input with bounds: CPU time, resident memory, one-line error.

Used by tests/test_hostile*.py. The child gets an address-space limit (so a regression fails
the test instead of swapping the machine); its CPU time and peak RSS are read from wait4's
rusage. The time bound is on CPU, not wall time: on a loaded machine (pytest-xdist workers
beside it, other jobs) a 2 s command can take 10 s of wall time. A child that waits instead
of computing is killed at a generous wall deadline and fails on its exit code.
"""
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import gen_hostile  # noqa: E402,F401  (tools/gen_hostile.py: the generators)
from tfg.executor.distributed import rpc  # noqa: E402
from tfg.schemas.proto import worker_pb2 as pb  # noqa: E402

MAX_SECONDS = 10.0  # of CPU (user + system)
WALL_DEADLINE_SECONDS = 120.0
MAX_RSS_BYTES = 1 << 30
ADDRESS_SPACE_BYTES = 4 << 30


class Outcome:
    def __init__(self, rc, stdout, stderr, seconds, rss, cpu):
        self.rc, self.stdout, self.stderr = rc, stdout, stderr
        self.seconds, self.rss, self.cpu = seconds, rss, cpu

    @property
    def err_lines(self):
        return [ln for ln in self.stderr.decode(errors="replace").splitlines() if ln.strip()]


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def run_bounded(args, cwd=None, seconds=WALL_DEADLINE_SECONDS, env=None, stdin=None):
    """`python -m tfg ARGS` with the limits above -> Outcome (rc -9 if it was still running
    after `seconds` of wall time)."""
    out_path = f"/tmp/tfg-hostile-{os.getpid()}-{time.monotonic_ns()}"
    with open(out_path + ".out", "wb") as out, open(out_path + ".err", "wb") as err:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "tfg", *map(str, args)],
                                stdout=out, stderr=err, cwd=cwd or ROOT, env=env,
                                stdin=subprocess.DEVNULL if stdin is None else stdin,
                                preexec_fn=_limit_memory)
        rusage, status = None, None
        while time.monotonic() - start < seconds:  # a hung child is killed, then reported
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.02)
        else:
            proc.kill()
            _, status, rusage = os.wait4(proc.pid, 0)
        elapsed = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path + ".out", "rb") as f:
        stdout = f.read()
    with open(out_path + ".err", "rb") as f:
        stderr = f.read()
    os.unlink(out_path + ".out")
    os.unlink(out_path + ".err")
    return Outcome(proc.returncode, stdout, stderr, elapsed, rusage.ru_maxrss * 1024,
                   rusage.ru_utime + rusage.ru_stime)


def assert_refused(outcome, rc=2, says=None):
    """Exit `rc`, one line on stderr (containing `says`), within time and memory."""
    text = outcome.stderr.decode(errors="replace")
    assert outcome.rc == rc, f"exit {outcome.rc}, stderr: {text[-2000:]}"
    assert len(outcome.err_lines) == 1, text[-2000:]
    assert "Traceback" not in text
    if says:
        assert says in text, text
    assert_bounded(outcome)


def assert_bounded(outcome):
    assert outcome.cpu < MAX_SECONDS, \
        f"took {outcome.cpu:.1f} s of CPU ({outcome.seconds:.1f} s of wall time)"
    assert outcome.rss < MAX_RSS_BYTES, f"peak RSS {outcome.rss >> 20} MiB"


def worker_status(address, token=None, timeout=10):
    """A worker's GetStatus answer (sessions, active steps), from a fresh client."""
    client = rpc.WorkerClient(("worker", 0), address, token)
    try:
        return client.call("GetStatus", pb.GetStatusRequest(), timeout=timeout)
    finally:
        client.close()


def rss_bytes(pid):
    """Resident memory of process `pid`, from /proc."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
