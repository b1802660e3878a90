"""engine.core.running: the fleet-wide walk over running candidates yields exactly what one merged stream
per opened queue yields (the order victim searches have always used), wherever it switches to streams;
and it asks a queue for its bound only when one of its candidates comes up."""

from __future__ import annotations

import heapq
from typing import Callable, Iterator, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.running import ANY, Entry, RunningIndex, Standing, above_guarantee, victim_order
from engine.model import Job, Queue, Task
from engine.resources import CPU


def _job(i: int, queue: str, admitted_at: float) -> Job:
    job = Job(id=f"j{i}", name=f"j{i}", queue=queue, tasks=[Task("t", 1, 1, {CPU: 1000})])
    job.seq = i
    job.admitted_at = admitted_at
    return job


def _spy(index: RunningIndex, method: str) -> list[tuple]:
    """Record each call of ``index.<method>`` (its arguments) and each item its iterator yields."""
    calls: list[tuple] = []
    real = getattr(index, method)

    def spied(*args: object) -> Optional[Iterator[tuple]]:
        calls.append(args)
        found = real(*args)
        return None if found is None else _recorded(found, calls)
    setattr(index, method, spied)
    return calls


def _recorded(items: Iterator[tuple], into: list[tuple]) -> Iterator[tuple]:
    for item in items:
        into.append(item)
        yield item


def _asking(bound: Callable[[str], Optional[float]]) -> tuple[Callable[[str], Optional[float]], list[str]]:
    """A rule's ``victim_queues`` that records the queues it is asked about."""
    asked: list[str] = []

    def victim_queues(name: str) -> Optional[float]:
        asked.append(name)
        return bound(name)
    return victim_queues, asked


def reference(index: RunningIndex, bounds: dict[str, Optional[float]], queues: dict[str, Queue]) -> list[str]:
    """The order before the walk: every queue with candidates asked for its bound, one stream each, merged
    with the queues above their guarantee (or without one) first."""
    streams: list[Iterator[tuple]] = []
    for name in index.queues():
        bound = bounds.get(name)
        if bound is None:
            continue
        entries = index.ordered(name, bound)
        if entries is None:
            continue
        queue = queues.get(name)
        first = 0 if queue is not None and (not queue.guarantee or above_guarantee(queue)) else 1
        streams.append(_prefixed(first, entries))
    return [merged[-1] for merged in heapq.merge(*streams)]


def _prefixed(first: int, entries: Iterator[Entry]) -> Iterator[tuple]:
    for entry in entries:
        yield (first, *entry)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[RunningIndex, dict[str, Optional[float]], dict[str, Queue]]:
    names = [f"q{i}" for i in range(draw(st.integers(1, 8)))]
    queues: dict[str, Queue] = {}
    for name in names:
        if draw(st.booleans()):
            continue                                     # a queue the state does not know (deleted)
        guarantee = {CPU: draw(st.integers(0, 4)) * 1000} if draw(st.booleans()) else {}
        queue = Queue(name=name, guarantee=guarantee)
        queue.allocated = {CPU: draw(st.integers(0, 6)) * 1000}
        queues[name] = queue
    index = RunningIndex()
    for i in range(draw(st.integers(0, 40))):
        job = _job(i, draw(st.sampled_from(names)), float(draw(st.integers(0, 3))))
        index.add(job, rank=draw(st.integers(0, 3)), fresh=draw(st.booleans()))
        if draw(st.integers(0, 9)) == 0:
            index.discard(job.id)
    if draw(st.booleans()):
        index.settle()
    bounds = {name: draw(st.sampled_from([None, ANY, 0, 1, 2, 3])) for name in names}
    return index, bounds, queues


@settings(max_examples=500, deadline=None)
@given(fleets(), st.integers(0, 6), st.integers(0, 6), st.integers(0, 3))
def test_the_walk_yields_the_merged_streams_wherever_it_switches(fleet: tuple, lazy: int, streams: int,
                                                                 per_stream: int) -> None:
    index, bounds, queues = fleet
    expected = reference(index, bounds, queues)
    assert list(victim_order(index, bounds.get, queues, lazy, streams, per_stream)) == expected
    assert list(victim_order(index, bounds.get, queues, 10**9)) == expected             # never switches
    shared = Standing()                  # a second search of an equal rule in the same state starts from the first's
    first = victim_order(index, bounds.get, queues, lazy, streams, per_stream, standing=shared)
    assert [next(first, None) for _ in range(min(2, len(expected)))] == expected[:2]
    assert list(victim_order(index, bounds.get, queues, per_stream, streams, lazy, standing=shared)) == expected


