"""Smoke test of the real fleet: a batch/v1 Job goes host -> Karmada -> member -> kwok pods that run and finish."""
from __future__ import annotations

import datetime
from typing import Any

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.support import (batch_job, binding, condition, is_true, namespace, propagation_policy, scheduled, until,
                               works_for)
from engine.resources import parse_quantity

pytestmark = pytest.mark.e2e

PARALLELISM = 4
RUN_SECONDS = 5



def _ts(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")


def member_pods(kube: Kube, ns: str, job: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = kube.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3D{job}")["items"]
    return pods


def test_cluster_resource_summary_is_kwok_allocatable(fleet: FleetHandle, host: Kube) -> None:
    """Karmada's cluster status controller reads the members' kwok nodes: allocatable = sum over nodes."""
    for name in fleet.members:
        nodes = fleet.info.member_nodes[name]
        want = {r: parse_quantity(v, r) * int(nodes["count"]) for r, v in nodes["allocatable"].items()}
        cluster = host.get(f"/apis/cluster.karmada.io/v1alpha1/clusters/{name}")
        assert is_true(cluster, "Ready"), f"Cluster {name} not Ready: {condition(cluster, 'Ready')}"
        got_raw = cluster["status"]["resourceSummary"]["allocatable"]
        got = {r: parse_quantity(v, r) for r, v in got_raw.items()}
        assert got == want, f"Cluster {name}: resourceSummary.allocatable {got_raw} != kwok nodes' {nodes}"
        for node_name in fleet.node_names(name):  # each kwok node carries the configured labels and allocatable
            node = fleet.member(name).get(f"/api/v1/nodes/{node_name}")
            assert nodes["labels"].items() <= node["metadata"]["labels"].items(), node["metadata"]["labels"]
            assert {r: parse_quantity(v, r) for r, v in node["status"]["allocatable"].items()
                    if r in nodes["allocatable"]} == {r: parse_quantity(v, r) for r, v in nodes["allocatable"].items()}
            assert is_true(node, "Ready"), f"node {node_name} not Ready"


def test_job_propagates_runs_on_kwok_and_completes(fleet: FleetHandle, host: Kube, members: dict[str, Kube],
                                                   ns: str) -> None:
    job = "smoke"
    host.apply(batch_job(job, ns, PARALLELISM, PARALLELISM, RUN_SECONDS, {"cpu": "1", "memory": "1Gi"}))
    host.apply(propagation_policy(job, ns, [{"apiVersion": "batch/v1", "kind": "Job", "name": job}], {
        "clusterAffinity": {"clusterNames": fleet.members},
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}))
    rb_name = f"{job}-job"

    # Karmada's detector builds the binding with the Job's replicas and per-pod requirements
    rb = until(f"ResourceBinding {ns}/{rb_name} scheduled", lambda: scheduled(host, ns, rb_name),
               show=lambda: binding(host, ns, rb_name))
    assert rb["spec"]["replicas"] == PARALLELISM
    assert parse_quantity(rb["spec"]["replicaRequirements"]["resourceRequest"]["cpu"], "cpu") == 1000
    targets = {t["name"]: t.get("replicas", 0) for t in rb["spec"]["clusters"]}
    # Aggregated with ample room: the fewest clusters, i.e. one cluster gets all replicas
    assert len(targets) == 1 and sum(targets.values()) == PARALLELISM, f"unexpected placement {targets}"
    (cluster,) = targets

    # a Work in the cluster's execution namespace carries the Job, and the member gets it
    until(f"Work for Job {ns}/{job} in karmada-es-{cluster}", lambda: works_for(host, cluster, "Job", ns, job),
          show=lambda: host.get(f"/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-{cluster}/works"))
    mk = members[cluster]
    mjob = until(f"Job {ns}/{job} in member {cluster}",
                 lambda: mk.get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}"))
    assert mjob["spec"]["parallelism"] == PARALLELISM

    # the member's Job controller creates pods, kube-scheduler binds them to kwok nodes, kwok runs and ends them
    kwok_nodes = set(fleet.node_names(cluster))
    until(f"Job {ns}/{job} Complete in member {cluster}",
          lambda: is_true(mk.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}"), "Complete"),
          timeout=120, show=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"))
                                     for p in member_pods(mk, ns, job)])
    pods = [p for p in member_pods(mk, ns, job) if p["status"].get("phase") == "Succeeded"]
    assert len(pods) == PARALLELISM, [p["metadata"]["name"] for p in pods]
    for p in pods:
        assert p["spec"]["nodeName"] in kwok_nodes, f"pod {p['metadata']['name']} on {p['spec'].get('nodeName')}"
        assert p["status"].get("startTime"), f"pod {p['metadata']['name']} never started"
        ready = condition(p, "Ready") or {}
        assert ready.get("reason") == "PodCompleted", f"pod not completed by the kwok stage: {p['status']}"
        # the pod-complete stage waits atoll.dev/run-seconds after the pod started (a lower bound only;
        # timestamps have 1 s resolution)
        finished = p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        ran = (_ts(finished) - _ts(p["status"]["startTime"])).total_seconds()
        assert ran >= RUN_SECONDS - 1, f"pod {p['metadata']['name']} completed after {ran}s < {RUN_SECONDS}s"
    for other in set(fleet.members) - {cluster}:
        assert members[other].get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}") is None

    # Karmada aggregates the member Job's status back to the host template
    until(f"host Job {ns}/{job} status.succeeded == {PARALLELISM}",
          lambda: (host.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}").get("status") or {}).get("succeeded")
          == PARALLELISM, show=lambda: host.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}").get("status"))


def test_gpu_job_requirements_reach_karmada_and_kwok(fleet: FleetHandle, host: Kube, members: dict[str, Kube],
                                                     ns: str) -> None:
    """GPUs are an extended resource end to end: binding requirements, member scheduling onto kwok GPUs."""
    job, target = "gpu", fleet.members[-1]
    host.apply(batch_job(job, ns, 2, 2, 1, {"cpu": "2", "nvidia.com/gpu": "4"}))
    host.apply(propagation_policy(job, ns, [{"apiVersion": "batch/v1", "kind": "Job", "name": job}],
                                  {"clusterAffinity": {"clusterNames": [target]}}))
    rb = until(f"ResourceBinding {ns}/{job}-job scheduled", lambda: scheduled(host, ns, f"{job}-job"),
               show=lambda: binding(host, ns, f"{job}-job"))
    assert rb["spec"]["replicaRequirements"]["resourceRequest"]["nvidia.com/gpu"] == "4"
    mk = members[target]
    until(f"GPU Job Complete in {target}",
          lambda: is_true(mk.get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}"), "Complete"),
          timeout=120, show=lambda: [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"))
                                     for p in member_pods(mk, ns, job)])
    nodes = {p["spec"]["nodeName"] for p in member_pods(mk, ns, job)}
    assert nodes <= set(fleet.node_names(target)), nodes
