"""Engine core behaviour with tiny inline plugins (built-ins are tested in tests/plugins)."""

from __future__ import annotations

from typing import Any, Optional

from engine.core.scheduler import Engine
from engine.hookspecs import hookimpl
from engine.model import Cluster, Failure, FailureKind, Job, JobState, Queue, Recovery, Refusal, Task
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from engine.resources import parse_resources


class Priority(Plugin):
    name = "t-priority"
    stages = ("order",)

    @hookimpl
    def atoll_job_order(self, job: Job) -> tuple[int]:
        return (-job.priority,)

    @hookimpl
    def atoll_queue_order(self, queue: Queue) -> tuple[int]:
        return (-queue.priority,)


class Quota(Plugin):
    name = "t-quota"
    stages = ("admit",)

    @hookimpl
    def atoll_admit(self, job: Job, state: Any) -> Optional[Refusal]:
        queue = state.queues[job.queue]
        cap = queue.capability or {}
        used = queue.allocated.get("cpu", 0)
        if "cpu" in cap and used + job.demand.get("cpu", 0) > cap["cpu"]:
            return Refusal(f"queue {queue.name} cpu capability exceeded", self.name)
        return None


class Requeue(Plugin):
    name = "t-requeue"
    stages = ("recover",)

    @hookimpl
    def atoll_recover(self, job: Job, failure: Failure) -> Recovery:
        return Recovery(requeue=True, delay=10, exclude_clusters=frozenset({failure.cluster or ""}))


def make_engine(*plugins: Plugin) -> Engine:
    stages: dict[str, list[Plugin]] = {}
    for p in plugins:
        for stage in p.stages:
            stages.setdefault(stage, []).append(p)
    return Engine(Pipeline(stages))


def cluster(name: str, cpu: str) -> Cluster:
    return Cluster(name=name, allocatable=parse_resources({"cpu": cpu, "memory": "100Gi"}))


def job(name: str, cpu: str, queue: str = "q", priority: int = 0, replicas: int = 1) -> Job:
    return Job(id=name, name=name, queue=queue, priority=priority,
               tasks=[Task("worker", replicas, replicas, parse_resources({"cpu": cpu}))])


def test_admits_in_priority_order_and_books_capacity_within_one_cycle() -> None:
    engine = make_engine(Priority({}, None))
    engine.upsert_cluster(cluster("m1", "10"))
    engine.upsert_queue(Queue("q"))
    for name, prio in (("low", 1), ("high", 9), ("mid", 5)):
        engine.submit(job(name, "4", priority=prio))
    result = engine.cycle(0)
    assert [a.job_id for a in result.admitted] == ["high", "mid"]      # 8 of 10 cpu; low does not fit
    assert engine.state.jobs["low"].state is JobState.PENDING
    assert engine.state.jobs["low"].pending_reason == "no ready cluster has room for the whole job (cpu=4)"
    assert "most in one cluster cpu=2" in engine.explain("low")      # the momentary amount: in explain only
    assert engine.state.free("m1")["cpu"] == 2000


def test_incremental_cycle_examines_only_new_jobs() -> None:
    engine = make_engine(Priority({}, None))
    engine.upsert_cluster(cluster("m1", "4"))
    engine.upsert_queue(Queue("q"))
    for i in range(50):
        engine.submit(job(f"j{i}", "4"))
    first = engine.cycle(0)
    # one job admitted, then one job of the (single) verdict key refused: the other 48 share its refusal
    assert first.full and len(first.admitted) == 1 and first.examined == 2
    assert len(first.reasons) == 49 and len(set(first.reasons.values())) == 1
    engine.submit(job("late", "1"))
    second = engine.cycle(1)
    assert not second.full and second.examined == 1 and second.admitted == []


