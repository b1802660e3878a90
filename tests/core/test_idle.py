"""Quiet queues (engine.core.idle): a queue whose groups are all parked and hold is passed without a look at each
group, and the decisions stay exactly the exhaustive engine's."""

from __future__ import annotations

from typing import Any

import pytest

from engine.core.backlog import Group
from engine.core.sources import WalkSource
from engine.core.idle import QueueReads
from engine.core.scheduler import Engine
from engine.core.state import FleetState
from engine.core.wake import Reads
from engine.model import Cluster, JobState, Queue, Refusal
from engine.resources import CPU, MEMORY
from tests.core.test_pruned_exact import SHARE_BEFORE, Pair, _copy
from tests.core.test_wake import DEFAULT, GI, NO_PREEMPTION, _job, churn_steps


def _many_queues(policy: Any, queues: int = 8) -> Pair:
    """Three clusters, ``queues`` queues of weights 1-3, 400 jobs of four gang sizes and three priorities."""
    pair = Pair(policy)
    for name, cpu in (("a", 8000), ("b", 6000), ("c", 4000)):
        pair.both("upsert_cluster", lambda name=name, cpu=cpu: (Cluster(name, allocatable={CPU: cpu, MEMORY: 64 * GI}),))
    for n in range(queues):
        pair.both("upsert_queue", lambda n=n: (Queue(f"q{n}", weight=1 + n % 3),))
    for i in range(400):
        j = _job(i, (1, 2, 3, 5)[i % 4], (1000, 2000)[i % 7 % 2], queue=f"q{i * 7 % queues}")
        j.priority = (0, 0, 1, 2)[i % 4]
        pair.both("submit", lambda j=j: (_copy(j),))
    return pair


