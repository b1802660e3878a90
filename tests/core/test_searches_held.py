"""A queue's victim searches held without being asked (``QueueReads.searches_hold``, engine.core.idle): once they
all held, they are not asked again while nothing they could wake for happened. Whenever that shortcut answers,
each of the queue's watches and rooms, asked afresh (a copy, so that the engine's own is untouched), must hold:
on random fleets against the exhaustive engine (the scenarios of test_searchwake.py) and on a saturated churn
fleet where rooms are many."""

from __future__ import annotations

import copy
import random
from contextlib import contextmanager
from typing import Any, Iterator
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import preempt as preempt_module
from engine.core.idle import QueueReads
from engine.core.preempt import ANY, PreemptRule, RunningIndex
from engine.core.scheduler import Engine
from engine.core.searchroom import Room
from engine.core.searchwake import CandidateLog, Watch
from engine.core.state import FleetState
from engine.core.wake import Reads
from engine.model import Cluster, Job, Queue, Task
from engine.policy import load_policy
from engine.resources import CPU, MEMORY
from tests.core._churn import churn_engine, finish_one_by_one
from tests.core.test_pruned_exact import policy_variant
from tests.core.test_searchwake import DEFAULT, _never_misses
from tests.core._rooms import chosen, entry

GI = 2**30


def _afresh(search: Watch | Room) -> bool:
    """What ``search.holds()`` answers now, asked of a copy (holds moves what it has looked at)."""
    twin = copy.copy(search)
    if isinstance(search, Room):
        assert isinstance(twin, Room)
        twin.again = set(search.again)
        twin.rules = []
        for seen in search.rules:
            kept = copy.copy(seen)
            kept.freed = {cluster: dict(amount) for cluster, amount in seen.freed.items()}
            kept.short = {cluster: list(short) for cluster, short in seen.short.items()}
            kept.ids, kept.on = dict(seen.ids), dict(seen.on)
            twin.rules.append(kept)
    return twin.holds()


@contextmanager
def checked() -> Iterator[dict[str, int]]:
    """Every shortcut answer checked; counts of answers (``rooms``: of queues with a room)."""
    counts = {"held": 0, "rooms": 0}
    original = QueueReads._still

    def still(self: QueueReads, queue: str, at: Any) -> bool:
        answer = original(self, queue, at)
        if answer:
            counts["held"] += 1
            searches = []
            for read in self._searches[queue]:
                assert isinstance(read, tuple)              # ("victims", watch or room): engine.core.idle._searching
                searches.append(read[1])
            counts["rooms"] += any(isinstance(search, Room) for search in searches)
            for search in searches:
                assert _afresh(search), f"{queue}: {search!r} no longer holds, but was taken to"
        return answer

    with patch.object(QueueReads, "_still", still):
        yield counts


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_searches_taken_to_hold_hold_on_random_fleets(data: Any) -> None:
    """Default policy, rooms made likely (the fleet-wide dry run skipped above one chosen candidate); the
    decisions are compared with the exhaustive engine's as well (``_never_misses``)."""
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 1), checked():
        _never_misses(data)


def test_searches_taken_to_hold_hold_under_churn() -> None:
    """A saturated bench fleet under the default policy, one finish per cycle, its victims gone by the next (as
    ``atoll bench --churn``): the shortcut answers often, for queues with rooms too, and never wrongly."""
    rng = random.Random(3)
    engine = churn_engine("default", 3000, 40, 8, rng)
    with checked() as counts:
        for _ in finish_one_by_one(engine, rng, 30):
            pass
    assert counts["held"] > 100 and counts["rooms"] > 10, counts


def _job(name: str, queue: str, priority: int, cpu: int, on: str | None = None) -> Job:
    job = Job(f"ns/{name}", name, "ns", queue=queue, priority=priority, submit_time=float(len(name)),
              tasks=[Task("t", 1, 1, {CPU: cpu, MEMORY: GI})])
    if on is not None:
        job.excluded_clusters = {"a", "c"} - {on}
    return job


