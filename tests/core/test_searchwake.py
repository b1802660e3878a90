"""Parked victim searches (engine.core.searchwake): a parked search never misses a wake-up, a new candidate
wakes it, and parking lets a default-policy fleet skip the refused preemptors a finish cannot help."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import preempt as preempt_module
from engine.core.preempt import ANY, PreemptRule, RunningIndex, VictimSearch
from engine.core.scheduler import Engine
from engine.core.searchroom import Room
from engine.core.searchwake import CandidateLog, Watch, opens, plan
from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Queue, Task
from engine.policy import load_policy
from engine.resources import CPU, MEMORY
from tests.core.test_pruned_exact import Pair, _cluster_copy, _copy, jobs, populate
from tests.core._rooms import chosen, entry

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "policies" / "default.yaml"
GI = 2**30


def _fresh_search_is_hopeless(engine: Engine) -> int:
    """For every pending job whose key has a parked search that still holds, a new search in the state of
    now must meet no candidate either. Returns how many were checked."""
    checked = 0
    preempt, state = engine._preempt, engine.state
    for job in list(state.jobs.values()):
        if job.state is not JobState.PENDING or preempt.parked(job) is None:
            continue
        rules = engine.pipeline.preempt_rule(job=job, state=state, now=state.now)
        protect = engine.pipeline.protect

        def protected(preemptor: Job, victim: Job, rule: Any) -> Any:
            return protect(preemptor=preemptor, victim=victim, rule=rule, state=state, now=state.now)

        search = VictimSearch(state, preempt.running, engine._fit, protected, state.now, [1 << 30],
                              engine.pipeline.fitting_clusters_only)
        found = search.run(job, rules) if rules and len(preempt.running) else None
        assert found is None, f"{job.id}: parked, but a search now finds {found}"
        if preempt.parked(job).room is None:      # type: ignore[union-attr]
            if rules and len(preempt.running):
                assert search.hopeless, f"{job.id}: parked as hopeless, but a search now meets candidates"
        else:       # parked on the room it lacked (engine.core.searchroom): nothing else may differ either
            assert search.protected_until is None and search.dry_runs == 0, \
                f"{job.id}: parked on its room, but a search now runs {search.dry_runs} dry run(s)"
        checked += 1
    return checked


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_parked_search_never_misses_a_wake_up(data: Any) -> None:
    """Random fleets under the default policy (priority preemption, reclaim): after every cycle and after
    every change, each parked search is still what a new search would find; and the decisions equal the
    exhaustive engine's (which never parks a search)."""
    _never_misses(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_search_parked_on_its_room_never_misses_a_wake_up(data: Any) -> None:
    """The same with the fleet-wide dry run skipped above one chosen candidate (instead of 256), so that
    these small fleets park searches that met candidates on the room they lacked (engine.core.searchroom)."""
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 1):
        _never_misses(data)


def _never_misses(data: Any) -> None:
    pair = Pair(DEFAULT)
    fleet, qs, names = populate(pair, data)
    submitted = 0
    for _ in range(data.draw(st.integers(3, 14))):
        op = data.draw(st.sampled_from(("submit", "submit", "cycle", "finish", "evicted", "evicted", "queue",
                                        "cluster")))
        if op == "submit":
            batch = data.draw(jobs(names, submitted))
            submitted += len(batch)
            for j in batch:
                pair.both("submit", lambda j=j: (_copy(j),))
        elif op == "finish" and pair.admitted():
            job_id = data.draw(st.sampled_from(pair.admitted()))
            pair.both("finished", lambda: (job_id, True, pair.now))
        elif op == "evicted":
            for job in [j for j in pair.pruned.state.jobs.values() if j.state is JobState.EVICTING]:
                pair.both("evicted", lambda job=job: (job.id, pair.now, pair.now))
        elif op == "cluster":      # a status report: more or less free without any job leaving
            c = data.draw(st.sampled_from(fleet))
            used = {CPU: data.draw(st.sampled_from((0, 1000, 3000)))}
            pair.both("upsert_cluster", lambda: (_cluster_copy(c, allocated=used, status_time=pair.now),))
        elif op == "queue":
            q = data.draw(st.sampled_from(qs))
            priority = data.draw(st.sampled_from((0, 5, 10)))
            pair.both("upsert_queue", lambda: (Queue(q.name, parent=q.parent, weight=q.weight, priority=priority,
                                                     open=q.open, capability=q.capability and dict(q.capability),
                                                     guarantee=dict(q.guarantee)),))
        _fresh_search_is_hopeless(pair.pruned)        # after the change, before the cycle reads it
        pair.cycle()
        _fresh_search_is_hopeless(pair.pruned)


