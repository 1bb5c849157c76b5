"""Helpers shared by tests: finite differences and running the CLI in-process or as a process."""
import subprocess
import sys

import numpy as np


def numeric_gradient(f, x, eps=1e-3):
    """Central differences of scalar f at x (float64 copy of x); returns an array like x."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = float(np.sum(f(x)))
        flat[i] = old - eps
        lo = float(np.sum(f(x)))
        flat[i] = old
        gflat[i] = (hi - lo) / (2 * eps)
    return grad


def tfg_cli(*args, input=None, check=True, timeout=120):
    """Run `python -m tfg ARGS` as a process; returns CompletedProcess (bytes out/err)."""
    p = subprocess.run([sys.executable, "-m", "tfg", *map(str, args)], input=input,
                       capture_output=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"tfg {' '.join(map(str, args))} exited {p.returncode}: "
                             f"{p.stderr.decode(errors='replace')}")
    return p
