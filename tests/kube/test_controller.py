"""Controller decisions with real-shaped objects and tiny test plugins (no API server)."""

from __future__ import annotations

from typing import Any, Optional

from engine.hookspecs import hookimpl
from engine.kube import plan
from engine.kube.controller import Controller
from engine.kube.failures import UNSCHEDULED_GRACE
from engine.kube.plan import Event, Patch
from engine.model import Failure, Job, JobState, Recovery
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from tests.core.test_scheduler import Priority as ByPriority
from tests.kube import objects as o


class Requeue(Plugin):
    name = "t-requeue"
    stages = ("recover",)

    @hookimpl
    def atoll_recover(self, job: Job, failure: Failure) -> Recovery:
        return Recovery(requeue=True, delay=5, exclude_clusters=frozenset({failure.cluster or ""}),
                        reason=f"requeued after {failure.kind.value}")


def controller(*plugins: Plugin, mode: str = "gate") -> Controller:
    stages: dict[str, list[Plugin]] = {}
    for p in plugins:
        for stage in p.stages:
            stages.setdefault(stage, []).append(p)
    return Controller(Pipeline(stages), mode=mode)


def feed(ctl: Controller, *objs: dict[str, Any]) -> None:
    for obj in objs:
        kind = obj["kind"]
        if kind == "Cluster":
            ctl.on_cluster("ADDED", obj, None, 0.0)
        elif kind == "Queue":
            ctl.on_queue("ADDED", obj, None)
        elif kind == "PriorityClass":
            ctl.on_priority_class("ADDED", obj, None)
        elif kind in ("ResourceBinding", "ClusterResourceBinding"):
            ctl.on_binding("ADDED", obj, ctl.bindings.get(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"))
        else:
            ctl.on_template("ADDED", obj, None)


def patches(items: list[Patch | Event], why: Optional[str] = None) -> list[Patch]:
    return [i for i in items if isinstance(i, Patch) and (why is None or i.why == why)]


def events(items: list[Patch | Event], reason: str) -> list[Event]:
    return [i for i in items if isinstance(i, Event) and i.reason == reason]


def test_paused_binding_is_admitted_with_one_merge_patch() -> None:
    ctl = controller()
    job = o.vcjob("train")
    feed(ctl, o.cluster("m1"), job, o.binding(job))
    items = ctl.step(1_800_000_000.0)
    (p,) = patches(items, "admit")
    assert p.content_type == "application/merge-patch+json"
    assert p.ref == plan.BindingRef("train-job", "team-a", "rb-train-job")
    assert p.body == {"metadata": {"annotations": {"atoll.dev/queue": "default",
                                                   "atoll.dev/admitted-at": "2027-01-15T08:00:00.000000Z",
                                                   "atoll.dev/pending-reason": None}},
                      "spec": {"suspension": {"scheduling": False}}}
    (ev,) = events(items, "Admitted")
    assert ev.involved["kind"] == "ResourceBinding" and ev.involved["name"] == "train-job"
    assert ctl.engine.state.jobs["team-a/train-job"].state is JobState.ADMITTED
    assert ctl.step(1_800_000_001.0) == []           # nothing changed: nothing written


def test_job_priority_orders_admission_and_the_waiting_job_gets_a_reason() -> None:
    ctl = controller(ByPriority({}, None))
    low, high = o.batch_job("low", parallelism=40, pc="low"), o.batch_job("high", parallelism=40, pc="high")
    feed(ctl, o.priority_class("low", 1), o.priority_class("high", 100), o.cluster("m1", cpu="64"),
         low, high, o.binding(low, created="2026-11-22T21:00:00Z"), o.binding(high, created="2026-11-22T21:00:05Z"))
    items = ctl.step(100.0)
    assert [p.ref.name for p in patches(items, "admit")] == ["high-job"]
    (pending,) = patches(items, "pending")
    assert pending.ref.name == "low-job"
    assert "no ready cluster has room" in pending.body["metadata"]["annotations"]["atoll.dev/pending-reason"]


def test_restart_adopts_resumed_bindings_and_admits_nothing_twice() -> None:
    ctl = controller()
    running, waiting = o.batch_job("running", parallelism=40), o.batch_job("waiting", parallelism=40)
    resumed = o.binding(running, paused=False, clusters=["m1"],
                        annotations={"atoll.dev/admitted-at": "2026-11-22T21:00:00.000000Z"})
    feed(ctl, o.cluster("m1", cpu="64"), running, waiting, resumed, o.binding(waiting))
    items = ctl.step(100.0)
    assert patches(items, "admit") == []              # the adopted job still holds 40 of the 64 cpus
    job = ctl.engine.state.jobs["team-a/running-job"]
    assert job.state is JobState.ADMITTED and job.placement == {"m1": {"job": 40}}
    assert ctl.engine.state.queues["default"].allocated["cpu"] == 40_000


def test_finished_job_releases_capacity_for_the_next() -> None:
    ctl = controller()
    first, second = o.batch_job("first", parallelism=40), o.batch_job("second", parallelism=40)
    feed(ctl, o.cluster("m1", cpu="64"), first, second, o.binding(first, created="2026-11-22T21:00:00Z"),
         o.binding(second, created="2026-11-22T21:00:01Z"))
    assert [p.ref.name for p in patches(ctl.step(1.0), "admit")] == ["first-job"]
    done = o.batch_job("first", parallelism=40, rv="2",
                       status={"succeeded": 40, "conditions": [{"type": "Complete", "status": "True"}]})
    ctl.on_template("MODIFIED", done, first)
    items = ctl.step(2.0)
    assert [p.ref.name for p in patches(items, "admit")] == ["second-job"]
    assert events(items, "Finished")
    assert ctl.engine.state.jobs["team-a/first-job"].state is JobState.SUCCEEDED


def test_scale_up_after_admission_is_charged() -> None:
    ctl = controller()
    d = o.deployment("web", replicas=2, cpu="1")
    feed(ctl, o.cluster("m1"), d, o.binding(d))
    ctl.step(1.0)
    bigger = o.deployment("web", replicas=6, cpu="1")
    bigger["metadata"]["resourceVersion"] = "2"
    ctl.on_template("MODIFIED", bigger, d)
    ctl.step(2.0)
    assert ctl.engine.state.queues["default"].allocated["cpu"] == 6000


def test_bad_template_is_kept_visible_and_picked_up_once_fixed() -> None:
    ctl = controller()
    bad = o.vcjob("bad")
    bad["spec"]["tasks"][0]["template"]["spec"]["containers"] = []
    feed(ctl, o.cluster("m1"), bad, o.binding(bad))
    items = ctl.step(1.0)
    (p,) = patches(items, "pending")
    assert "Job team-a/bad: spec.tasks[0].template.spec.containers" in p.body["metadata"]["annotations"][
        "atoll.dev/pending-reason"]
    assert events(items, "InvalidWorkload")[0].type == "Warning"
    assert "team-a/bad-job" not in ctl.engine.state.jobs and "team-a/bad-job" in ctl.invalid
    assert ctl.step(2.0) == []                       # reported once, not on every step
    good = o.vcjob("bad", rv="2")
    ctl.on_template("MODIFIED", good, bad)
    assert [p.ref.name for p in patches(ctl.step(3.0), "admit")] == ["bad-job"]


def test_unmanaged_kinds_and_unpaused_unknown_are_not_admitted() -> None:
    ctl = controller()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "team-a", "uid": "u"}}
    feed(ctl, o.cluster("m1"), cm, o.binding(cm))
    assert ctl.step(1.0) == [] and not ctl.engine.state.jobs