@contextmanager
def counting_searches() -> Iterator[list[str]]:
    """The ids of the jobs whose victim search runs while inside."""
    searches: list[str] = []
    original = VictimSearch.run

    def counted(self: VictimSearch, job: Job, rules: Any) -> Any:
        searches.append(job.id)
        return original(self, job, rules)

    VictimSearch.run = counted          # type: ignore[method-assign]
    try:
        yield searches
    finally:
        VictimSearch.run = original     # type: ignore[method-assign]


def _fleet() -> Engine:
    engine = Engine(load_policy(DEFAULT).pipeline)
    engine.upsert_cluster(Cluster("a", allocatable={CPU: 4000, MEMORY: 64 * GI}))
    engine.upsert_queue(Queue("q"))
    return engine


def _job(i: int, priority: int, cpu: int = 2000) -> Job:
    return Job(f"ns/j{i}", f"j{i}", "ns", queue="q", priority=priority, submit_time=float(i),
               tasks=[Task("t", 1, 1, {CPU: cpu, MEMORY: GI})])



def test_a_new_candidate_wakes_a_parked_search() -> None:
    """A running job whose priority drops becomes a candidate: the parked search of a higher job wakes."""
    engine = _fleet()
    engine.submit(_job(0, 5))
    engine.submit(_job(1, 5))                 # the cluster is full of priority-5 jobs
    engine.cycle(1.0)
    engine.submit(_job(2, 5))                 # equal priority: nobody to evict, the search is hopeless
    assert not engine.cycle(2.0).preemptions
    assert engine._preempt.parked(engine.state.jobs["ns/j2"]) is not None
    assert not engine.cycle(3.0).preemptions  # nothing changed
    engine.update_job(_job(1, 1))             # j1 now ranks below j2 (same capacity, same queue usage)
    result = engine.cycle(4.0)
    assert [p.victims for p in result.preemptions] == [("ns/j1",)]


def test_parking_skips_preemptors_a_finish_cannot_help() -> None:
    """Default policy, a full fleet of priority-5 jobs and a backlog of priority-5 jobs too big for any
    hole: after a finish, nothing is examined or searched again (before: every key, every finish)."""
    engine = _fleet()
    for i in range(4):
        engine.submit(_job(i, 5, cpu=1000))
    engine.cycle(1.0)
    for i in range(4, 40):
        engine.submit(_job(i, 5, cpu=3000))
    first = engine.cycle(2.0)
    assert first.examined >= 1 and not first.preemptions
    engine.finished("ns/j0", True, ended_at=3.0)      # 1 cpu free: no 3-cpu job fits, nobody to evict
    with counting_searches() as searches:
        result = engine.cycle(3.0)
    assert result.full and searches == []             # the key's search is parked: no victim search again
    assert result.examined <= 1
    exhaustive = Engine(load_policy(DEFAULT).pipeline, exhaustive=True)
    exhaustive.upsert_cluster(Cluster("a", allocatable={CPU: 4000, MEMORY: 64 * GI}))
    exhaustive.upsert_queue(Queue("q"))
    for i in range(4):
        exhaustive.submit(_job(i, 5, cpu=1000))
    exhaustive.cycle(1.0)
    for i in range(4, 40):
        exhaustive.submit(_job(i, 5, cpu=3000))
    exhaustive.cycle(2.0)
    exhaustive.finished("ns/j0", True, ended_at=3.0)
    assert exhaustive.cycle(3.0).examined == 36