@settings(max_examples=400, deadline=None)
@given(fleets(), st.data(), st.integers(0, 6), st.integers(0, 3))
def test_rules_of_a_shared_scope_share_what_they_learn_of_the_other_queues(fleet: tuple, data: st.DataObject,
                                                                          lazy: int, streams: int) -> None:
    """Rules that answer alike outside their own queues (``PreemptRule.shared_scope``) share a base Standing:
    each still yields exactly its own merged streams, whatever the base learnt from rules whose own queues
    were different, and a second search of a rule completes from the base without asking the rule again."""
    index, bounds, queues = fleet
    names = sorted(bounds)
    base = Standing()
    for _ in range(data.draw(st.integers(1, 5))):
        own = frozenset(data.draw(st.lists(st.sampled_from(names), max_size=3)))
        mine = {name: data.draw(st.sampled_from([None, ANY, 0, 1, 2, 3])) for name in own}
        ruled = {name: mine[name] if name in own else bounds[name] for name in names}
        victim_queues, asked = _asking(ruled.get)
        first = victim_order(index, victim_queues, queues, lazy, streams, standing=Standing(base, own))
        assert list(first) == reference(index, ruled, queues)
        if base.complete:
            asked.clear()
            again = list(victim_order(index, victim_queues, queues, lazy, streams, standing=Standing(base, own)))
            assert again == reference(index, ruled, queues)
            assert set(asked) <= own        # the other queues came from the base


def test_a_switch_midway_neither_repeats_nor_drops_a_candidate() -> None:
    """Queue a is closed; b's candidates interleave with a's: the walk skips a's, switches after the first
    skip, and the streams must start strictly after the skipped entry, in both passes."""
    index = RunningIndex()
    below = Queue(name="c", guarantee={CPU: 8000})
    below.allocated = {CPU: 1000}                        # under its guarantee: the second pass
    queues = {"a": Queue(name="a"), "b": Queue(name="b"), "c": below}
    for i in range(12):
        index.add(_job(i, "abc"[i % 3], float(i)), rank=i % 2, fresh=False)
    bounds: dict[str, Optional[float]] = {"a": None, "b": ANY, "c": ANY}
    expected = reference(index, bounds, queues)
    assert expected[:2] == ["j10", "j4"] and expected[-1] == "j5"
    for lazy in range(8):
        for streams in (0, 1, 2):
            for per_stream in range(4):
                assert list(victim_order(index, bounds.get, queues, lazy, streams, per_stream)) == expected


def test_bounds_are_asked_only_for_the_queues_met() -> None:
    """1,000 queues, every one open: the first candidate costs one bound, not 1,000 (the saturated bench's
    searches met a few candidates each but used to ask every queue and open a stream on each)."""
    index = RunningIndex()
    queues = {f"q{i}": Queue(name=f"q{i}") for i in range(1000)}
    for i in range(3000):
        index.add(_job(i, f"q{i % 1000}", float(i)), rank=0, fresh=False)
    victim_queues, asked = _asking(lambda name: ANY)
    walk = victim_order(index, victim_queues, queues)
    assert next(walk) == "j2999"
    assert asked == ["q999"]
    assert len(list(walk)) == 2999 and len(asked) == 1000


def test_a_rule_opening_one_queue_of_many_switches_to_its_stream() -> None:
    """A rule taking only from one queue: the walk gives up after a few skips, asks every queue, and reads
    the one opened queue's stream instead of skipping every other queue's candidates."""
    index = RunningIndex()
    queues = {f"q{i}": Queue(name=f"q{i}") for i in range(100)}
    for i in range(20000):
        index.add(_job(i, f"q{i % 100}", float(i)), rank=0, fresh=False)
    victim_queues, asked = _asking(lambda name: ANY if name == "q0" else None)
    streams = _spy(index, "ordered")
    walk = victim_order(index, victim_queues, queues)
    got = [next(walk)]
    assert len(asked) == 100          # each queue asked once, cached for the rest of the walk
    assert [call for call in streams if call[0] == "q0"] and all(call[0] == "q0" for call in streams if
                                                                 isinstance(call[0], str))  # one stream
    got.extend(walk)
    assert got == [f"j{i}" for i in range(19900, -1, -100)]