def test_cluster_not_ready_requeues_then_readmits_elsewhere_with_reschedule() -> None:
    ctl = controller(Requeue({}, None))
    job = o.batch_job("j", parallelism=4)
    feed(ctl, o.cluster("m1"), o.cluster("m2"), job, o.binding(job))
    (admit,) = patches(ctl.step(10.0), "admit")
    placed = o.binding(job, paused=False, clusters=["m1"], rv="11")
    ctl.on_binding("MODIFIED", placed, ctl.bindings["team-a/j-job"])
    ctl.step(11.0)
    ctl.on_cluster("MODIFIED", o.cluster("m1", ready=False), o.cluster("m1"), 12.0)
    items = ctl.step(12.0)
    (requeue,) = patches(items, "requeue")
    assert requeue.body["spec"] == {"suspension": {"scheduling": True}, "clusters": None}
    assert requeue.body["metadata"]["annotations"]["atoll.dev/admitted-at"] is None
    assert events(items, "Requeued")[0].type == "Warning"
    job_state = ctl.engine.state.jobs["team-a/j-job"]
    assert job_state.state is JobState.PENDING and job_state.excluded_clusters == {"m1"}
    assert patches(ctl.step(13.0), "admit") == []     # backoff: not before t=17
    (again,) = patches(ctl.step(17.5), "admit")
    assert again.body["spec"]["rescheduleTriggeredAt"] == "1970-01-01T00:00:18Z"
    assert ctl.engine.state.jobs["team-a/j-job"].placement == {"m2": {"job": 4}}


