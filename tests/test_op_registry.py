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
from tfg.schemas.ops import TRAITS, all_ops, control_flow_names, get_op, has_trait, ops_with
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


# Pairs of op names that only a table of a fact the signatures carry would list together.
_TELLTALES = [("Enter", "RefEnter"), ("Exit", "RefExit"), ("Merge", "RefMerge"),
              ("NextIteration", "RefNextIteration"), ("Placeholder", "PlaceholderWithDefault"),
              ("VariableV2", "VarHandleOp"), ("MatMul", "Conv2D"), ("_Send", "_Recv")]
# Modules whose op-name literals are registrations or rules, not copies of a trait: kernel and
# gradient registrations, rewrite patterns, and the GPU helper (being rewritten, issue 16 item 4).
_ALLOWED = {"tfg/kernels", "tfg/passes/grad", "tfg/render/dot.py", "tfg/passes/remap.py"}


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
