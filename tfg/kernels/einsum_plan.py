"""A two-operand einsum planned once as transposes around one batched matrix product: what
TensorFlow's Einsum kernel does (transpose, BatchMatMul, transpose), made once per node and
operand shapes instead of at every call.

    plan("bqhd,bkhd->bhqk", (2, 1, 4, 16), (2, 9, 4, 16))
    # batch b h, free q (left) k (right), contracted d:
    #   a -> [b h][q][d] = [8, 1, 16], b -> [b h][d][k] = [8, 16, 9], matmul -> [8, 1, 9]
    #   -> [2, 4, 1, 9], already in the output's order

Why: numpy's `einsum(optimize=True)` searches for a contraction order and builds the
tensordot at every call, about 40 us of Python (a keras attention's query-key and
probability-value products: 112 calls a step of a small GPT-2 decode loop, 16% of it), and
its plain C loop is unblocked (no BLAS) beyond tiny operands.

Only the common form is planned: explicit output, no ellipsis, no label twice in one operand
or in the output, every label shared by both operands of one size in both (no broadcasting
of size-1 dims). Anything else returns None and the kernel keeps numpy's einsum.
"""
import math

import numpy as np


def plan(equation, shape_a, shape_b):
    """`run(a, b)` computing `equation` ("ab,bc->ac" form) for operands of these shapes with
    one np.matmul, or None where the equation is not of the planned form."""
    lhs, arrow, out = equation.partition("->")
    if "." in equation or not arrow or lhs.count(",") != 1:
        return None
    la, lb = lhs.split(",")
    if (len(set(la)) != len(la) or len(set(lb)) != len(lb) or len(set(out)) != len(out)
            or len(la) != len(shape_a) or len(lb) != len(shape_b)):
        return None
    size = dict(zip(la, shape_a))
    for label, d in zip(lb, shape_b):
        if size.setdefault(label, d) != d:
            return None  # a broadcast label: numpy's rules, not planned
    if any(label not in size for label in out):
        return None
    batch = [x for x in out if x in la and x in lb]
    free_a = [x for x in out if x in la and x not in lb]
    free_b = [x for x in out if x in lb and x not in la]
    contract = [x for x in la if x in lb and x not in out]
    sum_a = tuple(i for i, x in enumerate(la) if x not in lb and x not in out)
    sum_b = tuple(i for i, x in enumerate(lb) if x not in la and x not in out)
    kept_a = [x for x in la if x not in lb and x in out or x in lb]
    kept_b = [x for x in lb if x not in la and x in out or x in la]
    perm_a = [kept_a.index(x) for x in batch + free_a + contract]
    perm_b = [kept_b.index(x) for x in batch + contract + free_b]
    nb, na, nk, nn = (math.prod(size[x] for x in group)
                      for group in (batch, free_a, contract, free_b))
    shape_a3, shape_b3 = (nb, na, nk), (nb, nk, nn)
    grouped = batch + free_a + free_b
    mid_shape = tuple(size[x] for x in grouped)
    final = [grouped.index(x) for x in out]
    final = None if final == list(range(len(final))) else final

    def run(a, b):
        if sum_a:
            a = np.add.reduce(a, axis=sum_a)
        if sum_b:
            b = np.add.reduce(b, axis=sum_b)
        y = np.matmul(a.transpose(perm_a).reshape(shape_a3),
                      b.transpose(perm_b).reshape(shape_b3)).reshape(mid_shape)
        return y if final is None else y.transpose(final)
    return run
