"""reclaim (preempt): a queue below its guarantee takes capacity back from queues above theirs.

With lending (the capacity plugin's ``lendGuarantees``, the default) a queue's idle
guarantee is used by others; reclaim gives it back when its owner needs it:

* **guarantee** (always): a job of queue Q may evict jobs of other queues when, with the job,
  Q stays within its guarantee in every resource the guarantee lists and that the job uses
  (``allocated + demand <= guarantee``). Victims come only from queues above their own
  guarantee, and the engine never takes a queue below it (``engine.core.preempt``).
* **fairShare** (optional): also when Q's weighted dominant share *with* the job is at most
  the victim queue's share *without* the victim (``share(Q + job) <= share(V - victim)``,
  Kueue's ``LessThanOrEqualToFinalShare``; shares as the drf plugin computes them), so a
  queue below its fair share takes back from one above it even beyond its guarantee.

Queues with ``reclaimable: false`` (Volcano's Queue ``spec.reclaimable``) are never victims of
reclaim; queues of Q's own line (ancestors, descendants) never reclaim from each other.
Victim order is the engine's (lowest rank, newest first); ``victimPriority: lower`` keeps
reclaim to victims of a strictly lower rank than the preemptor.
"""

from __future__ import annotations

from typing import Any, Hashable, Optional

from engine.core.preempt import ANY, PreemptRule, above_guarantee
from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job, Queue
from engine.plugin import Plugin
from engine.resources import add, sub
from plugins._placeutil import configure
from plugins._protections import Protections
from plugins.drf import weighted_share


def within_guarantee(queue: Queue, job: Job) -> bool:
    """With ``job``, ``queue`` uses no more than its guarantee of any guaranteed resource the job asks for
    (and the guarantee covers at least one of them)."""
    covered = False
    for resource, amount in job.demand.items():
        guaranteed = queue.guarantee.get(resource, 0)
        if amount <= 0 or guaranteed <= 0:
            continue
        covered = True
        if queue.allocated.get(resource, 0) + amount > guaranteed:
            return False
    return covered


class Reclaim(Plugin):
    """Give queues their guarantee (and optionally their fair share) back from queues above theirs."""

    name = "reclaim"
    stages = ("preempt",)
    description = "a queue below its guarantee (or, optionally, its weighted DRF share) evicts jobs of queues above theirs"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.protections = Protections(self.config, self.where)
        self.fair_share = bool(self.config["fairShare"])
        self.lower_only = self.config["victimPriority"] == "lower"

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return (job.queue, job.shape, job.priority, job.preempted_by)   # job.shape: the demand and the gang minimum

    def verdict_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        # the rule reads the queues (guarantees, reclaimable, parents) and its queue line's usage; a victim
        # queue's usage rises only with a new candidate, which the engine watches (engine.core.searchwake).
        # Fair share reads every queue's usage: not declared.
        if self.fair_share:
            return None
        own = state.queues.get(job.queue)
        if own is None or not own.guarantee:
            return (("queues",),)            # no guarantee (an edit would show): no rule, whatever its usage
        return (("queues",), ("allocated", job.queue))

    @hookimpl
    def atoll_preempt_rule(self, job: Job, state: FleetState, now: float) -> Optional[PreemptRule]:
        own = state.queues.get(job.queue)
        if own is None:
            return None
        guaranteed = within_guarantee(own, job)
        if not guaranteed and not self.fair_share:
            return None
        queues = state.queues
        line = {own.name, *(a.name for a in state.ancestors(own.name))}
        bound = float(job.priority) if self.lower_only else ANY

        def victim_queues(name: str) -> Optional[float]:
            queue = queues.get(name)
            if queue is None or name in line or not queue.reclaimable or not above_guarantee(queue):
                return None
            if own.name in {a.name for a in state.ancestors(name)}:
                return None                          # a child of the reclaiming queue: same line
            return bound

        allows = None
        if not guaranteed:
            total = state.fleet_allocatable
            mine = weighted_share(add(own.allocated, job.demand), total, own.weight)

            def allows(victim: Job) -> bool:
                theirs = queues[victim.queue]
                return mine <= weighted_share(sub(theirs.allocated, victim.demand), total, theirs.weight)

        # victim_queues reads the queues live (reclaimable, usage, ancestors); fair share reads its own usage too
        scope = (own.name, bound, tuple(sorted(line))) if guaranteed else None
        # outside the reclaiming queue's line and subtree, victim_queues answers alike for every rule of one bound
        shared = bound if guaranteed else None
        own_line = frozenset(line | _subtree(state, own.name)) if guaranteed else frozenset()
        return self.protections.rule("reclaim" if guaranteed else "fair-share", self.name, victim_queues, allows,
                                     scope=scope, shared_scope=shared, own_queues=own_line)


def _subtree(state: FleetState, name: str) -> set[str]:
    """The queues below ``name`` (cycles in bad input are cut)."""
    out: set[str] = set()
    todo = list(state.children(name))
    while todo:
        child = todo.pop()
        if child not in out and child != name:
            out.add(child)
            todo.extend(state.children(child))
    return out


PLUGINS = [Reclaim]
