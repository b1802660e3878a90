"""Parked victim searches that met candidates but ran no dry run: the room they lacked.

A search that meets eligible candidates and still finds nothing usually ran dry runs, and a dry run
reads the whole fleet state: such a search is looked at again at every capacity change. But in a
saturated fleet most failed searches never get that far (measured on scenarios/churn-1k.yaml: 86 %
of the searches, big gangs meeting hundreds of small candidates). A rule's search runs a dry run only

- when, after some prefix of its candidates, one cluster's free capacity plus what that prefix frees
  there covers the job's need (``VictimSearch._search``), or
- at the end, over all chosen candidates, when there are at most ``FLEET_WIDE_MAX`` of them and (for a
  job the place stage puts on one cluster, ``Pipeline.fitting_clusters_only``) one of their clusters
  could hold the need with what evictions under way free there beyond their claims (``excess``).

When neither happened, the outcome read the candidates (as a hopeless search: their log, and the
preempt plugins' declared reads, ``engine.core.searchwake``), each cluster's free capacity and excess,
and how many candidates were chosen. A ``Room`` keeps, per rule, what all its chosen candidates free on
each cluster (the largest prefix: a per-cluster check that failed for it failed for every prefix) and
how many there were, and follows the candidate log itself: a job becoming a candidate that a rule would
look at adds what it holds to that rule's room (as if it were chosen: its eligibility is not known, so
this is conservative) instead of waking the search. The search stays parked while, for every rule,

- no cluster's free capacity *now*, plus what the rule's candidates still there free on it, covers the need,
  tested as the search tests it: free capacity clamped at 0 first (the cheap test), then before clamping (an
  over-committed cluster's negative amounts count); plus the cluster's excess now while the fleet-wide try,
  the only test that adds it, could follow: for a job placed on one cluster, while the candidates the search
  chose that are still candidates are at most ``FLEET_WIDE_MAX`` (a fresh search chooses at least those);
- when the chosen count matters (a job that may be placed across clusters), none was chosen or absorbed, or
  the candidates the search chose that are still candidates are above ``FLEET_WIDE_MAX`` (absorbed candidates
  do not count there: their eligibility is not known, a fresh search may skip them);
- no queue rose above its guarantee in the rules' scope (that may open its older jobs to reclaim:
  unknown candidates, so the search wakes).

A candidate counted in a room that leaves the index (it finished, or another preemptor evicts it) is taken
back out of it (``RunningIndex.left``: each departure with what the job held): a fresh search would not meet
it, and its capacity, once free, shows in the cluster's free capacity, so counting it as freed too made rooms
wake for nothing (churn-10k: searches that parked on a room again, 20,180 -> 6,910). A cluster
left without any counted candidate is dropped (a fresh search meets none there, so never tests it, not even
with the excess). A room that missed departures ``RunningIndex.left`` no longer keeps wakes (as a watch
that missed log entries does).

Between two looks, a room that found every cluster short checks again only the clusters whose free
capacity or excess changed since (``FleetState.touched``) and those where it absorbed a candidate (what its
rules free there grew): the others are short still. A False answer makes it check them all next time, and
so does a rule's excess counting again (candidates left: the clusters were found short without it).

A search that passed a guarantee floor, hit ``max_candidates``, met a ``min_runtime`` protection or
the cycle's budget is never parked (``VictimSearch.volatile``, ``protected_until``), as before.
tests/core/test_searchwake.py checks that a fresh search in the state of the moment finds nothing
and runs no dry run whenever a room-parked search holds.
"""

from __future__ import annotations

from typing import Iterable, Optional

from engine.core import preempt
from engine.core.preempt import PreemptRule, RunningIndex, Unmet
from engine.core.searchwake import CandidateLog, opens, plan
from engine.core.state import FleetState
from engine.model import Job
from engine.resources import Resources, add_into

_LOOK_AGAIN_MAX = 1024
"""Above this many cluster changes since a room last looked, it looks at every cluster again."""


