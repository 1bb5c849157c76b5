"""The Session's graph rewrites switch, and the call that rewrites one request's subgraph
before it is prepared (the rewrites themselves: tfg/passes/step_rewrite.py).

    >>> resolve(None)            # default: on, unless $TFG_GRAPH_REWRITES is 0/off/false/no
    True
    >>> graph, needed = rewrite(graph, needed, request, log)   # log gets a StepRewrite

A rewrite that is skipped (too large, a feed it cannot keep exactly) leaves the graph as it
was; a pass that fails is rolled back by the pass manager, so a rewrite never fails a step.
"""
import os

from tfg.errors import TfgInputError
from tfg.executor import step as S
from tfg.passes.step_rewrite import rewrite_step

ENV = "TFG_GRAPH_REWRITES"
_OFF = ("0", "off", "false", "no")
_ON = ("1", "on", "true", "yes", "")


def resolve(value):
    """graph_rewrites= (None, True, False) -> bool; None reads $TFG_GRAPH_REWRITES."""
    if value is None:
        env = os.environ.get(ENV, "").strip().lower()
        if env not in _OFF + _ON:
            raise TfgInputError(f"${ENV} must be 1 or 0 (on/off), not {env!r}")
        return env not in _OFF
    if not isinstance(value, bool):
        raise TfgInputError(f"graph_rewrites must be True, False or None, not {value!r}")
    return value


def rewrite(graph, needed, request, log):
    """(graph, needed) for the request after the session-time rewrites; appends what was done
    to `log`."""
    result = rewrite_step(graph, needed, request.feed_refs, request.fetch_refs,
                          request.targets)
    log.append(result)
    if result.graph is None:
        return graph, needed
    new = result.graph
    return new, S.check_request(new, request.feed_refs, request.fetch_refs, request.targets)
