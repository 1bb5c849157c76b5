"""Op signatures: inputs/outputs with their type attrs, attrs with defaults, stateful flag, a
shape function and the op's traits, registered once per op in TensorFlow's REGISTER_OP notation.
This is the one home of every fact about an op: code elsewhere asks the registry
(`ops_with("blas")`, `control_flow_names("enter")`) instead of keeping a table of op names.

    >>> op("MatMul", inputs=["a: T", "b: T"], outputs=["product: T"],
    ...    attrs=["transpose_a: bool = false", "transpose_b: bool = false",
    ...           "T: {half, float, double, int32, int64, complex64, complex128}"],
    ...    shape_fn=matmul_shape, traits=["blas", "fresh_output"])
    >>> get_op("MatMul").attrs["transpose_a"].default
    False
    >>> "MatMul" in ops_with("blas"), sorted(control_flow_names("enter"))
    (True, ['Enter', 'RefEnter'])

Argument forms: `x: T` (type from attr T), `x: float` (fixed type), `x: N * T` (N tensors of
type T), `x: Tlist` where Tlist is a `list(type)` attr, `ref: Ref(T)` for reference inputs.
"""
import ast
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from tfg.errors import UnknownOpError
from tfg.schemas.dtypes import DType

NO_DEFAULT = object()

# What an op's traits mean; each names who asks.
TRAITS = {
    # Output i is computed from element i of each (broadcast) input, so the output has the
    # broadcast shape of the inputs (memory limits, layout, cost model).
    "elementwise": "each output element depends only on the matching input elements",
    # The CPU kernel is one BLAS call, which already uses every core: the executor runs it on
    # the scheduler thread instead of the pool.
    "blas": "the kernel is a BLAS call that spreads over every core itself",
    # Work does not grow with the input size (views, lookups, metadata): never worth a
    # thread-pool hand-off, however large the input.
    "cheap": "the kernel's work does not grow with its inputs",
    # The kernel may wait for another step or thread (queues): never on the scheduler thread.
    "blocking": "the kernel may wait for another step or thread",
    # Output 0 of the CPU kernel is an array nothing else references, so a consumer may
    # overwrite it in place.
    "fresh_output": "output 0 is a new array that nothing else references",
    # Commutes with a transpose of its 4-D data inputs (NHWC <-> NCHW layout rewrites).
    "layout_agnostic": "the op commutes with a transpose of its data inputs",
    # Output i is input i, value unchanged (Identity, StopGradient, CheckNumerics, ...): shape
    # inference forwards known values and handles through it, the cost model counts it free.
    "identity": "output i is input i, value unchanged",
    # The output is the input's shape, size or rank, never its values (constant folding
    # materializes it from a known shape, placement keeps it with its input).
    "shape_metadata": "the output is the input's shape, size or rank, not its values",
    # Output 0 is input 0's elements in another shape: no arithmetic (cost model).
    "view": "output 0 holds input 0's elements in another shape",
    # No output holds more elements than the largest input, of a type no wider (a part of
    # it, a reduction of it), while no input is empty (a Sum over an axis of size 0 has
    # more): the memory limits need not size it before it runs (tfg/executor/limits.py).
    "within_input": "no output holds more elements than the largest non-empty input",
    # A value the user feeds: kept by every pass, never folded, listed as a graph input.
    "placeholder": "a value the caller feeds",
    # A variable that persists across steps and is saved in checkpoints.
    "variable": "a variable that outlives the step (saved in checkpoints)",
}

# The primitive kinds the executor implements itself, for `control_flow=`.
CONTROL_FLOW_KINDS = ("switch", "merge", "enter", "exit", "next_iteration", "loop_cond",
                      "control_trigger", "send", "recv")

_TYPE_ALIASES = {
    "float": DType.FLOAT, "double": DType.DOUBLE, "half": DType.HALF, "bfloat16": DType.BFLOAT16,
    "int8": DType.INT8, "int16": DType.INT16, "int32": DType.INT32, "int64": DType.INT64,
    "uint8": DType.UINT8, "uint16": DType.UINT16, "uint32": DType.UINT32, "uint64": DType.UINT64,
    "bool": DType.BOOL, "string": DType.STRING, "complex64": DType.COMPLEX64,
    "complex128": DType.COMPLEX128, "resource": DType.RESOURCE, "variant": DType.VARIANT,
    "qint8": DType.QINT8, "quint8": DType.QUINT8, "qint32": DType.QINT32,
    "qint16": DType.QINT16, "quint16": DType.QUINT16,
}