def test_resumed_but_unschedulable_fails_into_recovery() -> None:
    ctl = controller(Requeue({}, None))
    job = o.batch_job("j", parallelism=1)
    feed(ctl, o.cluster("m1"), job, o.binding(job))
    ctl.step(1000.0)
    cond = {"type": "Scheduled", "status": "False", "reason": "NoClusterFit",
            "message": "0/2 clusters are available", "lastTransitionTime": "1970-01-01T00:16:41Z"}
    failed = o.binding(job, paused=False, rv="12", conditions=[cond])
    ctl.on_binding("MODIFIED", failed, ctl.bindings["team-a/j-job"])
    items = ctl.step(1001.0)
    assert patches(items, "requeue") and "NoClusterFit" in events(items, "Requeued")[0].message


def test_bind_mode_writes_spec_clusters_for_atoll_scheduled_bindings() -> None:
    ctl = controller(mode="bind")
    job = o.vcjob("v", tasks=[("w", 3, None, "1")])
    feed(ctl, o.cluster("m1"), job, o.binding(job, paused=False, scheduler="atoll"))
    (p,) = patches(ctl.step(5.0), "bind")
    assert p.body["spec"]["clusters"] == [{"name": "m1", "replicas": 3}]
    assert p.body["metadata"]["annotations"]["atoll.dev/clusters"] == "m1"


def test_bind_mode_a_cluster_being_deleted_loses_its_jobs_and_gets_no_new_ones() -> None:
    """Karmada deletes a Cluster only once no binding lists it in spec.clusters, and karmada-scheduler never
    moves bindings Atoll places: Atoll must clear them (requeue) and place elsewhere, or the deletion hangs."""
    ctl = controller(Requeue({}, None), mode="bind")
    job = o.vcjob("v", tasks=[("w", 3, None, "1")])
    feed(ctl, o.cluster("m1"), job, o.binding(job, paused=False, scheduler="atoll"))
    (p,) = patches(ctl.step(5.0), "bind")
    ctl.on_binding("MODIFIED", o.binding(job, paused=False, scheduler="atoll", clusters=["m1"], rv="12"),
                   ctl.bindings["team-a/v-job"])
    ctl.step(6.0)
    deleting = o.cluster("m1")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z"     # Ready=True still
    ctl.on_cluster("MODIFIED", deleting, o.cluster("m1"), 7.0)
    ctl.on_cluster("ADDED", o.cluster("m2"), None, 7.0)
    (requeue,) = patches(ctl.step(7.0), "requeue")
    assert requeue.body["spec"]["clusters"] is None
    (again,) = patches(ctl.step(13.0), "bind")                  # after the backoff, on m2 only
    assert again.body["spec"]["clusters"] == [{"name": "m2", "replicas": 3}]


def test_a_restart_during_a_cluster_deletion_requeues_its_jobs() -> None:
    """The new leader first sees the Cluster already being deleted: no Ready -> NotReady transition will come."""
    ctl = controller(Requeue({}, None), mode="bind")
    job = o.vcjob("v", tasks=[("w", 3, None, "1")])
    deleting = o.cluster("m1")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    placed = o.binding(job, paused=False, scheduler="atoll", clusters=["m1"],
                       annotations={plan.ADMITTED_ANNOTATION: "2026-11-23T09:00:00.000000Z"})
    feed(ctl, deleting, o.cluster("m2"), job, placed)
    (requeue,) = patches(ctl.step(5.0), "requeue")
    assert requeue.ref.name == "v-job" and requeue.body["spec"]["clusters"] is None


