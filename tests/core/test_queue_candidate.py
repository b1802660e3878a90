"""``atoll_queue_order``'s ``candidate``: a queue is keyed by its next job, and keyed again after a refusal
(its next job changed) only when an order plugin of the policy takes the argument."""

from __future__ import annotations

from typing import Any, Optional

from engine.core.scheduler import Engine
from engine.hookspecs import hookimpl
from engine.model import Job, Queue, Refusal
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from plugins.fifo import Fifo
from tests.plugins.queue_helpers import admitted, cluster, job, queue


class BiggestFirst(Plugin):
    """Test order plugin keyed by the next job's shape, as the hookspec asks: the larger its cpu, the sooner."""

    name = "biggest-first"
    stages = ("order",)

    def __init__(self) -> None:
        super().__init__({}, None)
        self.seen: list[tuple[str, Optional[str]]] = []

    @hookimpl
    def atoll_queue_order(self, queue: Queue, candidate: Optional[Job]) -> int:
        self.seen.append((queue.name, candidate.id if candidate else None))
        return -candidate.demand.get("cpu", 0) if candidate is not None else 0


class ByName(Plugin):
    name = "by-name"
    stages = ("order",)

    @hookimpl
    def atoll_queue_order(self, queue: Queue) -> str:
        return queue.name


def _engine(*order: Plugin) -> Engine:
    engine = Engine(Pipeline({"order": [*order, Fifo({}, None)]}))
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("a"))
    engine.upsert_queue(queue("b"))
    engine.submit(job("a1", q="a", cpu="20", submit=0))     # never fits
    engine.submit(job("a2", q="a", cpu="1", submit=1))
    engine.submit(job("b1", q="b", cpu="2", submit=0))
    return engine


def test_a_refusal_rekeys_the_queue_with_its_next_job() -> None:
    plugin = BiggestFirst()
    engine = _engine(plugin)
    assert engine.pipeline.queue_order_candidate
    # a (key -20 cpu, a1) first: a1 refused; a's next is a2 (-1) so b (-2) is served before it
    assert admitted(engine) == ["b1", "a2"]
    assert {("a", "a1"), ("a", "a2"), ("b", "b1")} <= set(plugin.seen)


def test_without_the_candidate_argument_a_queue_keeps_its_turn_through_refusals() -> None:
    engine = _engine(ByName({}, None))
    assert not engine.pipeline.queue_order_candidate
    assert admitted(engine) == ["a2", "b1"]


def _run(exhaustive: bool, wide: int) -> tuple[list[str], int]:
    engine = Engine(Pipeline({"order": [BiggestFirst(), Fifo({}, None)]}), exhaustive=exhaustive)
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("a"))
    engine.upsert_queue(queue("b"))
    for i in range(wide):                        # one verdict key, refused once per state
        engine.submit(job(f"a-wide{i}", q="a", cpu="20", submit=i))
    engine.submit(job("a-fits", q="a", cpu="1", submit=99))
    engine.submit(job("b1", q="b", cpu="4", submit=0))
    engine.submit(job("b2", q="b", cpu="3", submit=1))
    result = engine.cycle(0.0)
    return [a.job_id for a in result.admitted], result.examined


def test_pruned_and_exhaustive_engines_agree_with_a_candidate_key() -> None:
    """A group refused once is not sent through the pipeline again (one job at a time for a short queue,
    walked by key for a long one), and the queues are served exactly in the exhaustive engine's order."""
    for wide in (3, 12):
        (pruned, examined), (exhaustive, every) = _run(False, wide), _run(True, wide)
        # a (-20) first: every a-wide refused; a-fits (-1) puts a behind b1 (-4) and b2 (-3)
        assert pruned == exhaustive == ["b1", "b2", "a-fits"]
        assert every == wide + 3 and examined == 4, wide     # a-wide0, b1, b2, a-fits


# -- exactness on random backlogs: long queues of few shapes, so the pruned engine walks by verdict key --------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from plugins.drf import Drf  # noqa: E402


class UsageInReason(Plugin):
    """Test admit plugin: refuses jobs of 7 cpu or more with a text naming the cpu admitted so far, so a job
    examined in another state than the exhaustive engine examined it shows in its reason."""

    name = "usage-in-reason"
    stages = ("admit",)

    def verdict_key(self, job: Job) -> object:
        return job.demand.get("cpu", 0) >= 7000

    @hookimpl
    def atoll_admit(self, job: Job, state: Any) -> Optional[Refusal]:
        if job.demand.get("cpu", 0) < 7000:
            return None
        used = sum(q.allocated.get("cpu", 0) for q in state.queues.values() if not q.parent)
        return Refusal(f"big job while {used}m cpu is admitted", self.name)


def _order(kind: str) -> list[Plugin]:
    if kind == "biggest":
        return [BiggestFirst(), Fifo({}, None)]
    return [Drf({"hierarchical": kind == "hdrf"}, None), Fifo({}, None)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(("drf", "hdrf", "biggest")), data=st.data())
def test_pruned_walk_decides_exactly_as_exhaustive_with_candidate_keys(kind: str, data: st.DataObject) -> None:
    engines = [Engine(Pipeline({"order": _order(kind), "admit": [UsageInReason({}, None)]}), exhaustive=e)
               for e in (False, True)]
    assert engines[0]._keyed
    cpus = data.draw(st.lists(st.sampled_from(("4", "6", "10", "16")), min_size=1, max_size=3), label="clusters")
    names = ["a", "b", "c"][:data.draw(st.integers(2, 3), label="queues")]
    parents = {"a": None, "b": "a" if kind == "hdrf" and data.draw(st.booleans()) else None, "c": None}
    jobs = [(f"j{i}", data.draw(st.sampled_from(names)), data.draw(st.sampled_from(("1", "2", "3", "7", "20"))),
             data.draw(st.integers(0, 2))) for i in range(data.draw(st.integers(4, 60), label="jobs"))]
    for engine in engines:
        for i, cpu in enumerate(cpus):
            engine.upsert_cluster(cluster(f"m{i}", cpu=cpu))
        for name in names:
            engine.upsert_queue(queue(name, parent=parents[name], weight=1 + (name == "c")))
        for job_id, q, cpu, prio in jobs:
            engine.submit(job(job_id, q=q, cpu=cpu, priority=prio, submit=float(job_id[1:])))
    pruned, exhaustive = engines
    for step in range(4):
        a, b = pruned.cycle(float(step)), exhaustive.cycle(float(step))
        assert [x.job_id for x in a.admitted] == [x.job_id for x in b.admitted]
        assert a.reasons == b.reasons and a.examined <= b.examined
        assert {j.id: (j.state, j.pending_reason) for j in pruned.state.jobs.values()} == \
            {j.id: (j.state, j.pending_reason) for j in exhaustive.state.jobs.values()}
        running = sorted(j.id for j in pruned.state.jobs.values() if j.state.holds_resources)
        for job_id in running[:data.draw(st.integers(0, 3))]:
            for engine in engines:
                engine.finished(job_id, True, float(step))
