"""Karmada honours spec.suspension.scheduling on a ResourceBinding: the mechanism Atoll's gate relies on.

The binding is created paused (here directly, as Atoll's webhook would make the detector's
binding paused at CREATE). Proof it stays unscheduled is not a sleep: a later binding that is
not paused gets scheduled first, so the scheduler demonstrably ran and skipped ours. Then the
documented merge patch resumes it, and the Job reaches the member and completes there.
"""
from __future__ import annotations

from typing import Any

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.support import (batch_job, binding, create, is_true, merge_patch, namespace, rb_path, scheduled, until,
                               works_for)

pytestmark = pytest.mark.e2e

RESUME = {"spec": {"suspension": {"scheduling": False}}}



def job_binding(ns: str, job: dict[str, Any], cluster: str, paused: bool) -> dict[str, Any]:
    """A ResourceBinding for a Job template, shaped like the one Karmada's detector builds.

    karmada-scheduler only watches bindings whose schedulerName is its own and that carry a
    policy permanent-id label or ``binding.karmada.io/managed-by`` (pkg/scheduler/event_handler.go).
    """
    name = job["metadata"]["name"]
    suspension: dict[str, Any] = {"scheduling": True, "dispatching": False} if paused else {}
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-job", "namespace": ns, "labels": {"binding.karmada.io/managed-by": "atoll-e2e"},
                         # as the detector sets it: the binding controller deletes the Works before the binding goes
                         "finalizers": ["karmada.io/binding-controller"]},
            "spec": {"schedulerName": "default-scheduler", "resource": {"apiVersion": "batch/v1", "kind": "Job", "namespace": ns, "name": name,
                                  "uid": job["metadata"]["uid"]},
                     "replicas": job["spec"]["parallelism"],
                     "placement": {"clusterAffinity": {"clusterNames": [cluster]}},
                     "suspension": suspension}}


def test_paused_binding_waits_for_merge_patch(fleet: FleetHandle, host: Kube, members: dict[str, Kube],
                                              ns: str) -> None:
    cluster = fleet.members[0]
    paused_job = host.apply(batch_job("paused", ns, 2, 2, 2, {"cpu": "500m"}))
    control_job = host.apply(batch_job("control", ns, 1, 1, 2, {"cpu": "500m"}))
    rb = create(host, rb_path(ns), job_binding(ns, paused_job, cluster, paused=True))
    assert rb["spec"]["suspension"]["scheduling"] is True
    create(host, rb_path(ns), job_binding(ns, control_job, cluster, paused=False))

    until("the unpaused control binding scheduled (karmada-scheduler is working)",
          lambda: is_true(binding(host, ns, "control-job"), "Scheduled"),
          show=lambda: binding(host, ns, "control-job"))
    rb = binding(host, ns, "paused-job")
    assert rb is not None
    assert not rb["spec"].get("clusters"), f"paused binding was scheduled: {rb['spec']['clusters']}"
    assert "schedulerObservedGeneration" not in (rb.get("status") or {}), rb.get("status")
    assert not works_for(host, cluster, "Job", ns, "paused")
    assert members[cluster].get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/paused") is None

    patched = merge_patch(host, rb_path(ns, "paused-job"), RESUME)
    assert patched["spec"]["suspension"] == {"scheduling": False, "dispatching": False}, \
        "a merge patch must keep the other suspension fields"
    rb = until("resumed binding scheduled", lambda: scheduled(host, ns, "paused-job"),
               show=lambda: binding(host, ns, "paused-job"))
    assert [(c["name"], c.get("replicas")) for c in rb["spec"]["clusters"]] == [(cluster, 2)]
    mk = members[cluster]
    until(f"resumed Job Complete in member {cluster}",
          lambda: is_true(mk.get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/paused"), "Complete"),
          timeout=120, show=lambda: mk.get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/paused"))
