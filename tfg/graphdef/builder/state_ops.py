"""Reference variables as TensorFlow 1 makes them: VariableV2, an Assign initializer, a
`read` Identity, and the global initializer NoOp `init`.

    >>> w = tb.Variable(np.zeros((3, 1), np.float32), name="w")
    # w/initial_value (Const), w (VariableV2), w/Assign (Assign), w/read (Identity)
    >>> y = x @ w                      # reads w/read
    >>> step = tb.assign_add(w, delta) # AssignAdd on the reference w
    >>> init = tb.global_variables_initializer()   # NoOp `init` after every w/Assign
"""
from tfg.errors import TfgInputError
from tfg.graphdef.builder.constants import convert_to_tensor
from tfg.graphdef.builder.control_flow import group
from tfg.graphdef.builder.core import A, Tensor, get_default_builder
from tfg.graphdef.builder.math_ops import make


class Variable:
    """A ref variable. Use it like a Tensor (it reads `<name>/read`), or `.ref` for updates."""

    def __init__(self, initial_value, name="Variable", dtype=None, shape=None, trainable=True):
        b = get_default_builder()
        self.builder = b
        saved_ctx, b.ctx = b.ctx, None  # TensorFlow lifts variable creation out of cond/while
        try:
            with b.control_dependencies(None), b.name_scope(name) as scope:
                if callable(initial_value):
                    with b.name_scope("Initializer"):
                        init = convert_to_tensor(initial_value(), dtype)
                else:
                    init = convert_to_tensor(initial_value, dtype, name="initial_value")
                dt = init.dtype.base
                shp = init.shape if shape is None else tuple(shape)
                if shp is None or None in shp:
                    raise TfgInputError(f"variable {scope[:-1]!r} needs a fully known shape "
                                        f"(initial value has {shp})")
                self.op = make("VariableV2", [], {"shape": A(shp, "shape"), "dtype": dt,
                                                  "container": b"", "shared_name": b""},
                               scope, [dt.as_ref])
                coloc = [f"loc:@{self.op.name}".encode()]
                self.initializer = make("Assign", [self.op.outputs[0], init],
                                        {"T": dt, "validate_shape": True, "use_locking": True,
                                         "_class": coloc}, "Assign", [dt.as_ref])
                self._read = make("Identity", [self.op.outputs[0]], {"T": dt, "_class": coloc},
                                  "read", [dt]).outputs[0]
        finally:
            b.ctx = saved_ctx
        self.initial_value = init
        self.trainable = trainable
        b.variables.append(self)

    @property
    def name(self):
        return self.op.name + ":0"

    @property
    def ref(self):
        """The VariableV2 output (a reference), for Assign-like ops."""
        return self.op.outputs[0]

    @property
    def dtype(self):
        return self._read.dtype

    @property
    def shape(self):
        return self._read.shape

    def value(self):
        return self._read

    def _as_tensor(self):
        return self._read

    def assign(self, value, name=None):
        return assign(self, value, name=name)

    def assign_add(self, value, name=None):
        return assign_add(self, value, name=name)

    def assign_sub(self, value, name=None):
        return assign_sub(self, value, name=name)

    def __repr__(self):
        return f"<tb.Variable {self.op.name!r} dtype={self.dtype.tf_name} shape={self.shape}>"


def _delegate(name):
    def method(self, *args):
        return getattr(self._read, name)(*args)
    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__",
              "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__getitem__"):
    setattr(Variable, _name, _delegate(_name))
Variable.__hash__ = object.__hash__


def _ref_of(v):
    if isinstance(v, Variable):
        return v.ref
    if isinstance(v, Tensor) and v.dtype.is_ref:
        return v
    raise TfgInputError(f"{v!r} is not a variable (reference) to assign to")


def _update(op_type, ref, value, name, extra):
    b = get_default_builder()
    r = _ref_of(ref)
    with b.name_scope(name or op_type) as scope:
        v = convert_to_tensor(value, r.dtype.base, name="value")
        attrs = {"T": r.dtype.base}
        attrs.update(extra)
        with b.colocate_with(r):
            return make(op_type, [r, v], attrs, scope, [r.dtype]).outputs[0]


def assign(ref, value, validate_shape=True, use_locking=True, name=None):
    """ref = value; returns the updated reference (usable as a target)."""
    return _update("Assign", ref, value, name, {"validate_shape": bool(validate_shape),
                                                 "use_locking": bool(use_locking)})


def assign_add(ref, value, use_locking=False, name=None):
    return _update("AssignAdd", ref, value, name, {"use_locking": bool(use_locking)})


def assign_sub(ref, value, use_locking=False, name=None):
    return _update("AssignSub", ref, value, name, {"use_locking": bool(use_locking)})


def global_variables():
    return list(get_default_builder().variables)


def variables_initializer(var_list, name="init"):
    """A NoOp that runs every variable's Assign initializer."""
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer(name="init"):
    """tf.compat.v1.global_variables_initializer: NoOp `init` after every initializer."""
    return variables_initializer(global_variables(), name=name)


__all__ = ["Variable", "assign", "assign_add", "assign_sub", "global_variables",
           "variables_initializer", "global_variables_initializer"]
