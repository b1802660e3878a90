"""A queue keeps its turn through refusals without a key per job (``Engine._bound_turn``).

With an order plugin keying queues by their next job (drf's progressive filling), the candidate loop used to key
the top queue again after every refusal. When every such plugin declares ``Plugin.keys_rise_with_demand``, one
key by a candidate demanding the most that the next jobs demand bounds all their keys: while it is below the
next queues' keys, those jobs are served without a key each. tests/core/test_pruned_exact.py compares whole runs
with the exhaustive engine, which keys the queue by every job.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest import MonkeyPatch

from engine.core.backlog import Backlog
from engine.core.sources import ListSource
from engine.core.scheduler import Engine
from engine.model import Cluster, Job, JobState, Queue, Task
from engine.resources import CPU, GPU, MEMORY
from plugins.drf import Drf
from tests.core.test_queue_keys import GI, _engine

DEMANDS = st.fixed_dictionaries({CPU: st.integers(0, 8), MEMORY: st.integers(0, 8), GPU: st.integers(0, 2)})


def _most(demands: list[dict[str, int]]) -> dict[str, int]:
    most: dict[str, int] = {}
    for demand in demands:
        for name, amount in demand.items():
            if amount > most.get(name, 0):
                most[name] = amount
    return most


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("add", "add", "remove", "ask")), st.integers(0, 30),
                          st.sampled_from("ab"), DEMANDS), max_size=80))
def test_most_demand_is_the_most_a_pending_job_of_the_queue_demands(ops: list) -> None:
    """Kept while shapes join, found again when one leaves: always the most over the queue's jobs now."""
    books, jobs = Backlog(), {}
    for op, n, queue, demand in ops:
        job_id = f"ns/j{n}"
        if op == "add" and job_id not in jobs:
            job = jobs[job_id] = Job(id=job_id, name=f"j{n}", namespace="ns", queue=queue,
                                     tasks=[Task("w", 1, 1, dict(demand))])
            job.sort_key, job.seq = (0,), n
            books.add(job, (queue, job.shape))
        elif op == "remove" and job_id in jobs:
            books.remove(jobs.pop(job_id))
        for name in "ab":
            if op == "ask" or name in books._most:
                assert books.most_demand(name, jobs) == _most([j.demand for j in jobs.values() if j.queue == name])


def test_a_list_source_tells_the_most_its_next_jobs_demand() -> None:
    engine, _ = _engine()
    jobs = [Job(id=f"ns/j{i}", name=f"j{i}", queue="a", tasks=[Task("w", 1, 1, {CPU: c, GPU: g})])
            for i, (c, g) in enumerate(((1, 0), (5, 0), (2, 1), (3, 0)))]
    source = ListSource(engine, jobs, 0.0)
    assert source.position == 0 and source.most_ahead(2) == ({CPU: 5}, 2)
    assert source.peek() is jobs[0] and source.position == 0          # peeked, not handed out
    assert source.take() is jobs[0] and source.position == 1
    assert source.most_ahead(8) == ({CPU: 5, GPU: 1}, 9)
    source.peek()
    assert source.most_ahead(1) == ({CPU: 5}, 2)
    for _ in range(3):
        source.take()
    assert source.take() is None and source.peek() is None and source.position == 4
    assert source.most_ahead(8) == ({}, 12)


def _refused_run(engine: Engine) -> None:
    """Queue a (closed: every job refused) holds 40 jobs of different sizes, each keyed below b by its next job;
    b's two jobs fit one cluster each."""
    engine.state.queues["a"].open = False
    for i in range(40):
        engine.submit(Job(id=f"ns/a{i}", name=f"a{i}", namespace="ns", queue="a", submit_time=float(i),
                          tasks=[Task("w", 1, 1, {CPU: 100 + 50 * i, MEMORY: GI})]))
    for i, cpu in enumerate((7000, 6000)):
        engine.submit(Job(id=f"ns/b{i}", name=f"b{i}", namespace="ns", queue="b", submit_time=100.0 + i,
                          tasks=[Task("w", 1, 1, {CPU: cpu, MEMORY: GI})]))


