"""Queue order plugins: queue-priority, drf (flat and hierarchical), round-robin."""

from __future__ import annotations

from engine.core.state import FleetState
from plugins.drf import Drf
from plugins.fifo import Fifo
from plugins.queue_priority import QueuePriority
from plugins.round_robin import RoundRobin
from tests.plugins.queue_helpers import admitted, cluster, engine_with, job, queue, res


def test_queue_priority_serves_higher_priority_queues_first() -> None:
    engine = engine_with(order=[QueuePriority({}, None), Fifo({}, None)])
    engine.upsert_cluster(cluster("m1", cpu="2"))
    engine.upsert_queue(queue("low", priority=1))
    engine.upsert_queue(queue("high", priority=10))
    engine.submit(job("l1", q="low"))
    engine.submit(job("h1", q="high"))
    engine.submit(job("h2", q="high"))
    engine.submit(job("l2", q="low"))
    assert admitted(engine) == ["h1", "h2"]


def test_drf_alternates_by_weighted_dominant_share() -> None:
    # weight 2 queue gets two jobs for every one of the weight-1 queue
    engine = engine_with(order=[Drf({}, None), Fifo({}, None)])
    engine.upsert_cluster(cluster("m1", cpu="6"))
    engine.upsert_queue(queue("a", weight=1))
    engine.upsert_queue(queue("b", weight=2))
    for i in range(6):
        engine.submit(job(f"a{i}", q="a", submit=i))
        engine.submit(job(f"b{i}", q="b", submit=i))
    order = admitted(engine)
    assert len(order) == 6
    assert sum(1 for j in order if j.startswith("b")) == 4


def test_drf_uses_the_dominant_resource() -> None:
    state = FleetState()
    state.upsert_cluster(cluster("m1", cpu="100", memory="100Gi"))
    cpu_heavy, mem_heavy = queue("cpu-heavy"), queue("mem-heavy")
    state.upsert_queue(cpu_heavy)
    state.upsert_queue(mem_heavy)
    cpu_heavy.allocated.update(res(cpu="50", memory="1Gi"))       # dominant share 0.5 (cpu)
    mem_heavy.allocated.update(res(cpu="1", memory="40Gi"))       # dominant share 0.4 (memory)
    drf = Drf({}, None)
    assert drf.atoll_queue_order(mem_heavy, state, None) < drf.atoll_queue_order(cpu_heavy, state, None)
    only_cpu = Drf({"resources": ["cpu"]}, None)
    assert only_cpu.share(mem_heavy, state) == 0.01


def test_drf_compares_siblings_level_by_level() -> None:
    state = FleetState()
    state.upsert_cluster(cluster("m1", cpu="100"))
    for q in (queue("org-a"), queue("org-b"), queue("a1", parent="org-a"), queue("a2", parent="org-a"),
              queue("b1", parent="org-b")):
        state.upsert_queue(q)
    state._charge("a1", res(cpu="30"), +1)       # org-a 0.30, a1 0.30, a2 0
    state._charge("b1", res(cpu="20"), +1)       # org-b 0.20, b1 0.20
    drf = Drf({}, None)
    keys = {name: drf.atoll_queue_order(state.queues[name], state, None) for name in ("a1", "a2", "b1")}
    # b1's org is the least served, though a2 itself holds nothing
    assert sorted(keys, key=keys.__getitem__) == ["b1", "a2", "a1"]
    flat = Drf({"hierarchical": False}, None)
    flat_keys = {name: flat.atoll_queue_order(state.queues[name], state, None) for name in ("a1", "a2", "b1")}
    assert sorted(flat_keys, key=flat_keys.__getitem__) == ["a2", "b1", "a1"]


def test_drf_key_mixes_safely_with_later_order_plugins_across_depths() -> None:
    engine = engine_with(order=[Drf({}, None), QueuePriority({}, None), Fifo({}, None)])
    engine.upsert_cluster(cluster("m1", cpu="4"))
    for q in (queue("root"), queue("org"), queue("leaf", parent="org")):
        engine.upsert_queue(q)
    engine.submit(job("r", q="root"))
    engine.submit(job("l", q="leaf"))
    assert sorted(admitted(engine)) == ["l", "r"]       # equal shares, different depths: no TypeError


def test_round_robin_gives_every_queue_one_admission_per_pass() -> None:
    engine = engine_with(order=[RoundRobin({}, None), QueuePriority({}, None), Fifo({}, None)])
    engine.upsert_cluster(cluster("m1", cpu="100"))
    engine.upsert_queue(queue("a", priority=5))
    engine.upsert_queue(queue("b", priority=1))
    engine.upsert_queue(queue("c", priority=3))
    for i in range(3):
        engine.submit(job(f"a{i}", q="a", submit=i))
        engine.submit(job(f"b{i}", q="b", submit=i))
    engine.submit(job("c0", q="c"))
    assert admitted(engine) == ["a0", "c0", "b0", "a1", "b1", "a2", "b2"]


def test_round_robin_refused_head_keeps_the_turn_and_counts_reset_each_cycle() -> None:
    rr = RoundRobin({}, None)
    engine = engine_with(order=[rr, QueuePriority({}, None), Fifo({}, None)])
    engine.upsert_cluster(cluster("m1", cpu="4"))
    engine.upsert_queue(queue("a", priority=5))
    engine.upsert_queue(queue("b", priority=1))
    engine.submit(job("a-big", q="a", cpu="8", submit=0))     # never fits: a tries its next job
    engine.submit(job("a-small", q="a", submit=1))
    engine.submit(job("a-more", q="a", submit=2))
    engine.submit(job("b0", q="b"))
    assert admitted(engine) == ["a-small", "b0", "a-more"]
    assert rr.turns == {"a": 2, "b": 1}
    engine.submit(job("b1", q="b"))
    assert admitted(engine, 1.0) == ["b1"]
    assert rr.turns == {"b": 1}