class _Seen:
    """One rule's share of a room: what its candidates free per cluster (own copy), how many there are, and which
    are counted there still."""

    __slots__ = ("rule", "freed", "chosen", "met", "plain", "short", "ids", "on")

    def __init__(self, rule: PreemptRule, freed: dict[str, Resources], chosen: list[Job],
                 on: dict[str, list[Job]]) -> None:
        self.rule = rule
        self.freed = {cluster: dict(more) for cluster, more in freed.items()}
        self.chosen = len(chosen)   # chosen by the search or absorbed since, departed or not
        self.met = self.chosen      # of those the search chose itself (absorbed ones may not be eligible), how
        # many are still candidates
        self.plain = False          # its last look left the excess out
        # per cluster, what free + excess must reach per resource for the need to be covered (derived from
        # freed; the resource that fell short last is kept first)
        self.short: dict[str, list[tuple[str, int]]] = {}
        # the candidates counted in freed that are still candidates (True: the search chose it), and how many of
        # them run on each cluster of freed: what one that leaves held is taken back out of freed (it would count
        # twice, as free capacity too), and a cluster left without any is dropped (a fresh search meets none there)
        self.ids = dict.fromkeys((job.id for job in chosen), True)
        self.on = {cluster: len(jobs) for cluster, jobs in on.items()}

    def shortfall(self, cluster: str, need: list[tuple[str, int]]) -> list[tuple[str, int]]:
        known = self.short.get(cluster)
        if known is None:
            more = self.freed[cluster]
            known = self.short[cluster] = [(name, amount - more.get(name, 0)) for name, amount in need
                                           if amount - more.get(name, 0) > 0]
        return known

    def count(self, job_id: str, held: dict[str, Resources]) -> None:
        """A candidate absorbed: counted as if the search had chosen it."""
        self.chosen += 1
        self.ids[job_id] = False
        freed, on, short = self.freed, self.on, self.short
        for cluster, amount in held.items():
            add_into(freed.setdefault(cluster, {}), amount)
            on[cluster] = on.get(cluster, 0) + 1
            short.pop(cluster, None)

    def release(self, job_id: str, held: dict[str, Resources]) -> None:
        """A counted candidate left the index: what it held is no longer freed by evicting it."""
        if self.ids.pop(job_id):
            self.met -= 1
        freed, on, short = self.freed, self.on, self.short
        for cluster, amount in held.items():        # (counted: freed and on hold each of its clusters)
            short.pop(cluster, None)
            left = on[cluster] - 1
            if left:
                on[cluster] = left
                add_into(freed[cluster], amount, -1)
            else:
                del on[cluster], freed[cluster]


