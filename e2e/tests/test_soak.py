"""Soak: 2,000 bindings through one controller (bind mode) at a sustained rate; its RSS and cycle time at the
start and at the end are reported (a measurement, written to $ATOLL_E2E_STATE/controller-soak.json), and every
binding is admitted exactly once.

Load: ATOLL_SOAK_COUNT (2000) one-pod 10m-cpu batch Jobs, their ResourceBindings POSTed at ATOLL_SOAK_RATE (25/s)
with schedulerName atoll and ``suspension.dispatching: true``: Atoll admits and places every one, Karmada makes
their Works but does not apply them, so the members are not loaded with 2,000 pods and the run measures the
controller. Pace: each admission reserves a pod slot on its cluster until the next cluster report (the runner
re-stamps reports every 15 s), and the fleet has 2 x 220 pod slots, so admissions cannot outrun ~440 per 15 s.
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.controller_support import ControllerProcess, atoll, job
from e2e.tests.fault_support import AdmissionWatch, Stream, binding_body
from e2e.tests.support import delete, rb_path, until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
COUNT = int(os.environ.get("ATOLL_SOAK_COUNT", "2000"))
RATE = float(os.environ.get("ATOLL_SOAK_RATE", "25"))


def rss_mib(pid: int) -> float:
    m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return round(int(m.group(1)) / 1024, 1) if m else 0.0


def cycle_totals(ctl: ControllerProcess) -> tuple[float, float]:
    text = ctl.metrics()
    total = float(re.search(r"^atoll_cycle_duration_seconds_sum (\S+)$", text, re.M).group(1))  # type: ignore[union-attr]
    count = float(re.search(r"^atoll_cycle_duration_seconds_count (\S+)$", text, re.M).group(1))  # type: ignore[union-attr]
    return total, count


def sample(ctl: ControllerProcess, admitted: int) -> dict[str, Any]:
    total, count = cycle_totals(ctl)
    return {"admitted": admitted, "rss_mib": rss_mib(ctl.proc.pid), "cycle_sum_s": total, "cycles": count,
            "at": time.monotonic()}


def window(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    cycles = b["cycles"] - a["cycles"]
    return {"admitted": b["admitted"] - a["admitted"], "cycles": int(cycles),
            "mean_cycle_ms": round(1000 * (b["cycle_sum_s"] - a["cycle_sum_s"]) / cycles, 2) if cycles else None,
            "admitted_per_s": round((b["admitted"] - a["admitted"]) / (b["at"] - a["at"]), 1)}


@pytest.fixture
def soak_ns(ns: str, host: Kube) -> Any:
    yield ns
    delete(host, f"/api/v1/namespaces/{ns}")
    until(f"namespace {ns} deleted", lambda: host.get_or_none(f"/api/v1/namespaces/{ns}") is None, 600)


def test_soak_2000_bindings(fleet: FleetHandle, host: Kube, soak_ns: str, tmp_path: Path) -> None:
    ns = soak_ns
    names = [f"s{i:05d}" for i in range(COUNT)]
    with ThreadPoolExecutor(16) as pool:
        made = list(pool.map(lambda n: host.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs",
                                                    job(n, ns, cpu="10m", pods=1)), names))
    bodies = {}
    for obj in made:
        body = binding_body(obj["metadata"]["name"], obj["metadata"]["uid"], ns, fleet.members, "atoll")
        body["spec"]["suspension"] = {"dispatching": True}
        bodies[body["metadata"]["name"]] = body
    text = (REPO / "policies" / "default.yaml").read_text().replace("placementMode: gate", "placementMode: bind")
    with atoll(fleet.info, tmp_path, text) as (_, ctl, _cm):
        watch = AdmissionWatch(host, ns)
        samples = [sample(ctl, 0)]
        stream = Stream(host, rb_path(ns), bodies, rate=RATE, clients=16)
        marks = [COUNT // 10, COUNT // 2, COUNT * 9 // 10]
        for mark in marks:
            until(f"{mark} admitted", lambda: len(watch.admitted()) >= mark, 600,
                  show=lambda: f"{len(watch.admitted())} admitted")
            samples.append(sample(ctl, len(watch.admitted())))
        stream.wait(600)
        watch.wait_all_admitted(set(bodies), 600)
        samples.append(sample(ctl, len(watch.admitted())))
        watch.check_exactly_once(set(bodies))
        assert ctl.alive(), ctl.log_tail()
        watch.stop()
    result = {"bindings": COUNT, "target_rate_per_s": RATE, "load": round(os.getloadavg()[0], 1),
              "rss_mib": [s["rss_mib"] for s in samples],
              "start": window(samples[0], samples[1]), "middle": window(samples[1], samples[2]),
              "end": window(samples[3], samples[4]),
              "overall_admitted_per_s": round(COUNT / (samples[-1]["at"] - samples[0]["at"]), 1)}
    print("\nsoak:", json.dumps(result))
    (fleet.info.state_dir / "controller-soak.json").write_text(json.dumps(result, indent=2))
