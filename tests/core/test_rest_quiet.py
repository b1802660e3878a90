"""The candidate loop ends once every queue left is untouched and quiet (``QueueTurns._rest_quiet``): after the
last admission of a churn cycle, a saturated fleet's other queues are no longer stepped through one by one. That
this is exact is tested with every other pruning (test_pruned_exact.py: the pruned engine against the exhaustive
one); here, that it happens and that the decisions match an engine without it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from engine.core.turns import QueueTurns
from tests.core._churn import churn_engine

JOBS, QUEUES, CLUSTERS, FINISHES = 3000, 60, 6, 6


def churn(monkeypatch: pytest.MonkeyPatch, shortcut: bool) -> tuple[list[Any], int]:
    """A saturated fleet, then FINISHES finishes one cycle each (no-preemption policy): each cycle's admissions
    and refusal reasons, and how many times quiet queues were stepped through in those cycles."""
    if not shortcut:
        monkeypatch.setattr(QueueTurns, "_rest_quiet", lambda self, heap, sources, memo: False)
    passes = 0
    real = QueueTurns._pass_quiet

    def counted(self: QueueTurns, *args: Any) -> None:
        nonlocal passes
        passes += 1
        real(self, *args)

    monkeypatch.setattr(QueueTurns, "_pass_quiet", counted)
    rng = random.Random(7)
    engine = churn_engine("no-preemption", JOBS, QUEUES, CLUSTERS, rng)
    running = [a.job_id for a in engine.cycle(1.0).admitted]
    passes = 0
    seen = []
    for k in range(FINISHES):
        engine.finished(running.pop(rng.randrange(len(running))), True, ended_at=2.0 + k)
        r = engine.cycle(2.0 + k)
        seen.append(([(a.job_id, a.placement) for a in r.admitted], sorted(r.reasons.items()), r.examined))
        running.extend(a.job_id for a in r.admitted)
    monkeypatch.undo()
    return seen, passes


def test_a_churn_cycle_stops_stepping_through_quiet_queues_once_nothing_else_can_happen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with_it, passes = churn(monkeypatch, True)
    without, passes_without = churn(monkeypatch, False)
    assert with_it == without
    assert sum(len(admitted) for admitted, _, _ in with_it) >= FINISHES     # each finish let a job in
    assert passes_without >= FINISHES * QUEUES // 2          # what it saves: most queues stepped every cycle
    assert passes * 10 <= passes_without      # 0 against 430 when written
