"""Admit plugins: queue-state, capacity (capability, hierarchy, guarantee, borrowing, fleet free), volcano-capacity."""

from __future__ import annotations

from engine.model import JobState, Queue
from plugins.capacity import Capacity
from plugins.fifo import Fifo
from plugins.queue_priority import QueuePriority
from plugins.queue_state import QueueState
from plugins.volcano_capacity import VolcanoCapacity

KEEP = {"lendGuarantees": False}      # these tests are about guarantees kept free (lending is the default)
from tests.plugins.queue_helpers import admitted, cluster, engine_with, job, queue, res


def test_closed_queue_admits_nothing_until_reopened() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[QueueState({}, None)])
    engine.upsert_cluster(cluster("m1"))
    engine.upsert_queue(queue("team-x", open=False))
    engine.submit(job("j", q="team-x"))
    assert admitted(engine) == []
    assert engine.state.jobs["j"].pending_reason == "queue team-x is Closed"
    engine.upsert_queue(queue("team-x", open=True))
    assert admitted(engine, 1.0) == ["j"]


def test_closed_parent_closes_its_children() -> None:
    engine = engine_with(admit=[QueueState({}, None)])
    engine.upsert_cluster(cluster("m1"))
    engine.upsert_queue(queue("org", open=False))
    engine.upsert_queue(queue("team", parent="org"))
    engine.submit(job("j", q="team"))
    assert admitted(engine) == []
    assert engine.state.jobs["j"].pending_reason == "queue team is in queue org, which is Closed"


def test_capability_refusal_is_precise_and_has_no_retry_time() -> None:
    cap = Capacity(KEEP, None)
    engine = engine_with(order=[Fifo({}, None)], admit=[cap])
    engine.upsert_cluster(cluster("m1", cpu="1000"))
    engine.upsert_queue(queue("team-a", capability=res(cpu="200")))
    engine.submit(job("big", q="team-a", cpu="190", submit=0))
    engine.submit(job("more", q="team-a", cpu="20", submit=1))
    assert admitted(engine) == ["big"]
    refusal = cap.atoll_admit(engine.state.jobs["more"], engine.state)
    assert refusal is not None and refusal.retry_at is None
    assert refusal.reason == "queue team-a capability cpu 200 would be exceeded: 190 used + 20 requested"
    assert engine.state.jobs["more"].pending_reason == refusal.reason
    assert engine.next_timer() is None


def test_resources_not_in_capability_are_unlimited() -> None:
    engine = engine_with(admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="100", memory="1000Gi"))
    engine.upsert_queue(queue("q", capability=res(memory="1Gi")))
    engine.submit(job("cpu-only", q="q", cpu="50"))
    assert admitted(engine) == ["cpu-only"]


def test_parent_capability_caps_the_sum_of_children() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="100"))
    engine.upsert_queue(queue("org", capability=res(cpu="10")))
    engine.upsert_queue(queue("a", parent="org"))
    engine.upsert_queue(queue("b", parent="org"))
    engine.submit(job("a1", q="a", cpu="6", submit=0))
    engine.submit(job("b1", q="b", cpu="6", submit=1))
    engine.submit(job("b2", q="b", cpu="4", submit=2))
    assert sorted(admitted(engine)) == ["a1", "b2"]
    assert engine.state.jobs["b1"].pending_reason == \
        "parent queue org (of b) capability cpu 10 would be exceeded: 6 used + 6 requested"


def test_fleet_free_is_never_oversubscribed_by_uncapped_queues() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="4"))
    engine.upsert_cluster(cluster("m2", cpu="4"))
    engine.upsert_queue(queue("a"))
    engine.upsert_queue(queue("b"))
    engine.submit(job("a1", q="a", cpu="3", submit=0))
    engine.submit(job("b1", q="b", cpu="3", submit=1))
    engine.submit(job("b2", q="b", cpu="3", submit=2))
    assert admitted(engine) in (["a1", "b1"], ["b1", "a1"])
    assert engine.state.jobs["b2"].pending_reason == "job requests cpu 3, more than the fleet has free"
    assert "free now: fleet cpu=2" in engine.explain("b2")


def test_guarantee_is_kept_free_from_other_queues_and_usable_by_its_owner() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("prod", guarantee=res(cpu="6")))
    engine.upsert_queue(queue("dev"))
    for i in range(3):
        engine.submit(job(f"dev{i}", q="dev", cpu="2", submit=i))
    assert admitted(engine) == ["dev0", "dev1"]          # 4 of 10: 6 kept for prod
    assert engine.state.jobs["dev2"].pending_reason == (
        "queue dev: job requests cpu 2, more than the fleet has free outside other queues' unused guarantees "
        "(kept for them)")
    engine.submit(job("prod0", q="prod", cpu="4", submit=10))
    engine.submit(job("prod1", q="prod", cpu="2", submit=11))
    assert admitted(engine, 1.0) == ["prod0", "prod1"]


