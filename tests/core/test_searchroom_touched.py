"""A parked search's room looks again only at the clusters whose free capacity or excess changed since it
last found every cluster short (``FleetState.touched``, engine.core.searchroom; a dry run's changes, undone
at its end, are dropped from it): after any change of the state it answers exactly what a room looking at
every cluster answers."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import preempt as preempt_module
from engine.core.preempt import ANY, PreemptRule, RunningIndex
from engine.core.searchroom import Room
from engine.core.searchwake import CandidateLog
from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Queue, Task
from engine.resources import CPU, MEMORY
from tests.core._rooms import chosen, entry

GI = 2**30
NAMES = ("a", "b", "c")


def _fleet() -> FleetState:
    state = FleetState()
    for name in NAMES:
        state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI}))
    state.upsert_queue(Queue("q"))
    return state


def _job(i: int, cluster: str, cpu: int) -> Job:
    job = Job(f"ns/j{i}", f"j{i}", "ns", queue="q", tasks=[Task("t", 1, 1, {CPU: cpu, MEMORY: GI})])
    job.placement = {cluster: {"t": 1}}
    job.state = JobState.ADMITTED
    return job



def _indexed() -> tuple[RunningIndex, CandidateLog]:
    """A running index whose candidates are logged."""
    index = RunningIndex()
    log = CandidateLog(index.candidate, lambda: index.version)
    index.log = log
    return index, log


def _candidate(state: FleetState, index: RunningIndex, job: Job, admitted_at: float = 0.0) -> None:
    """``job`` (admitted, placed) becomes a victim candidate: logged."""
    job.admitted_at = admitted_at
    state.jobs[job.id] = job
    index.add(job, 0, fresh=False)


def _rooms(state: FleetState) -> tuple[Room, Room]:
    """Two equal rooms for a job needing 6 cpu: what two candidates free, 1 cpu on each cluster."""
    index = RunningIndex()
    log = CandidateLog(index.candidate)
    rule = PreemptRule("priority", "priority-preemption", lambda queue: ANY)
    freed = {name: {CPU: 1000} for name in NAMES}
    need = {CPU: 6000, MEMORY: GI}
    return tuple(Room(need, [entry(rule, freed, chosen(2))], state, index, log, log.end, True)  # type: ignore
                 for _ in range(2))


def _same(state: FleetState, incremental: Room, full: Room) -> bool:
    full.looked = None                       # looks at every cluster
    answer = full.holds()
    assert incremental.holds() == answer, f"touched {state.touched[-8:]}: the rooms differ"
    return answer


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_room_looking_at_changed_clusters_only_answers_as_one_looking_at_all(data: Any) -> None:
    """Random admissions, finishes, status reports, nominations (whose excess a room counts as free) and
    dry runs on a full fleet: after each, the incremental room says what the full one says."""
    state = _fleet()
    incremental, full = _rooms(state)
    held: list[Job] = []
    nominated: list[str] = []
    for i in range(data.draw(st.integers(4, 30))):
        op = data.draw(st.sampled_from(("hold", "hold", "release", "report", "nominate", "unnominate", "dry")))
        cluster = data.draw(st.sampled_from(NAMES))
        if op == "hold":
            job = _job(i, cluster, data.draw(st.sampled_from((1000, 2000, 3000))))
            state.hold(job)
            held.append(job)
        elif op == "release" and held:
            job = held.pop(data.draw(st.integers(0, len(held) - 1)))
            state.release(job)
            job.state = JobState.SUCCEEDED
        elif op == "report":
            used = data.draw(st.sampled_from((0, 2000, 5000, 8000)))
            state.upsert_cluster(Cluster(cluster, allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: used}))
        elif op == "nominate" and held:
            victim = data.draw(st.sampled_from(held))
            claim = data.draw(st.sampled_from((0, 1000)))
            state.nominate(f"ns/p{i}", {c: {CPU: claim} for c in victim.placement or {}}, [victim])
            nominated.append(f"ns/p{i}")
        elif op == "unnominate" and nominated:
            state.unnominate(nominated.pop(data.draw(st.integers(0, len(nominated) - 1))))
        elif op == "dry":                   # a preemption's dry run: victims supposed gone, then given back
            saved = state.dry_run_begin()
            gone = held[:data.draw(st.integers(0, len(held)))]
            for job in gone:
                state.suppose_gone(job, {c: job.placed_demand(c) for c in job.placement or {}})
            _same(state, incremental, full)
            for job in gone:
                state.suppose_gone(job, {c: job.placed_demand(c) for c in job.placement or {}}, -1)
            state.dry_run_end(saved)
        answer = _same(state, incremental, full)
        assert incremental.holds() is answer         # asked again in the same state: the same answer


def test_a_finish_elsewhere_is_not_looked_at_and_one_on_a_cluster_that_could_hold_it_wakes_it() -> None:
    """Each cluster is full (8 cpu used): the room holds. 2 cpu free on a: 2 + the 1 its candidates free there
    is short of 6, it still holds. 5 cpu free on b: 5 + 1 covers 6, it wakes."""
    state = _fleet()
    for name in NAMES:
        state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 8000}))
    incremental, full = _rooms(state)
    assert _same(state, incremental, full)
    assert incremental.looked == state.touched_base + len(state.touched)
    state.upsert_cluster(Cluster("a", allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 6000}))
    assert state.touched[-1] == "a"
    assert _same(state, incremental, full)
    state.upsert_cluster(Cluster("b", allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 3000}))
    assert not _same(state, incremental, full)
    assert incremental.looked is None


def test_a_dry_run_leaves_no_touched_cluster_behind() -> None:
    """A dry run credits excess and supposes victims gone, then undoes it: the log is as before it."""
    state = _fleet()
    victim = _job(1, "a", 5000)
    state.hold(victim)
    state.nominate("ns/p", {"b": {CPU: 1000}}, [victim])
    before = list(state.touched)
    saved = state.dry_run_begin()
    state.suppose_gone(victim, {"a": victim.placed_demand("a")})
    assert len(state.touched) > len(before)
    state.suppose_gone(victim, {"a": victim.placed_demand("a")}, -1)
    state.dry_run_end(saved)
    assert state.touched == before


def test_excess_of_a_nomination_wakes_a_room() -> None:
    """A victim holding 5 cpu on a for a preemptor claiming 0 there: that excess is coming free, so a room
    whose candidates free 1 cpu on a (with 0 free) now covers 6 cpu and wakes, though free did not change (b and c,
    4.5 cpu free, stay short)."""
    state = _fleet()
    for name in NAMES:     # a: 3 cpu allocated, and the victim's 5 fill it exactly (none over-committed)
        state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI},
                                     allocated={CPU: 3000 if name == "a" else 3500}))
    victim = _job(1, "a", 5000)
    state.hold(victim)
    incremental, full = _rooms(state)
    assert _same(state, incremental, full)
    free = state.free("a")
    state.nominate("ns/p", {"b": {CPU: 1000}}, [victim])     # claims on b; a's 5 cpu are excess
    assert state.free("a") == free and state.excess("a") == {CPU: 5000, MEMORY: GI}
    assert not _same(state, incremental, full)


def test_excess_on_an_over_committed_cluster_wakes_no_room() -> None:
    """The same nomination, but a is over-committed by 0.5 cpu (3.5 allocated besides the victim's 5): free
    clamped at 0 plus the 5 cpu excess plus the 1 its candidates free says 6, but a fresh search tests free
    before clamping (-0.5 + 5 + 1 = 5.5 < 6, ``VictimSearch._search``) and would not try, so the room holds."""
    state = _fleet()
    for name in NAMES:
        state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 3500}))
    victim = _job(1, "a", 5000)
    state.hold(victim)
    incremental, full = _rooms(state)
    assert _same(state, incremental, full)
    state.nominate("ns/p", {"b": {CPU: 1000}}, [victim])
    assert state.free("a") == {MEMORY: 63 * GI} and state.unclamped_free("a")[CPU] == -500
    assert _same(state, incremental, full)


def test_excess_counts_for_a_room_only_while_a_fleet_wide_try_could_follow() -> None:
    """A fresh search adds the excess only in its fleet-wide try, run with at most ``FLEET_WIDE_MAX`` chosen
    candidates (1 here). A room whose search chose 2 ignores an excess that would cover the job; once one of
    them left the index (nothing touched), the try could follow again: the room looks at every cluster with
    the excess and wakes."""
    state = _fleet()
    for name in NAMES:
        state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI},
                                     allocated={CPU: 3000 if name == "a" else 3500}))
    victim = _job(1, "a", 5000)
    state.hold(victim)
    index, log = _indexed()
    others = [_job(i, "c", 1000) for i in (2, 3)]
    for job in others:
        _candidate(state, index, job)
    rule = PreemptRule("priority", "priority-preemption", lambda queue: ANY)
    freed = {name: {CPU: 1000} for name in NAMES}
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 1):
        room = Room({CPU: 6000, MEMORY: GI}, [entry(rule, freed, others, index)], state, index, log, log.end, True)
        assert room.holds()
        state.nominate("ns/p", {"b": {CPU: 1000}}, [victim])        # a: 0 free + 5 excess + 1 covers 6
        assert room.holds()
        touched = state.touched_end
        index.discard(others[0].id)
        assert state.touched_end == touched and not room.holds()


def test_a_candidate_taken_in_is_looked_at_where_it_frees_without_any_cluster_touched() -> None:
    """A room absorbing a new candidate looks again at the clusters where that candidate frees something, even
    when none of them was touched since it last looked (here the candidate is indexed without any booking)."""
    state = _fleet()
    for name in NAMES:
        state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 8000}))
    index, log = _indexed()
    rule = PreemptRule("priority", "priority-preemption", lambda queue: ANY)
    room = Room({CPU: 6000, MEMORY: GI}, [entry(rule, {"a": {CPU: 1000}}, chosen(1))], state, index, log, log.end, True)
    assert room.holds()
    touched = state.touched_end
    _candidate(state, index, _job(1, "a", 5000), 1.0)   # logged: a candidate now, freeing 5 cpu on a (1 + 5: 6)
    assert state.touched_end == touched
    assert not room.holds()


def test_only_a_first_booking_leaves_grown_as_it_is() -> None:
    """``FleetState.grown``: every touch that may raise free capacity or excess. A first booking only takes; a
    booking made again (it may be smaller), a release and a status report may give back, and so does a dry run
    until it ends (then the log is as before it)."""
    state = _fleet()
    job = _job(1, "a", 5000)
    grown = state.grown_end
    state.hold(job)
    assert state.grown_end == grown and state.touched[-1] == "a"
    job.tasks = [Task("t", 1, 1, {CPU: 1000, MEMORY: GI})]
    state.hold(job)                                  # booked again, smaller
    assert state.grown_since(grown, 8) == ["a"]
    saved = state.dry_run_begin()
    state.suppose_gone(job, {"a": job.placed_demand("a")})
    assert len(state.grown) > 1
    state.suppose_gone(job, {"a": job.placed_demand("a")}, -1)
    state.dry_run_end(saved)
    assert state.grown_since(grown, 8) == ["a"]
    state.release(job)
    state.upsert_cluster(Cluster("b", allocatable={CPU: 8000, MEMORY: 64 * GI}))
    assert state.grown_since(grown, 8) == ["a", "a", "b"]


def test_a_split_job_s_room_counts_only_the_candidates_its_search_chose() -> None:
    """A job that may be placed across clusters gets the fleet-wide try whenever at most ``FLEET_WIDE_MAX`` (1
    here) candidates are chosen. Its search chose 2 (no try); a third is absorbed (as chosen: its eligibility is
    not known) and one of the first two leaves. A fresh search may choose just 1 (the absorbed one may be
    protected): it could try, so the room wakes, though 3 - 1 is above the limit."""
    state = _fleet()
    for name in NAMES:
        state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 8000}))
    index, log = _indexed()
    picked = [_job(i, "c", 1000) for i in (1, 2)]
    for job in picked:
        _candidate(state, index, job)
    rule = PreemptRule("priority", "priority-preemption", lambda queue: ANY)
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 1):
        room = Room({CPU: 6000, MEMORY: GI}, [entry(rule, {"c": {CPU: 2000}}, picked, index)], state, index, log,
                    log.end, False)
        assert room.holds()
        _candidate(state, index, _job(3, "c", 1000))
        assert room.holds() and room.rules[0].chosen == 3
        index.discard(picked[0].id)
        assert not room.holds()
