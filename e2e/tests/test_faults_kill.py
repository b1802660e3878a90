"""The controller SIGKILLed at 10 random points of a 200-job stream (seeded; the seed is printed, and
ATOLL_FAULT_SEED replays a run), restarted each time: every job admitted exactly once, none lost, none left
paused. In bind mode every binding also ends with spec.clusters and Scheduled=True, even one whose controller
died between writing the placement and writing the condition.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.controller_support import ControllerProcess, atoll, start_controller
from e2e.tests.fault_support import AdmissionWatch, Stream, binding_body, make_jobs
from e2e.tests.support import is_true, rb_path, until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
JOBS = 200
KILLS = 10


@pytest.mark.parametrize("mode", ["gate", "bind"])
def test_controller_sigkilled_at_ten_random_points(mode: str, fleet: FleetHandle, host: Kube, ns: str,
                                                   tmp_path: Path) -> None:
    seed = int(os.environ.get("ATOLL_FAULT_SEED", str(time.time_ns() % 1_000_000)))
    points = sorted(random.Random(seed).sample(range(1, JOBS), KILLS))
    print(f"\nATOLL_FAULT_SEED={seed}: SIGKILL after {points} admissions")
    text = (REPO / "policies" / "default.yaml").read_text()
    if mode == "bind":
        text = text.replace("placementMode: gate", "placementMode: bind")
    scheduler = "atoll" if mode == "bind" else "default-scheduler"
    bodies = {f"{n}-job": binding_body(n, uid, ns, fleet.members, scheduler)
              for n, uid in make_jobs(host, ns, JOBS).items()}
    with atoll(fleet.info, tmp_path, text) as (_, first, cm):
        ctl: ControllerProcess = first
        watch = AdmissionWatch(host, ns)
        stream = Stream(host, rb_path(ns), bodies, rate=10)
        kills = []
        for i, point in enumerate(points):
            until(f"{point} admissions", lambda: len(watch.admitted()) >= point, 120,
                  show=lambda: f"{len(watch.admitted())} admitted; controller log:\n{ctl.log_tail()}")
            kills.append(len(watch.admitted()))
            ctl.kill()
            ctl = start_controller(fleet.info, tmp_path, f"atoll-system/{cm}", name=f"controller-{i + 1}")
        try:
            stream.wait(120)
            watch.wait_all_admitted(set(bodies), 180)
            watch.check_exactly_once(set(bodies))
            if mode == "bind":
                until("every binding Scheduled=True with spec.clusters", lambda: all(
                    is_true(o, "Scheduled") and o["spec"].get("clusters") for o in list(watch.last.values())), 60,
                    show=lambda: [n for n, o in watch.last.items() if not is_true(o, "Scheduled")][:5])
            assert ctl.alive(), ctl.log_tail()
        finally:
            ctl.stop()
            watch.stop()
        print(f"killed at {kills} admissions (targets {points})")



