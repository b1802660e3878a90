"""`atoll run` (gate mode) on the real fleet: webhook pauses at create, the controller decides and resumes.

Fleet: two members with 2 kwok nodes x 32 cpu each (64 cpu per member, 128 in the fleet). Karmada reports
member usage every 10 s, so waits for freed capacity allow ~40 s.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.controller_support import (PAUSED, ControllerProcess, annotations_of, atoll, events_for, job, propagate,
                                          fill_then_queue_a_third, rb_name, vcjob, wait_admitted,
                                          wait_pending)
from e2e.tests.support import binding, delete, is_true, merge_patch, namespace, unique, until
from engine.kube.plan import parse_stamp

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def basic_policy() -> str:
    """The shipped default policy (queues, DRF, gang, GPU, requeue-backoff)."""
    shipped = REPO / "policies" / "default.yaml"
    if shipped.exists():
        return shipped.read_text()
    return "apiVersion: atoll.dev/v1alpha1\nkind: Policy\nmetadata:\n  name: e2e-fifo\nspec: {}\n"


@pytest.fixture(scope="module")
def running(fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    with atoll(fleet.info, tmp_path_factory.mktemp("atoll"), basic_policy()) as (_, ctl, cm):
        ctl.policy_cm = cm  # type: ignore[attr-defined]
        yield ctl



def test_paused_at_create_then_resumed_and_scheduled(fleet: FleetHandle, host: Kube, running: ControllerProcess,
                                                     ns: str) -> None:
    j = job("hello", ns, cpu="1", pods=2, run_seconds=5)
    host.apply(j)
    propagate(host, j, fleet.members)
    rb = wait_admitted(host, j)
    notes = annotations_of(rb)
    paused_at, admitted_at = parse_stamp(notes[PAUSED]), parse_stamp(notes["atoll.dev/admitted-at"])
    assert paused_at is not None and admitted_at is not None and admitted_at >= paused_at, notes
    assert notes["atoll.dev/queue"] == "default" and "atoll.dev/pending-reason" not in notes
    assert rb["spec"]["suspension"].get("dispatching") is not True
    rb = until("karmada-scheduler placed the resumed binding",
               lambda: (b := binding(host, ns, rb_name(j))) and is_true(b, "Scheduled") and b.get("spec", {}).get(
                   "clusters") and b, 60, show=lambda: binding(host, ns, rb_name(j)))
    assert sum(c.get("replicas", 0) for c in rb["spec"]["clusters"]) == 2
    reasons = {e["reason"] for e in events_for(host, ns, rb_name(j))}
    assert "Admitted" in reasons, reasons


def test_waits_without_room_and_is_admitted_when_capacity_frees(fleet: FleetHandle, host: Kube,
                                                                running: ControllerProcess, ns: str) -> None:
    m1, m2 = fleet.members[:2]
    _, _, third = fill_then_queue_a_third(host, ns, m1, m2)
    rb = wait_pending(host, third)
    assert "atoll.dev/admitted-at" not in annotations_of(rb)
    assert not rb["spec"].get("clusters")
    assert "Pending" in {e["reason"] for e in events_for(host, ns, rb_name(third))}
    # first completes after 20 s; Karmada reports the freed cpu within ~10 s; then third goes
    rb = wait_admitted(host, third, timeout=90)
    assert parse_stamp(annotations_of(rb)["atoll.dev/admitted-at"]) is not None
    # What holds the cpu is first's pods in m1, not the host's Job: Karmada aggregates the member Job's Complete
    # into the host's template later than it reports the freed cpu (CI once read the host Job before that).
    # Pods end, then Karmada reports the member's usage, then Atoll admits: so both pods must have ended by now.
    pods = fleet.member(m1).get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3Dfirst")["items"]
    phases = sorted(p.get("status", {}).get("phase", "") for p in pods)
    assert phases == ["Succeeded", "Succeeded"], f"third was admitted while first's pods in {m1} were {phases}"


def test_gang_waits_when_only_the_fleet_total_would_fit(fleet: FleetHandle, host: Kube, running: ControllerProcess,
                                                        ns: str) -> None:
    """A Volcano Job's demand comes from its template (its binding says replicas 0): 2 x 40 cpu fits the fleet
    (128) but no single member (64), so it waits; a 2 x 20 cpu one goes."""
    big = vcjob("big", ns, "default", [("worker", 2, "40")])
    small = vcjob("small", ns, "default", [("worker", 2, "20")])
    for obj in (big, small):
        host.apply(obj)
        propagate(host, obj, fleet.members)
    rb = wait_pending(host, big, "in one cluster")
    assert "cpu=80" in annotations_of(rb)["atoll.dev/pending-reason"]
    wait_admitted(host, small)
    still = binding(host, ns, rb_name(big))
    assert still is not None and still["spec"]["suspension"]["scheduling"] is True
    out = subprocess.run([sys.executable, "-m", "engine.cli", "explain", f"{ns}/big", "--kubeconfig",
                          str(fleet.info.host_kubeconfig), "--controller", f"http://127.0.0.1:{running.port}"],
                         capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    assert "state: waiting" in out.stdout and "gang needs" in out.stdout, out.stdout
    assert "live engine:" in out.stdout and "Pending in queue default" in out.stdout, out.stdout


def test_invalid_policy_edit_keeps_the_previous_policy(host: Kube, running: ControllerProcess, ns: str) -> None:
    cm = running.policy_cm  # type: ignore[attr-defined]
    path = f"/api/v1/namespaces/atoll-system/configmaps/{cm}"
    before = host.get(path)["data"]["policy.yaml"]
    merge_patch(host, path, {"data": {"policy.yaml": "spec: [this is not: a policy"}})
    try:
        until("PolicyRejected Event on the policy ConfigMap",
              lambda: [e for e in events_for(host, "atoll-system", cm) if e["reason"] == "PolicyRejected"], 30)
        assert "atoll_policy_reload_errors_total 1.0" in running.metrics()
        assert running.alive()
        j = job("after-bad-edit", ns, cpu="1", run_seconds=5)
        host.apply(j)
        propagate(host, j, ["member1", "member2"])
        wait_admitted(host, j)              # the previous policy is still scheduling
    finally:
        merge_patch(host, path, {"data": {"policy.yaml": before}})


def test_valid_policy_edit_takes_effect_within_seconds(fleet: FleetHandle, host: Kube, running: ControllerProcess,
                                                       ns: str) -> None:
    """default.yaml keeps a job of a Closed queue waiting (queue-state); karmada-fifo.yaml has no queue-state:
    after the edit the same job is admitted without anything else changing."""
    cm = running.policy_cm  # type: ignore[attr-defined]
    path = f"/api/v1/namespaces/atoll-system/configmaps/{cm}"
    before = host.get(path)["data"]["policy.yaml"]
    queue = unique("shut")
    host.apply({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": queue},
                "spec": {"weight": 1}})
    host.apply_status({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": queue},
                       "status": {"state": "Closed"}})
    try:
        j = job("in-shut-queue", ns, cpu="1", run_seconds=5, labels={"volcano.sh/queue-name": queue})
        host.apply(j)
        propagate(host, j, fleet.members)
        wait_pending(host, j, "Closed")
        merge_patch(host, path, {"data": {"policy.yaml": (REPO / "policies" / "karmada-fifo.yaml").read_text()}})
        edited = time.monotonic()
        wait_admitted(host, j, timeout=30)
        took = time.monotonic() - edited
        assert took < 15, f"the edit took {took:.1f}s to take effect"
        until("PolicyLoaded Event", lambda: [e for e in events_for(host, "atoll-system", cm)
                                             if e["reason"] == "PolicyLoaded"], 30)
    finally:
        merge_patch(host, path, {"data": {"policy.yaml": before}})
        delete(host, f"/apis/scheduling.volcano.sh/v1beta1/queues/{queue}")


def test_scale_up_after_admission_is_charged(fleet: FleetHandle, host: Kube, running: ControllerProcess,
                                             ns: str) -> None:
    """Only CREATE is gated; a later scale-up must still count against capacity and quota (update_job)."""
    labels = {"app": "grow"}
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "grow", "namespace": ns},
         "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                      {"name": "c", "image": "atoll.dev/e2e:noop",
                       "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}
    host.apply(d)
    propagate(host, d, fleet.members)
    wait_admitted(host, d)
    key = f"{ns}/{rb_name(d)}"
    assert "cpu=2 " in running.explain(key)
    merge_patch(host, f"/apis/apps/v1/namespaces/{ns}/deployments/grow", {"spec": {"replicas": 6}})
    until("the engine charges the scaled-up demand", lambda: "cpu=6 " in running.explain(key), 30,
          show=lambda: running.explain(key))
    assert "Admitted" in running.explain(key) or "Running" in running.explain(key)
