"""Parked keys (engine.core.wake): a finish wakes only the refused keys it could help, the reasons do not
move with unrelated capacity, and undeclared plugins keep the old behaviour."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.nodefit import shapes_of
from engine.core.scheduler import Engine
from engine.model import Cluster, Job, JobState, Queue, Task
from engine.plugin import Plugin
from engine.policy import load_policy
from engine.resources import CPU, GPU, MEMORY
from tests.core.test_pruned_exact import Pair, _cluster_copy, _copy

ROOT = Path(__file__).resolve().parents[2]
NO_PREEMPTION = ROOT / "policies" / "no-preemption.yaml"
DEFAULT = ROOT / "policies" / "default.yaml"
GI = 2**30


def _job(i: int, pods: int, cpu: int, queue: str = "q") -> Job:
    return Job(f"ns/j{i}", f"j{i}", "ns", queue=queue, submit_time=float(i),
               tasks=[Task("t", pods, pods, {CPU: cpu, MEMORY: GI})])


def _engine(**kwargs: Any) -> Engine:
    engine = Engine(load_policy(NO_PREEMPTION).pipeline, **kwargs)
    engine.upsert_cluster(Cluster("a", allocatable={CPU: 8000, MEMORY: 64 * GI}))
    engine.upsert_cluster(Cluster("b", allocatable={CPU: 4000, MEMORY: 64 * GI}))
    engine.upsert_queue(Queue("q"))
    return engine


def _saturated(engine: Engine) -> None:
    for i in range(6):                          # 6 x 2 cpu: fills a (4) and b (2)
        engine.submit(_job(i, 1, 2000))
    for i in range(6, 26):                      # gangs of 3 x 2 cpu: only cluster a could ever hold one
        engine.submit(_job(i, 3, 2000))
    engine.cycle(1.0)
    assert sum(j.state is JobState.ADMITTED for j in engine.state.jobs.values()) == 6


def test_a_finish_that_cannot_help_a_key_does_not_examine_it() -> None:
    engine = _engine()
    _saturated(engine)
    gang_reason = engine.state.jobs["ns/j6"].pending_reason
    assert gang_reason == "job requests cpu 6, more than the fleet has free"      # no momentary amount in it
    on_b = next(j.id for j in engine.state.jobs.values() if j.placement and "b" in j.placement)
    engine.finished(on_b, True, ended_at=2.0)          # 2 cpu free on b (of 4): no gang of 6 cpu fits there
    result = engine.cycle(2.0)
    assert result.full and result.examined == 0        # the gangs' key is parked; nothing else waits
    assert result.reasons == {}                        # no reason rewritten: nothing to write to the API
    assert engine.state.jobs["ns/j6"].pending_reason == gang_reason
    assert "free now: fleet cpu=2 memory=" in engine.explain("ns/j6")      # the amounts: in explain only


def test_a_finish_that_could_help_wakes_the_key_and_it_is_admitted() -> None:
    engine = _engine()
    _saturated(engine)
    on_a = [j.id for j in engine.state.jobs.values() if j.placement and "a" in j.placement]
    for at, job_id in enumerate(on_a[:2], start=2):
        engine.finished(job_id, True, ended_at=float(at))
        assert engine.cycle(float(at)).examined == 0   # 2, then 4 cpu free on a: the gangs' reads did not change
    engine.finished(on_a[2], True, ended_at=4.0)
    result = engine.cycle(4.0)
    assert result.examined == 2                        # 6 cpu free on a: the key wakes; j6 fits, then j7 does not
    assert [a.job_id for a in result.admitted] == ["ns/j6"]


class Undeclared(Plugin):
    """A third-party admit plugin with a verdict key but no verdict_reads."""

    name = "undeclared"
    stages = ("admit",)

    def verdict_key(self, job: Job) -> Any:
        return job.shape


def test_a_plugin_without_verdict_reads_keeps_its_keys_examined_on_every_change() -> None:
    engine = _engine()
    undeclared = Undeclared({}, None)                   # as if listed in admit (its admit_reads: its verdict_reads)
    engine.pipeline._readers.append(undeclared.verdict_reads)
    engine.pipeline._admit_readers.append(undeclared.admit_reads)
    _saturated(engine)
    on_b = next(j.id for j in engine.state.jobs.values() if j.placement and "b" in j.placement)
    engine.finished(on_b, True, ended_at=2.0)
    assert engine.cycle(2.0).examined == 1             # the gangs' key again (once: shared in the state)


def _churn_pair(policy: Path, priorities: tuple[int, ...] = (0,)) -> Pair:
    """Three clusters, two queues, 200 jobs of four gang sizes (and the given priorities, in turn) in both engines."""
    pair = Pair(policy)
    for name, cpu in (("a", 8000), ("b", 6000), ("c", 4000)):
        pair.both("upsert_cluster", lambda name=name, cpu=cpu: (Cluster(name, allocatable={CPU: cpu, MEMORY: 64 * GI}),))
    for q in ("q0", "q1"):
        pair.both("upsert_queue", lambda q=q: (Queue(q),))
    for i in range(200):
        j = _job(i, (1, 2, 3, 5)[i % 4], 2000, queue=f"q{i % 2}")
        j.priority = priorities[i % len(priorities)]
        pair.both("submit", lambda j=j: (_copy(j),))
    return pair


def test_parking_is_exact_under_churn_and_not_vacuous() -> None:
    """A saturated fleet, a deep backlog of few shapes, finishes one at a time: pruned with parking and
    exhaustive decide identically, and parking saves most examinations."""
    pair = _churn_pair(NO_PREEMPTION)
    pair.cycle()
    for _ in range(40):
        running = pair.admitted()
        if not running:
            break
        pair.both("finished", lambda job_id=running[len(running) // 2]: (job_id, True, pair.now))
        pair.cycle()
    assert pair.cycles > 30 and pair.shared > 1000


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_parking_is_exact_on_random_churn(data: Any) -> None:
    """Random fleets, queue limits and shapes under a stream of finishes, status reports and arrivals."""
    pair = Pair(NO_PREEMPTION)
    sizes = data.draw(st.lists(st.sampled_from((2000, 4000, 6000, 8000)), min_size=1, max_size=4), label="clusters")
    for n, cpu in enumerate(sizes):
        pair.both("upsert_cluster", lambda n=n, cpu=cpu: (Cluster(f"m{n}", allocatable={CPU: cpu, MEMORY: 16 * GI}),))
    caps = data.draw(st.lists(st.sampled_from((None, 4000, 8000)), min_size=1, max_size=3), label="capabilities")
    for n, cap in enumerate(caps):
        pair.both("upsert_queue", lambda n=n, cap=cap: (Queue(f"q{n}", capability=cap and {CPU: cap}),))
    seq = 0
    for _ in range(data.draw(st.integers(5, 25))):
        op = data.draw(st.sampled_from(("submit", "finish", "finish", "finish", "report")))
        if op == "submit":
            for _ in range(data.draw(st.integers(1, 12))):
                j = _job(seq, data.draw(st.integers(1, 4)), data.draw(st.sampled_from((1000, 2000))),
                         queue=f"q{data.draw(st.integers(0, len(caps) - 1))}")
                seq += 1
                pair.both("submit", lambda j=j: (_copy(j),))
        elif op == "finish" and pair.admitted():
            job_id = data.draw(st.sampled_from(pair.admitted()))
            pair.both("finished", lambda job_id=job_id: (job_id, True, pair.now))
        elif op == "report":
            n = data.draw(st.integers(0, len(sizes) - 1))
            used = data.draw(st.sampled_from((0, 1000, 2000)))
            pair.both("upsert_cluster", lambda n=n, used=used: (
                Cluster(f"m{n}", allocatable={CPU: sizes[n], MEMORY: 16 * GI}, allocated={CPU: used},
                        status_time=pair.now),))
        pair.cycle()



def test_a_capacity_refusal_under_a_preempt_stage_is_parked_with_its_victim_search() -> None:
    """Default policy (priority preemption, reclaim): the gangs' refusal also says 'no victim either' (every
    running job has their priority). Once that search has run and parked, the refusal sleeps with it: a
    finish that helps nobody examines nothing."""
    engine = _engine()
    engine.set_pipeline(load_policy(DEFAULT).pipeline)
    _saturated(engine)                                 # the first cycle had no candidates yet: no search ran
    on_b = [j.id for j in engine.state.jobs.values() if j.placement and "b" in j.placement]
    engine.finished(on_b[0], True, ended_at=2.0)
    assert engine.cycle(2.0).examined == 1             # the gangs' key: refused, its search parked (hopeless)
    assert engine._preempt.parked(engine.state.jobs["ns/j6"]) is not None
    engine.finished(on_b[1], True, ended_at=3.0)       # 4 cpu free on b: still no room for a 6-cpu gang
    result = engine.cycle(3.0)
    assert result.full and result.examined == 0 and not result.preemptions and result.reasons == {}


def test_parking_under_preemption_is_exact_under_churn_and_not_vacuous() -> None:
    """The default policy on a saturated fleet with priorities (preemptions happen, victims leave before the
    next finish): pruned and exhaustive decide identically, and parked refusals save most examinations."""
    pair = _churn_pair(DEFAULT, priorities=(0, 0, 0, 1, 2))
    preempted = sum(len(evicting) for evicting in churn_steps(pair, 60, lambda running: running[len(running) // 2]))
    assert pair.cycles >= 60 and preempted > 0 and pair.shared > 2000


def churn_steps(pair: Pair, cycles: int, pick: Callable[[list[str]], str]) -> Iterator[list[str]]:
    """``cycles`` times: the victims of the last cycle's preemptions leave, the running job ``pick`` chooses
    finishes, both engines run a cycle and must preempt the same victims; yields those victims."""
    evicting: list[str] = []
    for _ in range(cycles):
        for victim in evicting:
            pair.both("evicted", lambda victim=victim: (victim, pair.now, pair.now))
        running = [j for j in pair.admitted() if pair.pruned.state.jobs[j].state is JobState.ADMITTED]
        if running:
            pair.both("finished", lambda job_id=pick(running): (job_id, True, pair.now))
        pair.cycle()
        evicting = [v for p in pair.pruned._result.preemptions for v in p.victims]
        assert evicting == [v for p in pair.exhaustive._result.preemptions for v in p.victims]
        yield evicting


def test_an_elastic_job_wakes_where_one_replica_fits() -> None:
    """A job whose tasks all have minAvailable 0 starts with what fits in one cluster, at least one replica
    (``place_in_one``): the gang plugin's reads name where one replica of each task fits, not only where its
    (empty) minimum does. Two 4-cpu clusters: a's cpu taken by two 2-pod gangs, b's memory by one pod. The
    elastic job (3 x 1 cpu / 1Gi) fits the fleet's totals, no cluster holds one replica: refused and parked.
    One gang finishing on a frees room for two replicas (not the whole job, and the most free per resource
    stays as it was): it wakes and starts with two, as the exhaustive engine decides (found by
    test_searchwake; before, the refusal stayed parked)."""
    for policy in (NO_PREEMPTION, DEFAULT):
        pair = Pair(policy)
        for name in ("a", "b"):
            cluster = Cluster(name, allocatable={CPU: 4000, MEMORY: 8 * GI})
            pair.both("upsert_cluster", lambda cluster=cluster: (_cluster_copy(cluster),))
        pair.both("upsert_queue", lambda: (Queue("q"),))
        big = Job("ns/mem", "mem", "ns", queue="q", submit_time=2.0,
                  tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: 8 * GI})])
        for job in (_job(0, 2, 1000), _job(1, 2, 1000), big):
            pair.both("submit", lambda job=job: (_copy(job),))
        pair.cycle()
        placed = {j.id: j.placement or {} for j in pair.pruned.state.jobs.values()}
        assert list(placed["ns/j0"]) == list(placed["ns/j1"]) == ["a"] and list(placed["ns/mem"]) == ["b"]
        elastic = Job("ns/e", "e", "ns", queue="q", submit_time=3.0,
                      tasks=[Task("t", 3, 0, {CPU: 1000, MEMORY: GI})])
        pair.both("submit", lambda: (_copy(elastic),))
        pair.cycle()
        assert pair.pruned.state.jobs["ns/e"].state is JobState.PENDING
        pair.both("finished", lambda: ("ns/j0", True, pair.now))
        pair.cycle()
        assert pair.pruned.state.jobs["ns/e"].placement == {"a": {"t": 2}}, policy.name


def test_the_first_node_shape_report_judges_parked_refusals_again() -> None:
    """A refusal is parked only while no cluster reports node shapes (``parkable``): judged on totals. The first
    report makes node-aware verdicts count (other texts, other fits) while leaving the ready clusters, their
    labels and the allocatable as they were, so the ``("ready",)`` read says whether node shapes count: the
    parked refusals are judged again, as the exhaustive engine judges them. GPU pods need a's GPUs, a's cpu is
    taken; b (no GPUs) then reports its nodes."""
    for policy in (NO_PREEMPTION, DEFAULT):
        pair = Pair(policy)
        a = Cluster("a", allocatable={CPU: 4000, MEMORY: 64 * GI, GPU: 8}, allocated={CPU: 4000})
        b = Cluster("b", allocatable={CPU: 64000, MEMORY: 256 * GI})
        for cluster in (a, b):
            pair.both("upsert_cluster", lambda cluster=cluster: (_cluster_copy(cluster),))
        pair.both("upsert_queue", lambda: (Queue("q"),))
        for i in range(6):              # one key, enough jobs that the walk goes by key (parked refusals served)
            job = Job(f"ns/g{i}", f"g{i}", "ns", queue="q", submit_time=float(i),
                      tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: GI, GPU: 2})])
            pair.both("submit", lambda job=job: (_copy(job),))
        pair.cycle()
        assert "on nodes" not in pair.pruned.state.jobs["ns/g0"].pending_reason

        def reported() -> tuple[Cluster]:
            cluster = _cluster_copy(b, status_time=pair.now)
            cluster.node_shapes = shapes_of([{CPU: 0, MEMORY: 0}, {CPU: 32000, MEMORY: 128 * GI}], [0, 2])
            return (cluster,)

        pair.both("upsert_cluster", reported)
        pair.cycle()                    # compares reasons with the exhaustive engine's
        assert "on nodes" in pair.pruned.state.jobs["ns/g5"].pending_reason, policy.name


def test_a_signature_found_holding_is_answered_again_without_its_reads_until_the_state_changes() -> None:
    """``Reads.holds`` keeps the signatures that held in the current version: asked again for the group's next
    job in the same state it answers without hashing or comparing a read; once the version moves it compares them
    again, and a read whose value changed makes it False."""
    from engine.core.state import FleetState
    from engine.core.wake import Reads

    hashes = [0]

    class Counted:
        """A part of a read that counts how often the read is hashed (a nested tuple hashes every part)."""

        def __hash__(self) -> int:
            hashes[0] += 1
            return 7

    free = {"x": 1}
    version = [0]
    reads = Reads(FleetState(), lambda: version[0])
    read = ("call", lambda state, argument: free["x"], Counted())
    signature = reads.signature((read,))
    assert reads.holds(signature)
    before = hashes[0]
    for _ in range(5):
        assert reads.holds(signature)
    assert hashes[0] == before                       # answered from the memo: no read hashed
    free["x"] = 2                                     # the value changes, and so does the state's version
    version[0] += 1
    assert not reads.holds(signature)
    assert not reads.holds(signature)                 # a False answer is not kept as a True one
    free["x"] = 1
    version[0] += 1
    assert reads.holds(signature)
    assert hashes[0] > before
    equal = tuple(list(signature))                    # an equal signature, another object: its reads are compared
    assert equal is not signature
    before = hashes[0]
    assert reads.holds(equal)
    assert hashes[0] > before


def test_the_ready_read_says_which_clusters_are_ready_with_which_labels() -> None:
    """``("ready",)``: every parked signature holds it, so its value hashes once (a frozenset of the clusters,
    names unique: the same facts as the list in name order); it changes with a cluster's readiness, labels or
    allocatable and with a cluster joining, and stays equal while the clusters are re-reported unchanged."""
    from engine.core.state import FleetState
    from engine.core.wake import Reads

    state = FleetState()
    version = [0]
    reads = Reads(state, lambda: version[0])

    def value() -> Any:
        version[0] += 1
        return reads.value(("ready",))

    def cluster(name: str, ready: bool = True, zone: str = "z1", cpu: int = 4000) -> Cluster:
        return Cluster(name, labels={"zone": zone}, ready=ready, allocatable={CPU: cpu, MEMORY: 8 * 2**30})

    state.upsert_cluster(cluster("a"))
    state.upsert_cluster(cluster("b"))
    first = value()
    assert isinstance(first[0], frozenset) and {name for name, _ in first[0]} == {"a", "b"}
    state.upsert_cluster(cluster("b"))                 # re-reported as it was
    assert value() == first
    for changed in (cluster("b", ready=False), cluster("b", zone="z2"), cluster("b", cpu=8000)):
        state.upsert_cluster(changed)
        assert value() != first, changed
        state.upsert_cluster(cluster("b"))
        assert value() == first
    state.upsert_cluster(cluster("c"))
    assert value() != first
