"""Training graphs: optimizer updates for the variables among a gradient's xs.

`tfg grad --optimizer SPEC` (or `grad(..., optimizer=SPEC)`) adds, after the gradient, one
Apply* update per x that is a variable, the slot variables the optimizer needs, and a `train`
NoOp grouping the updates, the way TensorFlow's v1 optimizers do:

    sgd:LR                          ApplyGradientDescent(var, LR, grad)
    momentum:LR,M[,nesterov]        ApplyMomentum with slot `<var>/Momentum` (zeros)
    adam:LR[,B1,B2,EPS]             ApplyAdam with slots `<var>/Adam`, `<var>/Adam_1` (zeros) and
                                    the shared scalars `beta1_power`/`beta2_power` (B1, B2) that
                                    are multiplied by B1/B2 after every update, as AdamOptimizer
                                    (defaults 0.9, 0.999, 1e-8)
    rmsprop:LR[,DECAY,M,EPS]        ApplyRMSProp with slots `<var>/RMSProp` (ones, as TF1) and
                                    `<var>/RMSProp_1` (zeros) (defaults 0.9, 0.0, 1e-10)

An x is a variable when it is a VariableV2 (or its `/read` Identity), or a resource variable
read through ReadVariableOp (or the VarHandleOp itself; ResourceApply* is used then). Other xs
get no update. Slot initializers join the `init` NoOp when the graph has one; otherwise a new
`init` NoOp groups them with every `<var>/Assign` initializer of the graph.

    >>> g2 = grad(g, ys=["loss"], xs=["w/read"], optimizer="sgd:0.1")
    >>> g2["train"].inputs
    ('^gradients/train/w/ApplyGradientDescent',)
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.attrs import Shape
from tfg.graphdef.names import parse_tensor
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import has_trait, ref_variable_ops

REF_VARS = ref_variable_ops()

# name -> (Apply op suffix, default hyperparameters after LR, their names)
OPTIMIZERS = {
    "sgd": ("GradientDescent", (), ()),
    "momentum": ("Momentum", (None,), ("momentum",)),
    "adam": ("Adam", (0.9, 0.999, 1e-8), ("beta1", "beta2", "epsilon")),
    "rmsprop": ("RMSProp", (0.9, 0.0, 1e-10), ("decay", "momentum", "epsilon")),
}


def parse_optimizer(spec):
    """`"momentum:0.1,0.9"` -> ("momentum", 0.1, {"momentum": 0.9, "nesterov": False})."""
    kind, _, rest = str(spec).partition(":")
    kind = kind.strip().lower()
    usage = "sgd:LR | momentum:LR,M | adam:LR[,B1,B2,EPS] | rmsprop:LR[,DECAY,M,EPS]"
    if kind not in OPTIMIZERS:
        raise TfgInputError(f"unknown optimizer {kind!r} in {spec!r}; expected {usage}")
    parts = [p.strip() for p in rest.split(",") if p.strip()]
    nesterov = kind == "momentum" and parts and parts[-1].lower() == "nesterov"
    if nesterov:
        parts = parts[:-1]
    _, defaults, names = OPTIMIZERS[kind]
    if not parts or len(parts) > 1 + len(defaults):
        raise TfgInputError(f"optimizer {spec!r}: expected {usage}")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise TfgInputError(f"optimizer {spec!r}: hyperparameters must be numbers") from None
    params = dict(zip(names, defaults))
    params.update(zip(names, values[1:]))
    missing = [k for k, v in params.items() if v is None]
    if missing:
        raise TfgInputError(f"optimizer {spec!r}: missing {', '.join(missing)}; expected {usage}")
    if kind == "momentum":
        params["nesterov"] = bool(nesterov)
    return kind, values[0], params


def find_variable(g, x):
    """(variable node, is_resource) behind tensor name x, or None when x is no variable."""
    node = g.get(parse_tensor(x).node)
    if node is None:
        return None
    if node.op == "Identity" and node.inputs:
        src = g.get(parse_tensor(node.inputs[0]).node)
        if src is not None and src.op in REF_VARS:
            return src, False
    if node.op in REF_VARS:
        return node, False
    if node.op == "ReadVariableOp" and node.inputs:
        node = g.get(parse_tensor(node.inputs[0]).node)
    if node is not None and node.op == "VarHandleOp":
        return node, True
    return None


class _Trainer:
    """Adds the nodes of one optimizer's update step to g."""

    def __init__(self, g, scope, kind, lr, params):
        self.g, self.scope, self.kind, self.lr, self.params = g, scope, kind, lr, params
        self.initializers = []
        self.updates = []
        self._adam_powers = None

    def const(self, name, value, dtype):
        return self.g.add_node(self.g.unique_name(name), "Const", [],
                               {"dtype": dtype, "value": np.asarray(value, dtype.np)},
                               ).name

    def slot(self, var, resource, name, fill, dtype, shape):
        """A variable `name` like var, initialized to `fill`; returns its node name."""
        name = self.g.unique_name(name)
        init = self.const(f"{name}/Initializer/Const", np.full(shape, fill), dtype)
        if resource:
            self.g.add_node(name, "VarHandleOp", [], {"dtype": dtype, "shape": Shape(shape),
                                                      "shared_name": name}, var.device)
            assign = self.g.add_node(f"{name}/Assign", "AssignVariableOp", [name, init],
                                     {"dtype": dtype}, var.device)
        else:
            self.g.add_node(name, "VariableV2", [], {"dtype": dtype, "shape": Shape(shape)},
                            var.device)
            assign = self.g.add_node(f"{name}/Assign", "Assign", [name, init], {"T": dtype},
                                     var.device)
        self.initializers.append(assign.name)
        return name

    def adam_powers(self, var, resource, dtype):
        if self._adam_powers is None:
            b1 = self.slot(var, resource, "beta1_power", self.params["beta1"], dtype, ())
            b2 = self.slot(var, resource, "beta2_power", self.params["beta2"], dtype, ())
            self._adam_powers = (b1, b2, resource, dtype, var.device)
        return self._adam_powers[:2]

    def read(self, name, resource, dtype):
        if not resource:
            return name
        return self.g.add_node(self.g.unique_name(f"{name}/read_for_update"), "ReadVariableOp",
                               [name], {"dtype": dtype}).name

    def apply(self, var, resource, grad_name, all_grads):
        dtype = var.get_attr("dtype")
        shape = var.get_attr("shape")
        if shape is None or any(d is None or d < 0 for d in shape):
            raise TfgInputError(f"--optimizer: variable {var.name!r} has no fully known shape; "
                                "its slot variables cannot be made")
        shape = tuple(shape)
        base = f"{self.scope}/{var.name}"
        c = lambda n, v: self.const(f"{base}/{n}", v, dtype)  # noqa: E731
        suffix = OPTIMIZERS[self.kind][0]
        p = self.params
        slots, args, attrs = [], [], {"T": dtype, "use_locking": False}
        if self.kind == "sgd":
            args = [c("learning_rate", self.lr), grad_name]
        elif self.kind == "momentum":
            slots = [self.slot(var, resource, f"{var.name}/Momentum", 0, dtype, shape)]
            args = [c("learning_rate", self.lr), grad_name, c("momentum", p["momentum"])]
            attrs["use_nesterov"] = p["nesterov"]
        elif self.kind == "adam":
            slots = [self.slot(var, resource, f"{var.name}/Adam", 0, dtype, shape),
                     self.slot(var, resource, f"{var.name}/Adam_1", 0, dtype, shape)]
            b1p, b2p = self.adam_powers(var, resource, dtype)
            args = [self.read(b1p, resource, dtype), self.read(b2p, resource, dtype),
                    c("learning_rate", self.lr), c("beta1", p["beta1"]),
                    c("beta2", p["beta2"]), c("epsilon", p["epsilon"]), grad_name]
        else:
            slots = [self.slot(var, resource, f"{var.name}/RMSProp", 1, dtype, shape),
                     self.slot(var, resource, f"{var.name}/RMSProp_1", 0, dtype, shape)]
            args = [c("learning_rate", self.lr), c("decay", p["decay"]),
                    c("momentum", p["momentum"]), c("epsilon", p["epsilon"]), grad_name]
        op = ("ResourceApply" if resource else "Apply") + suffix
        # Every update waits for every gradient: a variable must not change while the
        # backward pass of another one still reads it (all gradients at the same point).
        deps = [f"^{n}" for n in all_grads]
        node = self.g.add_node(self.g.unique_name(f"{base}/{op}"), op,
                               [var.name, *slots, *args, *deps], attrs, var.device)
        self.updates.append(node.name)

    def finish_adam(self):
        """beta_power <- beta_power * beta after every Apply (AdamOptimizer._finish)."""
        if self._adam_powers is None:
            return
        b1p, b2p, resource, dtype, device = self._adam_powers
        deps = [f"^{u}" for u in self.updates]
        for power, beta in ((b1p, self.params["beta1"]), (b2p, self.params["beta2"])):
            base = f"{self.scope}/{power}"
            # The read waits for every Apply: they must all see the old power first.
            value = (self.g.add_node(self.g.unique_name(f"{base}/read"), "ReadVariableOp",
                                     [power, *deps], {"dtype": dtype}).name
                     if resource else
                     self.g.add_node(self.g.unique_name(f"{base}/read"), "Identity",
                                     [power, *deps], {"T": dtype}).name)
            mul = self.g.add_node(self.g.unique_name(f"{base}/mul"), "Mul",
                                  [value, self.const(f"{base}/beta", beta, dtype)],
                                  {"T": dtype}).name
            if resource:
                upd = self.g.add_node(self.g.unique_name(f"{base}/Assign"), "AssignVariableOp",
                                      [power, mul], {"dtype": dtype}, device)
            else:
                upd = self.g.add_node(self.g.unique_name(f"{base}/Assign"), "Assign",
                                      [power, mul], {"T": dtype, "use_locking": False}, device)
            self.updates.append(upd.name)


