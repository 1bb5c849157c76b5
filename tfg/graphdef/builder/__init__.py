"""The builder API: write TensorFlow-1-style graph code, get a tfg Graph / GraphDef.

    >>> from tfg import builder as tb
    >>> with tb.GraphBuilder() as g:
    ...     x = tb.placeholder(tb.float32, [None, 3], name="x")
    ...     w = tb.Variable(np.ones((3, 1), np.float32), name="w")
    ...     y = tb.identity(x @ w, name="y")
    ...     init = tb.global_variables_initializer()
    >>> g.save("model.pb")    # tfg run model.pb --init init --feed 'x=[[1,2,3]]' --fetch y

Control flow: `tb.cond(pred, true_fn, false_fn)` and `tb.while_loop(cond, body, loop_vars)`
compile to Switch/Merge/Enter/Exit/NextIteration as TensorFlow's v1 control flow does.
"""
from tfg.schemas.dtypes import DType
from tfg.graphdef.builder.core import (  # noqa: F401
    A, GraphBuilder, Operation, Tensor, colocate_with, control_dependencies, device,
    get_default_builder, name_scope, reset_default_graph)
from tfg.graphdef.builder.constants import (  # noqa: F401
    constant, convert_to_tensor, placeholder, placeholder_with_default)
from tfg.graphdef.builder.math_ops import *  # noqa: F401,F403
from tfg.schemas.ops.shape_fns import broadcast as broadcast_shape  # noqa: F401
from tfg.graphdef.builder.array_ops import *  # noqa: F401,F403
from tfg.graphdef.builder.slicing import *  # noqa: F401,F403
from tfg.graphdef.builder.array_ops import range_ as range, slice_ as slice  # noqa: F401,A001
from tfg.graphdef.builder.nn_ops import *  # noqa: F401,F403
from tfg.graphdef.builder.state_ops import *  # noqa: F401,F403
from tfg.graphdef.builder.random_ops import *  # noqa: F401,F403
from tfg.graphdef.builder.control_flow import (  # noqa: F401
    CondContext, WhileContext, cond, group, no_op, tuple_, while_loop, with_dependencies)
from tfg.graphdef.builder.control_flow import tuple_ as tuple  # noqa: F401,A001
from tfg.graphdef.builder import training as train  # noqa: F401
from tfg.graphdef.builder import nn_ops as nn  # noqa: F401
from tfg.graphdef.builder import collective  # noqa: F401

Graph = GraphBuilder  # `with tb.Graph() as g:` reads like TensorFlow
get_default_graph = get_default_builder

float16, float32, float64 = DType.HALF, DType.FLOAT, DType.DOUBLE
bfloat16 = DType.BFLOAT16
int8, int16, int32, int64 = DType.INT8, DType.INT16, DType.INT32, DType.INT64
uint8, uint16, uint32, uint64 = DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64
bool_ = DType.BOOL
string = DType.STRING
complex64, complex128 = DType.COMPLEX64, DType.COMPLEX128
newaxis = None
