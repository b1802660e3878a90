"""Admit verdicts shared across queues: the admit stage asked once per key and state, not once per job.

A verdict key (``Plugin.verdict_key``) names the queue, so a refused key's answer is handed on only within its
queue (engine.core.backlog). In a large first cycle most keys have one job each: 100,000 jobs of ~640 shapes in
1,000 queues, and after the fleet fills, ~94,000 of them are refused one by one by the same few answers ("no
cluster has room for the gang minimum ...") that depend on the job's shape and on FleetState, not on its queue.

When every admit plugin of the policy declares ``Plugin.shared_verdict_key`` (its key without the queue) and says
of a job's queue ``Plugin.admits_alike`` (nothing of this queue's line changes its verdict: no limit of its own on
it, the line open), the answer of the admit stage for a job is kept with the joined shared key while the state
is the one it was given in (the engine's ``_stamp``, which moves at each cycle start, admission and preemption
issued, and ``FleetState.changes``), and handed to the next job of any alike queue with that key. Exact by the
plugins' contract; the property tests compare with the exhaustive engine, which never shares
(tests/core/test_pruned_exact.py). Not for a nominated job (its booking is lifted around the admit call), and an
answer with a ``retry_at`` is not kept (a time of its own). The dry runs of preemption ask the admit stage
directly: they move ``changes`` and restore it, and are never served from here.

Whether a queue is alike is asked once per queue until a queue is added, edited or removed (``queue_edits``).
"""

from __future__ import annotations

from typing import Hashable, Optional

from engine.core.state import FleetState
from engine.model import Job, Refusal
from engine.pipeline import Pipeline

_MISS = object()
_MAX = 1 << 16
"""Answers kept in one state at most (then started again): one per shape in practice."""


class SharedAdmits:
    """The admit stage's answers of the state of the moment, by shared key, for the jobs of alike queues."""

    def __init__(self, pipeline: Pipeline, state: FleetState) -> None:
        self.pipeline = pipeline
        self.state = state
        self._answers: dict[Hashable, Optional[Refusal]] = {}
        self._stamp = -1                 # the engine's _stamp and the state's changes the answers were given in
        self._changes = -1
        self._alike: dict[str, bool] = {}
        self._edits = -1                 # FleetState.queue_edits the alike answers are for

    def admit(self, job: Job, key: Hashable, stamp: int) -> Optional[Refusal]:
        """The admit stage's verdict for ``job`` (its ``shared_admit_key`` is ``key``), shared when its queue is
        alike. ``stamp``: the engine's ``_stamp``."""
        state = self.state
        if not self.alike(job.queue):
            return self.pipeline.admit_positional(job, state)
        answers = self.answers(stamp)
        known = answers.get(key, _MISS)
        if known is not _MISS:
            return known                 # type: ignore[return-value]
        refusal = self.pipeline.admit_positional(job, state)
        if refusal is None or refusal.retry_at is None:
            if len(answers) >= _MAX:
                answers.clear()
            answers[key] = refusal
        return refusal

    def alike(self, name: str) -> bool:
        """Whether queue ``name`` is alike (``Pipeline.admits_alike``), asked once per queue until a queue is
        added, edited or removed."""
        state = self.state
        if self._edits != state.queue_edits:
            self._alike.clear()
            self._edits = state.queue_edits
        alike = self._alike.get(name)
        if alike is None:
            queue = state.queues.get(name)
            alike = self._alike[name] = queue is not None and self.pipeline.admits_alike(queue, state)
        return alike

    def answers(self, stamp: int) -> dict[Hashable, Optional[Refusal]]:
        """The answers kept for the state of the moment (``stamp``: the engine's ``_stamp``), by shared key: what
        ``admit`` hands a job of an alike queue without asking the plugins (engine.core.settle reads them)."""
        if self._stamp != stamp or self._changes != self.state.changes:
            self._answers.clear()
            self._stamp, self._changes = stamp, self.state.changes
        return self._answers
