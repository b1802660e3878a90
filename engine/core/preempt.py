"""Preemption: which admitted jobs to evict so that a job refused for lack of capacity fits.

Pure and synchronous like the rest of ``engine.core``. The engine calls ``find_victims``
right where it would record a capacity refusal (``Refusal.capacity``); the policy's
preempt plugins say *under which rules* a job may evict others (``PreemptRule``, from the
``atoll_preempt_rule`` hook) and may protect single victims (``atoll_protect``). This
module applies the rules every policy shares:

* **Useful only.** Victims are removed in a dry run on ``FleetState`` (``suppose_gone``) and
  the preemptor goes through the engine's own admit and place calls (``fit``). No fit, no
  eviction: the search returns None.
* **Minimal.** After a fit, victims are given back one by one in reverse order while the
  preemptor still fits (Kueue's fill-back): no victim in the answer is unneeded.
* **Whole jobs.** A victim is a whole job, on every cluster it runs on: a gang is never split.
* **Order.** Candidates come from ``RunningIndex`` in victim order: queues above their
  guarantee first, then lowest rank (priority), most recently admitted, later arrival (``seq``).
* **Guarantees.** Outside the preemptor's own queue line, no queue (or ancestor) is taken
  below its guarantee in any resource it guarantees.
* **No cycles, no thrash.** A job never evicts the job that evicted it; a job preempted
  ``max_preemptions`` times or admitted less than ``min_runtime`` ago is protected; jobs
  admitted in the current cycle are never victims; a victim being evicted is nobody's
  candidate any more, so two preemptors never claim the same victim.
* **Bounded.** At most ``max_candidates`` candidates and ``max_dry_runs`` dry runs per rule; a
  dry run is tried when one cluster a candidate runs on could then hold the gang minimum
  (per-cluster search, like Volcano's per-node one), and once over all candidates at the end
  (at most ``FLEET_WIDE_MAX``; for a job placed on one cluster only when one of the candidates'
  clusters could hold its minimum with what evictions under way free beyond their claims).
* **Waits for evictions under way.** A job that would fit in what earlier evictions free beyond
  their preemptors' claims gets no victim of its own (asked in a dry run that found victims: a
  search that finds none returns None either way). A search told that its key's last search
  ended so (``VictimSearch(..., expect_coming=True)``) asks that first, before walking any candidate; a
  yes is charged to the budget as that dry run would have been, a no costs nothing and the walk
  goes on as usual (without asking it again: the state is the same at every step of a search).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Optional

# ANY, RunningIndex and above_guarantee are re-exported: preempt plugins import them from here
from engine.core.running import ANY, RunningIndex, Standing, above_guarantee, victim_order
from engine.core.state import FleetState
from engine.model import Job, JobState, Placement, Queue
from engine.resources import Resources, add_into

__all__ = ["ANY", "FLEET_WIDE_MAX", "Found", "PreemptRule", "RunningIndex", "VictimSearch", "above_guarantee",
           "booked"]

_HOLDING = (JobState.ADMITTED, JobState.RUNNING)     # compared by identity first: no enum lookups per victim

FLEET_WIDE_MAX = 256
"""The dry run over all chosen candidates at the end of a rule's search is skipped above this many."""


