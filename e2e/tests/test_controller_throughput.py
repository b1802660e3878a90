"""Measurement (not a pass/fail timing gate): the controller's rate and latency on the real fleet, and the same load
against plain Karmada (no webhook, no controller) as the baseline.

* Jobs + PropagationPolicy: Karmada's detector makes the bindings, the webhook pauses them, Atoll resumes them.
* ResourceBindings POSTed directly at ATOLL_BENCH_RATE/s (templates first), twice on the same fleet: plain Karmada
  (created unpaused, karmada-scheduler places them at once) and with Atoll (paused at CREATE, resumed by the
  controller). The common end-to-end metric is create -> Scheduled=True on this process's clock
  (bench_support.BindingWatch).

ATOLL_BENCH_RATE (default 50/s), ATOLL_BENCH_COUNT (300), ATOLL_BENCH_CLIENTS (32); results printed and written to
$ATOLL_E2E_STATE/controller-bench-{detector,plain-karmada,with-atoll}.json. Only correctness is asserted: every
binding ends scheduled, none lost, the controller alive.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.bench_support import (BindingWatch, pause_to_resume, per_second, post_at_rate, report, spread,
                                     wait_jobs_cached)
from e2e.tests.controller_support import ControllerProcess, atoll, job
from e2e.tests.support import POLICY_API, RB_API, delete, is_true, namespace, unique, until
from e2e.tests.webhook_support import MWC_NAME

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RATE = float(os.environ.get("ATOLL_BENCH_RATE", "50"))
COUNT = int(os.environ.get("ATOLL_BENCH_COUNT", "300"))
THREADS = int(os.environ.get("ATOLL_BENCH_CLIENTS", "32"))       # concurrent creating clients
SCHEDULED_TIMEOUT = 300.0
NAMESPACE_GONE_TIMEOUT = 300.0


@pytest.fixture
def ns(host: Kube) -> Iterator[str]:
    name = unique("atoll-bench")
    namespace(host, name)
    yield name
    delete(host, f"/api/v1/namespaces/{name}")
    # gone before the next measurement: a controller started while these bindings still exist adopts them, and
    # they hold capacity that the next run's jobs then wait for (seen: pause -> resume p95 18 s instead of 1 s)
    until(f"namespace {name} deleted", lambda: host.get_or_none(f"/api/v1/namespaces/{name}") is None,
          NAMESPACE_GONE_TIMEOUT, show=lambda: host.get_or_none(f"/api/v1/namespaces/{name}"))


def default_policy() -> str:
    return (REPO / "policies" / "default.yaml").read_text()


def test_resume_rate_and_latency(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    with atoll(fleet.info, tmp_path, default_policy()) as (_, ctl, _cm):
        host.apply({"apiVersion": POLICY_API, "kind": "PropagationPolicy", "metadata": {"name": "bench", "namespace": ns},
                    "spec": {"resourceSelectors": [{"apiVersion": "batch/v1", "kind": "Job",
                                                    "labelSelector": {"matchLabels": {"atoll.dev/bench": "1"}}}],
                             "placement": {"clusterAffinity": {"clusterNames": fleet.members},
                                           "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                                 "replicaDivisionPreference": "Aggregated"}}}})
        objs = [job(f"b{i:04d}", ns, cpu="10m", pods=1, run_seconds=5, labels={"atoll.dev/bench": "1"})
                for i in range(COUNT)]
        sent, returned = post_at_rate(host, f"/apis/batch/v1/namespaces/{ns}/jobs", objs, RATE, THREADS)
        result = {"mode": "Jobs + PropagationPolicy (detector makes the bindings)", "bindings": COUNT,
                  "target_rate_per_s": RATE,
                  "achieved_create_rate_per_s": per_second(COUNT, max(returned.values()) - min(sent.values())),
                  **pause_to_resume(host, ns, COUNT)}
        report(fleet.info.state_dir, "detector", result)
        assert ctl.alive()


def direct_binding(ns: str, name: str, uid: str, clusters: list[str]) -> dict[str, Any]:
    """Shaped like the detector's binding: karmada-scheduler only takes bindings with its schedulerName and a
    policy permanent-id or managed-by label (pkg/scheduler/event_handler.go)."""
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            # the detector's finalizer, so the Works are withdrawn when the namespace goes
            "metadata": {"name": f"{name}-job", "namespace": ns, "finalizers": ["karmada.io/binding-controller"],
                         "labels": {"binding.karmada.io/managed-by": "atoll-e2e-bench"}},
            "spec": {"schedulerName": "default-scheduler",
                     "resource": {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": ns, "uid": uid},
                     "replicas": 1, "placement": {"clusterAffinity": {"clusterNames": clusters}}}}


def direct_load(fleet: FleetHandle, host: Kube, ns: str, ctl: Optional[ControllerProcess]) -> dict[str, Any]:
    """Templates first, then COUNT bindings POSTed at RATE/s; waits until the watch saw every one Scheduled."""
    made = [host.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job(f"d{i:04d}", ns, cpu="10m", pods=1,
                                                                              run_seconds=5))
            for i in range(COUNT)]
    if ctl is not None:
        wait_jobs_cached(host, ctl, COUNT)
    rbs = [direct_binding(ns, o["metadata"]["name"], o["metadata"]["uid"], fleet.members) for o in made]
    watch = BindingWatch(host, ns)
    try:
        sent, returned = post_at_rate(host, f"{RB_API}/namespaces/{ns}/resourcebindings", rbs, RATE, THREADS)
        watch.wait_scheduled(COUNT, SCHEDULED_TIMEOUT)
    finally:
        watch.stop()
    items = host.get(f"{RB_API}/namespaces/{ns}/resourcebindings")["items"]
    lost = [b["metadata"]["name"] for b in items if not is_true(b, "Scheduled") or not b["spec"].get("clusters")]
    assert len(items) == COUNT and not lost, f"{len(items)} bindings, not scheduled: {lost[:10]}"
    start = min(sent.values())
    names = list(returned)
    return {"bindings": COUNT, "target_rate_per_s": RATE,
            "created_per_s": per_second(COUNT, max(returned.values()) - start),
            "scheduled_per_s": per_second(COUNT, max(watch.scheduled.values()) - start),
            "create_to_scheduled_s": spread([watch.scheduled[n] - returned[n] for n in names]),
            "watch_added_to_scheduled_s": spread([watch.scheduled[n] - watch.added[n] for n in names]),
            "create_post_s": spread([returned[n] - sent[n] for n in names]),
            **({"create_to_unpaused_s": spread([watch.unpaused[n] - returned[n] for n in names])} if ctl else {})}


def test_plain_karmada_create_to_scheduled(fleet: FleetHandle, host: Kube, ns: str) -> None:
    """The baseline: no Atoll webhook registered, no controller; the bindings are created unpaused."""
    assert host.get_or_none(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{MWC_NAME}") \
        is None, "an Atoll webhook is still registered: the baseline would not be plain Karmada"
    result = {"mode": "plain Karmada (bindings POSTed directly)", **direct_load(fleet, host, ns, None)}
    report(fleet.info.state_dir, "plain-karmada", result)


def test_with_atoll_create_to_scheduled(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    """Same load with Atoll: the webhook pauses each binding at CREATE, the controller resumes it, Karmada places
    it. Karmada's detector creates bindings at only a few per second on this machine, which would hide the
    controller's own rate, hence bindings POSTed directly."""
    with atoll(fleet.info, tmp_path, default_policy()) as (_, ctl, _cm):
        result = {"mode": "Karmada + Atoll (bindings POSTed directly)", **direct_load(fleet, host, ns, ctl),
                  **pause_to_resume(host, ns, COUNT)}
        report(fleet.info.state_dir, "with-atoll", result)
        assert ctl.alive()