def test_a_queue_going_above_its_guarantee_wakes_reclaim_in_the_same_cycle(tmp_path: Path) -> None:
    """Reclaim opens a queue once it uses more than its guarantee: an admission earlier in the cycle that takes
    it there makes its older jobs candidates at once, and a parked reclaim search must see them."""
    text = DEFAULT.read_text().replace("guarantees: true ", "guarantees: false ")
    assert text != DEFAULT.read_text()
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)

    def engine_of(exhaustive: bool) -> Engine:
        engine = Engine(load_policy(policy).pipeline, exhaustive=exhaustive)
        engine.upsert_cluster(Cluster("a", allocatable={CPU: 6000, MEMORY: 64 * GI}))
        engine.upsert_queue(Queue("v", priority=10, guarantee={CPU: 3000}))
        engine.upsert_queue(Queue("b", priority=10))
        engine.upsert_queue(Queue("r", guarantee={CPU: 3000}))
        return engine

    def job(name: str, queue: str, cpu: int, at: float, **extra: Any) -> Job:
        # cpu only: a queue using memory beyond a cpu-only guarantee would count as above it from the start
        return Job(f"ns/{name}", name, "ns", queue=queue, submit_time=at, tasks=[Task("t", 1, 1, {CPU: cpu})], **extra)

    outcomes = []
    for exhaustive in (False, True):
        engine = engine_of(exhaustive)
        engine.submit(job("v1", "v", 1000, 1.0))
        engine.submit(job("v1b", "v", 2000, 2.0))
        engine.submit(job("b1", "b", 3000, 3.0, annotations={"volcano.sh/preemptable": "false"}))
        assert len(engine.cycle(1.0).admitted) == 3          # v at its guarantee (3 cpu), b1 protected
        engine.submit(job("a1", "r", 3000, 4.0))
        engine.submit(job("v2", "v", 1000, 5.0))
        assert not engine.cycle(2.0).preemptions             # no candidate for a1: v is not above its guarantee
        if not exhaustive:
            assert engine._preempt.parked(engine.state.jobs["ns/a1"]) is not None
        engine.finished("ns/b1", True, ended_at=3.0)
        result = engine.cycle(3.0)                           # v2 first (queue priority 10): v goes above 3 cpu
        outcomes.append(([a.job_id for a in result.admitted], [(p.preemptor, p.victims) for p in result.preemptions]))
    assert outcomes[0] == outcomes[1] == (["ns/v2"], [("ns/a1", ("ns/v1",))])


def test_a_search_parked_on_its_room_wakes_when_a_cluster_could_hold_the_job() -> None:
    """A priority-5 job needs 6 cpu in one pod; two 4-cpu clusters are full of 1-cpu priority-1 jobs. Its
    search meets eight candidates, no cluster could hold it with all of them gone, and (with the fleet-wide
    dry run off above one candidate) it runs no dry run: parked on the room it lacked. A finish changes
    nothing; a cluster growing to 8 cpu wakes it and the preemption is found, as the exhaustive engine finds
    it."""
    outcomes = []
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 1):
        for exhaustive in (False, True):
            engine = Engine(load_policy(DEFAULT).pipeline, exhaustive=exhaustive)
            for name in ("a", "b"):
                engine.upsert_cluster(Cluster(name, allocatable={CPU: 4000, MEMORY: 64 * GI}))
            engine.upsert_queue(Queue("q"))
            for i in range(8):
                engine.submit(_job(i, 1, cpu=1000))
            assert len(engine.cycle(1.0).admitted) == 8
            engine.submit(_job(8, 5, cpu=6000))
            with counting_searches() as searches:
                assert not engine.cycle(2.0).preemptions
                big = engine.state.jobs["ns/j8"]
                parked = engine._preempt.parked(big)
                if not exhaustive:
                    assert parked is not None and parked.room is not None
                engine.finished("ns/j0", True, ended_at=3.0)
                assert not engine.cycle(3.0).preemptions
                assert len(searches) == (2 if exhaustive else 1)      # parked: the finish could not help it
                engine.upsert_cluster(Cluster("a", allocatable={CPU: 8000, MEMORY: 64 * GI}))
                result = engine.cycle(4.0)
            outcomes.append([(p.preemptor, p.victims) for p in result.preemptions] +
                            [a.job_id for a in result.admitted])
    assert outcomes[0] == outcomes[1] and outcomes[0][0][0] == "ns/j8"