def _churn(pair: Pair, cycles: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Finish one running job per cycle (evicting the victims of the last one's preemptions); count what the
    pruned engine passed quietly, and the turns of a quiet queue that ended midway and resumed."""
    seen = {"quiet": 0, "resumed": 0}
    resume = WalkSource.resume

    def counting(self: WalkSource, passed: list[Any], rest: Any) -> None:
        if passed:
            seen["resumed"] += 1
        resume(self, passed, rest)

    monkeypatch.setattr(WalkSource, "resume", counting)
    pair.cycle()
    for _ in churn_steps(pair, cycles, lambda running: running[len(running) // 3]):
        seen["quiet"] += pair.pruned._result.quiet
    return seen


@pytest.mark.parametrize("policy", ["default", "no-preemption", "share-before"])
def test_quiet_queues_are_passed_and_the_decisions_stay_exact(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = {"default": DEFAULT, "no-preemption": NO_PREEMPTION, "share-before": SHARE_BEFORE}[policy]
    pair = _many_queues(path)
    assert pair.pruned.pipeline.queue_order_candidate is (policy != "share-before")
    seen = _churn(pair, 60, monkeypatch)
    assert pair.cycles > 60 and pair.shared > 2000
    assert seen["quiet"] > 30           # not vacuous: queue turns passed without a look at each group
    assert pair.exhaustive._result.quiet == 0


def test_a_quiet_queue_stopped_midway_resumes_where_the_loop_would() -> None:
    """Progressive drf keys a queue by its next job's shape: a quiet queue whose bigger shape would send it behind
    another queue stops there (its walk resumes with the groups passed so far), exactly as job by job."""
    pair = _many_queues(DEFAULT, queues=12)
    stopped = 0
    resume = WalkSource.resume

    def counting(self: WalkSource, passed: list[Any], rest: Any) -> None:
        nonlocal stopped
        stopped += bool(passed)
        resume(self, passed, rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WalkSource, "resume", counting)
        pair.cycle()
        for _ in range(40):
            running = [j for j in pair.admitted() if pair.pruned.state.jobs[j].state is JobState.ADMITTED]
            if running:
                pair.both("finished", lambda job_id=running[0]: (job_id, True, pair.now))
            pair.cycle()
    assert stopped > 0


def _parked_group(engine: Engine, job_id: str) -> Any:
    group = engine._backlog.group(job_id)
    assert group is not None and group.parked is not None
    return group


def test_the_counts_follow_parking_and_every_read_is_compared() -> None:
    engine = Engine(Pair(NO_PREEMPTION).pruned.pipeline)
    engine.upsert_cluster(Cluster("a", allocatable={CPU: 4000, MEMORY: 64 * GI}))
    engine.upsert_queue(Queue("q"))
    engine.submit(_job(0, 2, 2000))
    for i in range(1, 5):
        engine.submit(_job(i, 3, 2000))           # 6 cpu: never fits a 4-cpu cluster
    engine.cycle(1.0)
    quiet: QueueReads = engine._quiet
    group = _parked_group(engine, "ns/j1")
    assert group.counted is not None and quiet.count["q"] == 1
    assert quiet.quiet("q", len(engine._backlog.queues["q"]))
    engine.finished("ns/j0", True, ended_at=2.0)   # 4 cpu free: the gangs' 6 still fit nowhere, nothing they read moved
    assert quiet.quiet("q", 1)
    result = engine.cycle(2.0)
    assert result.full and result.quiet == 1 and result.examined == 0
    engine.upsert_cluster(Cluster("a", allocatable={CPU: 5000, MEMORY: 64 * GI}, status_time=2.5))
    assert not quiet.quiet("q", 1)                 # the most free in one cluster moved (5 cpu): looked at again
    result = engine.cycle(3.0)
    assert result.quiet == 0 and result.examined == 1
    assert quiet.quiet("q", 1)                     # parked again with the new values
    engine.submit(_job(9, 3, 2000))                # a job joins the group: not counted until parked again
    assert group.counted is None and "q" not in quiet.count


def test_a_queues_reads_are_compared_again_after_its_groups_change() -> None:
    """``QueueReads.quiet`` splits a queue's reads once (its own line apart, the rest shared with other queues and
    compared once per state); a group added or removed, a new state, or its own line changing, is seen."""
    state = FleetState()
    state.upsert_queue(Queue("q"))
    version = [0]
    values = {"k": 1}
    reads = Reads(state, lambda: version[0])
    quiet = QueueReads(state, reads)

    def fact(_state: Any, name: str) -> int:
        return values[name]

    def parked(key: str, value: int) -> Group:
        group = Group("q", key, True, key)
        group.parked = ((("usage", "q"), reads.value(("usage", "q"))), (("call", fact, "k"), value)), \
            Refusal("no room", "test")
        group.reason = "no room"
        return group

    one, two = parked("one", 1), parked("two", 2)
    quiet.add(one)
    assert quiet.quiet("q", 1)
    quiet.add(two)                                  # parked with another value of the same read
    assert not quiet.quiet("q", 2)
    quiet.remove(two)
    assert quiet.quiet("q", 1)
    values["k"] = 2
    version[0] += 1                                 # a new state: the shared part is compared again
    assert not quiet.quiet("q", 1)
    values["k"] = 1
    version[0] += 1
    assert quiet.quiet("q", 1)
    state.upsert_queue(Queue("q", capability={CPU: 1000}))   # its own line: the usage of what it limits
    version[0] += 1
    assert not quiet.quiet("q", 1)


def test_served_through_keeps_its_answer_only_while_the_queue_keys_and_its_shapes_stay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``QueueTurns._served_through`` keeps, with a queue's cached keys, the highest of its keys by its job shapes.
    Every answer, kept or not, must be the one found by keying the queue by each shape it has now: while the fleet
    churns and jobs of shapes new to their queues (bigger gangs: higher progressive keys) join between cycles, the
    kept answer is asked often, and shapes joining turn some answers from yes to no. The decisions stay exact."""
    from engine.core.turns import QueueTurns

    pair = _many_queues(DEFAULT, queues=12)
    original = QueueTurns._served_through
    seen = {"asked": 0, "kept": 0, "no": 0}

    def checked(self: Any, name: str, heap: Any) -> bool:
        if self is not pair.pruned or len(heap) == 1:
            return bool(original(self, name, heap))
        bound = heap[1][0] if len(heap) == 2 else min(heap[1][0], heap[2][0])
        keys, valid = self._key_cache(name)
        most = keys.get(("most",))
        kept_before = most is not None and most[0] == valid and most[1][0] == self._backlog.shape_edits
        kept = self._key_kept
        jobs = self.state.jobs
        heads = [next(iter(groups)).head for groups in self._backlog.shapes.get(name, {}).values()]
        expected = all(head is not None and self._queue_key(name, jobs[head[2]]) < bound for head in heads)
        self._key_kept = kept
        answer = bool(original(self, name, heap))
        assert answer == expected, name
        seen["asked"] += 1
        seen["kept"] += kept_before
        seen["no"] += not answer
        return answer

    monkeypatch.setattr(QueueTurns, "_served_through", checked)
    pair.cycle()
    extra = 1000
    for step, _ in enumerate(churn_steps(pair, 60, lambda running: running[len(running) // 3])):
        if step % 5 == 0:                     # a bigger gang than its queue has had (shapes are new per queue)
            queue = f"q{step // 5 % 12}"
            j = _job(extra, 6 + step // 20, 1500, queue=queue)
            extra += 1
            pair.both("submit", lambda j=j: (_copy(j),))
    assert seen["asked"] > 100 and seen["kept"] > 50 and seen["no"] > 5     # not vacuous
