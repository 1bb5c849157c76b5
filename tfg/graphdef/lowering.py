"""The new nodes that replace one v2 control-flow node (tfg.graphdef.lower_if, lower_while).

    >>> low = Lowering(graph, if_node)
    >>> sw = low.add("switch_0", "Switch", [x, pred], {"T": DType.FLOAT})  # "<if>/switch_0"
    >>> low.replace_with(Node(if_node.name, "IdentityN", [...], if_node.device))

Names are `<node>/<base>`, made unique against the graph and each other; every new node sits on
the replaced node's device. `replace_with` swaps them in for the node, which the result takes
the name of, so `node:k` and `^node` elsewhere keep their meaning.
"""
from tfg.errors import TfgInputError
from tfg.graphdef.graph import Node


class FunctionInliningError(TfgInputError):
    """A call that cannot be inlined: the message names the function and the node."""


class Taken:
    """Node names in use while replacing node `own`: the graph's (but `own`, whose name the
    replacement takes) and those handed out already. Checks the graph's index instead of
    copying it, so inlining many calls stays linear."""

    def __init__(self, graph, own):
        self.graph, self.own, self.local = graph, own, set()

    def __contains__(self, name):
        return name in self.local or (name != self.own and name in self.graph)

    def add(self, name):
        self.local.add(name)


def fresh_name(name, taken):
    new, i = name, 1
    while new in taken:
        new, i = f"{name}_{i}", i + 1
    taken.add(new)
    return new


class Lowering:
    """Nodes being built to replace `node` of `graph` (see the module docstring)."""

    def __init__(self, graph, node):
        self.graph, self.name, self.device = graph, node.name, node.device
        self.taken = Taken(graph, node.name)
        self.new = []

    def add(self, base, op, inputs, attrs=None):
        """A new node `<name>/<base>` (list values are list(type) attrs); returns the Node."""
        n = Node(fresh_name(f"{self.name}/{base}", self.taken), op, inputs, self.device)
        for key, value in (attrs or {}).items():
            n.set_attr(key, value, "list(type)" if isinstance(value, list) else None)
        self.new.append(n)
        return n

    def replace_with(self, result):
        """Remove the replaced node; add the new nodes and `result` (which takes its name)."""
        self.graph.remove_node(self.name)
        for n in self.new:
            self.graph.add(n)
        self.graph.add(result)

    def replace_with_merged(self, merges, executed, tout):
        """The conditionals' result: IdentityN of the Merges (a NoOp when there are none),
        waiting on `executed`, the Merge of the taken branch's completion."""
        if tout:
            result = Node(self.name, "IdentityN", list(merges) + ["^" + executed], self.device)
            result.set_attr("T", list(tout), "list(type)")
        else:
            result = Node(self.name, "NoOp", ["^" + executed], self.device)
        self.replace_with(result)