def test_bind_mode_restart_writes_a_scheduled_condition_the_dead_controller_left_unwritten() -> None:
    """Killed between the spec patch (spec.clusters) and the status write: the next leader adopts the job and
    writes Scheduled=True for the binding's generation; one already written is left alone."""
    ctl = controller(mode="bind")
    a, b = o.vcjob("a", tasks=[("w", 1, None, "1")]), o.vcjob("b", tasks=[("w", 1, None, "1")])
    note = {plan.ADMITTED_ANNOTATION: "2026-11-22T21:00:01.000000Z"}
    unwritten = o.binding(a, paused=False, scheduler="atoll", clusters=["m1"], annotations=note)
    unwritten["metadata"]["generation"] = 2
    written = o.binding(b, paused=False, scheduler="atoll", clusters=["m1"], annotations=note,
                        conditions=[{"type": "Scheduled", "status": "True"}])
    written["metadata"]["generation"] = 2
    written["status"]["schedulerObservedGeneration"] = 2
    feed(ctl, o.cluster("m1"), a, b, unwritten, written)
    items = ctl.step(5.0)
    (p,) = patches(items, "bind-status")
    assert p.ref.name == "a-job" and p.subresource == "status"
    assert p.body["status"]["schedulerObservedGeneration"] == 2
    assert [c["type"] for c in p.body["status"]["conditions"]] == ["Scheduled"]
    assert patches(items, "bind") == []                         # adopted, not placed again


def test_an_unforeseen_error_on_one_binding_does_not_stop_the_others(monkeypatch: Any) -> None:
    ctl = controller()
    bad, good = o.batch_job("bad"), o.batch_job("good")
    feed(ctl, o.cluster("m1"), bad, good, o.binding(bad), o.binding(good))
    original = ctl._sync

    def flaky(key: str, now: float, out: list[Patch | Event]) -> None:
        if key == "team-a/bad-job":
            raise RuntimeError("boom")
        original(key, now, out)
    monkeypatch.setattr(ctl, "_sync", flaky)
    assert [p.ref.name for p in patches(ctl.step(1.0), "admit")] == ["good-job"]


def test_member_job_failure_from_aggregated_status_is_acted_on_once() -> None:
    ctl = controller(Requeue({}, None))
    j = o.batch_job("j", parallelism=1)
    feed(ctl, o.cluster("m1"), o.cluster("m2"), j, o.binding(j))
    ctl.step(10.0)
    failed = o.binding(j, paused=False, clusters=["m1"], rv="12")
    failed["status"]["aggregatedStatus"] = [{"clusterName": "m1", "applied": True, "status": {
        "failed": 1, "conditions": [{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded",
                                     "lastTransitionTime": "2026-11-22T22:00:00Z"}]}}]
    ctl.on_binding("MODIFIED", failed, ctl.bindings["team-a/j-job"])
    items = ctl.step(11.0)
    assert patches(items, "requeue") and "JobFailed" in events(items, "Requeued")[0].message
    assert ctl.engine.state.jobs["team-a/j-job"].excluded_clusters == {"m1"}
    again = dict(failed, metadata={**failed["metadata"], "resourceVersion": "13"})
    ctl.on_binding("MODIFIED", again, failed)
    assert patches(ctl.step(12.0), "requeue") == []      # the same failure is not acted on twice


def test_the_default_policy_runs_with_its_preempt_stage_and_lends_guarantees() -> None:
    """The Kubernetes adapter evicts (engine/kube/eviction.py): the preempt stage runs, idle guarantees are lent."""
    from engine.policy import load_policy
    from tests.core.test_preempt import ROOT_POLICY

    policy = load_policy(ROOT_POLICY)
    ctl = Controller(policy.pipeline)
    assert ctl.engine.pipeline.stages["preempt"] and ctl.engine.pipeline.has_preempt
    capacity = next(p for p in ctl.engine.pipeline.stages["admit"] if p.name == "capacity")
    assert getattr(capacity, "guarantees") is False
