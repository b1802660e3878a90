"""reclaim, preemptable and capacity's lending: the preempt plugins over the engine."""

from __future__ import annotations

import json
from typing import Any, Optional

from engine._data import data_path
from engine.core.scheduler import Engine
from engine.model import Job, JobState, Task
from engine.pipeline import Pipeline
from engine.resources import parse_resources
from plugins._protections import PROTECTION_PROPERTIES
from plugins.capacity import Capacity
from plugins.drf import Drf
from plugins.fifo import Fifo
from plugins.gang import Gang
from plugins.preemptable import Preemptable
from plugins.priority_preemption import PriorityPreemption
from plugins.reclaim import Reclaim
from tests.plugins.queue_helpers import cluster, queue, res


def make(reclaim: Optional[dict[str, Any]] = None, priority: bool = False, protect: str = "",
         lend: bool = True) -> Engine:
    gang = Gang({}, None)
    preempt: list[Any] = []
    if protect:
        preempt.append(Preemptable({"expression": protect}, None))
    if priority:
        preempt.append(PriorityPreemption({}, None))
    if reclaim is not None:
        preempt.append(Reclaim(reclaim, None))
    return Engine(Pipeline({"order": [Drf({}, None), Fifo({}, None)],
                            "admit": [Capacity({"lendGuarantees": lend}, None), gang], "place": [gang],
                            "preempt": preempt}))


def job(name: str, cpu: int, q: str, priority: int = 0, labels: Optional[dict[str, str]] = None) -> Job:
    return Job(id=name, name=name, queue=q, priority=priority, labels=labels or {},
               tasks=[Task("w", 1, 1, parse_resources({"cpu": str(cpu)}))])


def run(engine: Engine, j: Job, c: str, at: float = 0.0) -> None:
    engine.adopt(j, {c: {"w": 1}}, at, running=True)


def fleet(engine: Engine, prod_guarantee: int = 4, reclaimable: bool = True) -> None:
    engine.upsert_cluster(cluster("m1", cpu="8"))
    engine.upsert_queue(queue("prod", guarantee=res(cpu=str(prod_guarantee))))
    batch = queue("batch")
    batch.reclaimable = reclaimable
    engine.upsert_queue(batch)


def test_lending_is_the_default_and_reclaim_gives_the_guarantee_back() -> None:
    engine = make({})
    fleet(engine)
    for i in range(4):
        engine.submit(job(f"b{i}", 2, "batch"))
    assert len(engine.cycle(1.0).admitted) == 4            # prod is idle: its guarantee is lent, nothing idles
    engine.submit(job("p0", 2, "prod"))
    engine.submit(job("p1", 2, "prod"))
    result = engine.cycle(10.0)
    assert sorted(v for p in result.preemptions for v in p.victims) == ["b2", "b3"]   # newest first, just enough
    assert {p.reason for p in result.preemptions} == {"reclaim"}
    for victim in ("b2", "b3"):
        engine.evicted(victim, 40.0, ended_at=40.0)
    assert sorted(a.job_id for a in engine.cycle(40.0).admitted) == ["p0", "p1"]
    engine.submit(job("p2", 2, "prod"))                    # beyond its guarantee: no reclaim
    assert engine.cycle(41.0).preemptions == []


def test_without_lending_the_guarantee_idles() -> None:
    engine = make(None, lend=False)
    fleet(engine)
    for i in range(4):
        engine.submit(job(f"b{i}", 2, "batch"))
    assert len(engine.cycle(1.0).admitted) == 2


def test_reclaimable_false_is_honoured() -> None:
    engine = make({})
    fleet(engine, reclaimable=False)
    for i in range(4):
        run(engine, job(f"b{i}", 2, "batch"), "m1")
    engine.submit(job("p0", 2, "prod"))
    assert engine.cycle(10.0).preemptions == []