def test_a_room_takes_in_new_candidates_and_wakes_when_they_make_room() -> None:
    """Two 4-cpu clusters, each with two 1-cpu priority-1 jobs and two 1-cpu priority-9 ones; a priority-5
    job needs 4 cpu. Its search meets two candidates per cluster: no room, no dry run, parked. A priority-9
    job dropping to 1 becomes a candidate: the room takes it in (3 cpu on that cluster: still short, no new
    search); the second one makes 4: the search wakes and evicts exactly what the exhaustive engine does."""
    outcomes = []
    for exhaustive in (False, True):
        engine = Engine(load_policy(DEFAULT).pipeline, exhaustive=exhaustive)
        assert engine.pipeline.fitting_clusters_only
        for name in ("a", "b"):
            engine.upsert_cluster(Cluster(name, allocatable={CPU: 4000, MEMORY: 64 * GI}))
        engine.upsert_queue(Queue("q"))
        for i in range(8):
            job = _job(i, 9 if i % 4 >= 2 else 1, cpu=1000)
            job.excluded_clusters = {"b" if i < 4 else "a"}       # j0-j3 on a, j4-j7 on b
            engine.submit(job)
        assert len(engine.cycle(1.0).admitted) == 8
        high = [j.id for j in engine.state.jobs.values() if j.priority == 9 and (j.placement or {}).get("a")]
        assert len(high) == 2
        engine.submit(_job(8, 5, cpu=4000))
        with counting_searches() as searches:
            assert not engine.cycle(2.0).preemptions
            if not exhaustive:
                parked = engine._preempt.parked(engine.state.jobs["ns/j8"])
                assert parked is not None and parked.room is not None
            engine.update_job(_moved(high[0]))
            assert not engine.cycle(3.0).preemptions
            assert len(searches) == (2 if exhaustive else 1)       # taken in: 3 cpu on a, still short
            engine.update_job(_moved(high[1]))
            result = engine.cycle(4.0)
        outcomes.append([(p.preemptor, sorted(p.victims)) for p in result.preemptions])
    assert outcomes[0] == outcomes[1] and len(outcomes[0]) == 1 and len(outcomes[0][0][1]) == 4


def _moved(job_id: str) -> Job:
    """The priority-9 job ``job_id`` of cluster a, now at priority 1."""
    job = _job(int(job_id.split("j")[-1]), 1, cpu=1000)
    job.excluded_clusters = {"b"}
    return job


def test_a_room_woken_by_what_it_cannot_absorb_stays_awake() -> None:
    """A queue going above its guarantee wakes a room for good: asked again in the same state (a parked refusal's
    wake read is asked more than once per state, engine.core.wake) it must not say 'holds' again. A room that
    answered False then True let a refusal park with a false 'victims' value: the pruned engine then skipped a
    preemption the exhaustive one issued (tests/core/test_wake.py, the churn test under the default policy)."""
    state, index = FleetState(), RunningIndex()
    state.upsert_cluster(Cluster("a", allocatable={CPU: 4000, MEMORY: 8 * GI}))
    log = CandidateLog(index.candidate)
    rule = PreemptRule("reclaim", "reclaim", lambda queue: ANY)
    room = Room({CPU: 8000}, [entry(rule, {"a": {CPU: 1000}}, chosen(1))], state, index, log, log.end, True)
    assert room.holds() and room.holds()
    log.add("q", -ANY)                       # a queue rose above its guarantee: unknown candidates
    assert not room.holds()
    assert not room.holds()