def test_a_job_larger_than_the_whole_fleet_waits_with_a_warning() -> None:
    """It cannot run until the fleet grows: a Warning, unlike a job that only waits its turn (Normal)."""
    from plugins.capacity import Capacity
    ctl = controller(Capacity({}, None))
    huge, wide = o.batch_job("huge", parallelism=1, cpu="100"), o.batch_job("wide", parallelism=1, cpu="40")
    later = o.batch_job("later", parallelism=1, cpu="40")
    feed(ctl, o.cluster("m1", cpu="64"), huge, wide, later, o.binding(huge), o.binding(wide),
         o.binding(later, created="2026-11-22T21:00:05Z"))
    items = ctl.step(1.0)
    kinds = {e.involved["name"]: e.type for e in events(items, "Pending")}
    assert kinds["huge-job"] == "Warning" and kinds["later-job"] == "Normal", kinds
    assert all(t == "Normal" for n, t in kinds.items() if n != "huge-job"), kinds


def test_a_failed_write_is_reissued_only_while_the_engine_still_means_it() -> None:
    """A requeue that failed while the API was away must not pause a binding adopted as running since."""
    ctl = controller(Requeue({}, None))
    j = o.batch_job("j", parallelism=1)
    feed(ctl, o.cluster("m1"), j, o.binding(j))
    (admit,) = patches(ctl.step(1.0), "admit")
    ctl.retry_later(admit)                                   # the admission failed: still wanted
    assert patches(ctl.step(2.0), "admit") == [admit]
    stale = Patch(admit.ref, plan.requeue_patch("default", "x"), "requeue")
    ctl.retry_later(stale)                                   # a requeue from before: the job holds now
    assert patches(ctl.step(3.0), "requeue") == []
    ctl.on_binding("DELETED", None, ctl.bindings["team-a/j-job"])
    ctl.step(4.0)
    ctl.retry_later(admit)                                   # the binding is gone: nothing to write
    assert patches(ctl.step(5.0)) == []


def test_a_transient_scheduler_error_is_left_to_karmada_scheduler_to_retry() -> None:
    """SchedulerError (karmada-scheduler could not write, e.g. its API server restarting) after the resume is
    not the job's failure: karmada-scheduler retries it. Only one lasting past the grace period counts."""
    ctl = controller(Requeue({}, None))
    job = o.batch_job("j", parallelism=1)
    feed(ctl, o.cluster("m1"), job, o.binding(job))
    ctl.step(1000.0)
    cond = {"type": "Scheduled", "status": "False", "reason": "SchedulerError",
            "message": "Patch ...: connection refused", "lastTransitionTime": "1970-01-01T00:16:41Z"}
    ctl.on_binding("MODIFIED", o.binding(job, paused=False, rv="12", conditions=[cond]), ctl.bindings["team-a/j-job"])
    assert patches(ctl.step(1001.0), "requeue") == []
    late = dict(cond, lastTransitionTime="1970-01-01T00:20:00Z")   # appeared long after the resume (at 1200)
    ctl.on_binding("MODIFIED", o.binding(job, paused=False, rv="13", conditions=[late]), ctl.bindings["team-a/j-job"])
    assert patches(ctl.step(1200.0 + UNSCHEDULED_GRACE - 1), "requeue") == []     # e.g. we were frozen meanwhile
    assert patches(ctl.step(1200.0 + UNSCHEDULED_GRACE + 1), "requeue")


def test_a_lost_cluster_requeues_only_jobs_that_run_there() -> None:
    """Gate mode: karmada-scheduler may place a job elsewhere than the engine planned; spec.clusters is where it
    runs. A job the engine planned on m1 but Karmada put on m2 keeps running when m1 is lost."""
    ctl = controller(Requeue({}, None))
    j = o.batch_job("j", parallelism=1)
    feed(ctl, o.cluster("m1"), o.cluster("m2", cpu="8"), j, o.binding(j))
    ctl.step(1.0)
    assert set(ctl.engine.state.jobs["team-a/j-job"].placement or {}) == {"m1"}
    ctl.on_binding("MODIFIED", o.binding(j, paused=False, clusters=["m2"], rv="12"), ctl.bindings["team-a/j-job"])
    ctl.step(2.0)
    ctl.on_cluster("DELETED", None, o.cluster("m1"), 3.0)
    assert patches(ctl.step(3.0), "requeue") == []


