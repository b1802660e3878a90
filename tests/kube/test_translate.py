"""Kubernetes objects -> engine model: demand from templates, queues, clusters, priorities."""

from __future__ import annotations

import copy
from typing import Any, Optional

import pytest

from engine.errors import InputError
from engine.kube.translate import (PriorityClasses, cluster_from_obj, job_from_template, queue_from_obj, queue_of,
                                   tasks_from_template, template_outcome, template_started)
from tests.kube import objects as o

GI = 2**30
GPU = "nvidia.com/gpu"


def test_volcano_job_demand_counts_every_task_not_the_binding() -> None:
    job = o.vcjob("train", tasks=[("ps", 1, None, "2"), ("worker", 4, 2, "1")])
    tasks = tasks_from_template(job)
    assert [(t.name, t.replicas, t.min_available) for t in tasks] == [("ps", 1, 1), ("worker", 4, 2)]
    assert tasks[1].resources == {"cpu": 1000, "memory": GI, "pods": 1}
    engine_job = job_from_template("team-a/train-job", job, PriorityClasses(), 5.0)
    assert engine_job.demand == {"cpu": 6000, "memory": 5 * GI, "pods": 5}
    assert engine_job.min_demand == {"cpu": 4000, "memory": 3 * GI, "pods": 3}


def test_volcano_job_level_min_available_fills_tasks_in_order() -> None:
    job = o.vcjob("j", tasks=[("a", 2, None, "1"), ("b", 3, None, "1")], min_available=3)
    assert [t.min_available for t in tasks_from_template(job)] == [2, 1]


