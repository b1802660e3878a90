"""Who goes first when one slot frees up, on the real fleet with the default policy less preemption
(policies/no-preemption.yaml): with preemption a high-priority waiter would evict a blocker instead of waiting
for the freed slot, which e2e/tests/test_preemption.py covers.

Slots: each member has two 32-cpu kwok nodes, so a 1-pod x 30-cpu job takes one "slot"; the fleet has 4.
Each test fills all 4 slots with blockers, queues two waiters whose winner differs between FIFO and the
behaviour under test, deletes one blocker and checks who is admitted into the freed slot. The loser keeps
waiting with a reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube, KubeError
from e2e.tests.controller_support import (ControllerProcess, admitted, annotations_of, atoll, job, propagate, vcjob,
                                          wait_admitted, wait_pending)
from e2e.tests.support import delete, namespace, unique, until
from engine.resources import parse_quantity

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


@pytest.fixture(scope="module")
def running(fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    with atoll(fleet.info, tmp_path_factory.mktemp("atoll"), (REPO / "policies" / "no-preemption.yaml").read_text()) \
            as (_, ctl, _cm):
        yield ctl



@pytest.fixture
def queues(host: Kube) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for q in made:
        delete(host, f"{QUEUES}/{q}")


def make_queue(host: Kube, made: list[str], name: str, weight: int = 1, priority: int = 0,
               state: Optional[str] = None) -> str:
    host.apply({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
                "spec": {"weight": weight, "priority": priority, "reclaimable": True}})
    made.append(name)
    if state:
        host.apply_status({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
                           "status": {"state": state}})
    return name


def submit(host: Kube, fleet: FleetHandle, obj: dict[str, Any], where: Optional[list[str]] = None) -> dict[str, Any]:
    host.apply(obj)
    propagate(host, obj, where or fleet.members)
    return obj


def slot(name: str, ns: str, queue: str = "", seconds: Optional[int] = None, pc: str = "",
         labels: Optional[dict[str, str]] = None) -> dict[str, Any]:
    lab = dict(labels or {})
    if queue:
        lab["volcano.sh/queue-name"] = queue
    return job(name, ns, cpu="30", pods=1, run_seconds=seconds, labels=lab, priority_class=pc)


def fleet_idle(host: Kube) -> bool:
    """No cpu allocated in any member: earlier tests' namespaces (deleted asynchronously) are gone."""
    for c in host.get("/apis/cluster.karmada.io/v1alpha1/clusters")["items"]:
        summary = c.get("status", {}).get("resourceSummary", {})
        for part in ("allocated", "allocating"):
            if parse_quantity((summary.get(part) or {}).get("cpu", "0"), "cpu") >= 1000:
                return False
    return True


def fill(host: Kube, fleet: FleetHandle, ns: str, queues_of_long: list[str]) -> dict[str, Any]:
    """Three blockers in the given queues plus one more (the test deletes it to free one slot): all 4 taken.
    Starts from an idle fleet, so capacity freed by earlier tests cannot open a fifth slot mid-race."""
    until("the fleet is idle (earlier tests cleaned up)", lambda: fleet_idle(host), 120)
    m1, m2 = fleet.members[:2]
    # pinned two per member: karmada-scheduler's ~10 s-stale estimate could otherwise stack three on one
    # member (one pod Pending there) and leave a real fifth slot free on the other
    for (i, q), where in zip(enumerate(queues_of_long), (m1, m1, m2)):
        wait_admitted(host, submit(host, fleet, slot(f"long{i}", ns, q), [where]))
    short = submit(host, fleet, slot("short", ns, ""), [m2])
    wait_admitted(host, short)
    return short


def race(host: Kube, winner: dict[str, Any], loser: dict[str, Any], blocker: dict[str, Any]) -> None:
    """Both waiters are pending: free exactly one slot and see who gets it."""
    m = blocker["metadata"]
    host.request("DELETE", f"/apis/batch/v1/namespaces/{m['namespace']}/jobs/{m['name']}",
                 {"propagationPolicy": "Background"})
    rb = wait_admitted(host, winner, timeout=90)
    assert admitted(host, loser) is None, "both waiters were admitted into one free slot"
    rb_loser = wait_pending(host, loser)
    assert annotations_of(rb_loser)["atoll.dev/pending-reason"]
    assert annotations_of(rb)["atoll.dev/admitted-at"]


def priority_class(host: Kube, name: str, value: int) -> None:
    host.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "globalDefault": False})


