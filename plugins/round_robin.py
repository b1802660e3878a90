"""round-robin (order): volcano-global's dispatcher order — every queue gets a turn per pass.

Key = ``(admissions from this queue in the current cycle,)``: once a queue admitted a job it
waits until every other queue with the same count has had its turn; a queue whose head is
refused keeps its turn and tries its next job (the engine moves on inside the queue).
Counters reset in ``atoll_cycle_start``. Combine with ``queue-priority`` *after* it to visit
queues in priority order within each pass, as volcano-global does.

Why admissions and not examinations: the engine re-keys queues only after an admission
(``Engine._queue_key`` is cached per admission count), so a key that changed on a refusal
would not be seen; counting admissions gives the same rotation whenever heads fit. If the
engine ever re-keys after every examination, this can count examinations instead.

The engine re-keys a queue right after each admission from it, and a queue's
``allocated`` changes only through admissions during a cycle, so an admission is counted
when the queue's ``allocated`` differs from the last one seen: O(resources), no engine
internals. (A job demanding nothing changes nothing and is not counted.)
"""

from __future__ import annotations

from typing import Any, ClassVar

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Queue
from engine.plugin import Plugin
from engine.resources import Resources


class RoundRobin(Plugin):
    """Queues take turns: one admission each per pass."""

    name = "round-robin"
    stages = ("order",)
    description = "queues take turns, one admission each per pass (volcano-global's dispatcher)"
    DEFAULTS: ClassVar[dict[str, Any]] = {}

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        self.turns: dict[str, int] = {}
        self._seen: dict[str, Resources] = {}

    @hookimpl
    def atoll_cycle_start(self, state: FleetState, now: float) -> None:
        self.turns.clear()
        self._seen.clear()

    @hookimpl
    def atoll_queue_order(self, queue: Queue, state: FleetState) -> tuple[int]:
        name = queue.name
        seen = self._seen.get(name)
        if seen is None:
            self._seen[name] = dict(queue.allocated)
        elif seen != queue.allocated:
            self.turns[name] = self.turns.get(name, 0) + 1
            self._seen[name] = dict(queue.allocated)
        return (self.turns.get(name, 0),)


PLUGINS = [RoundRobin]