def test_a_finish_elsewhere_rewrites_no_waiting_job() -> None:
    """Reasons name the need and the constraint, not the free amount of the moment: when capacity moves but
    a waiting job still cannot fit, its binding gets no new pending-reason patch and no new Event."""
    from engine.policy import load_policy
    from tests.core.test_wake import NO_PREEMPTION

    ctl = Controller(load_policy(NO_PREEMPTION).pipeline)
    big, small = o.batch_job("big", parallelism=40), o.batch_job("small", parallelism=20)
    waiting = o.batch_job("waiting", parallelism=40)
    feed(ctl, o.cluster("m1", cpu="64"), big, small, waiting, o.binding(big, created="2026-11-22T21:00:00Z"),
         o.binding(small, created="2026-11-22T21:00:01Z"), o.binding(waiting, created="2026-11-22T21:00:02Z"))
    items = ctl.step(1.0)
    assert sorted(p.ref.name for p in patches(items, "admit")) == ["big-job", "small-job"]
    (pending,) = patches(items, "pending")
    reason = pending.body["metadata"]["annotations"]["atoll.dev/pending-reason"]
    assert reason == "job requests cpu 40, more than the fleet has free"
    done = o.batch_job("small", parallelism=20, rv="2",
                       status={"succeeded": 20, "conditions": [{"type": "Complete", "status": "True"}]})
    ctl.on_template("MODIFIED", done, small)
    assert ctl.engine.state.fleet_free["cpu"] == 4_000
    items = ctl.step(2.0)                      # 24 cpu free now, 40 needed: still waiting, for the same reason
    assert events(items, "Finished") and ctl.engine.state.fleet_free["cpu"] == 24_000
    assert patches(items, "pending") == [] and events(items, "Pending") == []
    assert ctl.engine.state.jobs["team-a/waiting-job"].pending_reason == reason


# -- bindings addressed to schedulerName atoll that the webhook did not pause (created while it was down, with the
#    default failurePolicy Ignore, or before it was installed): waiting means "no spec.clusters" ------------------

def test_bind_mode_binding_created_while_the_controller_was_down_is_bound_exactly_once() -> None:
    """Not paused (the webhook was down too), no spec.clusters: nothing was dispatched while no controller ran.
    The next controller binds it once; the one after that (restart) adopts it, binds nothing."""
    job = o.batch_job("late", parallelism=2)
    created = o.binding(job, paused=False, scheduler="atoll")
    assert "scheduling" not in created["spec"]["suspension"]
    ctl = controller(mode="bind")
    feed(ctl, o.cluster("m1"), job, created)
    items = ctl.step(100.0)
    (bind,) = patches(items, "bind")
    assert bind.body["spec"]["clusters"] == [{"name": "m1", "replicas": 2}] and events(items, "Admitted")
    assert ctl.step(101.0) == []
    placed = o.binding(job, paused=False, scheduler="atoll", clusters=["m1"], rv="11",
                       annotations=bind.body["metadata"]["annotations"])
    again = controller(mode="bind")
    feed(again, o.cluster("m1"), job, placed)
    items = again.step(200.0)
    assert patches(items, "bind") == [] and events(items, "Admitted") == []
    assert again.engine.state.jobs["team-a/late-job"].state.holds_resources


def test_bind_mode_unpaused_binding_that_cannot_be_scheduled_gets_its_reason() -> None:
    """The pending-reason annotation (and InvalidWorkload Event) was written only on paused bindings: an unpaused,
    unplaced binding addressed to atoll waits just the same and must say why (template missing or invalid, no room)."""
    ctl = controller(mode="bind")
    bad = o.vcjob("bad")
    bad["spec"]["tasks"][0]["template"]["spec"]["containers"] = []
    big = o.batch_job("big", parallelism=100)
    missing = o.batch_job("missing")
    feed(ctl, o.cluster("m1", cpu="64"), bad, big, o.binding(bad, paused=False, scheduler="atoll"),
         o.binding(big, paused=False, scheduler="atoll"), o.binding(missing, paused=False, scheduler="atoll"))
    items = ctl.step(1.0)
    reasons = {p.ref.name: p.body["metadata"]["annotations"]["atoll.dev/pending-reason"]
               for p in patches(items, "pending")}
    assert set(reasons) == {"bad-job", "big-job", "missing-job"}, reasons
    assert "not found" in reasons["missing-job"] and "no containers" in reasons["bad-job"].lower()
    assert events(items, "InvalidWorkload") and patches(items, "bind") == []


