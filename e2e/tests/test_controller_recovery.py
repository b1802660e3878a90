"""A member becomes NotReady under a running job: the controller fails it, requeues it (requeue-backoff) and
re-admits it with spec.rescheduleTriggeredAt, and karmada-scheduler places it on the other member.

NotReady is real: the member's kube-apiserver is frozen with SIGSTOP (Karmada marks the Cluster NotReady and
taints it after its failure threshold, ~75 s here) and thawed with SIGCONT afterwards.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.controller_support import (annotations_of, atoll, events_for, job, propagate, rb_name, wait_admitted)
from e2e.tests.fault_support import wait_books_match_truth
from e2e.tests.support import binding, is_true, until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]



def apiserver_pid(fleet: FleetHandle, member: str) -> int:
    record = json.loads((fleet.info.state_dir / "pids" / f"{member}-kube-apiserver.json").read_text())
    pid: int = record["pid"]
    return pid


def placed(host: Kube, ns: str, name: str) -> list[str]:
    rb = binding(host, ns, name)
    if rb is None or not is_true(rb, "Scheduled"):
        return []
    return [c["name"] for c in rb["spec"].get("clusters") or []]


def test_member_not_ready_job_recovers_on_the_other_member(fleet: FleetHandle, host: Kube, ns: str,
                                                           tmp_path: Path) -> None:
    with atoll(fleet.info, tmp_path, (REPO / "policies" / "default.yaml").read_text()) as (_, ctl, _cm):
        j = job("survivor", ns, cpu="1", pods=1)            # runs until deleted
        host.apply(j)
        propagate(host, j, fleet.members)
        first = annotations_of(wait_admitted(host, j))["atoll.dev/admitted-at"]
        (lost,) = until("karmada placed the job", lambda: placed(host, ns, rb_name(j)), 60)
        (other,) = [m for m in fleet.members[:2] if m != lost]
        pid = apiserver_pid(fleet, lost)
        os.kill(pid, signal.SIGSTOP)
        try:
            until(f"Cluster {lost} NotReady", lambda: not is_true(
                host.get(f"/apis/cluster.karmada.io/v1alpha1/clusters/{lost}"), "Ready"), 180)
            until("Requeued event", lambda: [e for e in events_for(host, ns, rb_name(j))
                                             if e["reason"] == "Requeued" and "ClusterLost" in e["message"]], 30)
            rb = until("re-admitted after backoff", lambda: (b := binding(host, ns, rb_name(j))) and annotations_of(b).get(
                "atoll.dev/admitted-at", first) != first and b, 60, show=lambda: binding(host, ns, rb_name(j)))
            assert rb["spec"].get("rescheduleTriggeredAt"), rb["spec"]
            until(f"karmada placed it on {other}", lambda: placed(host, ns, rb_name(j)) == [other], 60,
                  show=lambda: binding(host, ns, rb_name(j)))
            assert "ClusterLost" in ctl.log.read_text()
        finally:
            os.kill(pid, signal.SIGCONT)
        until(f"Cluster {lost} Ready again", lambda: is_true(
            host.get(f"/apis/cluster.karmada.io/v1alpha1/clusters/{lost}"), "Ready"), 120)
        wait_books_match_truth(ctl, host, [ns])        # capacity accounting = the API's truth afterwards


def test_job_failing_in_its_member_is_requeued_then_given_up(fleet: FleetHandle, host: Kube, ns: str,
                                                             tmp_path: Path) -> None:
    """activeDeadlineSeconds: 1 makes the member's Job controller fail the Job; Karmada aggregates Failed into
    the template. Each failure -> requeue (spec.clusters withdrawn, a fresh Job on re-admission); after
    maxAttempts the controller gives up with the reason on the binding."""
    text = (REPO / "policies" / "default.yaml").read_text()
    text = text.replace("initialDelay: 10s", "initialDelay: 2s").replace("maxAttempts: 5", "maxAttempts: 2")
    assert "initialDelay: 2s" in text and "maxAttempts: 2" in text
    with atoll(fleet.info, tmp_path, text) as (_, ctl, _cm):
        j = job("doomed", ns, cpu="1", pods=1)
        j["spec"]["activeDeadlineSeconds"] = 1
        host.apply(j)
        propagate(host, j, fleet.members)
        wait_admitted(host, j)
        until("Requeued after JobFailed", lambda: [e for e in events_for(host, ns, rb_name(j))
                                                   if e["reason"] == "Requeued" and "JobFailed" in e["message"]], 90,
              show=lambda: host.get(f"/apis/batch/v1/namespaces/{ns}/jobs/doomed").get("status"))
        rb = until("given up", lambda: (b := binding(host, ns, rb_name(j))) and annotations_of(b).get(
            "atoll.dev/pending-reason", "").startswith("gave up") and b, 120,
            show=lambda: binding(host, ns, rb_name(j)))
        assert rb["spec"]["suspension"]["scheduling"] is True and not rb["spec"].get("clusters")
        assert [e for e in events_for(host, ns, rb_name(j)) if e["reason"] == "GaveUp"]
        assert "JobFailed" in ctl.log.read_text()
