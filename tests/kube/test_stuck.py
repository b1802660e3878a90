"""Stuck pods: unschedulable pods in members -> the job fails there and goes to the recover stage."""

from __future__ import annotations

from engine.kube import metrics
from engine.kube.controller import Controller
from engine.kube.stuck import StuckPods, unschedulable, workload_of
from engine.model import FailureKind, JobState
from tests.kube import objects as o
from tests.kube.test_controller import Requeue, controller, events, feed, patches

NO_GPU = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available"


def test_pods_map_to_their_workload_template() -> None:
    j, d, v = o.batch_job("j"), o.deployment("d"), o.vcjob("v")
    assert workload_of(o.member_pod("j-abc", j)) == ("batch/v1/Job", "team-a/j")
    assert workload_of(o.member_pod("d-5f7-xyz", d, rs_hash="5f7")) == ("apps/v1/Deployment", "team-a/d")
    assert workload_of(o.member_pod("v-w-0", v)) == ("batch.volcano.sh/v1alpha1/Job", "team-a/v")
    orphan = o.member_pod("p", j)
    orphan["metadata"]["ownerReferences"] = []
    assert workload_of(orphan) is None


def test_only_unbound_unschedulable_pods_count() -> None:
    j = o.batch_job("j")
    assert unschedulable(o.member_pod("a", j, unschedulable=NO_GPU)) == NO_GPU
    assert unschedulable(o.member_pod("b", j)) is None                             # not tried yet
    assert unschedulable(o.member_pod("c", j, unschedulable=NO_GPU, node="n1")) is None   # bound since
    deleting = o.member_pod("d", j, unschedulable=NO_GPU)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-23T14:00:05Z"
    assert unschedulable(deleting) is None


def test_a_pod_is_overdue_once_after_the_grace_period_without_interruption() -> None:
    s = StuckPods(grace=20)
    j = o.batch_job("j")
    stuck = o.member_pod("a", j, unschedulable=NO_GPU)
    s.on_pod("m1", stuck, None, 100.0)
    s.on_pod("m1", stuck, stuck, 110.0)                 # still stuck: the clock runs from the first sighting
    assert s.overdue(119.9) == []
    (pod,) = s.overdue(120.0)
    assert (pod.cluster, pod.workload, pod.pod, pod.since, pod.message) == \
        ("m1", ("batch/v1/Job", "team-a/j"), "team-a/a", 100.0, NO_GPU)
    assert s.overdue(200.0) == []                       # reported once
    other = o.member_pod("b", j, unschedulable=NO_GPU)
    s.on_pod("m1", other, None, 200.0)
    s.on_pod("m1", None, other, 205.0)                  # bound (left the spec.nodeName= stream) in time
    s.on_pod("m1", other, None, 210.0)                  # unschedulable again: a fresh 20 s
    assert s.overdue(229.0) == [] and [p.since for p in s.overdue(230.0)] == [210.0]


def admitted_on(ctl: Controller, job: o.Obj, cluster: str, now: float) -> None:
    feed(ctl, job, o.binding(job, paused=False, scheduler="atoll"))
    (bind,) = patches(ctl.step(now), "bind")
    assert [c["name"] for c in bind.body["spec"]["clusters"]] == [cluster]
    placed = o.binding(job, paused=False, scheduler="atoll", clusters=[cluster], rv="11")
    ctl.on_binding("MODIFIED", placed, ctl.bindings[f"team-a/{job['metadata']['name']}-job"])
    ctl.step(now)


def test_stuck_pod_fails_the_job_on_its_member_into_recovery_once() -> None:
    ctl = controller(Requeue({}, None), mode="bind")
    feed(ctl, o.cluster("m1"))
    j = o.batch_job("j", parallelism=1)
    admitted_on(ctl, j, "m1", 100.0)
    pod = o.member_pod("j-x1", j, unschedulable=NO_GPU)
    ctl.on_member_pod("m1", "ADDED", pod, None, 101.0)
    assert patches(ctl.step(120.9), "requeue") == []
    counted = metrics.FAILURES.labels("Unschedulable")._value.get()
    items = ctl.step(121.0)
    assert metrics.FAILURES.labels("Unschedulable")._value.get() == counted + 1
    (requeue,) = patches(items, "requeue")
    assert requeue.body["spec"] == {"suspension": {"scheduling": True}, "clusters": None}
    (ev,) = events(items, "Requeued")
    assert ev.type == "Warning" and FailureKind.UNSCHEDULABLE.value in ev.message
    assert "pod team-a/j-x1 unschedulable in m1 for 20s: 0/3 nodes are available: 3 Insufficient" in ev.message
    job = ctl.engine.state.jobs["team-a/j-job"]
    assert job.state is JobState.PENDING and job.excluded_clusters == {"m1"}
    ctl.on_member_pod("m1", "MODIFIED", pod, pod, 122.0)
    assert patches(ctl.step(200.0), "requeue") == []    # acted on once


def test_pods_elsewhere_or_from_an_earlier_attempt_or_scheduled_in_time_are_ignored() -> None:
    ctl = controller(Requeue({}, None), mode="bind")
    feed(ctl, o.cluster("m1"), o.cluster("m2", gpu="0"))
    j = o.batch_job("j", parallelism=1)
    old = o.member_pod("j-old", j, unschedulable=NO_GPU)
    ctl.on_member_pod("m1", "ADDED", old, None, 50.0)   # left over from before this admission
    admitted_on(ctl, j, "m1", 100.0)
    ctl.on_member_pod("m2", "ADDED", o.member_pod("j-m2", j, unschedulable=NO_GPU), None, 101.0)  # not placed there
    slow = o.member_pod("j-slow", j, unschedulable=NO_GPU)
    ctl.on_member_pod("m1", "ADDED", slow, None, 101.0)
    ctl.on_member_pod("m1", "DELETED", None, slow, 110.0)                                 # bound after 9 s
    assert patches(ctl.step(130.0), "requeue") == []
    assert ctl.engine.state.jobs["team-a/j-job"].state.holds_resources