# Named type sets usable in attr constraints, as in TensorFlow's op registrations.
TYPE_SETS = {
    "numbertype": ["float", "double", "int32", "uint8", "int16", "int8", "complex64", "int64",
                   "qint8", "quint8", "qint32", "bfloat16", "qint16", "quint16", "uint16",
                   "complex128", "half", "uint32", "uint64"],
    "realnumbertype": ["float", "double", "int32", "int64", "uint8", "int16", "int8", "uint16",
                       "half", "uint32", "uint64", "bfloat16"],
    "floattype": ["half", "bfloat16", "float", "double"],
    "quantizedtype": ["qint8", "quint8", "qint32", "qint16", "quint16"],
}


@dataclass
class ArgDef:
    name: str
    type_attr: Optional[str] = None  # dtype comes from this attr
    dtype: Optional[DType] = None  # fixed dtype
    number_attr: Optional[str] = None  # `N * T`: repeated N times
    type_list_attr: Optional[str] = None  # a list(type) attr gives each dtype
    is_ref: bool = False


@dataclass
class AttrDef:
    name: str
    type: str  # "type", "int", "float", "bool", "string", "shape", "tensor", "func", "list(int)"...
    default: object = NO_DEFAULT
    allowed: Optional[list] = None  # allowed values (DTypes for type attrs, strings for string)
    minimum: Optional[int] = None

    @property
    def has_default(self):
        return self.default is not NO_DEFAULT


@dataclass
class OpSignature:
    name: str
    inputs: list
    outputs: list
    attrs: dict
    stateful: bool = False
    shape_fn: Optional[Callable] = None
    is_commutative: bool = False
    is_aggregate: bool = False
    # The kind (one of CONTROL_FLOW_KINDS) of a control-flow or communication op the executor
    # implements itself; None for ordinary ops.
    control_flow: Optional[str] = None
    traits: frozenset = frozenset()
    extra: dict = field(default_factory=dict)

    def has(self, trait):
        """Whether the op has `trait` (a key of TRAITS)."""
        return trait in self.traits

    @property
    def has_ref_inputs(self):
        """Whether the op takes a reference input (and so may modify a variable in place)."""
        return any(a.is_ref for a in self.inputs)

    @property
    def has_effects(self):
        """Whether running it twice differs from running it once: stateful, or writing through
        a reference input. TensorFlow does not mark Assign, AssignAdd or the Apply* ops
        stateful (they mutate through their ref input), so `stateful` alone lets a loop hoist
        or merge an AssignAdd whose inputs are loop-invariant."""
        return self.stateful or self.has_ref_inputs

    @property
    def num_inputs_fixed(self):
        """Whether every input argument is a single tensor (no `N * T` or type lists)."""
        return all(not a.number_attr and not a.type_list_attr for a in self.inputs)

    @property
    def num_outputs_fixed(self):
        """Whether every output argument is a single tensor, so the op has len(outputs)
        outputs whatever its attrs (Switch: 2, _Send: 0)."""
        return all(not a.number_attr and not a.type_list_attr for a in self.outputs)


_OPS = {}


def op(name, inputs=(), outputs=(), attrs=(), stateful=False, shape_fn=None,
       is_commutative=False, is_aggregate=False, control_flow=None, traits=(), **extra):
    """Register an op signature (see module docstring for the notation)."""
    unknown = set(traits) - set(TRAITS)
    if unknown:
        raise ValueError(f"op {name}: unknown traits {sorted(unknown)} (known: {sorted(TRAITS)})")
    if control_flow is not None and control_flow not in CONTROL_FLOW_KINDS:
        raise ValueError(f"op {name}: control_flow {control_flow!r} is not one of "
                         f"{CONTROL_FLOW_KINDS}")
    sig = OpSignature(
        name=name, inputs=[_parse_arg(a) for a in inputs], outputs=[_parse_arg(a) for a in outputs],
        attrs={}, stateful=stateful, shape_fn=shape_fn, is_commutative=is_commutative,
        is_aggregate=is_aggregate, control_flow=control_flow, traits=frozenset(traits),
        extra=extra)
    for a in attrs:
        ad = _parse_attr(a)
        sig.attrs[ad.name] = ad
    for arg in sig.inputs + sig.outputs:
        # `x: T` names a list(type) attr: each tensor of the list has its own dtype.
        ad = sig.attrs.get(arg.type_attr)
        if ad is not None and ad.type == "list(type)":
            arg.type_list_attr, arg.type_attr = arg.type_attr, None
        elif arg.type_attr is not None and ad is None:
            raise ValueError(f"op {name}: argument {arg.name!r} names no attr {arg.type_attr!r}")
    _OPS[name] = sig
    return sig


def alias(new_name, existing, **changes):
    """Register `new_name` with the signature of `existing` (e.g. Add for AddV2)."""
    base = _OPS[existing]
    sig = OpSignature(**{**base.__dict__, "name": new_name, **changes})
    _OPS[new_name] = sig
    return sig


