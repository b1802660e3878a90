"""volcano-capacity (admit): volcano-global v0.3.0's admission check, as the comparison baseline.

``queue.allocated + request <= min(sum of cluster allocatable, queue capability)`` per
resource (capability missing or not listing a resource: only the fleet total bounds it).
Deliberately naive, like the original: no free-capacity check (several queues can each
claim the whole fleet), no hierarchy, no guarantee. One difference: the request is the
whole job (every task), not only its first task as in volcano-global (its weakness 5),
because the engine books the whole job and the baseline must not undercount it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Hashable, Optional

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job, Refusal
from engine.plugin import Plugin
from plugins._queue_common import qty


class VolcanoCapacity(Plugin):
    """The volcano-global v0.3.0 baseline: usage + request within min(fleet allocatable, capability)."""

    name = "volcano-capacity"
    stages = ("admit",)
    description = "volcano-global v0.3.0 baseline: allocated + request <= min(fleet allocatable, capability)"
    DEFAULTS: ClassVar[dict[str, Any]] = {}

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return (job.queue, tuple(job.demand.items()))

    @hookimpl
    def atoll_admit(self, job: Job, state: FleetState) -> Optional[Refusal]:
        queue = state.queues.get(job.queue)
        if queue is None:
            return None
        total = state.fleet_allocatable
        capability = queue.capability or {}
        for resource, amount in job.demand.items():
            limit = total.get(resource, 0)
            cap = capability.get(resource)
            bound = "fleet allocatable"
            if cap is not None and cap < limit:
                limit, bound = cap, "capability"
            used = queue.allocated.get(resource, 0)
            if used + amount > limit:
                return Refusal(f"queue {queue.name} {bound} {resource} {qty(resource, limit)} would be exceeded: "
                               f"{qty(resource, used)} used + {qty(resource, amount)} requested", self.name)
        return None


PLUGINS = [VolcanoCapacity]