def _j8_refused(exhaustive: bool, running: list[Job], policy: Any = DEFAULT) -> Engine:
    """Clusters a and c (4 cpu each), queues q, o and p, ``running`` all admitted; then j8 (q, priority 5, 4 cpu)
    refused without a preemption."""
    engine = Engine(load_policy(policy).pipeline, exhaustive=exhaustive)
    for name in ("a", "c"):
        engine.upsert_cluster(Cluster(name, allocatable={CPU: 4000, MEMORY: 64 * GI}))
    for queue in ("q", "o", "p"):
        engine.upsert_queue(Queue(queue))
    for job in running:
        engine.submit(job)
    assert len(engine.cycle(1.0).admitted) == len(running)
    engine.submit(_job("j8", "q", 5, 4000))
    assert not engine.cycle(2.0).preemptions
    return engine


def _parked_on_its_room(exhaustive: bool, policy: Any = DEFAULT) -> Engine:
    """Cluster a (4 cpu): three 1-cpu priority-1 jobs of q and p's h (1 cpu, priority 9); cluster c: o's 1-, 1- and
    2-cpu priority-9 jobs. j8 (priority 5, 4 cpu) meets three candidates, all on a: no room, no dry run,
    parked on its room. Then o's 1-cpu jobs finish on c, where j8's room has no candidate, one per cycle: its
    searches are asked, hold, and are then taken to hold."""
    engine = _j8_refused(exhaustive, [_job("j0", "q", 1, 1000, "a"), _job("j1", "q", 1, 1000, "a"),
                                      _job("j2", "q", 1, 1000, "a"), _job("h", "p", 9, 1000, "a"),
                                      _job("o1", "o", 9, 1000, "c"), _job("o2", "o", 9, 1000, "c"),
                                      _job("o3", "o", 9, 2000, "c")], policy)
    if not exhaustive:
        parked = engine._preempt.parked(engine.state.jobs["ns/j8"])
        assert parked is not None and parked.room is not None
    for at, job in ((3.0, "ns/o1"), (3.5, "ns/o2")):
        engine.finished(job, True, ended_at=at)
        assert not engine.cycle(at).preemptions
    return engine


def _then(change: str, policy: Any = DEFAULT) -> list[Any]:
    """After ``_parked_on_its_room``, h (on a) finishes or drops to priority 1: either way j8's room now covers 4
    cpu on a, with nothing else j8's refusal reads changed (the fleet has 3 cpu free, at most 2 on one cluster). The
    pruned engine's searches must wake, and it must preempt exactly as the exhaustive engine does."""
    outcomes = []
    for exhaustive in (False, True):
        with checked() as counts:
            engine = _parked_on_its_room(exhaustive, policy)
            if change == "finish":
                engine.finished("ns/h", True, ended_at=4.0)
            else:
                engine.update_job(_job("h", "p", 1, 1000, "a"))
            result = engine.cycle(4.0)
        if not exhaustive:
            assert counts["rooms"] >= 1, "j8's searches were never taken to hold: the test tests nothing"
        outcomes.append([(p.preemptor, sorted(p.victims)) for p in result.preemptions])
    return outcomes


def test_capacity_freed_where_a_room_has_candidates_wakes_it() -> None:
    outcomes = _then("finish")
    assert outcomes[0] == outcomes[1] == [("ns/j8", ["ns/j0", "ns/j1", "ns/j2"])]


def test_a_new_candidate_a_room_takes_in_wakes_it() -> None:
    outcomes = _then("drop")
    assert outcomes[0] == outcomes[1] and outcomes[0][0][0] == "ns/j8" and len(outcomes[0][0][1]) == 4


def test_a_new_candidate_wakes_a_hopeless_search() -> None:
    """j8 (priority 5, 4 cpu) finds no candidate at all (cluster a full of p's priority-9 jobs): parked hopeless.
    While o's jobs finish on c, one per cycle, its searches are taken to hold; n (p, priority 1) is then admitted
    on c, taking capacity only, and becomes a candidate with the next cycle: j8's watch must be asked again (``checked``),
    and the decisions stay the exhaustive engine's."""
    outcomes = []
    for exhaustive in (False, True):
        with checked() as counts:
            engine = _j8_refused(exhaustive, [_job(f"h{i}", "p", 9, 1000, "a") for i in range(4)] +
                                 [_job(f"o{i}", "o", 9, 1000, "c") for i in range(4)])
            if not exhaustive:
                parked = engine._preempt.parked(engine.state.jobs["ns/j8"])
                assert parked is not None and parked.room is None
            for at, job in ((3.0, "ns/o0"), (3.2, "ns/o1")):
                engine.finished(job, True, ended_at=at)
                assert not engine.cycle(at).admitted
            held = counts["held"]
            engine.submit(_job("n", "p", 1, 1000, "c"))
            assert [a.job_id for a in engine.cycle(3.5).admitted] == ["ns/n"]
            engine.finished("ns/o2", True, ended_at=4.0)
            result = engine.cycle(4.0)
        if not exhaustive:
            assert held >= 1, "j8's searches were never taken to hold: the test tests nothing"
        outcomes.append(([a.job_id for a in result.admitted], [(p.preemptor, p.victims) for p in result.preemptions]))
    assert outcomes[0] == outcomes[1]


