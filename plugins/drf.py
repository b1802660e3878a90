"""drf (order): weighted, hierarchy-aware dominant-resource fairness across queues.

With ``share: aboveGuarantee`` every ``allocated`` below is replaced by what the queue uses
beyond its guarantee, per resource (``max(0, allocated[r] - guarantee[r])``: Kueue's fair
sharing over nominal quotas), so queues within their guarantee all count 0.

Definition implemented (see /work/shared/reference/anchors.md): **Volcano drf** share —
``share(q) = max over resources r of allocated_q[r] / total[r]`` with ``total`` the sum of
allocatable over ready clusters (``FleetState.fleet_allocatable``) — divided by the
queue's weight, as Armada and Kueue weight it (``share / weight``; weights below 1 count
as 1). For hierarchical queues it is Volcano's hdrf comparison: siblings are compared at
each level, from the root down, so the queue served next is found by descending into the
child with the smallest weighted share at every level. ``queue.allocated`` already
includes every descendant's usage (``FleetState._charge``).

The key is ``((s_root, root, s_1, name_1, ..., s_q, q),)`` — one nested tuple, so its
varying length never collides with the keys of the order plugins after it. In a hierarchy
equal shares are broken by name at each level, so a subtree is served as a unit (a parent
before its children); without one (every queue a root) the key is ``((s_q,),)`` and equal
shares are left to the next order plugins. Each share is
computed as one correctly rounded division ``allocated / (total * weight)``, so equal
shares compare equal. Cost: O(depth x resources) per refresh, no loop over queues or jobs.
A resource with no allocatable in the fleet counts as fully used (share 1) if allocated.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Optional

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Queue
from engine.plugin import Plugin
from plugins._queue_common import settings


def weighted_share(allocated: Mapping[str, int], total: Mapping[str, int], weight: int,
                   only: Optional[frozenset[str]] = None) -> float:
    """max over resources of allocated / (total * weight); ordering only, never capacity."""
    w = weight if weight > 1 else 1
    best = 0.0
    for name, amount in allocated.items():
        if amount <= 0 or (only is not None and name not in only):
            continue
        cap = total.get(name, 0)
        share = amount / (cap * w) if cap > 0 else 1 / w
        if share > best:
            best = share
    return best


class Drf(Plugin):
    """Queue key: weighted dominant shares from the root to the queue (smallest served first)."""

    name = "drf"
    stages = ("order",)
    description = "weighted dominant-resource fair share across queues, compared level by level in a hierarchy"
    DEFAULTS: ClassVar[dict[str, Any]] = {"hierarchical": True, "share": "total"}

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        conf = settings(config, self.DEFAULTS)
        self.hierarchical: bool = bool(conf["hierarchical"])
        self.above_guarantee: bool = conf["share"] == "aboveGuarantee"
        resources = conf.get("resources")
        self.only: Optional[frozenset[str]] = frozenset(resources) if resources else None

    def used(self, queue: Queue) -> Mapping[str, int]:
        """What the share measures: all the queue uses, or (share: aboveGuarantee) what it uses beyond its guarantee."""
        if not self.above_guarantee or not queue.guarantee:
            return queue.allocated
        guarantee = queue.guarantee
        return {r: v - guarantee.get(r, 0) for r, v in queue.allocated.items() if v > guarantee.get(r, 0)}

    def share(self, queue: Queue, state: FleetState) -> float:
        return weighted_share(self.used(queue), state.fleet_allocatable, queue.weight, self.only)

    @hookimpl
    def atoll_queue_order(self, queue: Queue, state: FleetState) -> tuple[tuple[Any, ...]]:
        total = state.fleet_allocatable
        only = self.only
        own = weighted_share(self.used(queue), total, queue.weight, only)
        if not self.hierarchical or len(state.children(None)) == len(state.queues):
            return ((own,),)              # flat: equal shares are left to the next order plugins
        key: list[Any] = []
        for parent in reversed(state.ancestors(queue.name)):
            key.append(weighted_share(self.used(parent), total, parent.weight, only))
            key.append(parent.name)
        key.append(own)
        key.append(queue.name)
        return (tuple(key),)


PLUGINS = [Drf]