def test_many_opened_queues_are_walked_and_the_walk_stops_at_the_top_bound() -> None:
    """Most queues opened below rank 1: after the lazy skips the walk knows every bound; it opens no stream
    (the closed queues' candidates it skips cost less than 45 streams) and stops at the first rank-1
    candidate instead of skipping the rest."""
    index = RunningIndex()
    queues = {f"q{i}": Queue(name=f"q{i}") for i in range(50)}
    for i in range(5000):
        index.add(_job(i, f"q{i % 50}", float(i)), rank=1 if i % 7 else 0, fresh=False)
    bounds = {f"q{i}": 1.0 if i % 10 else None for i in range(50)}      # 45 opened, 5 closed
    expected = reference(index, bounds, queues)
    streams = _spy(index, "ordered")
    seen = _spy(index, "walk")
    assert list(victim_order(index, bounds.get, queues, lazy_skips=4)) == expected
    assert not streams
    walked = [item for item in seen if len(item) == 5]
    assert len(walked) == 715 + 1 and walked[-1][0] == 1    # the 715 rank-0 candidates, then one rank-1


def test_a_walk_that_keeps_skipping_turns_to_the_streams_after_all() -> None:
    """20 opened queues with one candidate each among 80 closed ones with 100 each: with every bound known
    the walk would still skip ~8,000 candidates, so after 8 skips per opened queue it merges their streams."""
    index = RunningIndex()
    queues = {f"q{i}": Queue(name=f"q{i}") for i in range(100)}
    for i in range(8020):
        name = f"q{20 + i % 80}" if i < 8000 else f"q{i - 8000}"
        index.add(_job(i, name, float(i % 97)), rank=0, fresh=False)
    bounds = {f"q{i}": ANY if i < 20 else None for i in range(100)}
    expected = reference(index, bounds, queues)
    streams = _spy(index, "ordered")
    seen = _spy(index, "walk")
    assert list(victim_order(index, bounds.get, queues)) == expected and len(expected) == 20
    walked = [item for item in seen if len(item) == 5]
    assert len(walked) <= 64 + 8 * 20 + 20 and sorted({call[0] for call in streams if len(call) == 3}) == \
        sorted(f"q{i}" for i in range(20))


def test_the_index_counts_its_busy_queues() -> None:
    index = RunningIndex()
    a, b = _job(1, "a", 1.0), _job(2, "a", 2.0)
    index.add(a, rank=0)
    assert not index.queues() and len(index) == 0                  # fresh: not a candidate before settle
    index.settle()
    index.add(b, rank=0, fresh=False)
    assert index.queues() == {"a"} and len(index) == 2 and [e[3] for e in index.walk()] == ["j2", "j1"]
    assert index.least_rank("a") == 0 and index.least_rank("b") == ANY
    index.discard("j1")
    index.discard("j2")
    assert not index.queues() and len(index) == 0 and not list(index.walk())
    index.add(a, rank=1, fresh=False)
    assert index.queues() == {"a"} and index.least_rank("a") == 1


def test_searches_of_equal_scopes_share_a_standing_while_nothing_changes() -> None:
    """engine.core.nomination: one Standing per rule scope, for as long as the queues, their usage and the
    candidates stay as they are; none for a rule without a scope; never in the exhaustive reference engine."""
    from engine.core.preempt import PreemptRule
    from engine.core.scheduler import Engine
    from engine.policy import load_policy
    from tests.core.test_searchwake import DEFAULT

    engine = Engine(load_policy(DEFAULT).pipeline)
    preempt = engine._preempt
    engine.upsert_queue(Queue(name="a"))

    def rule(scope: object) -> PreemptRule:
        return PreemptRule("priority", "priority-preemption", lambda name: ANY, scope=scope)
    one = preempt._standing(rule(("a", 1)))
    assert one is not None and preempt._standing(rule(("a", 1))) is one
    assert preempt._standing(rule(("a", 2))) is not one and preempt._standing(rule(None)) is None
    preempt.running.add(_job(1, "a", 1.0), rank=0, fresh=False)                 # a candidate came
    two = preempt._standing(rule(("a", 1)))
    assert two is not one and preempt._standing(rule(("a", 1))) is two
    engine.upsert_queue(Queue(name="a", priority=5))                            # a queue changed
    assert preempt._standing(rule(("a", 1))) is not two
    assert Engine(load_policy(DEFAULT).pipeline, exhaustive=True)._preempt.park is False