def test_a_candidate_leaving_wakes_a_room_that_counts_its_candidates() -> None:
    """A room of a job that may be placed across clusters counts its candidates (a fleet-wide dry run runs at
    or below ``FLEET_WIDE_MAX`` of them). The shipped place plugins never park such a job (a split gang
    declares no verdict reads), so this is asked of ``QueueReads`` itself: a candidate leaving the index, with
    no capacity changed and nothing logged, must make the queue's searches be asked again."""
    state, index = FleetState(), RunningIndex()
    state.upsert_cluster(Cluster("a", allocatable={CPU: 4000, MEMORY: 8 * GI}))
    log = CandidateLog(index.candidate, lambda: index.version)
    index.log = log
    job = _job("j0", "q", 0, 1000, "a")
    job.admitted_at, job.placement = 1.0, {"a": {"t": 1}}
    index.add(job, 0, fresh=False)
    rule = PreemptRule("priority", "priority-preemption", lambda queue: ANY)
    picked = [job, _job("j1", "q", 0, 1000, "a")]
    room = Room({CPU: 8000}, [entry(rule, {"a": {CPU: 2000}}, picked, index)], state, index, log, log.end, False)
    reads = Reads(state, lambda: (state.changes, log.end, index.version))     # a fresh value once one left
    quiet = QueueReads(state, reads, log, lambda: index.removed)
    quiet._searches["q"] = {("victims", room): {True: 1}}
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 1):
        assert quiet.searches_hold("q") and quiet.searches_hold("q")     # asked, then taken to hold
        index.discard(job.id)                                           # two candidates counted, one left
        assert not _afresh(room)
        assert not quiet.searches_hold("q")


def test_a_candidate_leaving_wakes_a_one_cluster_room_whose_rule_chose_more_than_the_fleet_wide_bound() -> None:
    """A room kept to one cluster (``Pipeline.fitting_clusters_only``) leaves the excess out while its rule chose
    more than ``FLEET_WIDE_MAX`` (a fresh search would skip the fleet-wide try). A chosen candidate leaving the
    index (here taken by another preemptor: no capacity changes, nothing is logged) brings it to the bound, and the
    excess that an eviction under way leaves on the cluster then covers the need: the queue's searches must be
    asked again, though no room there counts its candidates."""
    state, index = FleetState(), RunningIndex()
    state.upsert_cluster(Cluster("a", allocatable={CPU: 4000, MEMORY: 64 * GI}))
    log = CandidateLog(index.candidate, lambda: index.version)
    index.log = log
    picked = []
    for name in ("j0", "j1"):
        job = _job(name, "q", 0, 1000, "a")
        job.admitted_at, job.placement = 1.0, {"a": {"t": 1}}
        index.add(job, 0, fresh=False)
        picked.append(job)
    victim = _job("v", "o", 0, 2000, "a")
    victim.placement = {"a": {"t": 1}}
    state.nominate("ns/p", {"a": {}}, [victim])      # its preemptor claims nothing there: all it frees is excess
    assert state.excess("a") == {CPU: 2000, MEMORY: GI}
    rule = PreemptRule("priority", "priority-preemption", lambda queue: ANY)
    room = Room({CPU: 7000}, [entry(rule, {"a": {CPU: 2000}}, picked, index)], state, index, log, log.end, True)
    reads = Reads(state, lambda: (state.changes, log.end, index.version))
    quiet = QueueReads(state, reads, log, lambda: index.removed)
    quiet._searches["q"] = {("victims", room): {True: 1}}
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 1):
        assert quiet.searches_hold("q") and quiet.searches_hold("q")     # free 4 + freed 2 of 7 cpu: asked, then held
        index.discard(picked[0].id)             # one chosen left, the bound: free 4 + freed 1 + excess 2 cover 7
        assert not _afresh(room)
        assert not quiet.searches_hold("q")
