"""Bind mode on the real fleet: bindings addressed to schedulerName atoll get spec.clusters from the engine's
placement (karmada-scheduler ignores them), a Scheduled condition, and Karmada dispatches the Work there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.controller_support import (PAUSED, POLICY_NS, annotations_of, atoll, events_for, is_paused, job,
                                          propagate, rb_name, start_controller, wait_admitted)
from e2e.tests.support import binding, is_true, until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]



def test_bind_mode_writes_clusters_and_karmada_dispatches(fleet: FleetHandle, host: Kube, ns: str,
                                                          tmp_path: Path) -> None:
    text = re.sub(r"placementMode: \w+", "placementMode: bind", (REPO / "policies" / "default.yaml").read_text())
    assert "placementMode: bind" in text
    with atoll(fleet.info, tmp_path, text) as (_, ctl, _cm):
        j = job("bound", ns, cpu="2", pods=3, run_seconds=5)
        host.apply(j)
        propagate(host, j, fleet.members, scheduler="atoll")
        rb = wait_admitted(host, j)
        assert rb["spec"]["schedulerName"] == "atoll"
        clusters = rb["spec"]["clusters"]
        assert sum(c["replicas"] for c in clusters) == 3, clusters
        assert annotations_of(rb)["atoll.dev/clusters"] == ",".join(sorted(c["name"] for c in clusters))
        rb = until("Scheduled=True written by atoll", lambda: (b := binding(host, ns, rb_name(j))) and is_true(
            b, "Scheduled") and b, 30, show=lambda: binding(host, ns, rb_name(j)))
        assert rb["status"]["schedulerObservedGeneration"] >= 1
        target = clusters[0]["name"]
        member = fleet.member(target)
        mjob = until(f"Job {ns}/bound dispatched to {target}",
                     lambda: member.get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/bound"), 60)
        assert mjob["spec"]["parallelism"] == clusters[0]["replicas"]
        assert ctl.alive()


def test_bind_mode_binding_created_while_the_controller_is_down_is_bound_once_it_is_back(
        fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    """While no controller runs, a binding addressed to schedulerName atoll waits (paused by the webhook, no
    spec.clusters, so karmada-scheduler and the binding controller leave it alone); the next controller binds
    it, exactly once."""
    text = re.sub(r"placementMode: \w+", "placementMode: bind", (REPO / "policies" / "default.yaml").read_text())
    with atoll(fleet.info, tmp_path, text) as (_, ctl, cm):
        ctl.stop()
        j = job("late", ns, cpu="1", pods=2, run_seconds=5)
        host.apply(j)
        propagate(host, j, fleet.members, scheduler="atoll")
        rb = until("binding created by the detector", lambda: binding(host, ns, rb_name(j)), 60)
        assert is_paused(rb) and PAUSED in annotations_of(rb) and not rb["spec"].get("clusters"), rb["spec"]
        again = start_controller(fleet.info, tmp_path, f"{POLICY_NS}/{cm}", name="controller-2")
        try:
            rb = wait_admitted(host, j)
            assert sum(c["replicas"] for c in rb["spec"]["clusters"]) == 2, rb["spec"]
            until("Scheduled=True", lambda: is_true(binding(host, ns, rb_name(j)) or {}, "Scheduled"), 30,
                  show=lambda: binding(host, ns, rb_name(j)))
            admitted = [e for e in events_for(host, ns, rb_name(j)) if e["reason"] == "Admitted"]
            assert len(admitted) == 1 and admitted[0].get("count", 1) == 1, admitted
            assert again.alive()
        finally:
            again.stop()