def test_exhaustive_engine_examines_every_job() -> None:
    engine = make_engine(Priority({}, None))
    engine = Engine(engine.pipeline, exhaustive=True)
    engine.upsert_cluster(cluster("m1", "4"))
    engine.upsert_queue(Queue("q"))
    for i in range(50):
        engine.submit(job(f"j{i}", "4"))
    first = engine.cycle(0)
    assert first.full and len(first.admitted) == 1 and first.examined == 50 and len(first.reasons) == 49


def test_release_reopens_the_backlog() -> None:
    engine = make_engine(Priority({}, None))
    engine.upsert_cluster(cluster("m1", "4"))
    engine.upsert_queue(Queue("q"))
    engine.submit(job("a", "4"))
    engine.submit(job("b", "4"))
    assert [a.job_id for a in engine.cycle(0).admitted] == ["a"]
    engine.finished("a")
    # the cluster status has not caught up, but the in-flight booking of a is gone
    assert [a.job_id for a in engine.cycle(1).admitted] == ["b"]


def m1_report(allocated_cpu_milli: int, at: float) -> Cluster:
    """Cluster m1's status as Karmada would report it at time ``at``."""
    report = cluster("m1", "4")
    report.allocated = {"cpu": allocated_cpu_milli} if allocated_cpu_milli else {}
    report.status_time = at
    return report


def engine_with_a_started_on_m1() -> Engine:
    """Job a (4 cpu) admitted at 0 and started at 1 on m1 (4 cpu), no status report since."""
    engine = make_engine()
    engine.upsert_queue(Queue("q"))
    engine.upsert_cluster(cluster("m1", "4"))
    engine.submit(job("a", "4"))
    engine.cycle(0)
    engine.started("a", now=1)
    return engine


def test_inflight_reservation_survives_stale_status_until_newer_report() -> None:
    engine = engine_with_a_started_on_m1()
    engine.upsert_cluster(m1_report(0, at=0.5))                   # taken before a's pods existed
    assert engine.state.free("m1").get("cpu", 0) == 0
    engine.upsert_cluster(m1_report(4000, at=2))
    assert engine.state.free("m1").get("cpu", 0) == 0 and not engine.state.inflight("m1")


def test_a_report_that_already_counted_a_started_job_can_be_redated_to_end_its_reservation() -> None:
    """Karmada writes status only on change: the report taken at 0.8, after a's pods landed but before the
    adapter saw a start (1), is the last one. Re-dated to a horizon past the start it ends the reservation."""
    engine = engine_with_a_started_on_m1()
    engine.upsert_cluster(m1_report(4000, at=0.8))                # counts a's pods, older than a's start
    state = engine.state
    assert state.inflight("m1") and state.free("m1").get("cpu", 0) == 0      # a counted twice
    assert state.reports_to_redate(1.0) == []                 # the start is not before the horizon
    assert state.reports_to_redate(0.7) == []                 # the report is not older than the horizon
    assert state.reports_to_redate(1.5) == ["m1"]
    engine.upsert_cluster(m1_report(4000, at=1.5))                # what the adapter does with it
    assert not state.inflight("m1") and state.reports_to_redate(9.0) == []
    engine.submit(job("b", "4"))
    assert engine.cycle(2).admitted == []                         # a's pods, counted once, still fill m1
    engine.upsert_cluster(m1_report(0, at=3))
    assert [a.job_id for a in engine.cycle(3).admitted] == ["b"]
    engine.upsert_cluster(m1_report(0, at=3.5))                    # b admitted, not started: nothing to re-date
    assert state.inflight("m1") and state.reports_to_redate(100.0) == []
    state.mark_started(state.jobs["b"], 2.0)          # a start older than the report (as adopting a running job)
    assert state.reports_to_redate(3.0) == []         # the report (3.5) is newer than the horizon: never re-dated back
    assert state.reports_to_redate(4.0) == ["m1"]


