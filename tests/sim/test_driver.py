"""The event loop around the engine: two-level scheduling, deadlines, cluster loss, nothing lost."""

from __future__ import annotations

import json
import random
from typing import Optional

import pytest

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job, Refusal, Task
from engine.plugin import Plugin
from engine.sim.driver import simulate
from engine.sim.members import Member
from engine.sim.report import build_report
from tests.sim.helpers import PlaceAnywhere, RequeueElsewhere, nodes, pipeline, scenario

TASK = "[{name: worker, replicas: 10, minAvailable: 10, resources: {cpu: \"2\", memory: 2Gi}}]"


def burst(count: int, deadline: str = "", duration: str = "{min: 30s, max: 60s}") -> str:
    extra = f"\n    deadline: {deadline}" if deadline else ""
    return f"""
generators:
  - count: {count}
    namePrefix: job
    submitAt: {{start: 0s, every: 0s}}
    duration: {duration}{extra}
    tasks: {TASK}
"""


def test_kube_default_members_deadlock_when_everything_is_admitted() -> None:
    """Seed 004: pods of many jobs interleave, each job holds part of its gang, none can run."""
    s = scenario(f"clusters: [{{name: m1, nodes: {nodes(4)}}}]\n" + burst(8, deadline="300s"),
                 member="kube-default", seed=3)
    result = simulate(s, pipeline(PlaceAnywhere({}, None)), "admit-all")
    jobs = result.jobs.values()
    partial = [j for j in jobs if j.partial]
    assert len(partial) >= 2
    failed = [j for j in jobs if j.state == "Failed"]
    assert failed and all(j.attempts[-1].outcome == "DeadlineExceeded" for j in failed)
    assert all(j.attempts[-1].start_time is None for j in failed)


def test_volcano_members_never_run_a_partial_gang_even_when_everything_is_admitted() -> None:
    s = scenario(f"clusters: [{{name: m1, nodes: {nodes(4)}}}]\n" + burst(8), member="volcano", seed=3)
    result = simulate(s, pipeline(PlaceAnywhere({}, None)), "admit-all")
    assert all(j.state == "Succeeded" and not j.partial for j in result.jobs.values())
    # at most two 20-cpu gangs fit on 40 cpu at a time
    assert max(sample.running for sample in result.timeline) <= 2


def test_engine_gated_kube_default_does_not_deadlock() -> None:
    """The engine admits against reported capacity plus its own in-flight reservations: no over-admission."""
    s = scenario(f"clusters: [{{name: m1, nodes: {nodes(4)}}}]\n" + burst(8, deadline="900s"),
                 member="kube-default", seed=3)
    result = simulate(s, pipeline(), "engine-default")
    assert all(j.state == "Succeeded" and not j.partial for j in result.jobs.values())


def test_member_gang_binds_all_or_nothing() -> None:
    member = Member("m", {}, [{"cpu": 4000}, {"cpu": 4000}], "volcano", random.Random(1))
    tasks = {"w": Task("w", 3, 3, {"cpu": 2000})}
    member.add("big", {"w": 3}, tasks)
    member.add("small", {"w": 1}, {"w": Task("w", 1, 1, {"cpu": 3000})})
    assert member.schedule() == {"big"}
    assert member.bound("big") == {"w": 3} and member.bound("small") == {}
    assert member.allocated == {"cpu": 6000} and member.allocating == {"cpu": 3000}
    member.remove("big")
    assert member.schedule() == {"small"} and member.allocated == {"cpu": 3000} and not member.allocating


def test_whether_a_portion_could_ever_fit_costs_nodes_plus_replicas_not_their_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """First fit restarted from the first node for every replica: a 60,000-replica job on 2 x 50,000 one-cpu nodes (a
    scenario within the limits) ran ``fits`` ~10^9 times, and `atoll simulate` had not ended after 60 s. Free capacity
    only falls while the portion is laid out, so the first node that fits a task's pod never moves back."""
    from engine.sim import members

    calls = 0
    real = members.fits

    def counting(request: dict[str, int], free: dict[str, int]) -> bool:
        nonlocal calls
        calls += 1
        return real(request, free)

    monkeypatch.setattr(members, "fits", counting)
    member = Member("m", {}, [{"cpu": 1000, "pods": 110}] * 2000, "volcano", random.Random(1))
    tasks = {"a": Task("a", 500, 1, {"cpu": 500}), "b": Task("b", 3000, 1, {"cpu": 1000})}
    assert member.could_ever_fit({"a": 500}, tasks) and member.could_ever_fit({"a": 500, "b": 1750}, tasks)
    assert not member.could_ever_fit({"a": 500, "b": 1751}, tasks) and not member.could_ever_fit({"b": 2001}, tasks)
    assert calls <= 4 * (2000 + 500 + 3000) * 2, calls