@dataclass(frozen=True)
class PreemptRule:
    """Under which terms a preempt plugin lets one job evict others (``atoll_preempt_rule``).

    ``victim_queues(name)`` answers for each queue holding candidates: None (no victim from it)
    or a rank bound (victims with ``rank < bound``; ``ANY`` for all). ``allows(victim)`` is an
    optional extra test per candidate. The protections apply to the victims of this rule."""

    reason: str                                          # shown on victims, Events, metrics
    plugin: str
    victim_queues: Callable[[str], Optional[float]]
    allows: Optional[Callable[[Job], bool]] = None
    min_runtime: float = 0.0                             # admitted less than this ago: protected
    max_preemptions: Optional[int] = None                # preempted this many times: protected
    grace_period: float = 30.0                           # the adapter's termination grace (seconds)
    nomination_timeout: float = 300.0                    # give the freed capacity up after this long
    max_candidates: int = 2000
    max_dry_runs: int = 8
    # rules of one plugin with equal scopes open the same queues to the same ranks and allow the same victims
    # in every state (e.g. the preemptor's queue and rank); None: unknown. Lets parked searches share a watch
    # (engine.core.searchwake)
    scope: Optional[Hashable] = None
    # rules of one plugin with equal shared scopes open every queue outside their ``own_queues`` alike (the same
    # bound or none), in every state: e.g. every rule of one priority level and rank, whatever the preemptor's
    # queue. Lets their searches share what they learn of those queues (engine.core.running.Standing.base).
    # None: no such promise
    shared_scope: Optional[Hashable] = None
    own_queues: frozenset[str] = frozenset()
    # False promises that which jobs the rule may take (``victim_queues``, ``allows``) reads no queue's usage or
    # guarantee (priority-preemption: priorities only): a queue's usage rising above its guarantee then opens no
    # candidate to it, and its parked searches do not wake for that (engine.core.searchwake.opens). True: unknown
    # (reclaim takes from queues above their guarantee)
    reads_usage: bool = True


@dataclass(frozen=True)
class Found:
    victims: tuple[Job, ...]
    placement: Placement
    rule: PreemptRule


Fit = Callable[[Job], Optional[Placement]]
Unmet = tuple[PreemptRule, dict[str, Resources], list[Job], dict[str, list[Job]]]
"""A rule searched without a dry run: the rule, what its chosen candidates free per cluster, the chosen candidates,
and those on each cluster (``VictimSearch.rooms``, engine.core.searchroom)."""
Protect = Callable[[Job, Job, PreemptRule], Optional[str]]