def test_batch_job_parallelism_capped_by_completions_and_init_containers() -> None:
    job = o.batch_job("b", parallelism=5)
    job["spec"]["completions"] = 3
    job["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "init", "resources": {"requests": {"cpu": "4"}}}]
    (task,) = tasks_from_template(job)
    assert (task.replicas, task.min_available) == (3, 3)
    assert task.resources["cpu"] == 4000           # init container's 4 > the 1 of the main container


def test_deployment_replicas_limits_as_requests_and_gpu() -> None:
    d = o.deployment("web", replicas=3, cpu="500m", gpu="2")
    (task,) = tasks_from_template(d)
    assert (task.replicas, task.min_available) == (3, 1)
    assert task.resources == {"cpu": 500, "memory": GI, "nvidia.com/gpu": 2, "pods": 1}


def test_queue_resolution_order() -> None:
    assert queue_of(o.vcjob("j", queue="research")) == "research"
    assert queue_of(o.batch_job("b", labels={"volcano.sh/queue-name": "q1"})) == "q1"
    assert queue_of(o.deployment("d", annotations={"atoll.dev/queue": "q2"})) == "q2"
    assert queue_of(o.deployment("d")) == "default"


def test_priority_from_class_value_or_global_default() -> None:
    classes = PriorityClasses()
    classes.rebuild({"high": o.priority_class("high", 1000), "low": o.priority_class("low", 10, default=True)})
    assert job_from_template("a", o.vcjob("j", pc="high"), classes, 0).priority == 1000
    named = job_from_template("b", o.batch_job("b", pc="high"), classes, 0)
    assert (named.priority, named.priority_class) == (1000, "high")
    fallback = job_from_template("c", o.batch_job("c"), classes, 0)
    assert (fallback.priority, fallback.priority_class) == (10, "low")
    assert job_from_template("d", o.batch_job("d", pc="missing"), classes, 0).priority == 0


def test_bad_template_names_object_and_field() -> None:
    job = o.vcjob("broken")
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(InputError) as err:
        tasks_from_template(job)
    assert "Job team-a/broken: spec.tasks[0].template.spec.containers[0].resources.requests.cpu" in str(err.value)
    empty = o.vcjob("empty")
    empty["spec"]["tasks"] = []
    with pytest.raises(InputError, match="Job team-a/empty: spec.tasks is empty"):
        tasks_from_template(empty)


def test_cluster_summary_ready_and_labels() -> None:
    c = cluster_from_obj(o.cluster("m1", cpu="64", allocated_cpu="10", labels={"gpu.model": "a100"}), now=7.0)
    assert c.ready and c.labels == {"gpu.model": "a100"} and c.status_time == 7.0
    assert c.allocatable["cpu"] == 64000 and c.allocated == {"cpu": 10000} and c.allocatable["nvidia.com/gpu"] == 16
    assert not cluster_from_obj(o.cluster("m2", ready=False), 0).ready
    deleting = o.cluster("m4")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    assert not cluster_from_obj(deleting, 0).ready          # Ready=True, but going away
    bare = o.cluster("m3")
    del bare["status"]
    assert not cluster_from_obj(bare, 0).ready


def test_volcano_queue_fields() -> None:
    q = queue_from_obj(o.queue("research", weight=3, priority=5, capability={"cpu": "40", "nvidia.com/gpu": "8"},
                               parent="org", guarantee={"cpu": "4"}))
    assert (q.name, q.weight, q.priority, q.parent, q.open) == ("research", 3, 5, "org", True)
    assert q.capability == {"cpu": 40000, "nvidia.com/gpu": 8} and q.guarantee == {"cpu": 4000}
    assert not queue_from_obj(o.queue("c", state="Closed")).open
    assert queue_from_obj(o.queue("r", parent="root")).parent is None
    bad = o.queue("bad")
    bad["spec"]["weight"] = "heavy"
    with pytest.raises(InputError, match="Queue bad: spec.weight"):
        queue_from_obj(bad)


def test_template_outcome_and_started() -> None:
    running = o.batch_job("b", status={"active": 2})
    assert template_started(running) and template_outcome(running) is None
    done = o.batch_job("b", status={"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]})
    assert template_outcome(done) is True
    failed = o.batch_job("b", status={"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]})
    assert template_outcome(failed) is False
    vc = copy.deepcopy(o.vcjob("v"))
    vc["status"] = {"state": {"phase": "Completed"}, "succeeded": 2}
    assert template_outcome(vc) is True and template_started(vc)
    assert not template_started(o.deployment("d"))


def test_queue_capability_of_zero_means_none_not_unlimited() -> None:
    q = queue_from_obj(o.queue("cpu-only", capability={"cpu": "40", "nvidia.com/gpu": "0"}))
    assert q.capability == {"cpu": 40_000, "nvidia.com/gpu": 0}


def test_volcano_queue_reclaimable() -> None:
    """spec.reclaimable: false is honoured by the reclaim plugin; nil (absent) means true, as in Volcano."""
    assert queue_from_obj(o.queue("a")).reclaimable is True
    obj = o.queue("b")
    obj["spec"]["reclaimable"] = False
    assert queue_from_obj(obj).reclaimable is False


def _with_resources(requests: dict[str, str], limits: Optional[dict[str, str]] = None,
                    overhead: Optional[dict[str, str]] = None) -> o.Obj:
    d = o.deployment("d")
    pod_spec = d["spec"]["template"]["spec"]
    pod_spec["containers"][0]["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    if overhead is not None:
        pod_spec["overhead"] = overhead
    return d


@pytest.mark.parametrize("where, value", [("requests", "1.5"), ("requests", "0.5"), ("limits", "0.5"),
                                          ("overhead", "1500m"), ("requests", "1.0001")])
def test_fraction_of_an_extended_resource_is_refused_naming_the_field(where: str, value: str) -> None:
    # Kubernetes refuses such a pod (MilliValue % 1000 != 0): rounded up and admitted, it would hold GPUs for ever
    d = _with_resources({"cpu": "1"}, limits={GPU: value} if where == "limits" else None,
                        overhead={GPU: value} if where == "overhead" else None)
    if where == "requests":
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][GPU] = value
    with pytest.raises(InputError) as err:
        tasks_from_template(d)
    field = ("spec.template.spec.overhead" if where == "overhead"
             else f"spec.template.spec.containers[0].resources.{where}")
    assert str(err.value) == (f"Deployment team-a/d: {field}.{GPU}: {GPU} {value!r} is not a whole number "
                              "(Kubernetes allows fractions only of cpu, memory, ephemeral-storage and hugepages-*)")


def test_whole_extended_resources_and_fractions_of_divisible_ones_are_accepted() -> None:
    d = _with_resources({"cpu": "1.5", "memory": "1.5Gi", "ephemeral-storage": "0.5Gi", "hugepages-2Mi": "3Mi",
                         GPU: "1000m", "example.com/fpga": "2", "example.com/nic": "1.9999"})
    (task,) = tasks_from_template(d)
    assert task.resources == {"cpu": 1500, "memory": 3 * GI // 2, "ephemeral-storage": GI // 2,
                              "hugepages-2Mi": 3 * 2**20, GPU: 1, "example.com/fpga": 2, "example.com/nic": 2,
                              "pods": 1}


@pytest.mark.parametrize("name", ["pods", "gpu"])
def test_a_container_asking_for_pods_or_an_unqualified_resource_is_refused(name: str) -> None:
    # Kubernetes: "must be a standard resource for containers"; the pod slot is counted by Atoll, once per pod
    d = _with_resources({"cpu": "1", name: "5"})
    with pytest.raises(InputError) as err:
        tasks_from_template(d)
    assert str(err.value).startswith(f"Deployment team-a/d: spec.template.spec.containers[0].resources.requests."
                                     f"{name}: {name} is not a resource a container can request")
    overhead = _with_resources({"cpu": "1"}, overhead={name: "1"})
    with pytest.raises(InputError, match=rf"spec.template.spec.overhead.{name}: {name} is not a resource"):
        tasks_from_template(overhead)


def test_task_min_available_above_its_replicas_is_refused() -> None:
    # Volcano's webhook refuses it ("'minAvailable' is greater than 'replicas' in task"); clamping admitted it
    job = o.vcjob("v", tasks=[("a", 2, 2, "1"), ("b", 3, 4, "1")])
    with pytest.raises(InputError) as err:
        tasks_from_template(job)
    assert str(err.value) == ("Job team-a/v: spec.tasks[1].minAvailable: 4 is greater than the task's replicas (3); "
                              "Volcano refuses such a Job")
    assert [t.min_available for t in tasks_from_template(o.vcjob("v", tasks=[("a", 2, 2, "1")]))] == [2]


@pytest.mark.parametrize("task_min", [None, 1])
def test_job_min_available_above_all_replicas_is_refused(task_min: Optional[int]) -> None:
    # Volcano: "job 'minAvailable' should not be greater than total replicas in tasks" (with or without task ones)
    job = o.vcjob("v", tasks=[("a", 2, task_min, "1"), ("b", 3, task_min, "1")], min_available=6)
    with pytest.raises(InputError) as err:
        tasks_from_template(job)
    assert str(err.value) == ("Job team-a/v: spec.minAvailable: 6 is greater than the total replicas of the tasks "
                              "(5); Volcano refuses such a Job")
    exact = o.vcjob("v", tasks=[("a", 2, task_min, "1"), ("b", 3, task_min, "1")], min_available=5)
    assert sum(t.min_available for t in tasks_from_template(exact)) == (5 if task_min is None else 2)


@pytest.mark.parametrize("name, value, says", [
    ("huge", 2**70, f"{2**70} is outside int32 [-2147483648, 2147483647]"),
    ("above-int32", 2**31, "2147483648 is outside int32"),
    ("below-int32", -2**31 - 1, "-2147483649 is outside int32"),
    ("user-above-1e9", 1_000_000_001, "1000000001 is above 1,000,000,000, the highest Kubernetes allows a class "
                                      "not named system-*"),
    ("text", "high", "expected an integer, got 'high'"),
])
def test_priority_class_value_kubernetes_refuses_is_an_error_naming_the_class(name: str, value: Any,
                                                                             says: str) -> None:
    classes = PriorityClasses()
    classes.rebuild({"bad": {**o.priority_class(name, 0), "value": value}, "ok": o.priority_class("ok", 7)})
    with pytest.raises(InputError) as err:
        job_from_template("a", o.batch_job("b", pc=name), classes, 0)
    assert str(err.value).startswith(f"PriorityClass {name}: value: {says}"), str(err.value)
    assert job_from_template("b", o.batch_job("c", pc="ok"), classes, 0).priority == 7      # the others still work


def test_priority_class_limits_are_kubernetes_own() -> None:
    classes = PriorityClasses()
    classes.rebuild({"a": o.priority_class("system-node-critical", 2_000_001_000),
                     "b": o.priority_class("top-user", 1_000_000_000), "c": o.priority_class("lowest", -2**31)})
    assert classes.resolve("system-node-critical") == ("system-node-critical", 2_000_001_000)
    assert classes.resolve("top-user") == ("top-user", 1_000_000_000)
    assert classes.resolve("lowest") == ("lowest", -2**31)


def test_an_unusable_global_default_class_refuses_jobs_without_a_class() -> None:
    classes = PriorityClasses()
    classes.rebuild({"d": o.priority_class("everyone", 2**40, default=True)})
    with pytest.raises(InputError, match="PriorityClass everyone: value: 1099511627776 is outside int32"):
        job_from_template("a", o.batch_job("b"), classes, 0)
    classes.rebuild({"d": o.priority_class("everyone", 2**40, default=True), "e": o.priority_class("fine", 3, True)})
    assert classes.resolve("") == ("fine", 3)


def test_controller_marks_a_job_with_an_out_of_range_class_invalid_and_admits_the_others() -> None:
    # 2**70 used to reach the policy's CEL and raise "overflow" out of submit
    from engine._data import data_path
    from engine.kube import plan, policy_source
    from engine.kube.controller import Controller
    from tests.kube.test_controller import events, feed, patches
    pol = policy_source.load(data_path("policies", "default.yaml").read_text(), "default.yaml")
    ctl = Controller(pol.pipeline, pol.selector, "gate")
    hi, lo = o.batch_job("hi", pc="hi"), o.batch_job("lo", pc="lo")
    feed(ctl, o.priority_class("hi", 2**70), o.priority_class("lo", 0), o.cluster("m1", cpu="64"),
         hi, o.binding(hi), lo, o.binding(lo))
    out = ctl.step(1_800_000_000.0)
    pending = {p.ref.key: p.body["metadata"]["annotations"][plan.PENDING_ANNOTATION] for p in patches(out, "pending")}
    assert pending == {"team-a/hi-job": f"cannot schedule Job team-a/hi: PriorityClass hi: value: {2**70} is outside "
                                        "int32 [-2147483648, 2147483647], the range Kubernetes allows"}
    assert [e.message for e in events(out, "InvalidWorkload")] == [pending["team-a/hi-job"]]
    assert [p.ref.key for p in patches(out, "admit")] == ["team-a/lo-job"]


def test_api_counts_and_queue_priorities_are_int32_and_init_containers_a_list() -> None:
    """Kubernetes' and Volcano's counts and priorities are int32: a Queue priority of 2**63 would overflow the
    policy's CEL later, and a value of 5,000 digits cannot even be printed; ``initContainers: 5`` was a TypeError."""
    from engine.kube.translate import pod_requests

    for priority in (2**31, -2**31 - 1, 10**5000):
        with pytest.raises(InputError, match=r"expected an integer from -2147483648 to 2147483647 \(int32\)"):
            queue_from_obj(o.queue("q", priority=priority))
    assert queue_from_obj(o.queue("q", priority=2**31 - 1)).priority == 2**31 - 1
    with pytest.raises(InputError, match=r"expected an integer from 0 to 2147483647 \(int32\), got 2147483648"):
        queue_from_obj(o.queue("q", weight=2**31))
    spec = {"containers": [{"resources": {"requests": {"cpu": "1"}}}], "initContainers": 5}
    with pytest.raises(InputError, match="initContainers must be a list, got int") as exc:
        pod_requests(spec, "t: spec.template.spec")
    assert exc.value.where == "t: spec.template.spec.initContainers"


@pytest.mark.parametrize("value", [5, 1.5, True])
def test_a_list_field_of_another_type_is_an_input_error_or_no_status_never_a_type_error(value: Any) -> None:
    """``x.get("conditions") or ()`` iterated whatever was there: a number gave TypeError "'float' object is not
    iterable", so a Cluster update was dropped with a traceback instead of a one-line warning, and a binding's sync
    failed with that text as its Event. Spec fields are errors naming the field; a status written by another
    controller in an unexpected shape says nothing (no outcome, no failure) rather than stopping the sync."""
    from engine.kube.translate import member_failure, priority_class_of

    bad_cluster = o.cluster("m1")
    bad_cluster["status"]["conditions"] = value
    with pytest.raises(InputError) as info:
        cluster_from_obj(bad_cluster, 0.0)
    assert str(info.value) == f"Cluster m1: status.conditions must be a list, got {type(value).__name__}"
    job = o.vcjob("j")
    job["spec"]["tasks"] = value
    assert priority_class_of(job) == ""
    with pytest.raises(InputError) as info:
        tasks_from_template(job)
    assert str(info.value) == f"Job team-a/j: spec.tasks must be a non-empty list, got {type(value).__name__}"
    assert template_outcome(o.batch_job("b", status={"conditions": value})) is None
    rb = o.binding(o.vcjob("j"))
    rb["status"]["aggregatedStatus"] = value
    assert member_failure(rb) is None
    rb["status"]["aggregatedStatus"] = [{"clusterName": "m1", "status": {"conditions": value}}]
    assert member_failure(rb) is None