def test_finished_job_capacity_is_credited_until_a_report_newer_than_its_end() -> None:
    engine = engine_with_a_started_on_m1()
    engine.upsert_cluster(m1_report(4000, at=2))                  # the report counts a's pods
    assert engine.state.free("m1").get("cpu", 0) == 0
    engine.submit(job("b", "4"))
    assert engine.cycle(3).admitted == []
    engine.finished("a", ended_at=5)             # the next report (t=10) would still be 5 s away
    assert engine.state.free("m1")["cpu"] == 4000
    assert [a.job_id for a in engine.cycle(5).admitted] == ["b"]
    assert engine.state.free("m1").get("cpu", 0) == 0          # b's booking uses a's credit
    engine.upsert_cluster(m1_report(4000, at=4))                  # taken before a ended: credit stays
    assert engine.state.credits("m1") and engine.state.free("m1").get("cpu", 0) == 0
    engine.upsert_cluster(m1_report(0, at=6))                     # a's pods gone, b's not yet started
    assert not engine.state.credits("m1") and engine.state.free("m1").get("cpu", 0) == 0


def test_no_credit_without_an_exact_end_or_when_the_report_is_newer_than_the_end() -> None:
    for ended_at in (None, 1.5):
        engine = engine_with_a_started_on_m1()
        engine.upsert_cluster(m1_report(4000, at=2))
        engine.finished("a", ended_at=ended_at)   # unknown end, or one the t=2 report may already show
        assert not engine.state.credits("m1") and engine.state.free("m1").get("cpu", 0) == 0


def test_admit_refusal_reason_is_kept_and_queue_headroom_counted() -> None:
    engine = make_engine(Quota({}, None))
    engine.upsert_cluster(cluster("m1", "100"))
    engine.upsert_queue(Queue("q", capability=parse_resources({"cpu": "6"})))
    engine.submit(job("a", "4"))
    engine.submit(job("b", "4"))
    result = engine.cycle(0)
    assert [a.job_id for a in result.admitted] == ["a"]
    assert result.reasons == {"b": "queue q cpu capability exceeded"}


def test_failure_requeues_with_backoff_and_excludes_cluster() -> None:
    engine = make_engine(Requeue({}, None))
    engine.upsert_queue(Queue("q"))
    engine.upsert_cluster(cluster("m1", "8"))
    engine.upsert_cluster(cluster("m2", "8"))
    engine.submit(job("a", "4"))
    assert engine.cycle(0).admitted[0].placement == {"m1": {"worker": 1}}
    recovery = engine.fail("a", Failure(FailureKind.CLUSTER_LOST, cluster="m1"), now=5)
    assert recovery.requeue
    assert engine.cycle(6).admitted == []                      # backing off until t=15
    again = engine.cycle(15).admitted
    assert again and again[0].placement == {"m2": {"worker": 1}}


def test_unknown_queue_waits_and_is_admitted_once_created() -> None:
    engine = make_engine()
    engine.upsert_cluster(cluster("m1", "8"))
    engine.submit(job("a", "1", queue="later"))
    result = engine.cycle(0)
    assert result.reasons == {"a": "queue 'later' does not exist"}
    engine.upsert_queue(Queue("later"))
    assert [a.job_id for a in engine.cycle(1).admitted] == ["a"]


def test_scale_up_after_admission_is_charged() -> None:
    engine = make_engine()
    engine.upsert_queue(Queue("q"))
    engine.upsert_cluster(cluster("m1", "8"))
    engine.submit(job("a", "1", replicas=2))
    engine.cycle(0)
    engine.update_job(job("a", "1", replicas=6))
    assert engine.state.queues["q"].allocated["cpu"] == 6000
    assert engine.state.free("m1")["cpu"] == 2000


def test_adopted_job_holds_capacity_after_restart() -> None:
    engine = make_engine()
    engine.upsert_queue(Queue("q"))
    engine.upsert_cluster(cluster("m1", "8"))
    engine.adopt(job("old", "6"), {"m1": {"worker": 1}}, admitted_at=0.0)
    engine.submit(job("new", "4"))
    assert engine.cycle(1).admitted == []
    assert engine.state.queues["q"].allocated["cpu"] == 6000
    engine.finished("old")
    assert [a.job_id for a in engine.cycle(2).admitted] == ["new"]
