"""A member deleted from the fleet (its Cluster object removed) with jobs on it, then joined again: the jobs are
moved to the other member (by Karmada itself, or requeued and re-admitted by Atoll when Karmada leaves it there), and afterwards the engine's books equal the API's truth (clusters,
their summaries, no reservation left in flight, exactly the resumed bindings holding resources, queue usage =
the sum of its jobs). The frozen-apiserver case (a member whose API server stops with a job on it) is
test_controller_recovery.py, which ends with the same books check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.config import load_config
from e2e.harness.kube import Kube
from e2e.harness.member import join_objects
from e2e.harness.pki import Pki
from e2e.tests.controller_support import annotations_of, atoll, events_for, job, propagate, rb_name, wait_admitted
from e2e.tests.fault_support import wait_books_match_truth
from e2e.tests.support import binding, is_true, others_gone, until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = "/apis/cluster.karmada.io/v1alpha1/clusters"


def placed(host: Kube, ns: str, name: str) -> list[str]:
    rb = binding(host, ns, name)
    if rb is None or not is_true(rb, "Scheduled") or (rb["spec"].get("suspension") or {}).get("scheduling"):
        return []
    return sorted(c["name"] for c in rb["spec"].get("clusters") or [])


def placement_of(host: Kube, ns: str, name: str) -> Callable[[], list[str]]:
    return lambda: placed(host, ns, name)


def requeued_lost(host: Kube, ns: str, name: str) -> Callable[[], list[dict[str, Any]]]:
    return lambda: [e for e in events_for(host, ns, name) if e["reason"] == "Requeued" and "ClusterLost" in e["message"]]


def test_member_deleted_and_joined_again(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    text = (REPO / "policies" / "default.yaml").read_text().replace("initialDelay: 10s", "initialDelay: 2s")
    others_gone(host, ns)       # earlier tests' bindings on the member would hold its deletion up
    jobs = [job(f"m{i}", ns, cpu="1", pods=1) for i in range(4)]          # run until deleted
    with atoll(fleet.info, tmp_path, text) as (_, ctl, _cm):
        for j in jobs:
            host.apply(j)
            propagate(host, j, fleet.members)
        first = {rb_name(j): annotations_of(wait_admitted(host, j, 180))["atoll.dev/admitted-at"] for j in jobs}
        where = {rb_name(j): until(f"{rb_name(j)} placed", placement_of(host, ns, rb_name(j)), 180) for j in jobs}
        counts = {m: sum(m in w for w in where.values()) for m in fleet.members}
        lost = max(counts, key=lambda m: counts[m])
        (other,) = [m for m in fleet.members[:2] if m != lost]
        on_lost = [n for n, w in where.items() if lost in w]
        member_cfg = {m.name: m for m in load_config().members}[lost]
        host.request("DELETE", f"{CLUSTERS}/{lost}")
        try:
            until(f"Cluster {lost} gone", lambda: host.get_or_none(f"{CLUSTERS}/{lost}") is None, 300)
            for name in on_lost:       # Karmada may move it by itself; else Atoll requeues and re-admits it
                until(f"{name} placed on {other}", placement_of(host, ns, name), 180)
                until(f"{name} placed on {other}", lambda: placed(host, ns, name) == [other], 180,
                      show=lambda: binding(host, ns, name))
                if requeued_lost(host, ns, name)():
                    assert annotations_of(binding(host, ns, name)).get("atoll.dev/admitted-at") != first[name]
        finally:       # join again only once Karmada has finished removing it (else the join is undone)
            until(f"Cluster {lost} gone", lambda: host.get_or_none(f"{CLUSTERS}/{lost}") is None, 300)
            for obj in join_objects(member_cfg, Pki(fleet.info.state_dir / "pki")):
                host.apply(obj)
        until(f"Cluster {lost} joined again and Ready", lambda: is_true(host.get_or_none(f"{CLUSTERS}/{lost}"), "Ready")
              and (host.get(f"{CLUSTERS}/{lost}").get("status") or {}).get("resourceSummary"), 120)
        for name, w in where.items():                  # the jobs elsewhere were never touched
            if lost not in w:
                assert annotations_of(binding(host, ns, name))["atoll.dev/admitted-at"] == first[name], name
        wait_books_match_truth(ctl, host, [ns])
        assert ctl.alive(), ctl.log_tail()