def test_gate_mode_unpaused_binding_addressed_to_atoll_is_admitted_once_not_adopted_unplaced() -> None:
    """Gate mode meets an unpaused binding addressed to schedulerName atoll: unplaced and never admitted, it waits
    for admission like a paused one (before: adopted at once, holding capacity, placed nowhere, never in the
    queue); once admitted (its stamp) a restarted controller adopts it instead of admitting it again."""
    job = o.batch_job("g", parallelism=2)
    ctl = controller()
    feed(ctl, o.cluster("m1"), job, o.binding(job, paused=False, scheduler="atoll"))
    (admit,) = patches(ctl.step(1.0), "admit")
    resumed = o.binding(job, paused=False, scheduler="atoll", rv="11", annotations=admit.body["metadata"]["annotations"])
    again = controller()
    feed(again, o.cluster("m1"), job, resumed)
    assert patches(again.step(2.0)) == [] and again.engine.state.jobs["team-a/g-job"].state.holds_resources


def test_bindings_created_in_the_same_second_keep_the_order_the_watch_delivered_them() -> None:
    """Unpaused bindings have no microsecond pause stamp, only creationTimestamp (whole seconds): within one second
    FIFO follows the watch's order (etcd's commit order), not the bindings' names (before: by name)."""
    from plugins.fifo import Fifo

    ctl = Controller(Pipeline({"order": [Fifo({}, None)]}), mode="bind")
    names = ["zeta", "alpha", "mid"]
    feed(ctl, o.cluster("m1", cpu="64"), *[o.batch_job(n, parallelism=40) for n in names])
    for n in names:             # one per step: each one only after the one before was bound, in watch order
        feed(ctl, o.binding(o.batch_job(n, parallelism=40), paused=False, scheduler="atoll",
                            created="2026-11-22T21:00:00Z"))
    (first,) = patches(ctl.step(1.0), "bind")
    assert first.ref.name == "zeta-job"                       # first seen; "alpha" sorts first by name
    ctl.on_template("MODIFIED", o.batch_job("zeta", parallelism=40, rv="2", status={
        "succeeded": 40, "conditions": [{"type": "Complete", "status": "True"}]}), None)
    assert [p.ref.name for p in patches(ctl.step(2.0), "bind")] == ["alpha-job"]


def test_explain_says_an_unplaced_binding_addressed_to_atoll_is_waiting() -> None:
    from engine.kube.cli import binding_summary, describe_binding

    job = o.batch_job("w")
    rb = o.binding(job, paused=False, scheduler="atoll", annotations={plan.PENDING_ANNOTATION: "no room"})
    assert "state: waiting (schedulerName atoll, no spec.clusters yet)" in describe_binding(rb)
    assert binding_summary(rb)["state"] == "waiting" and binding_summary(rb)["why"] == "no room"
    placed = o.binding(job, paused=False, scheduler="atoll", clusters=["m1"],
                       annotations={plan.ADMITTED_ANNOTATION: "2026-11-22T21:00:01.000000Z"})
    assert binding_summary(placed)["state"] == "admitted" and "placed on: m1" in describe_binding(placed)


def test_a_forged_pause_stamp_cannot_put_a_job_ahead_of_the_line() -> None:
    """The webhook's pause stamp is an annotation anyone who may edit a binding can set: it counts no earlier than
    CLOCK_SKEW before the binding's creationTimestamp (set by the API server), so a stamp from 2000 on a binding
    created after another one does not go first."""
    from engine.kube.controller import CLOCK_SKEW
    from engine.kube.webhook import PAUSED_ANNOTATION
    from plugins.fifo import Fifo

    ctl = Controller(Pipeline({"order": [Fifo({}, None)]}))
    early, late = o.batch_job("early", parallelism=40), o.batch_job("late", parallelism=40)
    feed(ctl, o.cluster("m1", cpu="64"), early, late,
         o.binding(early, created="2026-11-22T21:00:00Z", annotations={PAUSED_ANNOTATION: "2026-11-22T21:00:00.250000Z"}),
         o.binding(late, created="2026-11-22T21:00:10Z", annotations={PAUSED_ANNOTATION: "2000-01-01T00:00:00.000000Z"}))
    assert [p.ref.name for p in patches(ctl.step(1.0), "admit")] == ["early-job"]
    late_binding = ctl.bindings["team-a/late-job"]
    created = plan.parse_stamp("2026-11-22T21:00:10Z")
    assert created is not None and Controller._submit_time(late_binding) == created - CLOCK_SKEW
    honest = o.binding(late, created="2026-11-22T21:00:10Z", annotations={PAUSED_ANNOTATION: "2026-11-22T21:00:09.5Z"})
    assert Controller._submit_time(honest) == plan.parse_stamp("2026-11-22T21:00:09.5Z")   # within the skew: its own


