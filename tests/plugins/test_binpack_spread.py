"""binpack and spread scores, and spread's division of non-gang replicas."""

from __future__ import annotations

from engine.core.state import FleetState
from engine.model import Job
from plugins.binpack import Binpack
from plugins.gang import Gang
from plugins.spread import Spread, divide_evenly

from tests.plugins._fleet import cluster, engine, job, task


def fleet() -> FleetState:
    s = FleetState()
    s.upsert_cluster(cluster("big", cpu="100", memory="100Gi"))
    s.upsert_cluster(cluster("small", cpu="10", memory="10Gi"))
    s.upsert_cluster(cluster("tiny", cpu="2", memory="2Gi"))
    return s


def four_cpu(min_available: int = 2) -> Job:
    return job("j", task("w", 2, min_available, cpu="2", memory="2Gi"))


def test_binpack_prefers_the_fullest_cluster_that_fits() -> None:
    s = fleet()
    scores = Binpack({"weight": 2}, None).atoll_score(four_cpu(), list(s.clusters.values()), s)
    assert scores == {"big": 2 * 4, "small": 2 * 40, "tiny": 0}       # tiny cannot hold even the minimum


def test_binpack_scores_the_minimum_where_only_it_fits() -> None:
    s = fleet()
    assert Binpack({}, None).atoll_score(four_cpu(1), [s.clusters["tiny"]], s) == {"tiny": 100}


def test_binpack_weights_only_requested_resources() -> None:
    s = FleetState()
    s.upsert_cluster(cluster("g", cpu="10", nvidia_com_gpu="8"))
    gpu_only = job("j", task("w", 1, nvidia_com_gpu="2"))
    assert Binpack({"resources": {"cpu": 1}}, None).atoll_score(gpu_only, [s.clusters["g"]], s) == {"g": 25}


def test_binpack_in_an_engine_fills_one_cluster_first() -> None:
    b, g = Binpack({}, None), Gang({}, None)
    e = engine({"admit": [g], "place": [b, g]}, [cluster("a", cpu="8"), cluster("b", cpu="8")])
    for i in range(4):
        e.submit(job(f"j{i}", task("w", 1, cpu="2")))
    placed = [next(iter(a.placement)) for a in e.cycle(0).admitted]
    assert placed == ["a", "a", "a", "a"]


def test_spread_prefers_the_emptiest_cluster() -> None:
    s = fleet()
    scores = Spread({}, None).atoll_score(four_cpu(), list(s.clusters.values()), s)
    assert scores == {"big": 96, "small": 60, "tiny": 0}


def test_spread_in_an_engine_alternates_clusters() -> None:
    sp, g = Spread({}, None), Gang({}, None)
    e = engine({"admit": [g], "place": [sp, g]}, [cluster("a", cpu="8"), cluster("b", cpu="8")])
    for i in range(4):
        e.submit(job(f"j{i}", task("w", 1, cpu="2")))
    placed = [next(iter(a.placement)) for a in e.cycle(0).admitted]
    assert placed == ["a", "b", "a", "b"]


def test_spread_divides_non_gang_replicas_evenly_within_capacity() -> None:
    s = fleet()
    sp = Spread({"splitReplicas": True}, None)
    clusters = [s.clusters[n] for n in ("big", "small", "tiny")]
    deploy = job("d", task("web", 10, 1, cpu="1", memory="1Gi"))
    assert sp.atoll_place(deploy, clusters, s) == {"big": {"web": 4}, "small": {"web": 4}, "tiny": {"web": 2}}
    assert sp.atoll_place(job("g", task("w", 4, 4, cpu="1")), clusters, s) is None        # a gang
    assert sp.atoll_place(job("x", task("w", 200, 1, cpu="1")), clusters, s) is None      # does not all fit
    assert Spread({}, None).atoll_place(deploy, clusters, s) is None                       # not enabled


def test_divide_evenly() -> None:
    assert divide_evenly(7, [10, 10, 10]) == [3, 2, 2]
    assert divide_evenly(7, [1, 10, 0]) == [1, 6, 0]
    assert divide_evenly(3, [1, 1]) is None
    assert divide_evenly(0, [5]) == [0]