def test_kube_default_member_binds_pod_by_pod_and_holds_nodes() -> None:
    member = Member("m", {}, [{"cpu": 4000}], "kube-default", random.Random(1))
    member.add("j", {"w": 3}, {"w": Task("w", 3, 3, {"cpu": 2000})})
    assert member.schedule() == {"j"}
    assert member.bound("j") == {"w": 2} and member.allocated == {"cpu": 4000} and member.allocating == {"cpu": 2000}
    snapshot = member.snapshot(5.0)
    assert (snapshot.allocated, snapshot.allocating, snapshot.status_time) == ({"cpu": 4000}, {"cpu": 2000}, 5.0)


def test_a_cluster_going_notready_kills_its_jobs_and_recover_requeues_them_elsewhere() -> None:
    body = f"""
clusters:
  - {{name: m1, nodes: {nodes(2)}}}
  - {{name: m2, nodes: {nodes(2)}}}
{burst(2, duration="100s")}
events:
  - {{at: 50s, cluster: m1, ready: false}}
  - {{at: 500s, cluster: m1, ready: true}}
"""
    s = scenario(body)
    result = simulate(s, pipeline(RequeueElsewhere({}, None)), "requeue")
    jobs = result.jobs
    lost = [j for j in jobs.values() if any(a.outcome == "ClusterLost" for a in j.attempts)]
    assert len(lost) == 1
    job = lost[0]
    assert job.state == "Succeeded" and len(job.attempts) == 2
    first, second = job.attempts
    assert list(first.placement) == ["m1"] and first.end_time == 50.0
    assert list(second.placement) == ["m2"] and second.admit_time >= 55.0    # after the 5 s backoff
    assert all(j.state == "Succeeded" for j in jobs.values())


def test_without_a_recover_plugin_a_lost_job_fails_but_is_reported() -> None:
    body = f"""
clusters: [{{name: m1, nodes: {nodes(2)}}}]
{burst(1, duration="100s")}
events: [{{at: 50s, cluster: m1, ready: false}}]
"""
    result = simulate(scenario(body), pipeline(), "no-recover")
    job = next(iter(result.jobs.values()))
    assert job.state == "Failed" and job.attempts[0].outcome == "ClusterLost" and "no recover plugin" in job.reason


def test_pods_that_fit_no_node_are_unschedulable_in_the_member() -> None:
    body = f"""
clusters: [{{name: m1, nodes: {nodes(4)}}}]
jobs:
  - {{name: huge-pod, duration: 10s, tasks: [{{name: w, replicas: 1, resources: {{cpu: "16"}}}}]}}
"""
    result = simulate(scenario(body), pipeline(), "plain")
    job = result.jobs["default/huge-pod"]
    assert job.state == "Failed" and job.attempts[0].outcome == "Unschedulable"


def test_nothing_is_lost_jobs_that_never_fit_stay_pending_with_a_reason() -> None:
    body = f"""
clusters: [{{name: m1, nodes: {nodes(2)}}}]
jobs:
  - {{name: fits, duration: 10s, tasks: [{{name: w, replicas: 2, resources: {{cpu: "2"}}}}]}}
  - {{name: too-big, duration: 10s, tasks: [{{name: w, replicas: 30, resources: {{cpu: "2"}}}}]}}
"""
    result = simulate(scenario(body), pipeline(), "plain")
    report = build_report(result)
    states = {j["name"]: j["state"] for j in report["jobs"]}
    assert states == {"fits": "Succeeded", "too-big": "Pending"}
    assert "no ready cluster has room" in result.jobs["default/too-big"].reason
    assert report["summary"]["jobs"] == {"total": 2, "Succeeded": 1, "Failed": 0, "Pending": 1, "Running": 0}
    assert not result.horizon_reached                 # it stopped because nothing could change