class VictimSearch:
    """One preemption attempt for one job: ``run(rules)`` -> Found or None. See the module doc."""

    def __init__(self, state: FleetState, index: RunningIndex, fit: Fit, protect: Protect, now: float,
                 budget: Optional[list[int]] = None, one_cluster: bool = False,
                 standings: Optional[Callable[[PreemptRule], Optional[Standing]]] = None,
                 expect_coming: bool = False) -> None:
        self.state = state
        # the key's last search ended "fits in what evictions under way free": ask that first (see ``_coming``)
        self.expect_coming = expect_coming
        self.standings = standings     # a rule's Standing shared with earlier searches of an equal scope (running.py)
        # the place stage places a job only where its gang minimum fits whole (Pipeline.fitting_clusters_only):
        # the fleet-wide dry run can then only succeed where one cluster could hold the minimum
        self.one_cluster = one_cluster
        self.budget = budget if budget is not None else [1 << 30]     # dry runs left this cycle (shared)
        self.exhausted = False
        self.hopeless = True           # no rule offered a single eligible candidate (and nothing is coming free)
        self.index = index
        self.fit = fit
        self.protect = protect
        self.now = now
        self.dry_runs = 0
        self.visited = 0
        self.protected_until: Optional[float] = None     # earliest end of a min-runtime protection met
        # the outcome read more than the candidates and the rules (engine.core.searchwake): the max_candidates
        # cut, a guarantee floor (ancestors' usage), or the budget
        self.volatile = False
        self.tried = False             # a dry run ran (its outcome read the whole fleet state)
        self.not_coming = False        # asked first (expect_coming): the job does not fit in what is coming
        self.rooms: list[Unmet] = []   # per rule searched without a dry run (engine.core.searchroom)

    def run(self, job: Job, rules: list[PreemptRule]) -> Optional[Found]:
        if self.expect_coming and rules:
            found = self._coming(job, rules[0])
            if found is not None:
                return found
        for rule in rules:
            found = self._search(job, rule)
            if found is not None:
                return found
        return None

    # -- one rule ----------------------------------------------------------------------------
    def _search(self, job: Job, rule: PreemptRule) -> Optional[Found]:
        state = self.state
        line = {job.queue, *(a.name for a in state.ancestors(job.queue))}
        need = job.min_demand
        # per cluster, the needed resources with the one that fell short last first: freed only grows and the
        # state is the same at each check (a dry run restores it), so it usually fails on its first compare
        wanted = [(r, v) for r, v in need.items() if v > 0]
        short: dict[str, list[tuple[str, int]]] = {}
        removed: dict[str, Resources] = {}
        freed: dict[str, Resources] = {}
        on: dict[str, list[Job]] = {}
        chosen: list[Job] = []
        guards: dict[str, list[Queue]] = {}     # victim queue -> _guarded (fixed during one search)
        dry_runs = 0
        visited = 0
        jobs, clusters, placed_of, eligible = state.jobs, state.clusters, self.index.placed, self._eligible
        max_candidates, max_dry_runs = rule.max_candidates, rule.max_dry_runs
        standing = self.standings(rule) if self.standings is not None else None
        for job_id in victim_order(self.index, rule.victim_queues, state.queues, standing=standing):
            visited += 1
            if visited > max_candidates:
                self.volatile = True
                break
            victim = jobs.get(job_id)
            if victim is None or not eligible(job, victim, rule):
                continue
            guarded = guards.get(victim.queue)
            if guarded is None:
                guarded = guards[victim.queue] = _guarded(victim, line, state)
            if guarded:
                if not _floor_ok(victim, guarded, removed):
                    self.volatile = True
                    continue
                for queue in guarded:
                    add_into(removed.setdefault(queue.name, {}), victim.demand)
            chosen.append(victim)
            self.hopeless = False
            placed = placed_of(victim)
            for cluster, amount in placed.items():
                more = freed.get(cluster)
                if more is None:
                    freed[cluster] = {r: v for r, v in amount.items() if v}     # as add_into into {}
                    on[cluster] = [victim]
                else:
                    add_into(more, amount)
                    on[cluster].append(victim)
            if dry_runs >= max_dry_runs:
                continue
            for cluster in (sorted(placed) if len(placed) > 1 else placed):
                if dry_runs >= max_dry_runs or cluster not in clusters:
                    continue
                free = state.free(cluster)
                more = freed[cluster]
                order = short.get(cluster)
                if order is None:
                    order = short[cluster] = list(wanted)
                for i, (r, v) in enumerate(order):
                    if free.get(r, 0) + more.get(r, 0) < v:
                        if i:
                            order.insert(0, order.pop(i))
                        break
                else:
                    if _covers(state.unclamped_free(cluster), more, need):
                        dry_runs += 1
                        found = self._try(job, on[cluster], rule)
                        if found is not None:
                            self.visited += visited
                            return found
        self.visited += visited
        if chosen and dry_runs < max_dry_runs and len(chosen) <= FLEET_WIDE_MAX and \
                (not self.one_cluster or any(_covers(_with(state.free(c), state.excess(c)), more, need) and
                                             _covers(_with(state.unclamped_free(c), state.excess(c)), more, need)
                                             for c, more in freed.items() if c in clusters)):
            # e.g. a split gang, or a fleet-wide quota; or, for a job placed on one cluster, victims on one
            # cluster plus what evictions under way free beyond their claims (a dry run counts that as free);
            # unclamped free is at most the cached (clamped) free, so that cheaper test is asked first
            return self._try(job, chosen, rule)
        if not dry_runs:
            self.rooms.append((rule, freed, chosen, on))
        return None

    def _eligible(self, job: Job, victim: Job, rule: PreemptRule) -> bool:
        if victim.state not in _HOLDING or victim.id == job.preempted_by or victim.id == job.id:
            return False
        if rule.max_preemptions is not None and victim.preemptions >= rule.max_preemptions:
            return False
        if rule.min_runtime > 0:
            until = (victim.admitted_at or 0.0) + rule.min_runtime
            if until > self.now:
                if self.protected_until is None or until < self.protected_until:
                    self.protected_until = until
                return False
        if rule.allows is not None and not rule.allows(victim):
            return False
        return self.protect(job, victim, rule) is None

    def _coming(self, job: Job, rule: PreemptRule) -> Optional[Found]:
        """Before any candidate: does ``job`` fit in what evictions under way free beyond their claims? Yes:
        no victim of its own, charged as the dry run that would have said so. No: nothing charged, nothing
        else learnt (the walk then never asks it again)."""
        state = self.state
        if self.budget[0] <= 0 or not state.freeing(job.min_demand):
            return None                # the walk's first dry run decides, as without the hint
        saved = state.dry_run_begin()
        try:
            placement = self.fit(job)
        finally:
            state.dry_run_end(saved)
        if placement is None:
            self.not_coming = True
            return None
        self.budget[0] -= 1
        self.dry_runs += 1
        self.tried = True
        return Found((), placement, rule)

    def _try(self, job: Job, victims: list[Job], rule: PreemptRule) -> Optional[Found]:
        """Dry run: without ``victims``, does ``job`` fit? Then give back every victim it does not need."""
        state = self.state
        if self.budget[0] <= 0:
            self.exhausted = self.volatile = True
            return None
        self.budget[0] -= 1
        self.dry_runs += 1
        self.tried = True
        coming_first = bool(victims) and not self.not_coming and state.freeing(job.min_demand)
        saved = state.dry_run_begin()
        gone: list[Job] = []
        try:
            if coming_first:
                # it may fit in what evictions under way free beyond their preemptors' claims (the dry run
                # counts that as free): then it needs no victim of its own, it waits for them (the capacity
                # epoch moves when they are gone). The fill-back would give every victim back too
                coming = self.fit(job)
                if coming is not None:
                    return Found((), coming, rule)
            gone = list(victims)
            placed = self.index.placed
            for victim in gone:
                state.suppose_gone(victim, placed(victim))
            placement = self.fit(job)
            if placement is None:
                return None
            for victim in reversed(victims):
                state.suppose_gone(victim, placed(victim), -1)
                gone.remove(victim)
                again = self.fit(job)
                if again is None:
                    state.suppose_gone(victim, placed(victim))
                    gone.append(victim)
                else:
                    placement = again
            order = {v.id: i for i, v in enumerate(victims)}
            return Found(tuple(sorted(gone, key=lambda v: order[v.id])), placement, rule)
        finally:
            for victim in gone:
                state.suppose_gone(victim, self.index.placed(victim), -1)
            state.dry_run_end(saved)


