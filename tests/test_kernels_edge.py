"""Kernel edge cases that TensorFlow-made fixtures do not reach."""
import types

import numpy as np

from tfg.kernels.registry import get_kernel


def test_addn_of_three_scalars():
    # The arithmetic optimizer turns scalar add trees into AddN; 0-d sums are numpy scalars.
    add_n = get_kernel("AddN").fn
    out = add_n(types.SimpleNamespace(xp=np), np.array(1, np.float32), np.array(2, np.float32), np.array(3, np.float32))
    assert out.dtype == np.float32 and out.shape == () and out == 6
