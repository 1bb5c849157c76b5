"""What a drawing shows: the selected nodes, which name scopes are collapsed into one box, and
which outside nodes appear as stubs.

    >>> v = select(graph, max_nodes=200)                 # everything, scopes collapsed if needed
    >>> v = select(graph, scope="dense_1")               # one scope, its neighbours as stubs
    >>> v = select(graph, around="loss", depth=2)        # a neighbourhood
    >>> v.unit_of["dense_1/MatMul"]                      # 'dense_1/MatMul' or a box id
    'box:dense_1/'

Collapsing is greedy from the top of the scope tree: start with every top-level scope as one
box, then open boxes (shallow ones first) while the number of drawn units stays within
`max_nodes`.
"""
from collections import deque
from dataclasses import dataclass, field

from tfg.errors import TfgInputError

BOX_PREFIX = "box:"


@dataclass
class View:
    nodes: list  # node names drawn one by one (selected and stubs), file order
    stubs: set  # nodes outside the selection next to it (drawn faded, or boxed)
    boxes: dict  # box id -> (scope prefix ending in '/', [member node names])
    unit_of: dict = field(default_factory=dict)  # node name -> its own name or a box id
    base: str = ""  # scope prefix every unit is relative to ('' = the whole graph)


def scope_of(name):
    """`a/b/c` -> `a/b/` ; `c` -> ''."""
    i = name.rfind("/")
    return name[: i + 1] if i >= 0 else ""


def select(graph, max_nodes=200, scope=None, around=None, depth=2):
    """Choose the units to draw (see the module docstring)."""
    if max_nodes < 1:
        raise TfgInputError("--max-nodes must be at least 1")
    base = ""
    if scope:
        base = scope.strip("/") + "/"
        selected = {n.name for n in graph if n.name.startswith(base) or n.name == base[:-1]}
        if not selected:
            raise TfgInputError(f"no node in scope {scope!r}")
    elif around:
        if around not in graph:
            raise TfgInputError(f"no node named {around!r} in the graph")
        selected = _neighbourhood(graph, around, depth)
    else:
        selected = set(graph.node_names())
    stubs = set()
    if scope or around:
        stubs = _neighbours(graph, selected) - selected
    names = [n for n in graph.node_names() if n in selected or n in stubs]
    units = _collapse(names, stubs, base, max_nodes)
    boxes = {}
    unit_of = {}
    for name in names:
        unit = units[name]
        unit_of[name] = unit
        if unit.startswith(BOX_PREFIX):
            boxes.setdefault(unit, (unit[len(BOX_PREFIX):], []))[1].append(name)
    return View([n for n in names if not unit_of[n].startswith(BOX_PREFIX)], stubs, boxes,
                unit_of, base)


def _neighbours(graph, names):
    out = set()
    for name in names:
        node = graph.get(name)
        out.update(r.node for r in node.input_refs if r.node in graph)
        out.update(c.name for c, _ in graph.consumers(name, include_control=True))
    return out


def _neighbourhood(graph, start, depth):
    seen = {start}
    frontier = deque([(start, 0)])
    while frontier:
        name, d = frontier.popleft()
        if d >= depth:
            continue
        for nb in _neighbours(graph, [name]):
            if nb not in seen:
                seen.add(nb)
                frontier.append((nb, d + 1))
    return seen


def _prefixes(name, base):
    """The collapsible scopes holding `name`, outermost first (inside `base` when it is)."""
    s = scope_of(name)
    i = s.find("/", len(base) if s.startswith(base) else 0)
    while i >= 0:
        yield s[: i + 1]
        i = s.find("/", i + 1)


def _collapse(names, stubs, base, max_nodes):
    """node name -> unit (itself, or `box:<scope>/`), opening boxes greedily."""
    tree = {}  # scope prefix -> members (all depths)
    for name in names:
        for prefix in _prefixes(name, base):
            tree.setdefault(prefix, []).append(name)

    def top_unit(name, opened):
        """The outermost unopened box holding `name`, or the node itself."""
        for prefix in _prefixes(name, base):
            if prefix not in opened:
                return BOX_PREFIX + prefix
        return name

    if len(names) <= max_nodes:
        opened = set(tree)
    else:
        # A box of one node saves nothing: always open those.
        opened = {p for p, members in tree.items() if len(members) == 1}
        current = {top_unit(n, opened) for n in names}
        by_depth = lambda p: (p.count("/"), p)  # noqa: E731
        queue = deque(sorted((p for p in tree if BOX_PREFIX + p in current), key=by_depth))
        while queue:
            prefix = queue.popleft()
            children = {top_unit(n, opened | {prefix}) for n in tree[prefix]}
            if len(current) - 1 + len(children) <= max_nodes:
                opened.add(prefix)
                current.discard(BOX_PREFIX + prefix)
                current |= children
                queue.extend(sorted((c[len(BOX_PREFIX):] for c in children
                                     if c.startswith(BOX_PREFIX)), key=by_depth))
    return {name: top_unit(name, opened) for name in names}
