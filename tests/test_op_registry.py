"""The op registry is the one home of every fact about an op (docs/architecture.md): an op with a
kernel or a gradient has a signature, the traits are consistent with the signatures' shape
functions, and no module outside tfg/schemas keeps its own set of op names for a fact the
signatures carry."""
import ast
from pathlib import Path

import pytest

import tfg.kernels  # noqa: F401  (registers every kernel)
import tfg.passes.grad  # noqa: F401  (registers every gradient)
from tfg.kernels import registry as kernels
from tfg.passes.grad import registry as grads
from tfg.schemas.ops import (
    TRAITS, all_ops, control_flow_names, fed_placeholder_ops, get_op, has_trait, ops_with,
    ref_variable_ops)
from tfg.schemas.ops.registry import CONTROL_FLOW_KINDS
from tfg.schemas.ops.array_shapes import select_v2
from tfg.schemas.ops.shape_fns import broadcast_binary, merge_inputs, unchanged

PACKAGE = Path(__file__).resolve().parent.parent / "tfg"


def test_every_op_with_a_kernel_has_a_signature():
    ops = all_ops()
    missing = sorted(op for op in kernels.registered_ops(kernels.CPU) if op not in ops)
    assert not missing, f"kernels without a signature (add one in tfg/schemas/ops): {missing}"


def test_every_op_with_a_gradient_has_a_signature():
    ops = all_ops()
    missing = sorted(op for op in grads._GRADS if op not in ops)
    assert not missing, f"gradients without a signature (add one in tfg/schemas/ops): {missing}"


def test_every_trait_is_documented_and_used():
    used = set().union(*(sig.traits for sig in all_ops().values()))
    assert used == set(TRAITS)
    with pytest.raises(ValueError, match="unknown trait"):
        ops_with("fast")


def test_elementwise_ops_have_elementwise_shape_functions():
    # An elementwise op's output has its inputs' (broadcast) shape: what the memory limits and
    # the layout pass rely on when they ask for the trait.
    for name in ops_with("elementwise"):
        sig = get_op(name)
        assert sig.shape_fn in (unchanged, broadcast_binary, merge_inputs, select_v2), name


def test_control_flow_kinds_cover_the_v1_primitives():
    assert control_flow_names("enter") == {"Enter", "RefEnter"}
    assert control_flow_names("next_iteration") == {"NextIteration", "RefNextIteration"}
    assert control_flow_names("send") == {"_Send", "_HostSend"}
    kinds = {get_op(n).control_flow for n in control_flow_names()}
    assert kinds == set(CONTROL_FLOW_KINDS)


def test_trait_lookups():
    assert has_trait("MatMul", "blas") and has_trait("MatMul", "fresh_output")
    assert not has_trait("AddV2", "blas") and not has_trait("NoSuchOp", "blas")
    assert ops_with("placeholder") == {"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"}
    assert ops_with("variable") == {"VariableV2", "Variable", "VarHandleOp"}
    assert fed_placeholder_ops() == {"Placeholder", "PlaceholderV2"}
    assert ref_variable_ops() == {"VariableV2", "Variable"}
    assert ops_with("shape_metadata") == {"Shape", "ShapeN", "Size", "Rank"}
    assert {"Identity", "StopGradient", "IdentityN"} <= ops_with("identity")


def test_shape_metadata_kernels_read_no_values():
    # The kernels registered with shape_only=True (their inputs stay where they are on a GPU)
    # are the ops with the trait.
    flagged = set()
    for path in (PACKAGE / "kernels").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "kernel"
                    and any(k.arg == "shape_only" and getattr(k.value, "value", False)
                            for k in node.keywords)):
                flagged.add(node.args[0].value)
    assert flagged == ops_with("shape_metadata")


def test_identity_ops_have_one_input_and_one_output_argument():
    for name in ops_with("identity"):
        sig = get_op(name)
        assert len(sig.inputs) == len(sig.outputs) == 1, name


# Pairs of op names that only a table of a fact the signatures carry would list together.
_TELLTALES = [("Enter", "RefEnter"), ("Exit", "RefExit"), ("Merge", "RefMerge"),
              ("NextIteration", "RefNextIteration"), ("Placeholder", "PlaceholderWithDefault"),
              ("VariableV2", "VarHandleOp"), ("MatMul", "Conv2D"), ("_Send", "_Recv")]
# Modules whose op-name literals are registrations or rules, not copies of a trait: kernel
# registrations, render's per-op styles and the remapper's and affine folds' patterns (see
# _OP_TABLES below).
_ALLOWED = {"tfg/kernels", "tfg/render/dot.py", "tfg/passes/remap.py", "tfg/passes/affine.py"}


