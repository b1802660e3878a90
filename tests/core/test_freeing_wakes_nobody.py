"""Evictions starting or ending wake no parked victim search (``Preemptions._park``): a parked search ran no dry
run, and while its own reads hold (no new candidate it could take, for a room: no cluster whose free capacity
plus excess plus what its candidates free covers the need) a fresh search would run none either, so whether
evictions under way free enough for the job (``FleetState.freeing``, read only by a dry run) cannot change its
outcome. Reading it anyway woke every parked key of a small shape whenever one eviction started or ended: the
p99 spikes of the churn bench (5,700 examinations in a cycle at 100,000 jobs). Here: a saturated fleet under the
default policy, one finish per cycle with the evictions of the cycle before completed first; the decisions equal
the exhaustive engine's, and once the first evictions are over no cycle examines more than a handful of jobs."""

from __future__ import annotations

import random
from typing import Any

from tests.core._churn import churn_engine, finish_one_by_one

JOBS, QUEUES, CLUSTERS, FINISHES = 3000, 60, 6, 20


def churn(exhaustive: bool) -> list[tuple[Any, ...]]:
    """Per cycle: admissions with placements, preemptions with victims, refusal reasons, examinations."""
    rng = random.Random(7)
    engine = churn_engine("default", JOBS, QUEUES, CLUSTERS, rng, exhaustive)
    return [([(a.job_id, a.placement) for a in r.admitted], [(p.preemptor, p.victims) for p in r.preemptions],
             sorted(r.reasons.items()), r.examined) for r in finish_one_by_one(engine, rng, FINISHES)]


def test_evictions_starting_or_ending_wake_no_parked_search() -> None:
    pruned, exhaustive = churn(False), churn(True)
    assert [s[:3] for s in pruned] == [s[:3] for s in exhaustive]
    assert sum(len(s[1]) for s in pruned[5:]) >= 5           # evictions keep starting and ending after the 5th
    assert max(s[3] for s in pruned[5:]) <= 30               # 262 and 264 when the read was there (cycles 10, 11)
