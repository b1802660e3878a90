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

**Progressive filling** (``progressive: true``, the default; Armada's rule): every share is the
one the queue would have *after* its next job, the ``candidate`` the engine passes (what admission
would charge: ``job.demand``, added as exact integers to the queue and to each ancestor, as
``FleetState._charge`` books it; with ``aboveGuarantee``, ``max(0, allocated + demand - guarantee)``
as Kueue's borrowing is measured). Equal shares before then go to the queue whose next job adds
less. ``progressive: false`` keys by the share before the job (Volcano's rule); the hook is then
registered without the ``candidate`` argument, so the engine keeps its cheaper loop (it re-keys a
queue after its refusals only for order plugins that read the candidate).

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
from engine.model import Job, Queue
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


def share_after(allocated: Mapping[str, int], demand: Optional[Mapping[str, int]], total: Mapping[str, int],
                weight: int, only: Optional[frozenset[str]] = None,
                guarantee: Optional[Mapping[str, int]] = None) -> float:
    """``weighted_share`` of ``allocated + demand`` (minus ``guarantee``, floored at 0, when given), each
    amount an exact integer; builds no dict (this runs once per examined job)."""
    if not demand and not guarantee:
        return weighted_share(allocated, total, weight, only)
    w = weight if weight > 1 else 1
    best = 0.0
    extra = demand or {}
    for name, amount in allocated.items():
        amount += extra.get(name, 0)
        if guarantee:
            amount -= guarantee.get(name, 0)
        if amount > 0 and (only is None or name in only):
            cap = total.get(name, 0)
            share = amount / (cap * w) if cap > 0 else 1 / w
            if share > best:
                best = share
    for name, amount in extra.items():
        if name in allocated:
            continue
        if guarantee:
            amount -= guarantee.get(name, 0)
        if amount > 0 and (only is None or name in only):
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
    DEFAULTS: ClassVar[dict[str, Any]] = {"hierarchical": True, "share": "total", "progressive": True}

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        conf = settings(config, self.DEFAULTS)
        self.hierarchical: bool = bool(conf["hierarchical"])
        self.above_guarantee: bool = conf["share"] == "aboveGuarantee"
        self.progressive: bool = bool(conf["progressive"])
        resources = conf.get("resources")
        self.only: Optional[frozenset[str]] = frozenset(resources) if resources else None
        if not self.progressive:
            # registered without ``candidate``: the engine sees (hookimpl argnames) that no order plugin
            # reads it and keeps re-keying queues only after admissions
            def before(queue: Queue, state: FleetState) -> tuple[tuple[Any, ...]]:
                return Drf.atoll_queue_order(self, queue, state, None)
            setattr(self, "atoll_queue_order", hookimpl(before))

    def keys_queues_by_line(self) -> bool:
        return True     # the line's allocated, weights and guarantees, the queue set, fleet allocatable, the shape

    def keys_rise_with_demand(self) -> bool:
        return True     # shares of allocated + the candidate's demand, level by level, names fixed per queue

    def used(self, queue: Queue) -> Mapping[str, int]:
        """What the share measures: all the queue uses, or (share: aboveGuarantee) what it uses beyond its guarantee."""
        if not self.above_guarantee or not queue.guarantee:
            return queue.allocated
        guarantee = queue.guarantee
        return {r: v - guarantee.get(r, 0) for r, v in queue.allocated.items() if v > guarantee.get(r, 0)}

    def _share(self, queue: Queue, total: Mapping[str, int], demand: Optional[Mapping[str, int]]) -> float:
        return share_after(queue.allocated, demand, total, queue.weight, self.only,
                           queue.guarantee if self.above_guarantee else None)

    def share(self, queue: Queue, state: FleetState, candidate: Optional[Job] = None) -> float:
        """The queue's weighted dominant share (after ``candidate`` when given)."""
        return self._share(queue, state.fleet_allocatable, candidate.demand if candidate is not None else None)

    @hookimpl
    def atoll_queue_order(self, queue: Queue, state: FleetState, candidate: Optional[Job]) -> tuple[tuple[Any, ...]]:
        """The order key, with the shares after ``candidate`` (None, or ``progressive: false``: as they are).
        Runs once per examined job: the common case (all resources, no guarantee counted) is inlined."""
        total = state.fleet_allocatable
        demand = candidate.demand if candidate is not None and self.progressive else None
        if demand and not self.above_guarantee and self.only is None:
            w = queue.weight if queue.weight > 1 else 1
            allocated = queue.allocated
            own = 0.0
            for name, amount in demand.items():
                amount += allocated.get(name, 0)
                if amount > 0:
                    cap = total.get(name, 0)
                    share = amount / (cap * w) if cap > 0 else 1 / w
                    if share > own:
                        own = share
            for name, amount in allocated.items():
                if amount > 0 and name not in demand:
                    cap = total.get(name, 0)
                    share = amount / (cap * w) if cap > 0 else 1 / w
                    if share > own:
                        own = share
        else:
            own = self._share(queue, total, demand)
        if not self.hierarchical or len(state.children(None)) == len(state.queues):
            return ((own,),)              # flat: equal shares are left to the next order plugins
        key: list[Any] = []
        for parent in reversed(state.ancestors(queue.name)):
            key.append(self._share(parent, total, demand))
            key.append(parent.name)
        key.append(own)
        key.append(queue.name)
        return (tuple(key),)


PLUGINS = [Drf]