class Room:
    """What a parked search with candidates lacked (see the module doc)."""

    __slots__ = ("demand", "need", "rules", "gone", "log", "seen", "one_cluster", "state", "index", "awake",
                 "looked", "again", "plan")

    def __init__(self, need: Resources, rooms: list[Unmet], state: FleetState, index: RunningIndex, log: CandidateLog,
                 seen: int, one_cluster: bool) -> None:
        self.state = state
        self.index = index
        self.demand = dict(need)
        self.need = [(name, amount) for name, amount in need.items() if amount > 0]
        self.rules = [_Seen(*room) for room in rooms]
        self.plan = plan([room[0] for room in rooms])      # which logged candidates may concern it
        self.gone = index.removed        # departures from the index taken back up to here (RunningIndex.left)
        self.log = log
        self.seen = seen
        self.one_cluster = one_cluster
        self.awake = False      # the log said what a room cannot absorb: awake for good
        # FleetState.touched position when every cluster was last found short (None: look at all next time), and
        # the clusters its rules' candidates free more on since (absorbed): the only others to look at again
        self.looked: Optional[int] = None
        self.again: set[str] = set()

    def holds(self) -> bool:
        """The search would still find nothing and run no dry run (for a job needing ``demand``). Asking again
        in the same state gives the same answer (a wake read, engine.core.wake, may be asked more than once)."""
        state, index = self.state, self.index
        if self.awake or (self.gone != index.removed and not self._release(index)) or \
                not self._absorb(state, index):
            self.awake = True
            return False
        for seen in self.rules:
            if not self.one_cluster and seen.chosen and seen.met <= preempt.FLEET_WIDE_MAX:
                return False
        end = state.touched_end
        # every cluster was short when it last looked: only those whose free or excess changed since can
        # cover the need now (absorbing a candidate sets looked to None)
        since = state.touched_since(self.looked, _LOOK_AGAIN_MAX)
        changed = self.again.union(since) if since is not None else None
        clusters, free_of, excess_of, need = state.clusters, state.free, state.excess, self.need
        none: Resources = {}
        for seen in self.rules:
            shorts = seen.short
            freed = seen.freed
            with_excess = self._with_excess(seen)
            if changed is None or (with_excess and seen.plain):        # (the excess counts from now on)
                looking: Iterable[str] = freed
            else:
                looking = [c for c in changed if c in freed]
            for cluster in looking:
                if cluster not in clusters:
                    continue
                short = shorts.get(cluster)
                if short is None:
                    short = seen.shortfall(cluster, need)
                free, coming = free_of(cluster), excess_of(cluster) if with_excess else none
                if not short:
                    if _covers(state, cluster, coming, freed[cluster], self.demand):
                        self.looked = None
                        return False
                    continue
                name, amount = short[0]
                if free.get(name, 0) + coming.get(name, 0) < amount:
                    continue            # the resource that fell short last is short still (the usual case)
                for i in range(1, len(short)):
                    name, amount = short[i]
                    if free.get(name, 0) + coming.get(name, 0) < amount:
                        short.insert(0, short.pop(i))
                        break
                else:
                    if _covers(state, cluster, coming, freed[cluster], self.demand):
                        self.looked = None
                        return False
        # inside a dry run (FleetState.dry_run_begin) the state is supposed: what it saw is forgotten
        self.looked = end if state.capacity_epoch >= 0 else None
        for seen in self.rules:
            seen.plain = not self._with_excess(seen)
        self.again.clear()
        return True

    def _with_excess(self, seen: _Seen) -> bool:
        """Whether the excess counts for ``seen``'s rule: only in the fleet-wide try of a job placed on one cluster,
        which needs at most FLEET_WIDE_MAX chosen (a fresh search chooses at least those the search met that are
        still there)."""
        return self.one_cluster and seen.met <= preempt.FLEET_WIDE_MAX

    def _release(self, index: RunningIndex) -> bool:
        """Take back out of freed what the counted candidates that left the index since the last look held
        (before absorbing new ones: a candidate that left and came back is logged again as new); False when
        some of those departures are no longer kept (``RunningIndex.left``)."""
        left, base = index.left, index.left_base
        if self.gone < base:
            return False
        for position in range(self.gone - base, len(left)):
            job_id, held = left[position]
            if held is None:
                continue                # never asked what it held: no room counted it
            for seen in self.rules:
                if job_id in seen.ids:
                    seen.release(job_id, held)
        self.gone = index.removed
        return True

    def _absorb(self, state: FleetState, index: RunningIndex) -> bool:
        """Add the candidates logged since the last look to the rules that would look at them; False when
        the log says something that cannot be absorbed (trimmed past, a queue above its guarantee)."""
        log = self.log
        if self.seen < log.base:
            return False
        entries, base = log.entries, log.base
        positions = log.maybe(self.plan, self.seen)
        self.seen = log.end
        jobs = state.jobs
        for position in positions:
            queue, rank, preemptions, job_id = entries[position - base]
            targets = [seen for seen in self.rules if opens(seen.rule, queue, rank, preemptions)]
            if not targets:
                continue
            if job_id is None:
                return False
            job = jobs.get(job_id)
            if job is None or not index.candidate(job_id):
                continue            # no candidate now: a fresh search would not meet it
            placed = index.placed(job)
            self.again.update(placed)       # what its rules free grew there: look at those clusters again
            for seen in targets:
                if job_id not in seen.ids:  # (logged twice while a candidate: counted once)
                    seen.count(job_id, placed)
        return True


def _covers(state: FleetState, cluster: str, coming: Resources, freed: Resources, need: Resources) -> bool:
    """The search's own test once free capacity (clamped at 0) says the need is covered: free before clamping
    (an over-committed cluster's negative amounts count, ``FleetState.unclamped_free``) plus ``coming`` plus
    ``freed`` covers it (``preempt._covers``, as ``VictimSearch._search`` asks it)."""
    return preempt._covers(preempt._with(state.unclamped_free(cluster), coming), freed, need)
