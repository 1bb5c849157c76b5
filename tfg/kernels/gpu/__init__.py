"""GPU support that is not a kernel: the numpy-backed stand-in for CuPy (standin.py).

GPU kernels are the kernels of tfg/kernels written against `ctx.xp` and registered with
`device_types=ALL_DEVICES`; tfg.kernels.memory moves their inputs to the memory TensorFlow
keeps them in. Nothing here imports CuPy: placement sees the same GPU kernels on every machine.
"""
