"""Plans tfg/executor/block_steps.py's steps for a fused chain (tfg/executor/loop_fusion.py):
which binary ufunc is sliced into column blocks by StridedSlices, and which two Adds of a
stacked Sigmoid's inputs read consecutive blocks of the same two buffers.

    Before (steps of a Keras GRU cell):  step2 (h @ U + b), step_slice x3, ..., step_split,
        step2 (xr + hr), step2 (xz + hz), step_stack
    After:  step_blocks (the add into blocks, the slices its blocks), ..., step_split,
        step_pair (both Adds in one call into the stack's rows), step_stack
"""


def plan_column_blocks(group, ins_of, outs_of, readers, outside, escapes, new_slot):
    """{add id: (its slice items, buffer slot, ports slot, reuse)}: binary ufunc members
    (or _FusedMatMul: its bias Add) whose output only two or more StridedSlice members of
    Const bounds read (the chain takes such a slice only with Const bounds) and nothing
    outside the chain."""
    kind_of = {it.id: kind for _, it, (kind, _) in group}
    items = {it.id: it for _, it, _ in group}
    found = {}
    for _, it, (kind, fn) in group:
        if not (kind == "fmatmul" or (kind == "ufunc" and fn.nin == 2)):
            continue
        o = outs_of(it)[0]
        rd = readers.get(o, set())
        if o in outside or len(rd) < 2 or not all(
                kind_of.get(r) == "slice" and ins_of[r][0][0] == o for r in rd):
            continue
        slices = sorted((items[r] for r in rd), key=lambda s: outs_of(s)[0])
        reuse = not any(escapes(outs_of(s)[0]) for s in slices)
        found[it.id] = (slices, new_slot((it.id, "colblocks")),
                        new_slot((it.id, "colports")), reuse)
    return found


def block_sources(blocks, split_blocks, ins_of, outs_of):
    """{operand slot: (source id, buffer slot, {slot: block} or the slot of that dict)}:
    the pieces of Splits that copy into blocks, and the slices of column-block adds."""
    sources = {}
    for sid, (it, slot) in split_blocks.items():
        ports = {s: p for p, s in enumerate(outs_of(it))}
        for s in ports:
            sources[s] = (sid, slot, ports)
    for aid, (slices, slot, ports_slot, _) in blocks.items():
        for s in slices:
            sources[outs_of(s)[0]] = (aid, slot, ports_slot)
    return sources


def plan_pair(stacked, group, ins_of, outs_of, readers, sources):
    """(earlier id, later id, (first, second, sources, row), swap) for two Adds (one binary
    ufunc) that write consecutive rows of the stack, each read only by its Sigmoid, whose
    operand k of both is a block of one source; None if there are none. `swap`: the stack's
    rows `row` and `row + 1` are to be swapped so that the first Add's blocks come first."""
    made = {outs_of(it)[0]: (it, fn) for _, it, (kind, fn) in group
            if kind == "ufunc" and fn.nin == 2}
    at = {it.id: k for k, (_, it, _) in enumerate(group)}
    srcs = [ins_of[s.id][0][0] for s in stacked]
    for row in range(len(stacked) - 1):
        p1, p2 = made.get(srcs[row]), made.get(srcs[row + 1])
        if p1 is None or p2 is None or p1[1] is not p2[1]:
            continue
        if (readers.get(srcs[row]) != {stacked[row].id}
                or readers.get(srcs[row + 1]) != {stacked[row + 1].id}):
            continue
        ins1, ins2 = ins_of[p1[0].id][0], ins_of[p2[0].id][0]
        pair_sources = []
        for k in range(2):
            s1, s2 = sources.get(ins1[k]), sources.get(ins2[k])
            if s1 is None or s2 is None or s1[0] != s2[0]:
                break
            pair_sources.append(s1[1:])
        if len(pair_sources) != 2:
            continue
        first = (ins1[0], ins1[1], srcs[row])
        second = (ins2[0], ins2[1], srcs[row + 1])
        # a Split's blocks are known now: where its second Add reads the block before the
        # first's (a GRU's reset gate comes first in the body), the two rows swap places
        swap = any(type(ports) is dict and ports[ins2[k]] == ports[ins1[k]] - 1
                   for k, (_, ports) in enumerate(pair_sources))
        if swap:  # (each Add keeps its output slot; the stack's row order changes)
            first, second = second, first
        ids = sorted((p1[0].id, p2[0].id), key=at.get)
        return ids[0], ids[1], (first, second, tuple(pair_sources), row), swap
    return None


def plan_shared_selects(group, ins_of, outs_of, produced, new_slot):
    """{first select's id: (the selects, held slot)}: two or more Select/SelectV2 members of
    one kind, one mask and one x whose ys are distinct values from outside the chain (a
    masked RNN's previous output and state); they run as one step at the first of them
    (its inputs are all theirs)."""
    by_key = {}
    for _, it, (kind, v2) in group:
        if kind == "select":
            m, x, y = ins_of[it.id][0]
            if y not in produced:
                by_key.setdefault((m, x, v2), []).append(it)
    found = {}
    for sels in by_key.values():
        ys = [ins_of[s.id][0][2] for s in sels]
        if len(sels) >= 2 and len(set(ys)) == len(ys):
            found[sels[0].id] = (sels, new_slot((sels[0].id, "selects")))
    return found
