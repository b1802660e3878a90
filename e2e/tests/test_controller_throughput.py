"""Measurement (not a pass/fail timing gate): bindings created at a fixed rate, paused by the webhook, resumed by
the controller. Latency = atoll.dev/admitted-at - atoll.dev/paused-by-webhook (both stamped on this host).

ATOLL_BENCH_RATE (default 50/s) and ATOLL_BENCH_COUNT (default 300); results printed and written to
$ATOLL_E2E_STATE/controller-bench.json.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.controller_support import PAUSED, annotations_of, atoll, job
from e2e.tests.support import POLICY_API, RB_API, delete, namespace, unique, until
from engine.kube.plan import parse_stamp

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RATE = float(os.environ.get("ATOLL_BENCH_RATE", "50"))
COUNT = int(os.environ.get("ATOLL_BENCH_COUNT", "300"))
THREADS = int(os.environ.get("ATOLL_BENCH_CLIENTS", "32"))       # concurrent creating clients


@pytest.fixture
def ns(host: Kube) -> Iterator[str]:
    name = unique("atoll-bench")
    namespace(host, name)
    yield name
    delete(host, f"/api/v1/namespaces/{name}")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def test_resume_rate_and_latency(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    with atoll(fleet.info, tmp_path, (REPO / "policies" / "default.yaml").read_text()) as (_, ctl, _cm):
        host.apply({"apiVersion": POLICY_API, "kind": "PropagationPolicy", "metadata": {"name": "bench", "namespace": ns},
                    "spec": {"resourceSelectors": [{"apiVersion": "batch/v1", "kind": "Job",
                                                    "labelSelector": {"matchLabels": {"atoll.dev/bench": "1"}}}],
                             "placement": {"clusterAffinity": {"clusterNames": fleet.members},
                                           "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                                 "replicaDivisionPreference": "Aggregated"}}}})
        objs = [job(f"b{i:04d}", ns, cpu="10m", pods=1, run_seconds=5, labels={"atoll.dev/bench": "1"})
                for i in range(COUNT)]
        start = time.monotonic()
        with ThreadPoolExecutor(THREADS) as pool:
            futures = []
            for i, obj in enumerate(objs):
                delay = start + i / RATE - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(host.request, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", obj))
            for f in futures:
                f.result()
        created_in = time.monotonic() - start

        def resumed() -> list[dict[str, Any]] | None:
            items: list[dict[str, Any]] = host.get(f"{RB_API}/namespaces/{ns}/resourcebindings")["items"]
            done = [b for b in items if "atoll.dev/admitted-at" in annotations_of(b)]
            return done if len(done) == COUNT else None

        bindings = until(f"all {COUNT} bindings resumed", resumed, 300)
        paused = [parse_stamp(annotations_of(b)[PAUSED]) for b in bindings]
        admitted = [parse_stamp(annotations_of(b)["atoll.dev/admitted-at"]) for b in bindings]
        lat = [a - p for a, p in zip(admitted, paused) if a is not None and p is not None]
        first_pause = min(p for p in paused if p is not None)
        last_admit = max(a for a in admitted if a is not None)
        result = {"bindings": COUNT, "target_rate_per_s": RATE, "created_in_s": round(created_in, 2),
                  "achieved_create_rate_per_s": round(COUNT / created_in, 1),
                  "resumed_per_s": round(COUNT / (last_admit - first_pause), 1),
                  "latency_s": {"p50": round(pct(lat, 50), 3), "p95": round(pct(lat, 95), 3),
                                "max": round(max(lat), 3)}}
        print("\ncontroller bench:", json.dumps(result))
        (fleet.info.state_dir / "controller-bench.json").write_text(json.dumps(result, indent=2))
        assert len(lat) == COUNT and min(lat) >= 0
        assert ctl.alive()


def test_resume_rate_with_bindings_created_directly(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    """Karmada's detector creates bindings at only a few per second on this machine, which hides the controller's
    own rate. Here the templates exist first (no PropagationPolicy) and the ResourceBindings are POSTed directly
    at RATE per second; the webhook pauses them at CREATE and the controller resumes them."""
    with atoll(fleet.info, tmp_path, (REPO / "policies" / "default.yaml").read_text()) as (_, ctl, _cm):
        uids = {}
        with ThreadPoolExecutor(8) as pool:
            made = list(pool.map(lambda i: host.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job(
                f"d{i:04d}", ns, cpu="10m", pods=1, run_seconds=5)), range(COUNT)))
        for obj in made:
            uids[obj["metadata"]["name"]] = obj["metadata"]["uid"]
        time.sleep(3)                                     # the controller's template cache has them all

        def rb(name: str) -> dict[str, Any]:
            return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                    # the detector's finalizer, so the Works are withdrawn when the namespace goes
                    "metadata": {"name": f"{name}-job", "namespace": ns,
                                 "finalizers": ["karmada.io/binding-controller"]},
                    "spec": {"resource": {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": ns,
                                          "uid": uids[name]},
                             "replicas": 1, "placement": {"clusterAffinity": {"clusterNames": fleet.members}}}}
        start = time.monotonic()
        with ThreadPoolExecutor(THREADS) as pool:
            futures = []
            for i, name in enumerate(sorted(uids)):
                delay = start + i / RATE - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(host.request, "POST", f"{RB_API}/namespaces/{ns}/resourcebindings",
                                           rb(name)))
            for f in futures:
                f.result()
        created_in = time.monotonic() - start

        def resumed() -> list[dict[str, Any]] | None:
            items: list[dict[str, Any]] = host.get(f"{RB_API}/namespaces/{ns}/resourcebindings")["items"]
            done = [b for b in items if "atoll.dev/admitted-at" in annotations_of(b)]
            return done if len(done) == COUNT else None

        bindings = until(f"all {COUNT} bindings resumed", resumed, 300)
        paused = [parse_stamp(annotations_of(b)[PAUSED]) for b in bindings]
        admitted = [parse_stamp(annotations_of(b)["atoll.dev/admitted-at"]) for b in bindings]
        lat = [a - p for a, p in zip(admitted, paused) if a is not None and p is not None]
        span = max(a for a in admitted if a is not None) - min(p for p in paused if p is not None)
        result = {"mode": "direct bindings", "bindings": COUNT, "target_rate_per_s": RATE,
                  "achieved_create_rate_per_s": round(COUNT / created_in, 1),
                  "resumed_per_s": round(COUNT / span, 1),
                  "latency_s": {"p50": round(pct(lat, 50), 3), "p95": round(pct(lat, 95), 3),
                                "max": round(max(lat), 3)}}
        print("\ncontroller bench (direct):", json.dumps(result))
        (fleet.info.state_dir / "controller-bench-direct.json").write_text(json.dumps(result, indent=2))
        assert len(lat) == COUNT and min(lat) >= 0
        assert ctl.alive()
