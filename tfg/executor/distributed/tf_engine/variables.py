"""Variables on TensorFlow servers (placeholder during development)."""
from tfg.errors import TfgInputError


def _no(*a, **k):
    raise TfgInputError("variables are not yet available with --engine tensorflow")


collect = save = saved_step = restore = _no
