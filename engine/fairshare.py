"""Fair-share targets that follow the queue hierarchy, shared by the simulator's report and the dashboard.

The ``drf`` plugin compares siblings level by level (Volcano's hdrf): at every level of the tree, the
active children of one parent divide what their parent gets in proportion to their weights (weights
below 1 count as 1, as in ``drf``). A queue's target fraction of the fleet is therefore the product,
along its path from the root, of ``weight / sum of its active siblings' weights``. A flat set of queues
is the special case of one level: ``weight / total weight``.

"Active" queues are the ones that compete (with jobs in the simulation, with demand on a live fleet);
their ancestors compete for them. Inactive queues get no target (they do not take part in the division).
Pure: no engine import, so the report, the dashboard and their tests use the same definition.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

QueueTree = Mapping[str, tuple[Optional[str], int]]
"""queue name -> (parent name or None, weight)."""


def _parent(tree: QueueTree, name: str) -> Optional[str]:
    parent = tree[name][0] if name in tree else None
    return parent if parent in tree and parent != name else None


def _weight(tree: QueueTree, name: str) -> int:
    weight = tree[name][1] if name in tree else 1
    return weight if weight > 1 else 1


def competing(tree: QueueTree, active: Iterable[str]) -> set[str]:
    """The active queues and all their ancestors (a cycle in bad input stops the walk)."""
    out: set[str] = set()
    for name in active:
        node: Optional[str] = name
        while node is not None and node not in out:
            out.add(node)
            node = _parent(tree, node)
    return out


def roots(tree: QueueTree, active: Iterable[str]) -> list[str]:
    """The competing queues without a competing parent: their shares add up to the whole."""
    nodes = competing(tree, active)
    return sorted(n for n in nodes if _parent(tree, n) not in nodes)


def targets(tree: QueueTree, active: Iterable[str]) -> dict[str, float]:
    """Target fraction of the fleet for every competing queue (ancestors included)."""
    nodes = competing(tree, active)
    siblings: dict[Optional[str], int] = {}
    for name in nodes:
        parent = _parent(tree, name)
        siblings[parent] = siblings.get(parent, 0) + _weight(tree, name)
    out: dict[str, float] = {}

    def target(name: str, depth: int = 0) -> float:
        if name in out:
            return out[name]
        parent = _parent(tree, name)
        above = target(parent, depth + 1) if parent is not None and depth < len(tree) else 1.0
        out[name] = above * _weight(tree, name) / siblings[parent]
        return out[name]

    for name in sorted(nodes):
        target(name)
    return out


def tree_order(tree: QueueTree, names: Iterable[str]) -> list[str]:
    """``names`` depth-first by name, children under their parent; names not in the tree last, by name.
    Stable between calls, so tables (and the dashboard's rows) never jump."""
    wanted = set(names)
    known = sorted(n for n in wanted if n in tree)
    children: dict[Optional[str], list[str]] = {}
    for name in known:
        parent = _parent(tree, name)
        children.setdefault(parent if parent in wanted else None, []).append(name)
    order: list[str] = []
    seen: set[str] = set()

    def walk(name: str) -> None:
        if name not in seen:
            seen.add(name)
            order.append(name)
            for child in children.get(name, []):
                walk(child)

    for root in children.get(None, []):
        walk(root)
    order += [n for n in known if n not in seen]          # cycles in bad input
    return order + sorted(n for n in wanted if n not in tree)
