"""`from tfg import builder as tb`: the graph-building API (see tfg.graphdef.builder).

    >>> from tfg import builder as tb
    >>> with tb.Graph() as g:
    ...     x = tb.placeholder(tb.float32, [], name="x")
    ...     y = tb.cond(x > 0.0, lambda: x * 2.0, lambda: -x)
    >>> g.save("abs2.pb")
"""
import sys

from tfg.graphdef import builder as _impl

# One module object under both names, so `import tfg.builder` and `tfg.graphdef.builder`
# share the default-builder state and every public name.
sys.modules[__name__] = _impl
