"""Deletion on the host reaches the members: the host kube-controller-manager's namespace and garbage
collector controllers and Karmada's binding/execution controllers together."""
from __future__ import annotations

import functools

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.support import (batch_job, binding, namespace, propagation_policy, rb_path, scheduled, unique, until,
                               works_for)

pytestmark = pytest.mark.e2e

def gone(kube: Kube, path: str) -> bool:
    return kube.get_or_none(path) is None


BACKGROUND = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}


def test_template_and_namespace_deletion_propagate(fleet: FleetHandle, host: Kube, members: dict[str, Kube]) -> None:
    ns = unique("atoll-cleanup")
    namespace(host, ns)
    for name, mk in members.items():  # Karmada syncs every non-reserved namespace to every member
        until(f"namespace {ns} in member {name}", functools.partial(mk.get_or_none, f"/api/v1/namespaces/{ns}"))

    cluster = fleet.members[0]
    host.apply(batch_job("gc", ns, 1, 1, 3600, {"cpu": "100m"}))
    host.apply(propagation_policy("gc", ns, [{"apiVersion": "batch/v1", "kind": "Job", "name": "gc"}],
                                  {"clusterAffinity": {"clusterNames": [cluster]}}))
    until("binding gc-job scheduled", lambda: scheduled(host, ns, "gc-job"), show=lambda: binding(host, ns, "gc-job"))
    mk = members[cluster]
    until(f"Job gc running in {cluster}", lambda: mk.get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/gc"))

    # the binding is owned by the template: the host garbage collector deletes it, Karmada then the Work and
    # the member's Job
    host.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/gc", BACKGROUND)
    until("ResourceBinding gc-job garbage-collected", lambda: binding(host, ns, "gc-job") is None,
          show=lambda: binding(host, ns, "gc-job"))
    until(f"Work for gc removed from karmada-es-{cluster}", lambda: not works_for(host, cluster, "Job", ns, "gc"))
    until(f"Job gc removed from {cluster}", lambda: mk.get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/gc") is None)

    host.request("DELETE", f"/api/v1/namespaces/{ns}")
    until(f"namespace {ns} finalized on the host (namespace controller)",
          lambda: host.get_or_none(f"/api/v1/namespaces/{ns}") is None,
          show=lambda: host.get_or_none(f"/api/v1/namespaces/{ns}"))
    for name, kube in members.items():
        until(f"namespace {ns} removed from member {name}", functools.partial(gone, kube, f"/api/v1/namespaces/{ns}"))
    assert host.get(rb_path(ns))["items"] == []