def _exhaustive() -> Engine:
    """The same engine as ``_engine`` gives, examining every job on its own (the reference)."""
    engine, _ = _engine()
    reference = Engine(engine.pipeline, exhaustive=True)
    for cluster in engine.state.clusters.values():
        reference.upsert_cluster(Cluster(cluster.name, allocatable=dict(cluster.allocatable)))
    for queue in engine.state.queues.values():
        reference.upsert_queue(Queue(queue.name, parent=queue.parent, weight=queue.weight))
    return reference


def _decisions(engine: Engine) -> tuple:
    jobs = sorted(engine.state.jobs.values(), key=lambda j: j.id)
    return tuple((j.id, j.state, j.placement, j.pending_reason) for j in jobs)


def test_a_queue_passing_refusals_is_keyed_once_per_bound_not_per_job() -> None:
    engine, calls = _engine()
    assert engine.pipeline.queue_keys_bounded
    _refused_run(engine)
    result = engine.cycle(1.0)
    reference = _exhaustive()                    # keys the queue by every job
    _refused_run(reference)
    assert [a.job_id for a in reference.cycle(1.0).admitted] == [a.job_id for a in result.admitted] == ["ns/b0", "ns/b1"]
    assert _decisions(engine) == _decisions(reference)
    assert all(engine.state.jobs[f"ns/a{i}"].pending_reason for i in range(40))
    asked = list(calls).count("a")
    assert asked <= 8, calls                     # bounds over 8, 16, 32 jobs ahead; without them 41 keys


def test_without_the_declaration_the_queue_is_keyed_by_every_job(monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(Drf, "keys_rise_with_demand", lambda self: False)
    engine, calls = _engine()
    assert not engine.pipeline.queue_keys_bounded
    _refused_run(engine)
    engine.cycle(1.0)
    assert list(calls).count("a") >= 40
    assert all(j.state is JobState.PENDING for j in engine.state.jobs.values() if j.queue == "a")


def _turn_run(engine: Engine, big_at: int) -> None:
    """Queue a: 30 small jobs pinned to a region no cluster has (refused), and one job of 7.5 cpu, the
    ``big_at``-th in a's order, whose key rises above b's (one job of 7 cpu): the exhaustive loop gives b the turn
    there, so b's job is placed first (binpack: on m0) and a's big one next (on m1)."""
    for i in range(30):
        engine.submit(Job(id=f"ns/a{i}", name=f"a{i}", namespace="ns", queue="a", submit_time=float(i),
                          labels={"atoll.dev/region": "nowhere"}, tasks=[Task("w", 1, 1, {CPU: 100 + 10 * i})]))
    engine.submit(Job(id="ns/a-big", name="a-big", namespace="ns", queue="a", submit_time=big_at - 0.5,
                      tasks=[Task("w", 1, 1, {CPU: 7500})]))
    engine.submit(Job(id="ns/b0", name="b0", namespace="ns", queue="b", submit_time=100.0,
                      tasks=[Task("w", 1, 1, {CPU: 7000})]))


@pytest.mark.parametrize("keyed", (True, False))
@pytest.mark.parametrize("big_at", range(1, 31))
def test_a_job_keyed_above_the_next_queue_ends_the_turn_where_it_always_did(big_at: int, keyed: bool) -> None:
    """Wherever that job stands (inside or at the edge of a bound's jobs), the bound over the jobs ahead
    counts it: the turn ends before it, as the exhaustive engine's does. Also when the engine keeps no backlog
    by verdict key (a policy whose plugins declare none: every job examined on its own)."""
    engine, _ = _engine()
    if not keyed:
        engine._keyed = False
        engine._backlog.clear()
    _turn_run(engine, big_at)
    admitted = [(a.job_id, a.placement) for a in engine.cycle(1.0).admitted]
    reference = _exhaustive()
    _turn_run(reference, big_at)
    assert admitted == [(a.job_id, a.placement) for a in reference.cycle(1.0).admitted]
    assert [job_id for job_id, _ in admitted] == ["ns/b0", "ns/a-big"]
    assert _decisions(engine) == _decisions(reference)