def get_op(name, node=None):
    """The signature of op `name`; UnknownOpError names the node when one is given."""
    sig = _OPS.get(name)
    if sig is None:
        where = f" (node {node!r})" if node else ""
        raise UnknownOpError(f"unknown op {name!r}{where}; tfg knows {len(_OPS)} ops "
                             f"(see `tfg info --ops`)")
    return sig


def has_op(name):
    return name in _OPS


def has_trait(name, trait):
    """Whether op `name` is registered and has `trait`; False for unknown ops."""
    sig = _OPS.get(name)
    return sig is not None and trait in sig.traits


def ops_with(trait):
    """The names of the registered ops with `trait`.

    Ask after `tfg.schemas.ops` is imported (importing it registers every op family).
    """
    if trait not in TRAITS:
        raise ValueError(f"unknown trait {trait!r} (known: {sorted(TRAITS)})")
    return frozenset(n for n, sig in _OPS.items() if trait in sig.traits)


def fed_placeholder_ops():
    """The placeholders without a default (Placeholder, PlaceholderV2): a step that needs one
    must be fed a value for it."""
    return frozenset(n for n in ops_with("placeholder") if not _OPS[n].inputs)


def ref_variable_ops():
    """The variables whose output is a reference (VariableV2, Variable), not a resource
    handle (VarHandleOp)."""
    return frozenset(n for n in ops_with("variable") if _OPS[n].outputs[0].is_ref)


def control_flow_names(*kinds):
    """The names of the registered ops of these control-flow kinds (e.g. Enter and RefEnter
    for "enter"); with no kinds, every op the executor implements itself."""
    bad = set(kinds) - set(CONTROL_FLOW_KINDS)
    if bad:
        raise ValueError(f"unknown control-flow kinds {sorted(bad)}")
    return frozenset(n for n, sig in _OPS.items() if sig.control_flow is not None
                     and (not kinds or sig.control_flow in kinds))


def all_ops():
    return dict(_OPS)


def _parse_arg(spec):
    name, _, rest = (s.strip() for s in spec.partition(":"))
    is_ref = False
    if rest.startswith("Ref(") and rest.endswith(")"):
        is_ref, rest = True, rest[4:-1].strip()
    if "*" in rest:
        number, _, t = (s.strip() for s in rest.partition("*"))
        if t in _TYPE_ALIASES:
            return ArgDef(name, dtype=_TYPE_ALIASES[t], number_attr=number, is_ref=is_ref)
        return ArgDef(name, type_attr=t, number_attr=number, is_ref=is_ref)
    if rest in _TYPE_ALIASES:
        return ArgDef(name, dtype=_TYPE_ALIASES[rest], is_ref=is_ref)
    return ArgDef(name, type_attr=rest, is_ref=is_ref)


def _parse_attr(spec):
    name, _, rest = (s.strip() for s in spec.partition(":"))
    default = NO_DEFAULT
    # `= default` (but not the `=` of a `>= minimum`).
    m = re.search(r"(?<![<>])=", rest)
    if m:
        rest, default = rest[:m.start()].strip(), rest[m.end():].strip()
    minimum = None
    if ">=" in rest:
        rest, _, m = (s.strip() for s in rest.partition(">="))
        minimum = int(m)
    allowed = None
    if rest.startswith("{"):
        items = [s.strip() for s in rest.strip("{}").split(",") if s.strip()]
        if all(i.startswith(("'", '"')) for i in items):
            allowed, typ = [ast.literal_eval(i) for i in items], "string"
        else:
            allowed, typ = _expand_types(items), "type"
    elif rest.startswith("list(") and "{" in rest:
        inner = rest[rest.index("{") + 1: rest.rindex("}")]
        allowed, typ = _expand_types([s.strip() for s in inner.split(",")]), "list(type)"
    elif rest in TYPE_SETS:
        allowed, typ = _expand_types([rest]), "type"
    else:
        typ = rest
    if default is not NO_DEFAULT:
        default = _parse_default(typ, default)
    return AttrDef(name, typ, default, allowed, minimum)


def _expand_types(items):
    out = []
    for item in items:
        for t in TYPE_SETS.get(item, [item]):
            out.append(_TYPE_ALIASES[t])
    return out


def _parse_default(typ, text):
    if typ in ("type",):
        return _TYPE_ALIASES[text.replace("DT_", "").lower()]
    if typ == "bool":
        return text.lower() == "true"
    if typ == "int":
        return int(text)
    if typ == "float":
        return float(text)
    if typ == "string":
        return ast.literal_eval(text).encode() if text[:1] in "'\"" else text.encode()
    if typ == "shape":
        return None if text in ("unknown", "None") else tuple(ast.literal_eval(text))
    if typ.startswith("list"):
        vals = ast.literal_eval(text)
        if typ == "list(type)":
            return [_TYPE_ALIASES[v] for v in vals]
        if typ == "list(string)":
            return [v.encode() for v in vals]
        return list(vals)
    return text
