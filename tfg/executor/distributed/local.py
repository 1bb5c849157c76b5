"""A cluster of `tfg worker` processes on this machine's loopback, for tests, benchmarks and
trying things out; always stopped on exit.

    >>> with LocalCluster(2) as cluster:
    ...     sess = Session(graph, cluster=cluster.spec)      # "worker=127.0.0.1:41234,..."
    ...     sess.run("y")
    ...     cluster.kill(1)                                  # SIGKILL task 1
    ...     cluster.restart(1)                               # same port, fresh process

Each worker is `python -m tfg worker --cluster SPEC --job worker --task I` on a free port;
`start()` returns once every worker answers the health check (or raises after `ready_s`).
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc

from tfg.errors import TfgRuntimeError
from tfg.executor.distributed import rpc


def free_port():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


class LocalCluster:
    """N worker processes of job `worker` (see the module docstring)."""

    def __init__(self, n=2, token=None, verbose=False, extra_args=(), ready_s=60.0, env=None,
                 threads=None):
        self.ports = [free_port() for _ in range(n)]
        self.addresses = [f"127.0.0.1:{p}" for p in self.ports]
        self.spec = "worker=" + ",".join(self.addresses)
        self.token = token
        self.verbose = verbose
        self.extra_args = list(extra_args)
        self.ready_s = ready_s
        self.env = env
        # BLAS threads per worker: workers sharing one machine should split its cores (idle
        # OpenBLAS threads spin and take CPU from the other workers).
        self.threads = threads
        self.procs = [None] * n
        self.logs = [None] * n

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        self.close_logs()

    def _launch(self, i):
        args = [sys.executable, "-m", "tfg", "worker", "--cluster", self.spec, "--job",
                "worker", "--task", str(i), *self.extra_args]
        if self.verbose:
            args.append("--verbose")
        env = dict(os.environ if self.env is None else self.env)
        env.pop("TFG_AUTH_TOKEN", None)
        if self.token:
            env["TFG_AUTH_TOKEN"] = self.token
        if self.threads:
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[var] = str(self.threads)
        if self.logs[i] is not None:
            self.logs[i].close()
        # A file, not a pipe: a chatty worker must never block on a full pipe.
        self.logs[i] = tempfile.TemporaryFile()
        self.procs[i] = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                         stderr=self.logs[i])

    def start(self):
        for i in range(len(self.procs)):
            self._launch(i)
        try:
            for i in range(len(self.procs)):
                self.wait_ready(i)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, i):
        """Block until task i answers the health check."""
        deadline = time.monotonic() + self.ready_s
        with grpc.insecure_channel(self.addresses[i]) as channel:
            while True:
                proc = self.procs[i]
                if proc.poll() is not None:
                    err = self.stderr(i).strip()
                    raise TfgRuntimeError(f"worker {i} exited with {proc.returncode}: {err}")
                try:
                    if rpc.health_check(channel, timeout=1.0) == 1:
                        return
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    raise TfgRuntimeError(f"worker {i} did not start within {self.ready_s}s")
                time.sleep(0.1)

    def kill(self, i, sig=signal.SIGKILL):
        """Send `sig` to task i (SIGKILL by default) and, unless it is SIGSTOP, reap it."""
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        if sig != signal.SIGSTOP:
            proc.wait(timeout=30)

    def restart(self, i):
        """Start task i again on its port (after kill) and wait until it answers."""
        self.kill(i)
        self._launch(i)
        self.wait_ready(i)

    def stop(self):
        """SIGTERM every worker (a stopped one is continued first), SIGKILL stragglers."""
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGCONT)
                    proc.terminate()
                except OSError:
                    pass
        for proc in self.procs:
            if proc is None:
                continue
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def stderr(self, i):
        """What task i has written to stderr so far."""
        fd = self.logs[i].fileno()
        # pread: the worker shares this file's offset, so never move it.
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def close_logs(self):
        for log in self.logs:
            if log is not None:
                log.close()
