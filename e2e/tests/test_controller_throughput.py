"""Measurement (not a pass/fail timing gate): how fast bindings get scheduled on the real fleet, with and
without Atoll, under the same load.

Load: ATOLL_BENCH_COUNT (default 300) ResourceBindings POSTed at ATOLL_BENCH_RATES per second (default 50 and 200)
for batch Jobs that already exist, as Karmada's detector would create them; open loop over ATOLL_BENCH_CLIENTS
kept-alive connections (bench_support.post_at_rate). A watch opened before the load stamps
when each binding is first seen Scheduled=True; create -> Scheduled runs from the moment its POST was sent.
- plain Karmada: no webhook, no controller; karmada-scheduler takes each binding as it arrives;
- Atoll: the webhook pauses each binding at CREATE, the controller admits and resumes it, karmada-scheduler
  then schedules it. Also reported: pause -> resume (atoll.dev/admitted-at - atoll.dev/paused-by-webhook).
A third run creates Jobs with a PropagationPolicy (the detector makes the bindings) under Atoll.
Results are printed and written to $ATOLL_E2E_STATE/controller-bench-*.json.
"""

from __future__ import annotations

import re
import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.bench_support import CpuMeter, ScheduledWatch, latency, post_at_rate
from e2e.tests.controller_support import PAUSED, annotations_of, atoll, job
from e2e.tests.support import POLICY_API, RB_API, delete, until
from engine.kube.plan import parse_stamp

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RATE = float(os.environ.get("ATOLL_BENCH_RATE", "50"))                 # the detector run
RATES = [float(r) for r in os.environ.get("ATOLL_BENCH_RATES", "50,200").split(",")]
COUNT = int(os.environ.get("ATOLL_BENCH_COUNT", "300"))
CLIENTS = int(os.environ.get("ATOLL_BENCH_CLIENTS", "32"))       # the load generator's kept-alive connections
TIMEOUT = 300 + 2 * COUNT / 50         # a deadline, generous: karmada-scheduler took 4-10 bindings/s here
MODES = ("karmada", "gate", "bind")
MODE_TEXT = {"karmada": "plain Karmada, bindings POSTed directly",
             "gate": "Atoll (gate), bindings POSTed directly",
             "bind": "Atoll (bind: schedulerName atoll), bindings POSTed directly"}
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


def binding_for(name: str, uid: str, ns: str, members: list[str], scheduler: str = "default-scheduler"
                ) -> dict[str, Any]:
    """Shaped like the detector's: karmada-scheduler only takes bindings with its schedulerName and a
    managed-by label (pkg/scheduler/event_handler.go); the finalizer withdraws the Works with the namespace."""
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-job", "namespace": ns, "labels": {"binding.karmada.io/managed-by": "atoll-e2e"},
                         "finalizers": ["karmada.io/binding-controller"]},
            "spec": {"schedulerName": scheduler,
                     "resource": {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": ns, "uid": uid},
                     "replicas": 1, "placement": {"clusterAffinity": {"clusterNames": members}, **DIVIDED}}}


def bindings_scheduled(fleet: FleetHandle, host: Kube, ns: str, jobs: dict[str, str], rate: float,
                       scheduler: str = "default-scheduler") -> dict[str, Any]:
    """POST a binding per Job at ``rate``; wait until every one is Scheduled and its Work applied in a member;
    report rates, create -> Scheduled and create -> dispatched (FullyApplied=True), and where the machine's CPU
    went from the first POST until the last binding was Scheduled."""
    watch = ScheduledWatch(host, ns)
    bodies = {f"{name}-job": binding_for(name, uid, ns, fleet.members, scheduler)
              for name, uid in sorted(jobs.items())}
    meter = CpuMeter(fleet.info.state_dir)
    sent, created_in = post_at_rate(host, f"{RB_API}/namespaces/{ns}/resourcebindings", bodies, rate, CLIENTS)
    seen = watch.wait_all(set(bodies), TIMEOUT)
    cpu = meter.cores()
    applied = watch.wait_all(set(bodies), TIMEOUT, "FullyApplied")
    watch.stop()
    start = min(sent.values())
    return {"bindings": COUNT, "target_rate_per_s": rate, "achieved_create_rate_per_s": round(COUNT / created_in, 1),
            "scheduled_per_s": round(COUNT / (max(seen.values()) - start), 1),
            "create_to_scheduled_s": latency([seen[name] - sent[name] for name in bodies]),
            "dispatched_per_s": round(COUNT / (max(applied.values()) - start), 1),
            "create_to_dispatched_s": latency([applied[name] - sent[name] for name in bodies]),
            "cpu_cores_until_scheduled": cpu}


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


