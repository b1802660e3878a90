"""Measurement (not a pass/fail timing gate): how fast bindings get scheduled on the real fleet, with and
without Atoll, under the same load.

Load: ATOLL_BENCH_COUNT (default 300) ResourceBindings POSTed at ATOLL_BENCH_RATE per second (default 50) for
batch Jobs that already exist, as Karmada's detector would create them. A watch opened before the load stamps
when each binding is first seen Scheduled=True; create -> Scheduled runs from the moment its POST was sent.
- plain Karmada: no webhook, no controller; karmada-scheduler takes each binding as it arrives;
- Atoll: the webhook pauses each binding at CREATE, the controller admits and resumes it, karmada-scheduler
  then schedules it. Also reported: pause -> resume (atoll.dev/admitted-at - atoll.dev/paused-by-webhook).
A third run creates Jobs with a PropagationPolicy (the detector makes the bindings) under Atoll.
Results are printed and written to $ATOLL_E2E_STATE/controller-bench-*.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.bench_support import ScheduledWatch, latency, post_at_rate
from e2e.tests.controller_support import PAUSED, annotations_of, atoll, job
from e2e.tests.support import POLICY_API, RB_API, delete, until
from engine.kube.plan import parse_stamp

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RATE = float(os.environ.get("ATOLL_BENCH_RATE", "50"))
COUNT = int(os.environ.get("ATOLL_BENCH_COUNT", "300"))
CLIENTS = int(os.environ.get("ATOLL_BENCH_CLIENTS", "32"))       # concurrent creating clients
TIMEOUT = 300 + 2 * COUNT / RATE       # a deadline, generous: karmada-scheduler took 4-10 bindings/s here
DIVIDED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}


@pytest.fixture
def ns(ns: str, host: Kube) -> Iterator[str]:
    """The conftest namespace, but gone before the next measurement starts: deleting 300 bindings keeps
    karmada-scheduler and the binding controller busy for a while, which would slow the next run down."""
    yield ns
    delete(host, f"/api/v1/namespaces/{ns}")
    until(f"namespace {ns} deleted", lambda: host.get_or_none(f"/api/v1/namespaces/{ns}") is None, 300)


def default_policy() -> str:
    return (REPO / "policies" / "default.yaml").read_text()


def create_jobs(host: Kube, ns: str) -> dict[str, str]:
    """COUNT one-pod Jobs (no PropagationPolicy, so Karmada makes no binding for them); name -> uid."""
    made = [host.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job(f"d{i:04d}", ns, cpu="10m", pods=1,
                                                                             run_seconds=5))
            for i in range(COUNT)]
    return {obj["metadata"]["name"]: obj["metadata"]["uid"] for obj in made}


def binding_for(name: str, uid: str, ns: str, members: list[str]) -> dict[str, Any]:
    """Shaped like the detector's: karmada-scheduler only takes bindings with its schedulerName and a
    managed-by label (pkg/scheduler/event_handler.go); the finalizer withdraws the Works with the namespace."""
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-job", "namespace": ns, "labels": {"binding.karmada.io/managed-by": "atoll-e2e"},
                         "finalizers": ["karmada.io/binding-controller"]},
            "spec": {"schedulerName": "default-scheduler",
                     "resource": {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": ns, "uid": uid},
                     "replicas": 1, "placement": {"clusterAffinity": {"clusterNames": members}, **DIVIDED}}}


def bindings_scheduled(host: Kube, ns: str, jobs: dict[str, str], members: list[str]) -> dict[str, Any]:
    """POST a binding per Job at RATE; wait until every one is Scheduled; report rate and create -> Scheduled."""
    watch = ScheduledWatch(host, ns)
    bodies = {f"{name}-job": binding_for(name, uid, ns, members) for name, uid in sorted(jobs.items())}
    sent, created_in = post_at_rate(host, f"{RB_API}/namespaces/{ns}/resourcebindings", bodies, RATE, CLIENTS)
    seen = watch.wait_all(set(bodies), TIMEOUT)
    waits = [seen[name] - sent[name] for name in bodies]
    return {"bindings": COUNT, "target_rate_per_s": RATE, "achieved_create_rate_per_s": round(COUNT / created_in, 1),
            "scheduled_per_s": round(COUNT / (max(seen.values()) - min(sent.values())), 1),
            "create_to_scheduled_s": latency(waits)}


def pause_to_resume(host: Kube, ns: str) -> dict[str, Any]:
    """Atoll's own share, from its annotations (written in the same patch that resumes, so present once a
    binding is Scheduled): every binding was paused by the webhook and admitted."""
    items: list[dict[str, Any]] = host.get(f"{RB_API}/namespaces/{ns}/resourcebindings")["items"]
    notes = [annotations_of(b) for b in items]
    assert len(notes) == COUNT and all(PAUSED in n and "atoll.dev/admitted-at" in n for n in notes), \
        [n for n in notes if PAUSED not in n or "atoll.dev/admitted-at" not in n][:3]
    paused = [parse_stamp(n[PAUSED]) for n in notes]
    admitted = [parse_stamp(n["atoll.dev/admitted-at"]) for n in notes]
    lat = [a - p for a, p in zip(admitted, paused) if a is not None and p is not None]
    assert len(lat) == COUNT and min(lat) >= 0
    return {"resumed_per_s": round(COUNT / (max(a for a in admitted if a) - min(p for p in paused if p)), 1),
            "pause_to_resume_s": latency(lat)}


def report(fleet: FleetHandle, name: str, result: dict[str, Any]) -> None:
    print(f"\n{name}:", json.dumps(result))
    (fleet.info.state_dir / f"controller-bench-{name}.json").write_text(json.dumps(result, indent=2))


def test_plain_karmada_schedules_bindings_created_at_rate(fleet: FleetHandle, host: Kube, ns: str) -> None:
    result = bindings_scheduled(host, ns, create_jobs(host, ns), fleet.members)
    report(fleet, "karmada", {"mode": "plain Karmada, bindings POSTed directly", **result})


def test_atoll_resumes_bindings_created_at_rate(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    jobs = create_jobs(host, ns)           # before the controller starts: it is ready once its caches hold them
    with atoll(fleet.info, tmp_path, default_policy()) as (_, ctl, _cm):
        result = bindings_scheduled(host, ns, jobs, fleet.members)
        result.update(pause_to_resume(host, ns))
        assert ctl.alive()
    report(fleet, "atoll", {"mode": "Atoll (gate), bindings POSTed directly", **result})


def test_atoll_with_bindings_made_by_karmadas_detector(fleet: FleetHandle, host: Kube, ns: str,
                                                       tmp_path: Path) -> None:
    """Jobs POSTed at RATE with a PropagationPolicy: Karmada's detector makes the bindings (on this machine at
    only a few dozen per second, which then bounds everything after it)."""
    with atoll(fleet.info, tmp_path, default_policy()) as (_, ctl, _cm):
        host.apply({"apiVersion": POLICY_API, "kind": "PropagationPolicy", "metadata": {"name": "bench", "namespace": ns},
                    "spec": {"resourceSelectors": [{"apiVersion": "batch/v1", "kind": "Job",
                                                    "labelSelector": {"matchLabels": {"atoll.dev/bench": "1"}}}],
                             "placement": {"clusterAffinity": {"clusterNames": fleet.members}, **DIVIDED}}})
        watch = ScheduledWatch(host, ns)
        bodies = {f"b{i:04d}": job(f"b{i:04d}", ns, cpu="10m", pods=1, run_seconds=5, labels={"atoll.dev/bench": "1"})
                  for i in range(COUNT)}
        sent, created_in = post_at_rate(host, f"/apis/batch/v1/namespaces/{ns}/jobs", bodies, RATE, CLIENTS)
        seen = watch.wait_all({f"{name}-job" for name in bodies}, TIMEOUT)
        result = {"bindings": COUNT, "target_rate_per_s": RATE,
                  "achieved_create_rate_per_s": round(COUNT / created_in, 1),
                  "job_create_to_scheduled_s": latency([seen[f"{n}-job"] - sent[n] for n in bodies]),
                  **pause_to_resume(host, ns)}
        assert ctl.alive()
    report(fleet, "atoll-detector", {"mode": "Atoll (gate), bindings made by Karmada's detector", **result})
