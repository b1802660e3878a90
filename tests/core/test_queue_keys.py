"""Queue order keys kept across cycles (``Plugin.keys_queues_by_line``, ``FleetState.line_stamp``).

When every order plugin keys a queue by its line alone, the engine asks a queue's key again only when the usage of
the queue or of an ancestor, the queues, or the fleet's allocatable changed. A key served from the cache must equal
the one the plugins would give now; tests/core/test_pruned_exact.py compares whole runs with the exhaustive engine,
which asks every key again in every cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Hashable, Iterator
from unittest.mock import MagicMock

from engine.core.scheduler import Engine
from engine.model import Cluster, Job, Queue, Task
from engine.pipeline import join_keys
from engine.policy import load_policy
from engine.resources import CPU, MEMORY

ROOT = Path(__file__).resolve().parents[2]
GI = 2**30


class Asked:
    """The queues whose key the order plugins were asked for, one entry per call (a spy on the pipeline)."""

    def __init__(self, spy: MagicMock) -> None:
        self.spy = spy

    def __iter__(self) -> Iterator[str]:
        return iter(call.args[0].name for call in self.spy.call_args_list)

    def __bool__(self) -> bool:
        return bool(self.spy.call_args_list)

    def __repr__(self) -> str:
        return repr(list(self))

    def clear(self) -> None:
        self.spy.reset_mock()


def _engine(policy: str = "default.yaml") -> tuple[Engine, Asked]:
    """An engine whose order plugins' calls are recorded."""
    pipeline = load_policy(ROOT / "policies" / policy).pipeline
    spy = MagicMock(wraps=pipeline.queue_order_positional)
    pipeline.queue_order_positional = spy
    calls = Asked(spy)
    engine = Engine(pipeline)
    for name in ("m0", "m1"):
        engine.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 32 * GI}))
    engine.upsert_queue(Queue("org", weight=1))
    for name in ("a", "b", "c"):
        engine.upsert_queue(Queue(name, parent="org" if name != "c" else None, weight=1))
    return engine, calls


def _job(i: int, queue: str, cpu: int = 4000) -> Job:
    return Job(id=f"ns/j{i}", name=f"j{i}", namespace="ns", queue=queue, priority=0, submit_time=float(i),
               tasks=[Task("w", 1, 1, {CPU: cpu, MEMORY: GI})])


def _fresh(engine: Engine, name: str, candidate: Any) -> tuple:
    queue = engine.state.queues[name]
    return (0, join_keys(engine.pipeline.queue_order_positional(queue, engine.state, candidate)), name)


def _assert_cache_current(engine: Engine) -> int:
    """Every cached key the engine would serve now equals the plugins' answer now; returns how many."""
    jobs: dict[Hashable, Job] = {j.shape_key: j for j in engine.state.jobs.values()}     # the cache is keyed by Job.shape_key
    checked = 0
    for name, by_shape in engine._queue_keys.items():
        for shape, (_, key) in list(by_shape.items()):
            candidate = None if shape is None else jobs[shape]
            if engine._queue_key(name, candidate) is key:         # served from the cache
                assert key == _fresh(engine, name, candidate), (name, shape)
                checked += 1
    return checked


def test_keys_are_kept_across_cycles_while_nothing_they_read_changes() -> None:
    engine, calls = _engine()
    assert engine.pipeline.queue_keys_by_line
    for i, queue in enumerate(("a", "b", "c", "a", "b", "c", "a", "b", "c")):
        engine.submit(_job(i, queue))
    engine.cycle(1.0)            # 4 fit (2 clusters x 8 cpu, 4 cpu each): 5 wait
    engine.cycle(2.0)            # nothing changed: no queue is keyed again
    calls.clear()
    engine.submit(_job(100, "c", cpu=16000))      # too big: refused, no usage changes
    engine.cycle(3.0)
    assert set(calls) <= {"c"}, calls
    assert _assert_cache_current(engine) > 0


def test_a_siblings_admission_changes_the_key_of_every_queue_under_the_same_parent() -> None:
    """Hierarchical drf: a's key holds org's share, which b's admission moves; c (another root) keeps its key."""
    engine, calls = _engine()
    for i, queue in enumerate(("a", "c")):
        engine.submit(_job(i, queue, cpu=2000))
    engine.cycle(1.0)
    calls.clear()
    engine.submit(_job(10, "b", cpu=2000))
    engine.cycle(2.0)
    assert "b" in list(calls)
    org_share_before = engine._queue_keys["a"]
    assert _assert_cache_current(engine) > 0
    engine.submit(_job(11, "a", cpu=2000))
    calls.clear()
    engine.cycle(3.0)
    assert "a" in list(calls) and "c" not in list(calls), calls
    assert engine._queue_keys["a"] is org_share_before       # the same dict, its entries refreshed
    assert _assert_cache_current(engine) > 0


def test_a_cluster_changing_the_fleets_allocatable_changes_every_key() -> None:
    engine, calls = _engine()
    for i, queue in enumerate(("a", "b", "c")):
        engine.submit(_job(i, queue, cpu=2000))
    engine.cycle(1.0)
    engine.submit(_job(10, "c", cpu=16000))        # a waiting job keeps c's turn coming in each cycle
    engine.cycle(2.0)
    calls.clear()
    engine.upsert_cluster(Cluster("m2", allocatable={CPU: 8000, MEMORY: 32 * GI}))
    engine.cycle(3.0)
    assert "c" in list(calls)
    assert _assert_cache_current(engine) > 0


def test_order_plugins_that_keep_state_are_asked_in_every_cycle() -> None:
    """round-robin counts admissions per cycle (state of its own): it does not declare, so no key is kept."""
    engine, calls = _engine("volcano-global.yaml")
    assert not engine.pipeline.queue_keys_by_line
    for i, queue in enumerate(("a", "b", "c")):
        engine.submit(_job(i, queue, cpu=16000))     # all refused: nothing changes between cycles
    engine.cycle(1.0)
    engine.cycle(2.0)
    calls.clear()
    engine.submit(_job(10, "c", cpu=16000))
    engine.cycle(3.0)
    assert calls
