"""capacity (admit): queue quotas — capability (max), guarantee (min), hierarchy, borrowing —
and the fleet's free capacity, so the queues together never oversubscribe the fleet.

For a job of queue Q demanding d (all replicas: what admission books), per resource:

1. **capability**: for Q and every ancestor A with a capability listing the resource,
   ``allocated + d <= capability`` (``allocated`` includes descendants, so a parent's
   capability caps the sum of its children). Resources not listed are unlimited.
2. **deserved** (only with ``borrowing: false``): the same check against ``deserved``.
   With borrowing (the default) a queue may run beyond its deserved share on capacity
   nobody else is using, up to its capability; fair order (drf) decides who goes first.
3. **fleet free and guarantees**: ``d <= fleet free``; with ``lendGuarantees: false`` also
   ``d <= fleet free - capacity protected from Q``, where
   the protected part is the unused guarantees of every queue outside Q's own line (see
   ``plugins._guarantees``). A queue below its guarantee therefore always finds its
   guarantee free (if the fleet has it), and no admission can eat into another queue's.
   With ``lendGuarantees: true`` (the default) idle guarantees are lent to whoever has a
   backlog, and the ``reclaim`` preempt plugin gives them back to their owner on demand.

This is Volcano's capacity plugin (``realCapability = min(capability, total - other queues'
guarantees)``) applied to what is actually free: other queues' *unused* guarantees are
subtracted from *free* capacity (what they already use is not free anyway).

Refusals carry no ``retry_at``: they can only change when capacity is freed or a queue is
edited, both of which move the capacity epoch and re-examine the job. Each check is
O(depth x resources) with cached fleet views: no loop over clusters, queues or jobs.
"""

from __future__ import annotations

from typing import Any, ClassVar, Hashable, Optional

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job, Queue, Refusal
from engine.plugin import Plugin
from engine.resources import Resources
from plugins._guarantees import GuaranteeLedger
from plugins._queue_common import qty, settings


