"""tfg: a toolchain for TensorFlow-style dataflow graphs, without TensorFlow.

    >>> import tfg
    >>> g = tfg.load("model.pb")
    >>> tfg.save(g, "model.pbtxt")
"""
__version__ = "0.1.0"

from tfg.graphdef.graph import Graph, Node  # noqa: E402,F401
from tfg.graphdef.io import load, loads, save, dumps  # noqa: E402,F401
from tfg.schemas.dtypes import DType  # noqa: E402,F401
