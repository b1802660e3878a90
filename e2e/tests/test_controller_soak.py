"""Soak (a measurement, not a timing gate): ATOLL_SOAK_COUNT (default 2,000) bindings through one controller in
bind mode at a sustained rate (ATOLL_SOAK_RATE, default 20/s: at 40/s this machine falls behind); the
controller's RSS and cycle time at the start and at the end, and create -> Scheduled in the first and the last
tenth of the stream.

Each binding is addressed to schedulerName atoll and created with ``spec.suspension.dispatching: true``: Karmada
makes no Works for it, so what is measured is the controller (admit, write spec.clusters and the Scheduled
condition) and the API server, not Karmada's dispatch (about 4 Works/s on this machine: 2,000 would take over
8 minutes). Once Scheduled, each binding and its Job are deleted (the job is gone), so the engine's books and
the controller's caches go up and down as in a fleet where jobs come and go, and a leak would show as an RSS or
a cycle time that grows with the count.
Results are printed and written to $ATOLL_E2E_STATE/controller-soak.json.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.bench_support import ScheduledWatch, latency, post_at_rate
from e2e.tests.controller_support import ControllerProcess, atoll, job
from e2e.tests.support import RB_API, delete, until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
COUNT = int(os.environ.get("ATOLL_SOAK_COUNT", "2000"))
RATE = float(os.environ.get("ATOLL_SOAK_RATE", "20"))
TENTH = max(1, COUNT // 10)


@pytest.fixture
def ns(ns: str, host: Kube) -> Iterator[str]:
    """Gone before the next test: thousands of objects keep the API server busy while they are deleted."""
    yield ns
    delete(host, f"/api/v1/namespaces/{ns}")
    until(f"namespace {ns} deleted", lambda: host.get_or_none(f"/api/v1/namespaces/{ns}") is None, 600)


def binding(name: str, uid: str, ns: str, members: list[str]) -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-job", "namespace": ns},
            "spec": {"schedulerName": "atoll", "suspension": {"dispatching": True},
                     "resource": {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": ns, "uid": uid},
                     "replicas": 1, "placement": {"clusterAffinity": {"clusterNames": members},
                                                  "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                                        "replicaDivisionPreference": "Aggregated"}}}}


class Sampler:
    """Every second: bindings Scheduled so far, the controller's RSS (from /proc) and its cycle histogram's
    running sum and count (from /metrics)."""

    def __init__(self, ctl: ControllerProcess, watch: ScheduledWatch) -> None:
        self.ctl, self.watch = ctl, watch
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak sampler", daemon=True)
        self._thread.start()

    def sample(self) -> dict[str, float]:
        status = Path(f"/proc/{self.ctl.proc.pid}/status").read_text()
        rss_kb = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1))  # type: ignore[union-attr]
        text = self.ctl.metrics()
        total = float(re.search(r"^atoll_cycle_duration_seconds_sum (\S+)", text, re.M).group(1))  # type: ignore[union-attr]
        steps = float(re.search(r"^atoll_cycle_duration_seconds_count (\S+)", text, re.M).group(1))  # type: ignore[union-attr]
        return {"t": time.monotonic(), "scheduled": len(self.watch.seen), "rss_mib": rss_kb / 1024,
                "cycle_sum": total, "cycle_count": steps}

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.samples.append(self.sample())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.samples.append(self.sample())

    def window(self, low: int, high: int) -> dict[str, Any]:
        """Mean cycle time and RSS while the Scheduled count went from ``low`` to ``high``."""
        inside = [s for s in self.samples if low <= s["scheduled"] <= high] or self.samples[-2:]
        first, last = inside[0], inside[-1]
        steps = last["cycle_count"] - first["cycle_count"]
        mean = (last["cycle_sum"] - first["cycle_sum"]) / steps if steps else 0.0
        return {"cycle_mean_ms": round(mean * 1000, 2), "steps": int(steps),
                "rss_mib": round(max(s["rss_mib"] for s in inside), 1)}


def test_soak_bind_mode(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    jobs = {}
    bodies = {f"s{i:05d}": job(f"s{i:05d}", ns, cpu="10m", pods=1) for i in range(COUNT)}
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    post_at_rate(host, path, bodies, 500.0, 32)
    for item in host.get(path)["items"]:
        jobs[item["metadata"]["name"]] = item["metadata"]["uid"]
    assert len(jobs) == COUNT
    policy = re.sub(r"placementMode: \w+", "placementMode: bind", (REPO / "policies" / "default.yaml").read_text())
    load = round(os.getloadavg()[0], 1)
    with atoll(fleet.info, tmp_path, policy) as (_, ctl, _cm):
        watch = ScheduledWatch(host, ns)
        sampler = Sampler(ctl, watch)
        deleted: set[str] = set()
        stop = threading.Event()

        def end(name: str) -> None:
            delete(host, f"{RB_API}/namespaces/{ns}/resourcebindings/{name}")
            delete(host, f"{path}/{name.removesuffix('-job')}")

        def delete_scheduled() -> None:           # each job ends once placed: its binding and Job go
            with ThreadPoolExecutor(8) as pool:
                while True:
                    done = stop.wait(0.2)
                    batch = sorted(watch.seen.copy().keys() - deleted)
                    list(pool.map(end, batch))
                    deleted.update(batch)
                    if done:
                        return

        deleter = threading.Thread(target=delete_scheduled, name="soak deleter", daemon=True)
        deleter.start()
        rbs = {f"{name}-job": binding(name, uid, ns, fleet.members) for name, uid in sorted(jobs.items())}
        sent, created_in = post_at_rate(host, f"{RB_API}/namespaces/{ns}/resourcebindings", rbs, RATE, 32)
        seen = watch.wait_all(set(rbs), 300 + 2 * COUNT / RATE)
        sampler.stop()
        stop.set()
        deleter.join(60)
        watch.stop()
        until("every binding deleted", lambda: not host.get(f"{RB_API}/namespaces/{ns}/resourcebindings")["items"],
              300)
        assert ctl.alive(), ctl.log_tail()
        order = sorted(rbs, key=lambda n: sent[n])
        start = min(sent.values())
        result = {
            "bindings": COUNT, "target_rate_per_s": RATE, "achieved_create_rate_per_s": round(COUNT / created_in, 1),
            "scheduled_per_s": round(COUNT / (max(seen.values()) - start), 1),
            "first_tenth_create_to_scheduled_s": latency([seen[n] - sent[n] for n in order[:TENTH]]),
            "last_tenth_create_to_scheduled_s": latency([seen[n] - sent[n] for n in order[-TENTH:]]),
            "start": sampler.window(0, TENTH), "middle": sampler.window(COUNT // 2 - TENTH // 2, COUNT // 2 + TENTH // 2),
            "end": sampler.window(COUNT - TENTH, COUNT),
            "load": [load, round(os.getloadavg()[0], 1)]}
    print("\nsoak:", json.dumps(result))
    (fleet.info.state_dir / "controller-soak.json").write_text(json.dumps(result, indent=2))