class Capacity(Plugin):
    """Admits a job only within its queues' capabilities and the fleet's unreserved free capacity."""

    name = "capacity"
    stages = ("admit",)
    description = "queue capability/guarantee/deserved (hierarchical) and fleet free capacity"
    DEFAULTS: ClassVar[dict[str, Any]] = {"guarantees": True, "borrowing": True, "fleetFree": True,
                                          "lendGuarantees": True}

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        conf = settings(config, self.DEFAULTS)
        # lending idle guarantees (the default): other queues may use them; the reclaim plugin (preempt
        # stage) takes them back when their owner needs them, so nothing is withheld idle
        self.guarantees: bool = bool(conf["guarantees"]) and not bool(conf["lendGuarantees"])
        self._honour = bool(conf["guarantees"])
        self.borrowing: bool = bool(conf["borrowing"])
        self.fleet_free: bool = bool(conf["fleetFree"])
        self.ledger = GuaranteeLedger()
        self._refusals: dict[tuple[str, str, int, bool, int], Refusal] = {}

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        # the queue line's limits and usage, and the demand in its own order (the first short resource is named)
        return (job.queue, tuple(job.demand.items()))

    def verdict_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        # the queue line (limits, usage) is read by the engine; the fleet check reads what _fleet_short returns,
        # for any queue alike while no guarantee is kept (then the value says so, and changes when one is)
        if not self.fleet_free:
            return ()
        if self.guarantees:
            self.ledger.sync(state)
        queue = job.queue if self.guarantees and self.ledger.active else None
        return (("call", self._fleet_short, (queue, tuple(job.demand.items()))),)

    def shared_verdict_key(self, job: Job) -> Optional[Hashable]:
        return job.shape_key              # the demand, in its order (part of the shape)

    def admits_alike(self, queue: Queue, state: FleetState) -> bool:
        # no limit of this plugin's on the line, and nothing kept for other queues' guarantees (whose text names
        # the queue): the verdict is the fleet check's alone, the same for any queue
        if self.guarantees:
            return False
        return all(not q.capability and (self.borrowing or not q.deserved)
                   for q in (queue, *state.ancestors(queue.name)))

    @hookimpl
    def atoll_admit(self, job: Job, state: FleetState) -> Optional[Refusal]:
        queue = state.queues.get(job.queue)
        if queue is None:
            return None                                  # the engine reports unknown queues
        demand = job.demand
        line = [queue, *state.ancestors(queue.name)] if queue.parent else [queue]
        for q in line:
            if q.capability:
                refusal = self._limit(q, queue, demand, q.capability, "capability")
                if refusal is not None:
                    return refusal
            if not self.borrowing and q.deserved:
                refusal = self._limit(q, queue, demand, q.deserved, "deserved share")
                if refusal is not None:
                    return refusal
        if self.fleet_free:
            refusal = self._fleet(queue, demand, state)
            if refusal is not None:
                return refusal
        if self.guarantees:
            self.ledger.touch(queue.name)
        return None

    def _limit(self, q: Queue, queue: Queue, demand: Resources, limits: Resources, what: str) -> Optional[Refusal]:
        for resource, amount in demand.items():
            limit = limits.get(resource)
            if limit is None:
                continue
            used = q.allocated.get(resource, 0)
            if used + amount > limit:
                whose = f"queue {q.name}" if q is queue else f"parent queue {q.name} (of {queue.name})"
                if amount > limit:
                    return Refusal(f"job requests {resource} {qty(resource, amount)}, more than {whose} {what} "
                                   f"{qty(resource, limit)}: it cannot be admitted until the queue changes", self.name)
                return Refusal(f"{whose} {what} {resource} {qty(resource, limit)} would be exceeded: "
                               f"{qty(resource, used)} used + {qty(resource, amount)} requested", self.name)
        return None

    def _fleet(self, queue: Queue, demand: Resources, state: FleetState) -> Optional[Refusal]:
        if not self.guarantees:           # nothing kept for others (the default): _fleet_short inlined (once per
            free = state.fleet_free       # examined job), the same first short resource and nothing kept
            for resource, amount in demand.items():
                if amount > free.get(resource, 0):
                    return self._fleet_refusal("", resource, amount, False, state.fleet_allocatable.get(resource, 0))
            return None
        short = self._fleet_short(state, (queue.name, demand.items()))
        if short is None:
            return None
        resource, kept = short
        whole = state.fleet_allocatable.get(resource, 0)
        return self._fleet_refusal(queue.name if kept else "", resource, demand[resource], kept, whole)

    def _fleet_short(self, state: FleetState, args: tuple[str, Any]) -> Optional[tuple[str, bool]]:
        """The first resource of the demand (in its order) that the fleet's free capacity, less what is kept
        for other queues' unused guarantees, cannot give, and whether something was kept; None: it fits.
        Everything the fleet check's verdict and text read of the state (a verdict read, engine.core.wake)."""
        name, demand = args
        free = state.fleet_free
        protected: Resources = {}
        if self.guarantees:
            self.ledger.sync(state)
            if self.ledger.active:
                if name is None:
                    return "*", True        # read for no queue in particular: the key wakes, and reads per queue
                protected = self.ledger.protected_from(name, state)
        for resource, amount in demand:
            kept = protected.get(resource, 0)
            if amount > free.get(resource, 0) - kept:
                return resource, kept > 0
        return None

    def _fleet_refusal(self, queue: str, resource: str, amount: int, kept: bool, whole: int) -> Refusal:
        """The refusal, memoised on everything it says (it is immutable): a saturated fleet refuses most
        of a large backlog here with a few distinct texts, and formatting costs ~3 us each time. No momentary
        free amount is quoted (``atoll explain`` shows them): the text changes only when the verdict could."""
        key = (queue, resource, amount, kept, whole)
        known = self._refusals.get(key)
        if known is not None:
            return known
        if kept:
            text = (f"queue {queue}: job requests {resource} {qty(resource, amount)}, more than the fleet has free "
                    f"outside other queues' unused guarantees (kept for them)")
        elif amount > whole:
            text = (f"job requests {resource} {qty(resource, amount)}, more than the whole fleet's "
                    f"{qty(resource, whole)} (ready clusters)")
        else:       # no momentary free amount: the text changes only when the verdict could
            text = f"job requests {resource} {qty(resource, amount)}, more than the fleet has free"
        if len(self._refusals) >= 4096:
            self._refusals.clear()
        known = self._refusals[key] = Refusal(text, self.name, capacity=amount <= whole)
        return known


PLUGINS = [Capacity]
