"""What machine a benchmark ran on, recorded beside its numbers.

    >>> describe()
    {'cpu': 'AMD EPYC', 'family_model': '25/1', 'avx512': False, 'avx2': True, 'cores': 2,
     'openblas_core': 'Haswell', 'numpy': '2.4.6'}
    >>> summary(describe())
    'AMD EPYC (family 25 model 1), AVX2, 2 cores, OpenBLAS Haswell, numpy 2.4.6'

Why: the sessions of this project run on VMs drawn from more than one kind of host. An
AVX-512 host (OpenBLAS's SkylakeX kernels) and an AVX2 one (its Haswell kernels, same "AMD
EPYC" name) give other absolute times and other tfg / TensorFlow ratios (TensorFlow's oneDNN
gains more from the wider vectors than numpy does), so rows from two sessions compare only
when these fields match.
"""
import os
import platform


def _cpuinfo():
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def describe():
    """CPU name, family/model, vector extensions, cores, OpenBLAS's kernels, numpy."""
    import numpy as np
    from tfg.executor.blas import openblas_core
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    return {"cpu": info.get("model name") or platform.processor() or platform.machine(),
            "family_model": f"{info.get('cpu family', '?')}/{info.get('model', '?')}",
            "avx512": "avx512f" in flags, "avx2": "avx2" in flags,
            "cores": os.cpu_count(), "openblas_core": openblas_core(),
            "numpy": np.__version__}


def summary(d):
    """One line of `describe()`'s fields, for a benchmark's log."""
    family, _, model = d["family_model"].partition("/")
    vec = "AVX-512" if d["avx512"] else "AVX2" if d["avx2"] else "no AVX2"
    blas = f"OpenBLAS {d['openblas_core']}" if d["openblas_core"] else "BLAS not OpenBLAS"
    return (f"{d['cpu']} (family {family} model {model}), {vec}, {d['cores']} cores, {blas}, "
            f"numpy {d['numpy']}")
