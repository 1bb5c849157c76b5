"""Prepared kernel calls: at plan time every kernel node gets one closure that reads its inputs,
reads the Refs its kernel takes by value, calls the kernel and normalises what it returns to
the op's outputs. The dataflow executor and the fast path both run these; nothing else calls a
kernel (tracing and memory accounting wrap them, chosen once per step, not tested per node).

    >>> call = args_call(item)                  # the dataflow executor's form
    >>> call([x, y], step)                      # -> the op's outputs, as a list
    [array([4., 6.], dtype=float32)]
    >>> call = slot_call(item, (3, 4), 5, free=(3,))  # the fast path's form
    >>> call(vals, step)                        # vals[5] = Add(vals[3], vals[4]); vals[3] = None

A call is generated Python: one template per shape (number of inputs, of outputs and of slots
to free, which inputs may carry a Ref, whether the kernel takes the step), compiled once and
instantiated per node with the node's kernel, context and slot numbers bound in cells. So a
node costs one call of straight-line code: no per-node tests of what the plan already knows.
"""
from tfg.errors import TfgRuntimeError
from tfg.kernels.resources import Ref

_TEMPLATES = {}  # shape -> factory


def args_call(item):
    """`call(args, step) -> outputs`: `args` is the node's input list (it may be changed)."""
    return _instantiate("args", item, tuple(range(item.num_inputs)), None, ())


def slot_call(item, in_slots, out_slots, free=(), deref=None, fn=None):
    """`call(vals, step)`: reads `vals[in_slots]`, stores the outputs at `out_slots` and
    clears the slots in `free` (inputs read for the last time, outputs nobody reads). `deref`:
    the input indices that may carry a Ref (default: the item's); `fn`: a replacement kernel
    with the same contract (an in-place variant, tfg/executor/inplace.py)."""
    return _instantiate("slots", item, tuple(in_slots), tuple(out_slots), tuple(free), deref,
                        fn)


def _instantiate(form, item, ins, outs, free, deref=None, fn=None):
    if deref is None:
        deref = item.deref or ()
    n_out = item.num_outputs
    key = (form, len(ins), n_out, len(free), tuple(deref), item.needs_step)
    factory = _TEMPLATES.get(key)
    if factory is None:
        factory = _TEMPLATES[key] = _compile(*key)
    return factory(fn or item.fn, item.ctx, *ins, *(outs or ()), *free)


def _compile(form, n_in, n_out, n_free, deref, needs_step):
    """The factory of one call shape; see the module docstring."""
    ins = [f"i{k}" for k in range(n_in)]
    outs = [f"o{k}" for k in range(n_out)] if form == "slots" else []
    frees = [f"f{k}" for k in range(n_free)]
    src = "args" if form == "args" else "vals"
    body = []
    if deref:  # Refs are read when the kernel runs, as TensorFlow does
        args = [f"a{k}" for k in range(n_in)]
        body += [f"a{k} = {src}[{ins[k]}]" for k in range(n_in)]
        body += [f"if type(a{k}) is Ref: a{k} = a{k}.get()" for k in deref]
    else:
        args = [f"{src}[{i}]" for i in ins]
    call = "fn(" + ", ".join(["ctx"] + (["step"] if needs_step else []) + args) + ")"
    if form == "args":
        if n_out == 1:
            body += [f"r = {call}",
                     "if type(r) is tuple or type(r) is list: return one(r)",
                     "return [r]"]
        elif n_out == 0:
            body += [call, "return []"]
        else:
            body += [f"return many({call}, {n_out})"]
    else:
        if n_out == 1:
            body += [f"r = {call}",
                     "if type(r) is tuple or type(r) is list: r = one(r)[0]",
                     "vals[o0] = r"]
        elif n_out == 0:
            body += [call]
        else:
            body += [f"r = many({call}, {n_out})"]
            body += [f"vals[o{k}] = r[{k}]" for k in range(n_out)]
        body += [f"vals[{f}] = None" for f in frees]
    params = ", ".join(["fn", "ctx"] + ins + outs + frees)
    text = (f"def factory({params}):\n"
            f"    def call({src}, step):\n" + "".join(f"        {line}\n" for line in body) +
            "    return call\n")
    scope = {"Ref": Ref, "one": _one, "many": _many}
    exec(compile(text, f"<tfg prepared call {form} {n_in}->{n_out}>", "exec"), scope)
    return scope["factory"]


def _one(r):
    if len(r) != 1:
        raise TfgRuntimeError(f"kernel returned {len(r)} outputs, the op has 1")
    return [r[0]]


def _many(r, n):
    if type(r) is not tuple and type(r) is not list:
        raise TfgRuntimeError(f"kernel returned one value, the op has {n} outputs")
    if len(r) != n:
        raise TfgRuntimeError(f"kernel returned {len(r)} outputs, the op has {n}")
    return list(r)