def _literal_names(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            names = {e.value for e in node.elts if isinstance(e, ast.Constant)
                     and isinstance(e.value, str)}
            if names:
                yield node.lineno, names


def test_no_module_keeps_a_copy_of_a_trait_table():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("tfg/schemas") or any(rel.startswith(a) for a in _ALLOWED):
            continue
        for line, names in _literal_names(ast.parse(path.read_text())):
            for a, b in _TELLTALES:
                if a in names and b in names:
                    found.append(f"{rel}:{line} lists {a} and {b}")
    assert not found, "ask tfg.schemas.ops (ops_with, control_flow_names) instead:\n" + \
        "\n".join(found)


# Every table in tfg/ (tfg/schemas/ops, the registry, aside) that lists three or more op names
# and nothing else: a set, tuple, list or dict keys. Each is a registration or a rule of the
# module it lives in, never a copy of a fact about an op (ask the registry for those: a trait,
# a control-flow kind, the signature's inputs and outputs). A new table fails this test until
# it is derived from the signatures or listed here with the reason it is a rule.
_OP_TABLES = {
    # Kernel registrations: the ops one kernel function serves, or op -> numpy function.
    "tfg/kernels/basic.py:identity": "kernel registration (ops sharing one kernel)",
    "tfg/kernels/math_ops.py:_SCALAR_UFUNC": "op -> Python operator of the scalar fast path",
    "tfg/executor/loop_calls.py:_SCALAR_FAST": "op -> Python operator of a compiled loop's "
                                               "scalar call (math_ops._SCALAR_UFUNC's rule)",
    "tfg/executor/loops.py:_IDENTITY_OPS": "the single-output forwarders a compiled loop may "
                                           "alias (not CheckNumerics/EnsureShape: they check)",
    "tfg/kernels/batchnorm.py:fused_batch_norm": "kernel registration",
    "tfg/kernels/spectral_ops.py:fft": "kernel registration (FFT/IFFT of rank 1-3)",
    "tfg/kernels/spectral_ops.py:rfft": "kernel registration (RFFT of rank 1-3)",
    "tfg/kernels/spectral_ops.py:irfft": "kernel registration (IRFFT of rank 1-3)",
    "tfg/kernels/spectral_ops.py:complex_part": "kernel registration: op -> numpy function",
    "tfg/kernels/segment_ops.py:segment": "kernel registration (the Segment* reductions)",
    "tfg/kernels/unsorted_segment_ops.py:unsorted_segment": "kernel registration "
                                                            "(UnsortedSegmentMax/Min/Prod)",
    "tfg/kernels/unsorted_segment_ops.py:_UFUNC": "reduction kind (Max/Min/Prod, the op name's "
                                                  "suffix) -> numpy ufunc",
    "tfg/kernels/tensor_scatter_ops.py:_COMBINE": "kernel registration: op -> how updates "
                                                  "combine, device types",
    "tfg/kernels/scatter_ops.py:_ROW_OPS": "kernel registration: ref scatter -> how rows combine",
    "tfg/kernels/scatter_ops.py:_ND_OPS": "kernel registration: ref ScatterNd -> how rows combine",
    "tfg/passes/arith/cse.py:_INPLACE": "Grappler's rule: no merging of a node an Inplace op "
                                        "consumes (TensorFlow's kernels write their input)",
    "tfg/kernels/segment_ops.py:_SPARSE": "kernel registration (the SparseSegment* "
                                          "reductions, with and without num_segments)",
    "tfg/kernels/batchnorm.py:fused_batch_norm_grad": "kernel registration",
    "tfg/kernels/nn_ops.py:batch_matmul": "kernel registration",
    "tfg/kernels/math_ops.py:BINARY": "kernel registration: op -> numpy function",
    "tfg/kernels/math_ops.py:UNARY": "kernel registration: op -> numpy function",
    "tfg/kernels/fused.py:_ACTIVATIONS": "the fused kernel's activation functions",
    "tfg/kernels/fused.py:_INPLACE_ACTIVATIONS": "the fused kernel's in-place activations",
    "tfg/kernels/fused.py:_CHUNK_ACTIVATIONS": "per-chunk activations (conv_chunks)",
    "tfg/kernels/gpu/fusion.py:C_EXPRESSIONS": "the GPU fusion's CUDA C expression per op",
    # Per-op functions of one module, the way a shape function is per op.
    "tfg/executor/inplace.py:_VARIANTS": "op -> its in-place kernel variant",
    "tfg/executor/limits.py:VARIANT_CONTENTS": "op -> sizer of the TensorList it makes",
    "tfg/kernels/scratch.py:SCRATCH": "op -> sizer of the padded input its kernel allocates",
    "tfg/graphdef/infer.py:_HANDLES": "op -> how its resource handle is described",
    "tfg/render/dot.py:_STYLE": "how render draws each op (colours, shapes)",
    "tfg/passes/cost_model.py:_ELEMENTWISE_WEIGHT": "the cost model's FLOPs per element",
    "tfg/passes/cost_model.py:estimate_work": "the cost model's FLOP formula per op family",
    "tfg/passes/dependency.py:_NEVER": "the checks and prints Grappler's dependency optimizer "
                                       "never turns into NoOps (its own rule)",
    "tfg/executor/blas_floor.py:gemm_macs": "the size of one GEMM per BLAS op family, from "
                                            "its shapes (the BLAS thread floor)",
    "tfg/executor/blas_floor.py:ONEDNN_OPS": "the ops whose kernels run on oneDNN where it is "
                                             "installed (kernels/onednn.py), out of the floor",
    # Rewrite rules: the ops a pattern matches and what it rewrites them to (Grappler's).
    "tfg/passes/arith/stages.py:_REDUCTIONS": "reduce-then-squeeze pattern",
    "tfg/passes/arith/stages.py:_INVERSE_ORDER": "logical-not-of-comparison rewrite",
    "tfg/passes/arith/stages.py:rules": "rewrite patterns",
    "tfg/passes/constfold/simplify.py:rules": "rewrite patterns",
    "tfg/passes/collective.py:MERGE_OPS": "collective merge_op attr -> the op lowering emits",
    "tfg/passes/layout.py:SENSITIVE": "layout pass: NHWC ports of each layout-sensitive op",
    "tfg/passes/remap.py:_FUSED": "remapper: op -> its fused op",
    "tfg/passes/affine.py:_BASES": "affine folds: the ops whose constant filter takes a "
                                   "per-channel scale",
    "tfg/passes/remap.py:_FUSED_DTYPES": "remapper: dtypes the fused kernels take (narrower "
                                         "than the fused ops' signatures)",
    "tfg/passes/remap.py:_ACTS": "remapper: activations it fuses",
    "tfg/passes/remap.py:_BN": "remapper: batch norms it folds",
    "tfg/passes/remap.py:_PADDED": "remapper: convolutions a zero Pad folds into (explicit "
                                   "paddings)",
}


def _owners(tree):
    """{ast node: the def it is in (dotted), or the module-level name it is assigned to}."""
    out = {}

    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            mine = owner
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                mine = f"{owner}.{child.name}" if owner else child.name
            elif owner is None and isinstance(child, (ast.Assign, ast.AnnAssign)):
                target = child.targets[0] if isinstance(child, ast.Assign) else child.target
                mine = target.id if isinstance(target, ast.Name) else None
            out[child] = mine
            visit(child, mine)
    visit(tree, None)
    return out


def op_tables():
    """{"path:owner"} of every literal of >= 3 strings that are all registered op names."""
    ops = set(all_ops())
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("tfg/schemas/") or "/proto/" in rel:
            continue
        tree = ast.parse(path.read_text())
        owners = _owners(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
                elts = node.elts
            elif isinstance(node, ast.Dict):
                elts = node.keys
            else:
                continue
            if len(elts) >= 3 and all(isinstance(e, ast.Constant) and e.value in ops
                                      for e in elts):
                found.add(f"{rel}:{owners.get(node) or '<module>'}")
    return found


def test_no_new_op_name_tables():
    found = op_tables()
    new = sorted(found - set(_OP_TABLES))
    assert not new, ("op-name tables outside the registry: derive them from the signatures "
                     "(ops_with, control_flow_names, fed_placeholder_ops, ref_variable_ops) or, "
                     "for a rule of that module, list them in _OP_TABLES with why:\n"
                     + "\n".join(new))
    stale = sorted(set(_OP_TABLES) - found)
    assert not stale, f"listed tables that no longer exist (remove them): {stale}"


def test_the_table_scan_finds_a_table(tmp_path, monkeypatch):
    # Guards the scan itself: a copy of the placeholder set would be found.
    pkg = tmp_path / "tfg"
    pkg.mkdir()
    (pkg / "copy.py").write_text(
        'FEEDS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})\n'
        'def f(op):\n    return op in ("Shape", "Size", "Rank")\n'
        'NOT_OPS = ("Shape", "Size", "rank")\n')
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    assert op_tables() == {"tfg/copy.py:FEEDS", "tfg/copy.py:f"}
