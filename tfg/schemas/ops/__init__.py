"""Op signatures for every op tfg understands, one module per op family.

Importing this package registers them all; look one up with `get_op(name)`.
"""
from tfg.schemas.ops.registry import (  # noqa: F401
    NO_DEFAULT, ArgDef, AttrDef, OpSignature, all_ops, alias, get_op, has_op, op)
from tfg.schemas.ops import signature  # noqa: F401
