"""Volcano objects on the real fleet: a Queue and a Volcano Job propagate as objects to the members.

The members run no Volcano controllers, so this proves the API path only (CRDs on host and
members, Karmada's interpreter for batch.volcano.sh Job, Works, member objects).
"""
from __future__ import annotations

import functools
from typing import Any

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.support import (cluster_propagation_policy, delete, is_true, namespace, propagation_policy, unique,
                               until)

pytestmark = pytest.mark.e2e

VC_JOBS = "/apis/batch.volcano.sh/v1alpha1"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"



def queue(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 3, "reclaimable": True, "capability": {"cpu": "16", "nvidia.com/gpu": "4"}}}


def volcano_job(name: str, ns: str, queue_name: str) -> dict[str, Any]:
    def task(tname: str, replicas: int, cpu: str) -> dict[str, Any]:
        return {"name": tname, "replicas": replicas, "minAvailable": replicas,
                "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": tname, "image": "atoll.dev/e2e:noop", "resources": {"requests": {"cpu": cpu}}}]}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulerName": "volcano", "queue": queue_name, "minAvailable": 3,
                     "tasks": [task("master", 1, "1"), task("worker", 2, "2")]}}


def test_queue_and_volcano_job_propagate(fleet: FleetHandle, host: Kube, members: dict[str, Kube], ns: str) -> None:
    qname = unique("atoll-q")
    host.apply(queue(qname))
    host.apply(cluster_propagation_policy(qname, [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                                   "name": qname}],
                                          {"clusterAffinity": {"clusterNames": fleet.members}}))
    target = fleet.members[-1]
    job = "vcjob"
    host.apply(volcano_job(job, ns, qname))
    host.apply(propagation_policy(job, ns, [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job}],
                                  {"clusterAffinity": {"clusterNames": [target]}}))
    try:
        for name, mk in members.items():  # a Queue is cluster-scoped: a ClusterResourceBinding, every member
            q = until(f"Queue {qname} in member {name}", functools.partial(mk.get_or_none, f"{QUEUES}/{qname}"),
                      show=lambda: host.get_or_none(
                          f"/apis/work.karmada.io/v1alpha2/clusterresourcebindings/{qname}-queue"))
            assert q["spec"]["weight"] == 3 and q["spec"]["capability"]["nvidia.com/gpu"] == "4"

        rb_path = f"/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings/{job}-job"
        rb = until(f"ResourceBinding {ns}/{job}-job scheduled",
                   lambda: (b := host.get_or_none(rb_path)) and is_true(b, "Scheduled") and b,
                   show=lambda: host.get_or_none(rb_path))
        assert [c["name"] for c in rb["spec"]["clusters"]] == [target]
        # karmada.md: the Volcano Job interpreter defines no InterpretReplica, so the binding carries no
        # replicas; Atoll must read demand from the template (this guards that assumption)
        assert not rb["spec"].get("replicas"), f"Volcano Job binding has replicas {rb['spec'].get('replicas')}"

        mk = members[target]
        got = until(f"Volcano Job {ns}/{job} in member {target}",
                    lambda: mk.get_or_none(f"{VC_JOBS}/namespaces/{ns}/jobs/{job}"))
        assert got["spec"]["queue"] == qname and got["spec"]["minAvailable"] == 3
        assert [(t["name"], t["replicas"]) for t in got["spec"]["tasks"]] == [("master", 1), ("worker", 2)]
        for other in set(members) - {target}:
            assert members[other].get_or_none(f"{VC_JOBS}/namespaces/{ns}/jobs/{job}") is None
    finally:
        delete(host, f"/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies/{qname}")
        delete(host, f"{QUEUES}/{qname}")