def _covers(free: Resources, more: Resources, need: Resources) -> bool:
    """``need`` fits ``free`` (unclamped: an over-committed cluster's negative amounts count) plus ``more``."""
    return all(free.get(r, 0) + more.get(r, 0) >= v for r, v in need.items() if v > 0)


def _with(free: Resources, more: Resources) -> Resources:
    if not more:
        return free
    out = dict(free)
    add_into(out, more)
    return out


def _guarded(victim: Job, line: set[str], state: FleetState) -> list[Queue]:
    """The queues of the victim's line (itself and ancestors) outside the preemptor's line that have a guarantee."""
    queue = state.queues.get(victim.queue)
    if queue is None:
        return []
    out = [queue] if queue.guarantee and queue.name not in line else []
    if queue.parent:
        out.extend(a for a in state.ancestors(queue.name) if a.guarantee and a.name not in line)
    return out


def _floor_ok(victim: Job, guarded: list[Queue], removed: dict[str, Resources]) -> bool:
    """Taking ``victim`` keeps every guarded queue at or above its guarantee in each guaranteed resource
    the victim uses (what is below stays untouched)."""
    demand = victim.demand
    for queue in guarded:
        gone = removed.get(queue.name, {})
        for resource, guaranteed in queue.guarantee.items():
            amount = demand.get(resource, 0)
            if amount > 0 and guaranteed > 0 and \
                    queue.allocated.get(resource, 0) - gone.get(resource, 0) - amount < guaranteed:
                return False
    return True


def booked(job: Job, placement: Placement) -> dict[str, Resources]:
    """What ``placement`` of ``job`` takes on each cluster (a nomination's booking)."""
    by_task = {t.name: t for t in job.tasks}
    out: dict[str, Resources] = {}
    for cluster, replicas in placement.items():
        total: Resources = {}
        for task_name, count in replicas.items():
            task = by_task.get(task_name)
            if task is not None and count:
                add_into(total, {k: v * count for k, v in task.resources.items()})
        out[cluster] = total
    return out
