"""karmada-divided: Karmada's DynamicWeight division, stale view, no gang guarantee."""

from __future__ import annotations

from engine.core.state import FleetState
from engine.model import Refusal
from plugins.karmada_divided import KarmadaDivided, divide_by_available

from tests.plugins._fleet import cluster, engine, job, task


def fleet() -> FleetState:
    s = FleetState()
    for name, cpu in (("a", "6"), ("b", "3"), ("c", "1")):
        s.upsert_cluster(cluster(name, cpu=cpu))
    return s


def test_divides_by_available_replicas_with_karmadas_remainder_rule() -> None:
    s = fleet()
    placed = KarmadaDivided({}, None).atoll_place(job("j", task("w", 5, cpu="1")), list(s.clusters.values()), s)
    assert placed == {"a": {"w": 4}, "b": {"w": 1}}       # 6*5//10=3 (+1 remainder), 3*5//10=1, 1*5//10=0


def test_divide_by_available_matches_karmada_arithmetic() -> None:
    assert divide_by_available([("x", 4), ("y", 4), ("z", 2)], 10) == {"x": 4, "y": 4, "z": 2}
    assert divide_by_available([("x", 1), ("y", 1), ("z", 1)], 7) == {"x": 3, "y": 2, "z": 2}
    assert divide_by_available([("x", 10), ("y", 5)], 3) == {"x": 2, "y": 1}


def test_unschedulable_when_total_available_is_short() -> None:
    s = fleet()
    decided = KarmadaDivided({}, None).atoll_place(job("j", task("w", 11, cpu="1")), list(s.clusters.values()), s)
    assert isinstance(decided, Refusal)
    assert "max 10 replicas are supported, 11 needed" in decided.reason and decided.retry_at is None


def test_divide_anyway_when_configured() -> None:
    s = fleet()
    p = KarmadaDivided({"whenShort": "divide"}, None)
    placed = p.atoll_place(job("j", task("w", 20, cpu="1")), list(s.clusters.values()), s)
    assert placed == {"a": {"w": 12}, "b": {"w": 6}, "c": {"w": 2}}
    s2 = FleetState()
    s2.upsert_cluster(cluster("x", cpu="1"))
    s2.upsert_cluster(cluster("y", cpu="1"))
    assert p.atoll_place(job("j", task("w", 3, cpu="4")), list(s2.clusters.values()), s2) == \
        {"x": {"w": 2}, "y": {"w": 1}}


def test_no_gang_guarantee_tasks_divided_independently() -> None:
    s = fleet()
    j = job("j", task("ps", 1, cpu="1"), task("worker", 4, cpu="1"))
    placed = KarmadaDivided({}, None).atoll_place(j, list(s.clusters.values()), s)
    assert placed == {"a": {"ps": 1, "worker": 3}, "b": {"worker": 1}}


def test_stale_view_over_commits_like_karmada_unless_inflight_counted() -> None:
    for count_inflight, expected in ((False, 2), (True, 1)):
        p = KarmadaDivided({"countInflight": count_inflight}, None)
        e = engine({"place": [p]}, [cluster("a", cpu="4")])
        e.submit(job("j1", task("w", 4, cpu="1")))
        e.submit(job("j2", task("w", 4, cpu="1")))
        assert len(e.cycle(0).admitted) == expected


def test_pods_allocatable_limits_available_replicas() -> None:
    s = FleetState()
    s.upsert_cluster(cluster("a", cpu="100", pods="2"))
    s.upsert_cluster(cluster("b", cpu="100", pods="8"))
    placed = KarmadaDivided({}, None).atoll_place(job("j", task("w", 5, cpu="1")), list(s.clusters.values()), s)
    assert placed == {"a": {"w": 1}, "b": {"w": 4}}


def test_best_effort_tasks_count_as_available_everywhere() -> None:
    s = fleet()
    placed = KarmadaDivided({}, None).atoll_place(job("j", task("w", 3)), list(s.clusters.values()), s)
    assert placed == {"a": {"w": 1}, "b": {"w": 1}, "c": {"w": 1}}