def test_a_queue_rising_above_its_guarantee_wakes_only_rules_that_read_usage() -> None:
    """The log's entry for a queue gone above its guarantee (unknown candidates: reclaim may take its older jobs
    now) wakes a watch or room of a rule that may read usage, not one of a rule that promises it reads none
    (``PreemptRule.reads_usage``: priority-preemption's, which reads priorities): its candidates are those it saw.
    In the 100,000-job churn bench such an entry woke ~2,800 parked keys of priority rules at once."""
    state, index = FleetState(), RunningIndex()
    state.upsert_cluster(Cluster("a", allocatable={CPU: 4000, MEMORY: 8 * GI}))
    log = CandidateLog(index.candidate, lambda: index.version)
    index.log = log
    blind = PreemptRule("priority", "priority-preemption", lambda queue: ANY, reads_usage=False)
    reading = PreemptRule("reclaim", "reclaim", lambda queue: ANY)
    assert opens(reading, "q", -ANY, 0) and not opens(blind, "q", -ANY, 0) and opens(blind, "q", 0.0, 0)
    watches = {rule.plugin: Watch(log, [rule], log.end) for rule in (blind, reading)}
    rooms = {rule.plugin: Room({CPU: 8000}, [entry(rule, {"a": {CPU: 1000}}, chosen(1))], state, index, log, log.end,
                               True)
             for rule in (blind, reading)}
    log.add("q", -ANY)
    assert watches["priority-preemption"].holds() and rooms["priority-preemption"].holds()
    assert not watches["reclaim"].holds() and not rooms["reclaim"].holds()
    job = _job(0, 0)                             # a real candidate still wakes the watch of either
    job.admitted_at = 1.0
    index.add(job, 0, fresh=False)               # a candidate now: logged
    assert not watches["priority-preemption"].holds()


def test_a_logged_candidate_that_left_wakes_no_watch_that_looks_after() -> None:
    """Watches share what the log knows of each entry (``CandidateLog.still``, asked once per version of the
    candidates): a job that was a candidate when one watch looked, and left before another looked, wakes only
    the first."""
    index = RunningIndex()
    log = CandidateLog(index.candidate, lambda: index.version)
    index.log = log
    rule = PreemptRule("priority", "priority-preemption", lambda queue: ANY)
    early, late = Watch(log, [rule], log.end), Watch(log, [rule], log.end)
    job = _job(0, 0)
    job.admitted_at = 1.0
    index.add(job, 0, fresh=False)             # a candidate now: logged
    assert index.candidate(job.id)
    assert not early.holds()                   # it would look at it
    index.discard(job.id)                      # evicted by an earlier preemptor, say
    assert late.holds()                        # gone before this one looked: nothing new for it
    index.add(job, 0, fresh=False)             # a candidate again: a new entry
    assert not late.holds()


