"""Signatures of the optimizer update ops (TensorFlow's training_ops.cc). `Apply*` update a
reference variable in place and output it; `ResourceApply*` update a resource variable.

    >>> get_op("ApplyGradientDescent").inputs[0].is_ref
    True

TensorFlow marks `Apply*` not stateful (their side effect shows through the ref input, see
`OpSignature.has_ref_inputs`) and `ResourceApply*` stateful.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import merge, no_outputs


def apply_update(ctx):
    """The output is the variable; slots (ref inputs) and the gradient share its shape."""
    out = ctx.shape(0)
    for i, arg in enumerate(ctx.sig.inputs):
        if arg.is_ref or arg.name in ("grad", "delta"):
            out = merge(out, ctx.shape(i))
    return [out]


# --- reference-variable updates: the output is the updated variable
op("ApplyGradientDescent",
   inputs=["var: Ref(T)", "alpha: T", "delta: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   shape_fn=apply_update)
op("ApplyMomentum",
   inputs=["var: Ref(T)", "accum: Ref(T)", "lr: T", "grad: T", "momentum: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false", "use_nesterov: bool = false"],
   shape_fn=apply_update)
op("ApplyAdam",
   inputs=["var: Ref(T)", "m: Ref(T)", "v: Ref(T)", "beta1_power: T", "beta2_power: T", "lr: T",
           "beta1: T", "beta2: T", "epsilon: T", "grad: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false", "use_nesterov: bool = false"],
   shape_fn=apply_update)
op("ApplyRMSProp",
   inputs=["var: Ref(T)", "ms: Ref(T)", "mom: Ref(T)", "lr: T", "rho: T", "momentum: T",
           "epsilon: T", "grad: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   shape_fn=apply_update)
op("ApplyAdagrad",
   inputs=["var: Ref(T)", "accum: Ref(T)", "lr: T", "grad: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false", "update_slots: bool = true"],
   shape_fn=apply_update)
op("ApplyCenteredRMSProp",
   inputs=["var: Ref(T)", "mg: Ref(T)", "ms: Ref(T)", "mom: Ref(T)", "lr: T", "rho: T",
           "momentum: T", "epsilon: T", "grad: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   shape_fn=apply_update)
op("ApplyAdadelta",
   inputs=["var: Ref(T)", "accum: Ref(T)", "accum_update: Ref(T)", "lr: T", "rho: T",
           "epsilon: T", "grad: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   shape_fn=apply_update)
op("ApplyAdagradV2",
   inputs=["var: Ref(T)", "accum: Ref(T)", "lr: T", "epsilon: T", "grad: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false", "update_slots: bool = true"],
   shape_fn=apply_update)
op("ApplyAdaMax",
   inputs=["var: Ref(T)", "m: Ref(T)", "v: Ref(T)", "beta1_power: T", "lr: T", "beta1: T",
           "beta2: T", "epsilon: T", "grad: T"],
   outputs=["out: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   shape_fn=apply_update)

# --- resource-variable updates: no outputs
op("ResourceApplyGradientDescent",
   inputs=["var: resource", "alpha: T", "delta: T"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   stateful=True, shape_fn=no_outputs)
op("ResourceApplyMomentum",
   inputs=["var: resource", "accum: resource", "lr: T", "grad: T", "momentum: T"],
   attrs=["T: numbertype", "use_locking: bool = false", "use_nesterov: bool = false"],
   stateful=True, shape_fn=no_outputs)
op("ResourceApplyAdam",
   inputs=["var: resource", "m: resource", "v: resource", "beta1_power: T", "beta2_power: T",
           "lr: T", "beta1: T", "beta2: T", "epsilon: T", "grad: T"],
   attrs=["T: numbertype", "use_locking: bool = false", "use_nesterov: bool = false"],
   stateful=True, shape_fn=no_outputs)
op("ResourceApplyRMSProp",
   inputs=["var: resource", "ms: resource", "mom: resource", "lr: T", "rho: T", "momentum: T",
           "epsilon: T", "grad: T"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   stateful=True, shape_fn=no_outputs)
op("ResourceApplyAdagrad",
   inputs=["var: resource", "accum: resource", "lr: T", "grad: T"],
   attrs=["T: numbertype", "use_locking: bool = false", "update_slots: bool = true"],
   stateful=True, shape_fn=no_outputs)
op("ResourceApplyCenteredRMSProp",
   inputs=["var: resource", "mg: resource", "ms: resource", "mom: resource", "lr: T", "rho: T",
           "momentum: T", "epsilon: T", "grad: T"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   stateful=True, shape_fn=no_outputs)
op("ResourceApplyAdadelta",
   inputs=["var: resource", "accum: resource", "accum_update: resource", "lr: T", "rho: T",
           "epsilon: T", "grad: T"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   stateful=True, shape_fn=no_outputs)
op("ResourceApplyAdagradV2",
   inputs=["var: resource", "accum: resource", "lr: T", "epsilon: T", "grad: T"],
   attrs=["T: numbertype", "use_locking: bool = false", "update_slots: bool = true"],
   stateful=True, shape_fn=no_outputs)
op("ResourceApplyAdaMax",
   inputs=["var: resource", "m: resource", "v: resource", "beta1_power: T", "lr: T", "beta1: T",
           "beta2: T", "epsilon: T", "grad: T"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   stateful=True, shape_fn=no_outputs)

# --- sparse resource-variable updates: only the rows `indices` name (grad[i] updates row
# indices[i]); what TensorFlow's v1 optimizers and Keras' optimizer_v2 emit for the gradient
# of an embedding lookup (IndexedSlices)
op("ResourceSparseApplyAdagrad",
   inputs=["var: resource", "accum: resource", "lr: T", "grad: T", "indices: Tindices"],
   attrs=["T: numbertype", "Tindices: {int32, int64}", "use_locking: bool = false",
          "update_slots: bool = true"],
   stateful=True, shape_fn=no_outputs)
op("ResourceSparseApplyAdagradV2",
   inputs=["var: resource", "accum: resource", "lr: T", "epsilon: T", "grad: T",
           "indices: Tindices"],
   attrs=["T: numbertype", "Tindices: {int32, int64}", "use_locking: bool = false",
          "update_slots: bool = true"],
   stateful=True, shape_fn=no_outputs)
op("ResourceSparseApplyMomentum",
   inputs=["var: resource", "accum: resource", "lr: T", "grad: T", "indices: Tindices",
           "momentum: T"],
   attrs=["T: numbertype", "Tindices: {int32, int64}", "use_locking: bool = false",
          "use_nesterov: bool = false"],
   stateful=True, shape_fn=no_outputs)