@pytest.fixture(scope="module")
def summary(fleet: FleetHandle) -> Iterator[dict[tuple[str, float], dict[str, Any]]]:
    """Every mode's result at every rate, compared side by side once the module is done (same fleet, same run)."""
    results: dict[tuple[str, float], dict[str, Any]] = {}
    yield results
    rows = []
    for rate in sorted({r for _, r in results}):
        plain = results.get(("karmada", rate), {}).get("scheduled_per_s")
        for mode in MODES:
            res = results.get((mode, rate))
            if res is None:
                continue
            cts = res["create_to_scheduled_s"]
            ratio = round(res["scheduled_per_s"] / plain, 2) if plain else None
            rows.append({"rate": rate, "mode": mode, "created_per_s": res["achieved_create_rate_per_s"],
                         "scheduled_per_s": res["scheduled_per_s"], "x_plain": ratio, "p50_s": cts["p50"],
                         "p95_s": cts["p95"], "dispatched_p50_s": res.get("create_to_dispatched_s", {}).get("p50"),
                         "load": res.get("load"), "cpu": res.get("cpu_cores_until_scheduled")})
    text = "\n".join(json.dumps(r) for r in rows)
    print(f"\nthroughput summary (create -> Scheduled; x_plain = scheduled/s over plain Karmada's at that rate):\n{text}")
    (fleet.info.state_dir / "controller-bench-summary.json").write_text(json.dumps(rows, indent=2))


def mode_policy(mode: str) -> str:
    text = re.sub(r"placementMode: \w+", f"placementMode: {mode}", default_policy())
    assert f"placementMode: {mode}" in text
    return text


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rate", RATES, ids=lambda r: f"{r:g}per_s")
def test_scheduled_at_rate(mode: str, rate: float, fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path,
                           summary: dict[tuple[str, float], dict[str, Any]]) -> None:
    """The same load three ways: plain Karmada (no webhook, no controller: karmada-scheduler places each binding
    as it arrives); Atoll in gate mode (paused at CREATE, admitted and resumed by Atoll, placed by
    karmada-scheduler); Atoll in bind mode (bindings addressed to schedulerName atoll: Atoll writes spec.clusters
    and the Scheduled condition itself, karmada-scheduler never sees them)."""
    jobs = create_jobs(host, ns)           # before the controller starts: it is ready once its caches hold them
    load = round(os.getloadavg()[0], 1)
    if mode == "karmada":
        result = bindings_scheduled(fleet, host, ns, jobs, rate)
    else:
        with atoll(fleet.info, tmp_path, mode_policy(mode)) as (_, ctl, _cm):
            result = bindings_scheduled(fleet, host, ns, jobs, rate,
                                        scheduler="atoll" if mode == "bind" else "default-scheduler")
            result.update(pause_to_resume(host, ns))
            assert ctl.alive()
    result = {"mode": MODE_TEXT[mode], **result, "load": [load, round(os.getloadavg()[0], 1)]}
    summary[(mode, rate)] = result
    report(fleet, f"{mode}-{rate:g}", result)


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
        watch.stop()
        result = {"bindings": COUNT, "target_rate_per_s": RATE,
                  "achieved_create_rate_per_s": round(COUNT / created_in, 1),
                  "job_create_to_scheduled_s": latency([seen[f"{n}-job"] - sent[n] for n in bodies]),
                  **pause_to_resume(host, ns)}
        assert ctl.alive()
    report(fleet, "atoll-detector", {"mode": "Atoll (gate), bindings made by Karmada's detector", **result})
