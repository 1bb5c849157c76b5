"""Two isomorphic fused chains (tfg/executor/loop_fusion.py) planned as one: `batched` matches
them member by member and picks each member's stacked step, to run on the two chains'
operands stacked along a new leading axis (tfg/executor/loop_pairs.py runs the two
directions of a Keras Bidirectional layer in lockstep and calls this once an iteration
instead of each direction's chain).

    Before (an iteration of a masked BiLSTM, each direction's chain in turn):
      fwd: h @ U (8x32 @ 32x128), + xW, + b, Split, Sigmoid, Tanh, ..., 3 Selects
      bwd: the same on its own operands: ~40 numpy calls
    After: H @ U2 (2x8x32 @ 2x32x128, one np.matmul), + XW2, + B2, ...: ~22 numpy calls on
      the stacked operands; the values read outside the chain are views of the rows

This module plans (which members pair up, which operands come from outside the chain and in
what role, which steps stack); batched_run.py stacks the operands and runs the steps;
batched_steps.py and batched_selects.py are the steps. Values are the chains' own, bit for
bit: the same elementwise numpy functions on the same elements, a Split's pieces as views,
a Select as a copy then a masked copy. Chains that differ in any member, or hold a step not
done stacked (a transposed MatMul, a StridedSlice, ...), are not planned: None.
"""
from tfg.executor import batched_run as BR
from tfg.executor import batched_selects as SEL
from tfg.executor import chain_programs as CP
from tfg.executor import batched_steps as BS
from tfg.executor.chain_match import aligned


def batched(ca, cb):
    """run(va, vb) -> bool for the fused chains `ca` (of one loop's slots va) and `cb` (of
    the other's), or None where they are not the same chain or hold a step not done here."""
    ia, ib = getattr(ca, "io", None), getattr(cb, "io", None)
    if ia is None or ib is None:
        return None
    # B's members in the order of their partners in A (two exports of one layer may list
    # them in other orders: chain_match.py)
    ib = aligned(ia, ib, ca.escaping, cb.escaping)
    if ib is None:
        return None
    # Each distinct (slot of A, slot of B) read from outside the chain becomes one stacked
    # operand; a member's output one stacked value. A slot pair read in two roles (an axis
    # and a float) cannot be one stack: not planned.
    index = {}  # (slot of A, slot of B) -> index in the stacked values
    external = []  # (index, slot of A, slot of B, role)
    roles = {}
    made = [{}, {}]  # slot -> index, for A and B: what a member produced
    plan = []
    for (ita, ka, ins_a, outs_a), (itb, kb, ins_b, outs_b) in zip(ia, ib):
        if ita.op != itb.op or ka != kb or len(ins_a) != len(ins_b) or len(outs_a) != len(
                outs_b):
            return None
        kind, fn = ka
        ins = []
        for pos, (sa, sb) in enumerate(zip(ins_a, ins_b)):
            pa, pb = made[0].get(sa), made[1].get(sb)
            if pa is not None or pb is not None:
                if pa != pb:
                    return None
                ins.append(pa)
                continue
            role = ("axis" if kind == "split" and pos == 0 else
                    "mask" if kind == "select" and pos == 0 else "float")
            k = index.get((sa, sb))
            if k is None:
                k = index[(sa, sb)] = len(index)
                external.append((k, sa, sb, role))
                roles[k] = role
            elif roles[k] != role:
                return None
            ins.append(k)
        outs = []
        for sa, sb in zip(outs_a, outs_b):
            k = index[("out", sa, sb)] = len(index)
            made[0][sa] = made[1][sb] = k
            outs.append(k)
        plan.append((kind, fn, ins, outs))
    # the values read outside the chain must be the same member's output in both loops:
    # each loop then takes its row of that stack
    # (aligned matched them: each escaping slot of A with the one of B its partner makes)
    of_b = {k: sb for sb, k in made[1].items()}
    escaping = [(made[0][sa], sa, of_b[made[0][sa]]) for sa in ca.escaping]
    steps = _steps(plan)
    if steps is None:
        return None
    return BR.runner(len(index), tuple(external), tuple(steps), tuple(escaping),
                     _mask_uses(plan, roles), _program(plan, escaping))