def test_queue_beyond_its_guarantee_borrows_only_unreserved_capacity() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("a", guarantee=res(cpu="3")))
    engine.upsert_queue(queue("b", guarantee=res(cpu="3")))
    engine.submit(job("a-big", q="a", cpu="7", submit=0))       # 3 own guarantee + 4 borrowed: leaves b's 3
    engine.submit(job("a-more", q="a", cpu="1", submit=1))      # would eat b's guarantee
    engine.submit(job("b0", q="b", cpu="3", submit=2))
    assert admitted(engine) == ["a-big", "b0"]
    assert engine.state.jobs["a-more"].pending_reason == (
        "queue a: job requests cpu 1, more than the fleet has free outside other queues' unused guarantees "
        "(kept for them)")


def test_hierarchical_guarantee_protects_a_subtree_and_lets_its_children_share_it() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("org", guarantee=res(cpu="6")))
    engine.upsert_queue(queue("t1", parent="org"))
    engine.upsert_queue(queue("t2", parent="org", guarantee=res(cpu="2")))
    engine.upsert_queue(queue("other"))
    engine.submit(job("o1", q="other", cpu="5", submit=0))      # only 4 unreserved
    engine.submit(job("t1a", q="t1", cpu="5", submit=1))        # org's slack (4) + free: but t2's 2 stay
    engine.submit(job("t1b", q="t1", cpu="4", submit=2))      # 5 free, 2 kept for t2
    engine.submit(job("t2a", q="t2", cpu="2", submit=3))
    result = admitted(engine)
    assert result == ["t1a", "t2a"]
    assert "o1" not in result
    ledger_state = engine.state
    assert ledger_state.queues["org"].allocated == res(cpu="7")


def test_borrowing_off_makes_deserved_a_hard_limit() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[Capacity({**KEEP, "borrowing": False}, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("q", deserved=res(cpu="2")))
    engine.submit(job("j1", q="q", cpu="1", submit=0))
    engine.submit(job("j", q="q", cpu="2", submit=1))
    assert admitted(engine) == ["j1"]
    assert engine.state.jobs["j"].pending_reason == \
        "queue q deserved share cpu 2 would be exceeded: 1 used + 2 requested"
    borrowing = engine_with(admit=[Capacity(KEEP, None)])
    borrowing.upsert_cluster(cluster("m1", cpu="10"))
    borrowing.upsert_queue(queue("q", deserved=res(cpu="2")))
    borrowing.submit(job("j", q="q", cpu="3"))
    assert admitted(borrowing) == ["j"]


def test_guarantee_ledger_follows_releases_and_queue_edits() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("prod", guarantee=res(cpu="5")))
    engine.upsert_queue(queue("dev"))
    engine.submit(job("p", q="prod", cpu="5"))
    engine.submit(job("d", q="dev", cpu="5"))
    assert sorted(admitted(engine)) == ["d", "p"]
    engine.finished("p")                              # prod's 5 are unused again: reserved for it
    engine.submit(job("d2", q="dev", cpu="5"))
    assert admitted(engine, 1.0) == []
    engine.upsert_queue(Queue("prod"))                # guarantee removed
    assert admitted(engine, 2.0) == ["d2"]


def test_volcano_capacity_is_the_naive_baseline() -> None:
    engine = engine_with(order=[Fifo({}, None)], admit=[VolcanoCapacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("a", capability=res(cpu="6")))
    engine.upsert_queue(queue("b"))
    engine.submit(job("a1", q="a", cpu="4", submit=0))
    engine.submit(job("a2", q="a", cpu="4", submit=1))
    engine.submit(job("b1", q="b", cpu="11", submit=2))
    assert admitted(engine) == ["a1"]
    assert engine.state.jobs["a2"].pending_reason == \
        "queue a capability cpu 6 would be exceeded: 4 used + 4 requested"
    assert engine.state.jobs["b1"].pending_reason == \
        "queue b fleet allocatable cpu 10 would be exceeded: 0 used + 11 requested"
    # no free-capacity check: it lets b claim what a already holds (placement then fails)
    plugin = VolcanoCapacity(KEEP, None)
    assert plugin.atoll_admit(job("b2", q="b", cpu="10"), engine.state) is None
    assert engine.state.jobs["a1"].state is JobState.ADMITTED


def test_guarantee_used_up_in_this_cycle_frees_the_rest_for_others_in_the_same_cycle() -> None:
    engine = engine_with(order=[QueuePriority({}, None), Fifo({}, None)], admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("prod", guarantee=res(cpu="6"), priority=1))
    engine.upsert_queue(queue("dev"))
    engine.submit(job("p", q="prod", cpu="6", submit=0))
    engine.submit(job("d", q="dev", cpu="4", submit=1))
    assert admitted(engine) == ["p", "d"]


def test_demands_that_can_never_fit_say_so() -> None:
    engine = engine_with(admit=[Capacity(KEEP, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("small", capability=res(cpu="4")))
    engine.upsert_queue(queue("big"))
    engine.submit(job("too-big-for-queue", q="small", cpu="5"))
    engine.submit(job("too-big-for-fleet", q="big", cpu="11"))
    engine.cycle(0.0)
    assert engine.state.jobs["too-big-for-queue"].pending_reason == \
        "job requests cpu 5, more than queue small capability 4: it cannot be admitted until the queue changes"
    assert engine.state.jobs["too-big-for-fleet"].pending_reason == \
        "job requests cpu 11, more than the whole fleet's 10 (ready clusters)"