def test_fair_share_reclaim_is_optional() -> None:
    for fair, expect in ((False, 0), (True, 1)):
        engine = make({"fairShare": fair})
        fleet(engine, prod_guarantee=0)
        for i in range(4):
            run(engine, job(f"b{i}", 2, "batch"), "m1")
        engine.submit(job("p0", 2, "prod"))                # share 2/8 with it <= batch's 6/8 without a victim
        result = engine.cycle(10.0)
        assert len(result.preemptions) == expect
        if fair:
            assert result.preemptions[0].reason == "fair-share"


def test_fair_share_never_takes_a_queue_below_the_preemptor() -> None:
    engine = make({"fairShare": True})
    fleet(engine, prod_guarantee=0)
    run(engine, job("p-run", 4, "prod"), "m1")
    run(engine, job("b0", 4, "batch"), "m1")
    engine.submit(job("p1", 2, "prod"))                    # 6/8 with it > 0/8 for batch without b0
    assert engine.cycle(10.0).preemptions == []


def test_preemptable_cel_protects_jobs() -> None:
    engine = make(priority=True, protect="!('tier' in job.labels) || job.labels['tier'] != 'prod'")
    engine.upsert_cluster(cluster("m1", cpu="4"))
    engine.upsert_queue(queue("q"))
    run(engine, job("prod-low", 2, "q", labels={"tier": "prod"}), "m1")
    run(engine, job("dev-low", 2, "q", labels={"tier": "dev"}), "m1")
    engine.submit(job("high", 4, "q", priority=100))
    assert engine.cycle(10.0).preemptions == []            # needs both, one is protected: nothing evicted
    engine.submit(job("high2", 2, "q", priority=100))
    [p] = engine.cycle(11.0).preemptions
    assert p.victims == ("dev-low",)
    assert engine.state.jobs["prod-low"].state is JobState.RUNNING


def test_protection_keys_are_the_same_in_every_preempt_schema() -> None:
    for name in ("priority-preemption", "reclaim"):
        schema = json.loads(data_path("schemas", "plugins", f"{name}.schema.json").read_text())
        for key, prop in PROTECTION_PROPERTIES.items():
            assert schema["properties"][key] == prop, (name, key)


def test_the_worked_example_of_docs_policy_md() -> None:
    """docs/policy.md, "What below its share means": guarantee alone ends at 2 : 6, fairShare at 4 : 4."""
    for fair, expect in ((False, 2), (True, 4)):
        engine = make({"fairShare": fair})
        fleet(engine, prod_guarantee=2)
        for i in range(4):
            run(engine, job(f"v{i}", 2, "batch"), "m1", at=float(i))
        t = 10.0
        for i in range(3):
            engine.submit(job(f"q{i}", 2, "prod"))
            for p in engine.cycle(t).preemptions:
                for victim in p.victims:
                    engine.evicted(victim, t + 1, ended_at=t + 1)
            engine.cycle(t + 1)
            t += 10
        assert engine.state.queues["prod"].allocated.get("cpu", 0) == expect * 1000, fair
        assert engine.state.queues["batch"].allocated.get("cpu", 0) == (8 - expect) * 1000, fair


def test_drf_share_above_guarantee_is_an_option() -> None:
    from engine.core.state import FleetState
    from engine.model import Queue

    state = FleetState()
    state.upsert_cluster(cluster("m1", cpu="10"))
    big = Queue("big", guarantee=res(cpu="6"), allocated=res(cpu="6"))     # all within its guarantee
    small = Queue("small", allocated=res(cpu="2"))
    for q in (big, small):
        state.upsert_queue(q)
    total, above = Drf({}, None), Drf({"share": "aboveGuarantee"}, None)
    assert total.atoll_queue_order(big, state, None) > total.atoll_queue_order(small, state, None)     # 0.6 > 0.2
    assert above.atoll_queue_order(big, state, None) < above.atoll_queue_order(small, state, None)     # 0.0 < 0.2