def test_finished_job_capacity_is_used_before_the_next_status_tick() -> None:
    """The engine sees a job end (as the controller sees the binding's status) and credits its
    capacity at once, though the cluster's next status report (t=20) would show it later."""
    body = f"""
clusters: [{{name: m1, nodes: {nodes(1)}}}]
jobs:
  - {{name: a, submitAt: 0s, duration: 12s, tasks: [{{name: w, replicas: 5, resources: {{cpu: "2"}}}}]}}
  - {{name: b, submitAt: 1s, duration: 10s, tasks: [{{name: w, replicas: 5, resources: {{cpu: "2"}}}}]}}
"""
    result = simulate(scenario(body, status="10s"), pipeline(), "plain")
    b = result.jobs["default/b"].attempts[0]
    assert result.jobs["default/a"].finish_time == 12.0
    assert b.admit_time == 12.0                       # not 20.0, when the report first shows a gone
    assert result.jobs["default/b"].state == "Succeeded"


def test_same_seed_same_report_different_seed_different_interleaving() -> None:
    def run(seed: int) -> str:
        s = scenario(f"clusters: [{{name: m1, nodes: {nodes(4)}}}]\n" + burst(8, deadline="300s"),
                     member="kube-default", seed=seed)
        report = build_report(simulate(s, pipeline(PlaceAnywhere({}, None)), "admit-all"))
        report["summary"].pop("simulation")
        return json.dumps(report, sort_keys=True)
    assert run(5) == run(5)
    assert run(5) != run(6)


class RetryOnce(Plugin):
    """Refuses each job once with a retry time: exercises engine timers under a schedulePeriod."""

    name = "t-retry-once"
    stages = ("admit",)

    def __init__(self, config: dict, cel: object, where: str = "") -> None:
        super().__init__(config, cel, where)
        self.seen: set[str] = set()

    @hookimpl
    def atoll_admit(self, job: Job, state: FleetState) -> Optional[Refusal]:
        if job.id in self.seen:
            return None
        self.seen.add(job.id)
        return Refusal("not yet", self.name, retry_at=state.now + 0.001)


def test_timers_with_a_schedule_period_and_inexact_float_times_make_progress() -> None:
    """2046.749 + 10 - 2046.749 < 10 in floats: the loop once spun forever there."""
    body = f"""
schedulePeriod: 10s
clusters: [{{name: m1, nodes: {nodes(2)}}}]
jobs:
  - {{name: a, submitAt: 2046.749, duration: 5s, tasks: [{{name: w, replicas: 1, resources: {{cpu: "1"}}}}]}}
  - {{name: b, submitAt: 2050.5, duration: 5s, tasks: [{{name: w, replicas: 1, resources: {{cpu: "1"}}}}]}}
"""
    result = simulate(scenario(body), pipeline(RetryOnce({}, None)), "retry")
    assert all(j.state == "Succeeded" for j in result.jobs.values())
    assert result.jobs["default/a"].attempts[0].admit_time == 2056.749      # next cycle after the period


def test_a_gang_that_fits_the_cluster_total_but_not_its_nodes_is_unschedulable() -> None:
    """9 cpu of pods fit 10 cpu of cluster, but two 5-cpu nodes host only one 3-cpu pod each... twice."""
    member = Member("m", {}, [{"cpu": 5000}, {"cpu": 5000}], "volcano", random.Random(1))
    tasks = {"w": Task("w", 3, 3, {"cpu": 3000})}
    assert not member.could_ever_fit({"w": 3}, tasks)
    assert member.could_ever_fit({"w": 2}, tasks)
    body = f"""
clusters: [{{name: m1, nodes: [{{count: 2, allocatable: {{cpu: "5"}}}}]}}]
jobs:
  - {{name: j, duration: 10s, tasks: [{{name: w, replicas: 3, resources: {{cpu: "3"}}}}]}}
"""
    result = simulate(scenario(body), pipeline(), "plain")
    attempt = result.jobs["default/j"].attempts[0]
    assert attempt.outcome == "Unschedulable" and "no node of m1" in attempt.message


