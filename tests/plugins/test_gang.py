"""gang: all-or-nothing admission, one cluster unless split is allowed, whole job when it fits."""

from __future__ import annotations

import pytest

from engine.core.state import FleetState
from engine.errors import InputError
from engine.model import Cluster, JobState, Refusal
from plugins.gang import Gang

from tests.plugins._fleet import cluster, engine, job, task


def state_with(*clusters: Cluster) -> FleetState:
    s = FleetState()
    for c in clusters:
        s.upsert_cluster(c)
    return s


def test_admit_refuses_in_one_cluster_with_the_documented_reason() -> None:
    gang = Gang({}, None)
    s = state_with(cluster("a", cpu="8", memory="10Gi"), cluster("b", cpu="4", memory="40Gi"))
    refusal = gang.atoll_admit(job("j", task("w", 4, cpu="5", memory="5Gi")), s)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == ("gang needs cpu=20 memory=20Gi in one cluster; "
                              "no ready cluster has that much free")
    assert refusal.retry_at is None and refusal.plugin == "gang"


def test_admit_counts_only_min_available() -> None:
    gang = Gang({}, None)
    s = state_with(cluster("a", cpu="8"))
    assert gang.atoll_admit(job("j", task("w", 10, 2, cpu="4")), s) is None
    assert gang.atoll_admit(job("j", task("w", 10, 3, cpu="4")), s) is not None


def test_split_admit_uses_fleet_free() -> None:
    gang = Gang({"allowSplit": True}, None)
    s = state_with(cluster("a", cpu="8"), cluster("b", cpu="8"))
    assert gang.atoll_admit(job("j", task("w", 4, cpu="4")), s) is None
    refusal = gang.atoll_admit(job("j", task("w", 5, cpu="4")), s)
    assert refusal is not None and "across the fleet" in refusal.reason and "cpu=16" in refusal.reason


def test_engine_places_whole_gang_in_one_cluster_or_not_at_all() -> None:
    g = Gang({}, None)
    e = engine({"admit": [g], "place": [g]}, [cluster("a", cpu="6"), cluster("b", cpu="6")])
    e.submit(job("big", task("w", 4, cpu="2")))            # 8 cpu: fits the fleet, no single cluster
    e.submit(job("small", task("w", 3, cpu="2")))
    result = e.cycle(0)
    assert [a.job_id for a in result.admitted] == ["small"]
    assert result.admitted[0].placement == {"a": {"w": 3}}
    assert e.state.jobs["big"].state is JobState.PENDING
    assert "gang needs cpu=8 in one cluster" in e.state.jobs["big"].pending_reason


def test_place_prefers_a_cluster_where_the_whole_job_fits() -> None:
    g = Gang({}, None)
    s = state_with(cluster("a", cpu="4"), cluster("b", cpu="10"))
    j = job("j", task("w", 5, 2, cpu="2"))
    assert g.atoll_place(j, [s.clusters["a"], s.clusters["b"]], s) == {"b": {"w": 5}}


def test_place_starts_minimum_plus_what_fits_when_nothing_holds_all() -> None:
    g = Gang({}, None)
    s = state_with(cluster("a", cpu="7"), cluster("b", cpu="3"))
    j = job("j", task("ps", 2, 1, cpu="1"), task("w", 8, 2, cpu="2"))
    placed = g.atoll_place(j, [s.clusters["b"], s.clusters["a"]], s)
    # b cannot hold the minimum (1 + 4 cpu); a holds it: ps 1+1, then w 2 + 1 more in the 2 cpu left... exact:
    # minimum ps=1 (1) + w=2 (4) = 5 of 7; extras task by task: ps +1 (6), w +0 (1 cpu left < 2)
    assert placed == {"a": {"ps": 2, "w": 2}}


def test_place_refuses_when_filters_left_no_cluster_holding_the_minimum() -> None:
    g = Gang({}, None)
    s = state_with(cluster("a", cpu="4"), cluster("b", cpu="16"))
    decided = g.atoll_place(job("j", task("w", 3, cpu="2")), [s.clusters["a"]], s)
    assert isinstance(decided, Refusal) and "none of the 1 candidate cluster(s)" in decided.reason


def test_split_spreads_the_minimum_then_extras() -> None:
    g = Gang({"allowSplit": True}, None)
    s = state_with(cluster("a", cpu="4"), cluster("b", cpu="6"))
    placed = g.atoll_place(job("j", task("w", 6, 4, cpu="2")), [s.clusters["a"], s.clusters["b"]], s)
    assert placed == {"a": {"w": 2}, "b": {"w": 3}}
    refused = g.atoll_place(job("j", task("w", 6, 6, cpu="2")), [s.clusters["a"], s.clusters["b"]], s)
    assert isinstance(refused, Refusal) and "w: 1" in refused.reason


def test_split_gang_admitted_across_clusters_by_the_engine() -> None:
    g = Gang({"allowSplit": True}, None)
    e = engine({"admit": [g], "place": [g]}, [cluster("a", cpu="6"), cluster("b", cpu="6")])
    e.submit(job("big", task("w", 5, cpu="2")))
    result = e.cycle(0)
    assert result.admitted and sum(p["w"] for p in result.admitted[0].placement.values()) == 5
    assert len(result.admitted[0].placement) == 2


def test_bad_config_names_the_field() -> None:
    with pytest.raises(InputError) as info:
        Gang({"allowSplit": "yes"}, None, "p.yaml: spec.plugins.gang")
    assert "p.yaml: spec.plugins.gang.allowSplit" in str(info.value)
    with pytest.raises(InputError):
        Gang({"allowsplit": True}, None)


def test_min_available_zero_still_needs_one_replica_somewhere() -> None:
    for config in ({}, {"allowSplit": True}):
        g = Gang(config, None)
        s = state_with(cluster("a", cpu="1"))
        decided = g.atoll_place(job("j", task("w", 3, 0, cpu="2")), [s.clusters["a"]], s)
        assert isinstance(decided, Refusal)
        assert g.atoll_place(job("j", task("w", 3, 0, cpu="1")), [s.clusters["a"]], s) == {"a": {"w": 1}}


def test_split_counts_what_each_clusters_nodes_can_host() -> None:
    """Summed, cluster a has 8 GPUs free; on its nodes (4 x 2 GPUs) not one 4-GPU pod fits. A split gang of
    three 4-GPU pods goes where nodes can host them, or is refused, never packed onto the sums."""
    from engine.core.nodefit import NodeShapes, vector
    g = Gang({"allowSplit": True}, None)
    gpu = "nvidia.com/gpu"
    a, b = cluster("a", nvidia_com_gpu="8"), cluster("b", nvidia_com_gpu="8")
    a.node_shapes = NodeShapes.of([(vector({gpu: 2}), 4)], frozenset({gpu}))
    b.node_shapes = NodeShapes.of([(vector({gpu: 4}), 2)], frozenset({gpu}))
    s = state_with(a, b)
    placed = g.atoll_place(job("j", task("w", 3, 2, nvidia_com_gpu="4")), [s.clusters["a"], s.clusters["b"]], s)
    assert placed == {"b": {"w": 2}}                      # the summed view said {"a": 2, "b": 1}
    refused = g.atoll_place(job("k", task("w", 3, 3, nvidia_com_gpu="4")), [s.clusters["a"], s.clusters["b"]], s)
    assert isinstance(refused, Refusal) and "w: 1" in refused.reason
