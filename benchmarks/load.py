"""Busy processes beside a benchmark: `--load N` in benchmarks/run.py.

    with busy_load(2, kind="numpy"):   # two processes spinning, one per requested load
        run_the_benchmark()            # they are killed (SIGKILL) when the block ends

Each process is a plain `python -c` loop ('python': integer arithmetic that never sleeps;
'numpy': elementwise numpy on 1 MiB arrays, single-threaded, also never sleeps), started in its
own session so that killing its process group cannot miss a child. They are killed when the
block exits, on an exception, and (atexit) when the interpreter exits before the block did;
each is also told to end by itself when its parent is gone (it polls os.getppid()), so even a
SIGKILLed benchmark leaves nothing spinning.
"""
import atexit
import os
import signal
import subprocess
import sys

_SPIN = {
    "python": "i = 0\nwhile True:\n    i = (i * 7 + 1) % 1000003",
    "numpy": ("import numpy as np\na = np.random.rand(1 << 17)\nb = np.empty_like(a)\n"
              "while True:\n    np.multiply(a, 1.0001, out=b); np.add(b, a, out=a); a *= 0.5"),
}
# Each loop checks every ~50 ms-worth of iterations that its parent still lives.
_GUARD = ("import os, threading, time\nppid = {ppid}\n"
          "def _watch():\n    while os.getppid() == ppid:\n        time.sleep(0.2)\n"
          "    os._exit(0)\n"
          "threading.Thread(target=_watch, daemon=True).start()\n")


class busy_load:
    """Context manager running `n` busy processes of `kind` ('python' or 'numpy')."""

    def __init__(self, n, kind="python"):
        if kind not in _SPIN:
            raise ValueError(f"load kind must be one of {sorted(_SPIN)}, got {kind!r}")
        self.n, self.kind, self.procs = int(n), kind, []

    def __enter__(self):
        code = _GUARD.format(ppid=os.getpid()) + _SPIN[self.kind]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        for _ in range(self.n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", code], env=env,
                                               stdin=subprocess.DEVNULL,
                                               start_new_session=True))
        atexit.register(self.stop)
        return self

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []

    def __exit__(self, *exc):
        self.stop()
        atexit.unregister(self.stop)
        return False
