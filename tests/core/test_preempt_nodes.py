"""Preemption on clusters that report node shapes: the dry run sees the victims' pods gone from the node view,
as their eviction (and the next report) would."""

from __future__ import annotations

from engine.core.nodefit import allocatable_modelings, shapes_of
from engine.model import Cluster, JobState
from engine.resources import parse_resources
from tests.core.test_preempt import job, make, run
from tests.plugins.queue_helpers import queue

GRADES = [{"cpu": 0}, {"cpu": 2000}, {"cpu": 30000}, {"cpu": 32000}]     # not Karmada's defaults


def shaped(used: list[int], at: float) -> Cluster:
    """Two 32-cpu nodes, ``used`` cpu (cores) bound on each, reported at ``at``."""
    nodes = [({"cpu": 32000}, [{"cpu": u * 1000}] if u else []) for u in used]
    return Cluster("m1", allocatable=parse_resources({"cpu": str(32 * len(used)), "memory": "100Gi"}),
                   allocated={"cpu": 1000 * sum(used)}, status_time=at,
                   node_shapes=shapes_of(GRADES, allocatable_modelings(GRADES, nodes)))


def test_a_reported_victim_frees_its_nodes_in_the_dry_run() -> None:
    engine = make({})
    engine.upsert_cluster(shaped([0, 0], 0.0))
    engine.upsert_queue(queue("q"))
    run(engine, job("low", 30, replicas=2), {"m1": 2})
    engine.upsert_cluster(shaped([30, 30], 1.0))           # the report counts low's pods, one per node
    assert engine.state.nodes("m1") is not None and engine.state.replicas_fit("m1", {"cpu": 30000}) == 0
    engine.submit(job("high", 30, priority=1000, replicas=2))
    result = engine.cycle(10.0)
    assert [(p.preemptor, p.victims) for p in result.preemptions] == [("high", ("low",))]
    assert engine.state.jobs["low"].state is JobState.EVICTING
    assert engine.state.replicas_fit("m1", {"cpu": 30000}) == 0          # the dry run left nothing behind
    engine.evicted("low", 20.0)
    engine.upsert_cluster(shaped([0, 0], 21.0))
    assert [a.job_id for a in engine.cycle(21.0).admitted] == ["high"]


def test_an_inflight_victim_leaves_the_node_view_in_the_dry_run() -> None:
    engine = make({})
    engine.upsert_cluster(shaped([0, 0], 0.0))
    engine.upsert_queue(queue("q"))
    engine.submit(job("low", 30, replicas=2))
    assert [a.job_id for a in engine.cycle(1.0).admitted] == ["low"]   # booked on the nodes, not yet reported
    engine.submit(job("high", 30, priority=1000, replicas=2))
    result = engine.cycle(10.0)
    assert [(p.preemptor, p.victims) for p in result.preemptions] == [("high", ("low",))]


def test_the_fill_back_sees_each_supposed_state_afresh() -> None:
    """Victims given back one by one in the fill-back: each step is a new capacity epoch (caches keyed on it,
    such as the capacity plugin's guarantee ledger, see the state of that step)."""
    engine = make({})
    engine.upsert_cluster(shaped([0, 0], 0.0))
    state = engine.state
    saved = state.dry_run_begin()
    first = state.capacity_epoch
    low = job("low", 30)
    state.jobs["low"] = low
    state.suppose_gone(low, {"m1": {"cpu": 30000}})
    second = state.capacity_epoch
    state.suppose_gone(low, {"m1": {"cpu": 30000}}, -1)
    assert len({first, second, state.capacity_epoch}) == 3 and state.capacity_epoch < 0
    state.dry_run_end(saved)
    assert state.capacity_epoch == saved
