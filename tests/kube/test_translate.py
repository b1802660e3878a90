"""Kubernetes objects -> engine model: demand from templates, queues, clusters, priorities."""

from __future__ import annotations

import copy

import pytest

from engine.errors import InputError
from engine.kube.translate import (PriorityClasses, cluster_from_obj, job_from_template, queue_from_obj, queue_of,
                                   tasks_from_template, template_outcome, template_started)
from tests.kube import objects as o

GI = 2**30


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