def add_training(g, x_refs, grad_names, optimizer, scope):
    """Add Apply* updates of the variable xs (gradients in grad_names) and `train`, in place.

    Before: `w`, `w/read`, `loss`, `grad/w/read`.  After (sgd:0.1): also
    `<scope>/train/w/learning_rate`, `<scope>/train/w/ApplyGradientDescent` and the NoOp
    `train` with the control input ^...ApplyGradientDescent. Returns the `train` node name.
    """
    kind, lr, params = parse_optimizer(optimizer)
    tr = _Trainer(g, f"{scope}/train", kind, lr, params)
    todo = {}
    for x, gname in zip(x_refs, grad_names):
        found = find_variable(g, x)
        if found is None or found[0].name in todo:
            continue
        dtype = found[0].get_attr("dtype")
        if isinstance(dtype, DType) and dtype.is_floating:
            todo[found[0].name] = (found, gname)
    for (var, resource), gname in todo.values():
        tr.apply(var, resource, gname, [gn for _, gn in todo.values()])
    if not tr.updates:
        raise TfgInputError("--optimizer: none of the xs is a floating-point variable "
                            "(VariableV2, its /read, or a ReadVariableOp of a VarHandleOp)")
    tr.finish_adam()
    train = g.unique_name("train")
    g.add_node(train, "NoOp", [f"^{u}" for u in tr.updates])
    _add_initializers(g, tr.initializers)
    return train


def _add_initializers(g, new_inits):
    init = g.get("init")
    if init is not None and init.op == "NoOp":
        init.inputs = list(init.inputs) + [f"^{n}" for n in new_inits]
        return
    existing = [f"{n.name}/Assign" for n in g if has_trait(n.op, "variable")
                and f"{n.name}/Assign" in g and f"{n.name}/Assign" not in new_inits]
    name = "init" if init is None else g.unique_name("init")
    g.add_node(name, "NoOp", [f"^{n}" for n in existing + new_inits])
