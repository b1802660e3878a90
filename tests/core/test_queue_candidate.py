"""``atoll_queue_order``'s ``candidate``: a queue is keyed by its next job, and keyed again after a refusal
(its next job changed) only when an order plugin of the policy takes the argument."""

from __future__ import annotations

from typing import Optional

from engine.core.scheduler import Engine
from engine.hookspecs import hookimpl
from engine.model import Job, Queue
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from plugins.fifo import Fifo
from tests.plugins.queue_helpers import admitted, cluster, job, queue


class ByCandidate(Plugin):
    """Test order plugin: the next job's ``order`` label is the queue's key."""

    name = "by-candidate"
    stages = ("order",)
    seen: list[tuple[str, Optional[str]]]

    def __init__(self) -> None:
        super().__init__({}, None)
        self.seen = []

    @hookimpl
    def atoll_queue_order(self, queue: Queue, candidate: Optional[Job]) -> int:
        self.seen.append((queue.name, candidate.id if candidate else None))
        return int(candidate.labels["order"]) if candidate is not None else 99


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
    engine.submit(job("a1", q="a", cpu="20", submit=0, labels={"order": "0"}))     # never fits
    engine.submit(job("a2", q="a", cpu="1", submit=1, labels={"order": "10"}))
    engine.submit(job("b1", q="b", cpu="1", submit=0, labels={"order": "5"}))
    return engine


def test_a_refusal_rekeys_the_queue_with_its_next_job() -> None:
    plugin = ByCandidate()
    engine = _engine(plugin)
    assert engine.pipeline.queue_order_candidate
    # a (key 0, a1) first: a1 refused; a's next is a2 (key 10) so b (key 5) is served before it
    assert admitted(engine) == ["b1", "a2"]
    assert ("a", "a1") in plugin.seen and ("a", "a2") in plugin.seen and ("b", "b1") in plugin.seen


def test_without_the_candidate_argument_a_queue_keeps_its_turn_through_refusals() -> None:
    engine = _engine(ByName({}, None))
    assert not engine.pipeline.queue_order_candidate
    assert admitted(engine) == ["a2", "b1"]


def test_pruned_and_exhaustive_engines_agree_with_a_candidate_key() -> None:
    """Jobs of one verdict key refused once are not sent through the pipeline again, but each is still
    taken one at a time, so the queue is keyed by each in turn, as the exhaustive engine does."""
    def run(exhaustive: bool) -> tuple[list[str], int]:
        engine = Engine(Pipeline({"order": [ByCandidate(), Fifo({}, None)]}), exhaustive=exhaustive)
        engine.upsert_cluster(cluster("m1", cpu="10"))
        engine.upsert_queue(queue("a"))
        engine.upsert_queue(queue("b"))
        for i, key in enumerate(("0", "1", "7", "2")):        # same shape: one verdict key, refused once
            engine.submit(job(f"a-wide{i}", q="a", cpu="20", submit=i, labels={"order": key}))
        engine.submit(job("a-fits", q="a", cpu="1", submit=9, labels={"order": "3"}))
        engine.submit(job("b1", q="b", cpu="1", submit=0, labels={"order": "5"}))
        engine.submit(job("b2", q="b", cpu="1", submit=1, labels={"order": "6"}))
        result = engine.cycle(0.0)
        return [a.job_id for a in result.admitted], result.examined

    # a: 0, 1 refused; a-wide2 (7) puts a behind b1 (5) and b2 (6); then a-wide2, a-wide3 refused, a-fits
    (pruned, examined), (exhaustive, every) = run(False), run(True)
    assert pruned == exhaustive == ["b1", "b2", "a-fits"]
    assert examined < every == 7                # the pruned engine sent a-wide1..3 through no pipeline