def test_queue_priority_beats_arrival_order(fleet: FleetHandle, host: Kube, running: ControllerProcess, ns: str,
                                            queues: list[str]) -> None:
    low = make_queue(host, queues, unique("low"), priority=1)
    high = make_queue(host, queues, unique("high"), priority=10)
    blocker = fill(host, fleet, ns, ["default", "default", "default"])
    first = submit(host, fleet, slot("in-low", ns, low, seconds=5))
    wait_pending(host, first)
    second = submit(host, fleet, slot("in-high", ns, high, seconds=5))
    wait_pending(host, second)
    race(host, winner=second, loser=first, blocker=blocker)


def test_job_priority_within_a_queue(fleet: FleetHandle, host: Kube, running: ControllerProcess, ns: str) -> None:
    priority_class(host, "atoll-e2e-low", 10)
    priority_class(host, "atoll-e2e-high", 1000)
    blocker = fill(host, fleet, ns, ["default", "default", "default"])
    first = submit(host, fleet, slot("low-prio", ns, pc="atoll-e2e-low", seconds=5))
    wait_pending(host, first)
    second = submit(host, fleet, slot("high-prio", ns, pc="atoll-e2e-high", seconds=5))
    wait_pending(host, second)
    race(host, winner=second, loser=first, blocker=blocker)


def test_weighted_drf_between_two_queues(fleet: FleetHandle, host: Kube, running: ControllerProcess, ns: str,
                                         queues: list[str]) -> None:
    """heavy (weight 3) holds 2 slots, light (weight 1) holds 1: weighted shares 60/128/3 < 30/128/1, so
    heavy's waiter wins although light's waiter came first and light holds less (plain DRF or FIFO: light)."""
    heavy = make_queue(host, queues, unique("heavy"), weight=3)
    light = make_queue(host, queues, unique("light"), weight=1)
    blocker = fill(host, fleet, ns, [heavy, heavy, light])
    first = submit(host, fleet, slot("light-waiter", ns, light, seconds=5))
    wait_pending(host, first)
    second = submit(host, fleet, slot("heavy-waiter", ns, heavy, seconds=5))
    wait_pending(host, second)
    race(host, winner=second, loser=first, blocker=blocker)


def test_closed_queue_admits_nothing(fleet: FleetHandle, host: Kube, running: ControllerProcess, ns: str,
                                     queues: list[str]) -> None:
    closed = make_queue(host, queues, unique("closed"), state="Closed")
    is_open = make_queue(host, queues, unique("open"))
    blocked = submit(host, fleet, slot("in-closed", ns, closed, seconds=5))
    fine = submit(host, fleet, slot("in-open", ns, is_open, seconds=5))
    wait_admitted(host, fine)
    rb = wait_pending(host, blocked, "Closed")
    assert rb["spec"]["suspension"]["scheduling"] is True


def test_gpu_capacity_and_model_labels(fleet: FleetHandle, host: Kube, running: ControllerProcess, ns: str) -> None:
    """Members have 16 GPUs each (2 nodes x 8). Models come from Cluster labels gpu-model."""
    m1, m2 = fleet.members[:2]
    for member, model in ((m1, "a100"), (m2, "h100")):
        host.request("PATCH", f"/apis/cluster.karmada.io/v1alpha1/clusters/{member}",
                     {"metadata": {"labels": {"gpu-model": model}}}, content_type="application/merge-patch+json")
    try:
        h100 = submit(host, fleet, job("want-h100", ns, cpu="1", pods=2, gpu="8", run_seconds=5,
                                       labels={"atoll.dev/gpu-model": "h100"}))
        v100 = submit(host, fleet, job("want-v100", ns, cpu="1", pods=1, gpu="1", run_seconds=5,
                                       labels={"atoll.dev/gpu-model": "v100"}))
        too_big = submit(host, fleet, vcjob("gpu-gang", ns, "default", [("w", 3, "1")], gpu="8"))
        wait_admitted(host, h100)
        wait_pending(host, v100, "v100")
        rb = wait_pending(host, too_big)
        assert "nvidia.com/gpu" in annotations_of(rb)["atoll.dev/pending-reason"]
    finally:
        for member in (m1, m2):
            try:
                host.request("PATCH", f"/apis/cluster.karmada.io/v1alpha1/clusters/{member}",
                             {"metadata": {"labels": {"gpu-model": None}}},
                             content_type="application/merge-patch+json")
            except KubeError:
                pass