def _program(plan, escaping):
    """The stacked chain as one compiled program (tfg/executor/chain_programs.py): its
    MatMuls as their stacked steps, the rest one call over the stacks. None where the
    chain has a member the program does not take."""
    pre = tuple(BS.matmul(ins[0], ins[1], outs[0], fn[2])
                for kind, fn, ins, outs in plan if kind == "matmul")
    members = [(kind, fn, tuple(ins), tuple(outs)) for kind, fn, ins, outs in plan]
    return CP.program(members, [k for k, _, _ in escaping], pre, batched=True)


def _mask_uses(plan, roles):
    """{mask's index: (the x indices of its Selects, ...)} for the external masks whose
    Selects all broadcast (SelectV2): a mask expanded to their x's shape selects the same
    elements (batched_rows.mask_row expands the mask rows so, once a run)."""
    uses, narrow = {}, set()
    for kind, fn, ins, _ in plan:
        k = ins[0] if kind == "select" else None
        if k is not None and roles.get(k) == "mask":
            uses.setdefault(k, []).append(ins[1])
            if not fn:
                narrow.add(k)
    return tuple((k, tuple(xs)) for k, xs in uses.items() if k not in narrow)


def _steps(plan):
    """The stacked steps of `plan` [(kind, fn, input indices, output indices)]; None where
    one is not done here. A Split whose pieces feed two or more Sigmoids takes one Sigmoid
    over its whole input (as fused_steps.split does), the Sigmoids then views of it."""
    piece_of = {}
    for n, (kind, _, ins, outs) in enumerate(plan):
        if kind == "split":
            piece_of.update((o, (n, p)) for p, o in enumerate(outs))
    whole = {}  # split member -> [(port, Sigmoid's output index)]
    for kind, _, ins, outs in plan:
        if kind == "sigmoid" and ins[0] in piece_of:
            n, p = piece_of[ins[0]]
            whole.setdefault(n, []).append((p, outs[0]))
    whole = {n: v for n, v in whole.items() if len(v) >= 2}
    skipped = {o for v in whole.values() for _, o in v}
    # Selects of one mask and one x (a masked RNN's new output and new state): one step at
    # the last of them, over a stack of their y's
    shared = {}
    for n, (kind, fn, ins, outs) in enumerate(plan):
        if kind == "select":
            shared.setdefault((ins[0], ins[1], fn), []).append(n)
    at = {}  # member -> the members of its shared select, at the last one
    for group in shared.values():
        if len(group) >= 2:
            at.update((n, None) for n in group)
            at[group[-1]] = group
    steps = []
    for n, (kind, fn, ins, outs) in enumerate(plan):
        if n in at:
            group = at[n]
            if group is not None:
                steps.append(SEL.selects(ins[0], ins[1], tuple(plan[g][2][2] for g in group),
                                         tuple(plan[g][3][0] for g in group), fn))
            continue
        if kind == "ufunc":
            steps.append(BS.unary(fn, ins[0], outs[0]) if len(ins) == 1
                         else BS.binary(fn, ins[0], ins[1], outs[0]))
        elif kind == "sigmoid":
            if outs[0] not in skipped:
                steps.append(BS.sigmoid(ins[0], outs[0]))
        elif kind == "matmul" and not fn[0] and not fn[1]:
            steps.append(BS.matmul(ins[0], ins[1], outs[0], fn[2]))
        elif kind == "bias":
            steps.append(BS.bias(ins[0], ins[1], outs[0]))
        elif kind == "split":
            steps.append(BS.split(ins[0], ins[1], tuple(outs), tuple(whole.get(n, ()))))
        elif kind == "select":
            steps.append(SEL.select(ins[0], ins[1], ins[2], outs[0], fn))
        else:
            return None
    return steps