def test_a_deadlock_without_deadlines_ends_the_run_and_is_reported() -> None:
    s = scenario(f"clusters: [{{name: m1, nodes: {nodes(4)}}}]\n" + burst(8), member="kube-default", seed=3)
    result = simulate(s, pipeline(PlaceAnywhere({}, None)), "admit-all")
    assert not result.horizon_reached and result.end_time < 3600
    stuck = [j for j in result.jobs.values() if j.state == "Pending"]
    assert stuck and all("gang never started (pods bound: worker " in j.reason for j in stuck)
    assert all(j.state in ("Succeeded", "Pending") for j in result.jobs.values())


def test_pod_slots_count_in_the_engine_as_in_the_controller() -> None:
    """A job carries one ``pods`` slot per pod (engine.kube.translate.pod_requests adds it in the
    controller): the engine admits no more pods than a member has slots, so none waits in the member.
    Here 2 nodes x 2 slots: the second 4-pod job waits in the engine (cpu alone would fit both)."""
    body = """
clusters: [{name: m1, nodes: [{count: 2, allocatable: {cpu: "10", memory: 10Gi, pods: "2"}}]}]
jobs:
  - {name: a, duration: 10s, tasks: [{name: w, replicas: 4, resources: {cpu: "1"}}]}
  - {name: b, duration: 10s, tasks: [{name: w, replicas: 4, resources: {cpu: "1"}}]}
"""
    result = simulate(scenario(body), pipeline(), "plain")
    a, b = (result.jobs[f"default/{n}"].attempts for n in "ab")
    assert [x.outcome for x in a + b] == ["Succeeded", "Succeeded"]
    assert b[0].admit_time == 10.0 and b[0].start_time == 10.0      # admitted when a's slots were free
    assert a[0].start_time == a[0].admit_time == 0.0


def test_nodes_without_a_pods_allocatable_get_the_kubelet_default() -> None:
    s = scenario("clusters: [{name: m1, nodes: [{count: 2, allocatable: {cpu: \"4\"}}]}]")
    assert s.clusters[0].allocatable == {"cpu": 8000, "pods": 220}
    m = Member("m1", {}, s.clusters[0].nodes, "volcano", random.Random(0))
    assert m._request(Task("w", 1, 1, {"cpu": 1000, "pods": 1})) == {"cpu": 1000, "pods": 1}   # one slot, not two


class FailsOnce(Plugin):
    """Raises the first time it judges job ``b`` (a third-party plugin's momentary bug)."""

    name = "t-fails-once"
    stages = ("admit",)

    def __init__(self, config: dict, cel: object, where: str = "") -> None:
        super().__init__(config, cel, where)
        self.failed = False

    @hookimpl
    def atoll_admit(self, job: Job, state: FleetState) -> Optional[Refusal]:
        if job.name == "b" and not self.failed:
            self.failed = True
            raise ValueError("momentary")
        return None


def test_a_plugin_error_fails_one_judging_of_one_job_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.core import contain
    monkeypatch.setattr(contain, "STRICT", False)
    body = f"""
clusters: [{{name: m1, nodes: {nodes(2)}}}]
jobs:
  - {{name: a, submitAt: 0, duration: 100s, tasks: [{{name: w, replicas: 1, resources: {{cpu: "1"}}}}]}}
  - {{name: b, submitAt: 0, duration: 5s, tasks: [{{name: w, replicas: 1, resources: {{cpu: "1"}}}}]}}
"""
    result = simulate(scenario(body), pipeline(PlaceAnywhere({}, None), FailsOnce({}, None)), "fails-once")
    assert all(j.state == "Succeeded" for j in result.jobs.values())
    assert result.jobs["default/a"].attempts[0].admit_time == 0
    # examined again RETRY_AFTER later (nothing freed before: a runs 100 s), not lost, not failed for good
    assert result.jobs["default/b"].attempts[0].admit_time == 60
    assert result.plugin_errors == 1
    assert build_report(result)["summary"]["simulation"]["pluginErrors"] == 1
