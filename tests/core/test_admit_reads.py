"""A refusal of the admit stage sleeps on what the admit stage read (``Plugin.admit_reads``), not on what placement
would have read: in a saturated fleet a gang no single cluster can hold used to wake whenever the most free of one
resource, or the set of clusters passing a place filter, moved anywhere, and its text flipped between an admit and
a place refusal each time (every waiting binding's reason rewritten). Each step is compared with the exhaustive
engine (``Pair``: same admissions, placements and reasons)."""

from __future__ import annotations

from typing import Any

from engine.model import Cluster, Job, JobState, Queue, Task
from engine.plugin import Plugin
from engine.resources import CPU, MEMORY
from tests.core.test_pruned_exact import Pair, _copy
from tests.core.test_wake import GI, NO_PREEMPTION

ONE = "gang needs cpu=8 memory=16Gi in one cluster; no ready cluster has that much free"


def _fleet(pair: Pair) -> None:
    """Most cpu on a, most memory on b and c: the per-resource most free holds the gang below, no cluster does."""
    for name, cpu, memory in (("a", 16_000, 4 * GI), ("b", 2000, 64 * GI), ("c", 2000, 64 * GI)):
        pair.both("upsert_cluster", lambda name=name, cpu=cpu, memory=memory: (
            Cluster(name, allocatable={CPU: cpu, MEMORY: memory}),))
    for q in ("q", "other"):
        pair.both("upsert_queue", lambda q=q: (Queue(q),))


def _job(name: str, queue: str, pods: int, cpu: int, memory: int, at: float) -> Job:
    return Job(f"ns/{name}", name, "ns", queue=queue, submit_time=at, tasks=[Task("t", pods, pods, {CPU: cpu, MEMORY: memory})])


def _submit(pair: Pair, job: Job) -> None:
    pair.both("submit", lambda: (_copy(job),))


def test_a_gang_no_single_cluster_holds_is_refused_at_admit_and_sleeps_through_placement_only_changes() -> None:
    pair = Pair(NO_PREEMPTION)
    _fleet(pair)
    _submit(pair, _job("big", "other", 1, 10_000, GI, 1.0))
    pair.cycle()
    jobs = pair.pruned.state.jobs
    assert jobs["ns/big"].placement == {"a": {"t": 1}}     # 6 cpu left on a, the most in one cluster
    _submit(pair, _job("gang", "q", 2, 4000, 8 * GI, 2.0))
    pair.cycle()
    assert jobs["ns/gang"].pending_reason == ONE
    # big ends: the most free cpu (a: 16) and memory (b, c: 64Gi) each hold the gang's minimum again, so what
    # placement reads moved, but no single cluster holds it: the refusal is the admit stage's, with the same text
    # (before, it became the place stage's "none of the 3 candidate cluster(s) has it free"), and its key sleeps
    pair.now += 1.0
    pair.both("finished", lambda: ("ns/big", True, pair.now))
    pair.cycle()
    assert pair.exhaustive._result.full and pair.exhaustive._result.examined == 1
    assert pair.pruned._result.examined == 0
    assert jobs["ns/gang"].pending_reason == ONE and not pair.pruned._result.reasons
    # a's memory grows to 64Gi: the gang's minimum fits there, its admit read changes, it is admitted
    pair.both("upsert_cluster", lambda: (Cluster("a", allocatable={CPU: 16_000, MEMORY: 64 * GI}),))
    pair.cycle()
    assert pair.pruned._result.examined == 1
    assert jobs["ns/gang"].state is JobState.ADMITTED and jobs["ns/gang"].placement == {"a": {"t": 2}}


class Both(Plugin):
    """A third-party plugin of both stages declaring its verdict reads but no admit reads of its own."""

    name = "both"
    stages = ("admit", "place")

    def verdict_reads(self, job: Job, state: Any) -> Any:
        return (("max", tuple(job.demand.items())),)


class Undeclared(Plugin):
    name = "undeclared"
    stages = ("admit",)


def test_admit_reads_default_to_the_verdict_reads() -> None:
    job = _job("j", "q", 1, 1000, GI, 0.0)
    assert Both({}, None).admit_reads(job, None) == (("max", ((CPU, 1000), (MEMORY, GI))),)
    assert Undeclared({}, None).admit_reads(job, None) is None