def test_an_admitted_at_stamp_in_the_future_counts_as_now() -> None:
    """A resumed binding adopted after a restart holds since its admitted-at stamp, at the latest now: a stamp in
    the future would hide its stuck pods and protect it from preemption (min_runtime) for ever."""
    ctl = controller()
    job = o.batch_job("r", parallelism=4)
    feed(ctl, o.cluster("m1"), job, o.binding(job, paused=False, clusters=["m1"],
                                              annotations={plan.ADMITTED_ANNOTATION: "9999-01-01T00:00:00.000000Z"}))
    ctl.step(100.0)
    adopted = ctl.engine.state.jobs["team-a/r-job"]
    assert adopted.state.holds_resources and adopted.admitted_at == 100.0


class BrokenForBad(Plugin):
    name = "t-broken"
    stages = ("admit",)

    @hookimpl
    def atoll_admit(self, job: Job, state: Any) -> None:
        if job.name.startswith("bad"):
            raise KeyError("x")


def test_a_plugin_error_on_one_job_is_its_warning_and_the_others_are_admitted(monkeypatch: Any, caplog: Any) -> None:
    from engine.core import contain
    from engine.kube import metrics
    monkeypatch.setattr(contain, "STRICT", False)
    ctl = controller(BrokenForBad({}, None))
    bad, bad2, good = o.batch_job("bad"), o.batch_job("bad2"), o.batch_job("good")
    feed(ctl, o.cluster("m1"), bad, bad2, good, o.binding(bad), o.binding(bad2), o.binding(good))
    before = metrics.PLUGIN_ERRORS.labels("t-broken")._value.get()
    with caplog.at_level("ERROR", logger="atoll.controller"):
        items = ctl.step(1.0)
    assert [p.ref.name for p in patches(items, "admit")] == ["good-job"]
    warned = {e.involved["name"]: (e.type, e.message) for e in events(items, "Pending")}
    assert set(warned) == {"bad-job", "bad2-job"} and all(t == "Warning" for t, _ in warned.values())
    assert "plugin 't-broken' failed while judging this job (KeyError: 'x')" in warned["bad-job"][1]
    assert metrics.PLUGIN_ERRORS.labels("t-broken")._value.get() == before + 2
    logged = [r.getMessage() for r in caplog.records if "t-broken failed" in r.getMessage()]
    assert len(logged) == 2 and sum("Traceback" in m for m in logged) == 1     # the traceback once per error


class BrokenEnqueue(Plugin):
    name = "t-broken-enqueue"
    stages = ("enqueue",)
    broken = True

    @hookimpl
    def atoll_enqueue(self, job: Job, state: Any) -> None:
        if self.broken and job.name.startswith("bad"):
            raise KeyError("x")


def test_a_binding_whose_sync_raises_says_so_once_and_is_synced_again_later(caplog: Any) -> None:
    plugin = BrokenEnqueue({}, None)
    ctl = controller(plugin)
    bad, good = o.batch_job("bad"), o.batch_job("good")
    feed(ctl, o.cluster("m1"), bad, good, o.binding(bad), o.binding(good))
    items = ctl.step(1.0)
    assert [p.ref.name for p in patches(items, "admit")] == ["good-job"]
    (warning,) = events(items, "SyncFailed")
    assert warning.type == "Warning" and warning.involved["name"] == "bad-job"
    assert "could not take this binding in (KeyError: 'x')" in warning.message and "within 60 s" in warning.message
    caplog.clear()
    with caplog.at_level("ERROR", logger="atoll.controller"):
        assert ctl.step(30.0) == []                # not retried before its time, nothing said again
    assert not caplog.records
    assert events(ctl.step(61.0), "SyncFailed") == []     # retried, failed the same way: no second Event
    plugin.broken = False
    assert [p.ref.name for p in patches(ctl.step(121.0), "admit")] == ["bad-job"]
    assert ctl.sync_failed == {} and ctl.sync_warned == {}