def test_a_position_whose_job_left_is_given_to_no_search() -> None:
    """A candidate leaving the index marks the position it was logged at gone (``CandidateLog.left``, from
    ``RunningIndex.discard``): ``maybe`` leaves it out and ``concerns`` does not count it, for a planned search and
    for one that looks at every position; the job indexed again is a new position, given as any other. (In the
    churn bench half the positions handed to rooms were victims already taken by an earlier preemptor.)"""
    index = RunningIndex()
    log = CandidateLog(index.candidate, lambda: index.version)
    index.log = log
    rule = PreemptRule("priority", "priority-preemption", lambda queue: ANY, shared_scope=0)
    planned = plan([rule])
    stay, leave = _job(0, 0), _job(1, 0)
    for job in (stay, leave):
        job.admitted_at = 1.0
    index.add(leave, 0, fresh=False)
    first = log.end - 1
    assert list(log.maybe(planned, first)) == [first] and log.concerns(planned, first) and log.concerns(None, first)
    index.discard(leave.id)                   # evicted by an earlier preemptor, say
    assert list(log.maybe(planned, first)) == [] and list(log.maybe(None, first)) == []
    assert not log.concerns(planned, first) and not log.concerns(None, first)
    index.add(stay, 0, fresh=False)
    index.add(leave, 0, fresh=False)          # a candidate again: a new entry
    assert list(log.maybe(planned, first)) == [first + 1, first + 2] == list(log.maybe(None, first))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_concerns_says_whether_maybe_gives_a_position(data: Any) -> None:
    """``CandidateLog.concerns`` (asked of a quiet queue's victim searches at every cycle, engine.core.idle) answers
    exactly whether ``maybe`` would give a position now, whatever was asked before, and ``untouched`` whether it
    would give one gone or not (with and without the plan's scope keys numbered); and what the positions open
    (``opens``, which every caller asks) is the same as in a log only ever asked ``maybe``. Rules of one shared
    scope open every queue but their own alike (``PreemptRule.shared_scope``), as here."""
    queues = ["a", "b", "c"]
    bounds = {0: 0.5, 1: 1.5, 2: ANY}

    def rule(plugin: str, shared: int, own: str, most: Optional[int]) -> PreemptRule:
        return PreemptRule(plugin, plugin, lambda queue: ANY if queue == own else bounds[shared],
                           max_preemptions=most, shared_scope=shared, own_queues=frozenset((own,)))

    asked, reference = CandidateLog(lambda _: True), CandidateLog(lambda _: True)
    everything = CandidateLog(lambda _: True)       # the same entries, none leaving: positions gone or not
    numbers: dict[tuple, int] = {}                  # plans' scope keys numbered, as idle.QueueReads does
    for _ in range(data.draw(st.integers(1, 12))):
        for _ in range(data.draw(st.integers(0, 3))):
            entry = (data.draw(st.sampled_from(queues)), data.draw(st.sampled_from([-ANY, 0.0, 1.0, 2.0])),
                     data.draw(st.integers(0, 2)))
            job_id = f"j{asked.end}"
            asked.add(*entry, job_id=job_id)
            reference.add(*entry, job_id=job_id)
            everything.add(*entry, job_id=job_id)
        for _ in range(data.draw(st.integers(0, 2))):      # candidates leaving: their positions are gone
            job_id = f"j{data.draw(st.integers(0, asked.end))}"
            asked.left(job_id)
            reference.left(job_id)
        rules = [rule(data.draw(st.sampled_from(["p", "r"])), data.draw(st.sampled_from(sorted(bounds))),
                      data.draw(st.sampled_from(queues)), data.draw(st.sampled_from([None, 1])))
                 for _ in range(data.draw(st.integers(1, 3)))]
        planned = plan(rules) if data.draw(st.integers(0, 4)) else None
        since = data.draw(st.integers(0, asked.end + 1))
        concerned = asked.concerns(planned, since)
        given_now = list(asked.maybe(planned, since))
        assert concerned == bool(given_now)
        given_ever = list(everything.maybe(planned, since))
        if planned is not None:
            # untouched: maybe would give no position, gone or not (asked again: kept answers, then by scopes)
            untouched = asked.untouched(planned, since)
            assert untouched == (not given_ever) and (not untouched or not given_now)
            scopes = numbers.setdefault(tuple(entry[0] for entry in planned), len(numbers))
            owns = frozenset().union(*(entry[2] for entry in planned))
            assert asked.untouched(planned, since, scopes, owns) == untouched == asked.untouched(planned, since)

        def opened(positions: Any, log: CandidateLog) -> list[int]:
            return [p for p in positions if any(opens(r, *log.entries[p - log.base][:3]) for r in rules)]

        assert opened(given_now, asked) == opened(reference.maybe(planned, since), reference)
