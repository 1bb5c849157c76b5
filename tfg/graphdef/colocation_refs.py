"""Keep `_class` colocation attrs pointing at nodes that exist, as Grappler does.

TensorFlow's `import_graph_def` refuses a node whose `_class: loc:@X` names a node X that is
not in the graph ("expects to be colocated with unknown node"). Passes that remove nodes
(pruning, constant folding, loop optimization) can remove X while its colocation group lives
on. Like Grappler's `ReassignColocation`, each group that names a missing node is re-rooted at a
surviving member, so the constraint "these nodes share a device" is kept:

    before: a {_class: [loc:@while/Identity_1]}, b {_class: [loc:@while/Identity_1]}
            (while/Identity_1 was folded away)
    after:  a {},  b {_class: [loc:@a]}

A group with no surviving member other than one node loses the attr there. Groups whose
targets all exist are left exactly as written.
"""
LOC_PREFIX = b"loc:@"


def fix_colocation_refs(graph):
    """Re-root colocation groups that name removed nodes (in place); returns whether it
    changed anything."""
    parent = {}

    def find(x):
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:  # path compression keeps later finds short
            parent[x], x = root, parent[x]
        return root

    def union(a, b):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    targets, broken = {}, set()
    for node in graph:
        names = [s[len(LOC_PREFIX):].decode(errors="replace")
                 for s in _class_strings(node) if s.startswith(LOC_PREFIX)]
        if not names:
            continue
        targets[node.name] = names
        for name in names:
            union(node.name, name)
            if name not in graph:
                broken.add(name)
    if not broken:
        return False
    broken_groups = {find(name) for name in broken}
    members = {}
    for name in targets:
        group = find(name)
        if group in broken_groups:
            members.setdefault(group, []).append(name)
    for group, names in members.items():
        live = sorted(n for n in set(names) | {t for m in names for t in targets[m]}
                      if n in graph)
        root = live[0]
        for name in names:
            node = graph[name]
            other = [s for s in _class_strings(node) if not s.startswith(LOC_PREFIX)]
            if name == root:
                _set_class(node, other)
            else:
                _set_class(node, [LOC_PREFIX + root.encode()] + other)
    return True


def _class_strings(node):
    """The byte strings of a node's `_class` attr; none when it is absent or not a list of
    strings (a malformed attr is left for validation to report, not rewritten here)."""
    av = node.attr_view.get("_class")
    if av is None or av.WhichOneof("value") != "list":
        return []
    return list(av.list.s)


def _set_class(node, values):
    if values:
        node.set_attr("_class", list(values))
    else:
        node.del_attr("_class")
