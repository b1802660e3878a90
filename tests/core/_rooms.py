"""Rooms built by hand (engine.core.searchroom), as a victim search would hand them over."""

from __future__ import annotations

from typing import Optional

from engine.core.preempt import PreemptRule, RunningIndex, Unmet
from engine.model import Job
from engine.resources import Resources


def chosen(count: int) -> list[Job]:
    """``count`` candidates a search chose that the test does not index (only their ids count in a room)."""
    return [Job(id=f"chosen-{i}", name=f"chosen-{i}", queue="chosen") for i in range(count)]


def entry(rule: PreemptRule, freed: dict[str, Resources], jobs: list[Job], index: Optional[RunningIndex] = None
          ) -> Unmet:
    """One rule's entry in ``VictimSearch.rooms``: the rule, what its chosen candidates free per cluster (given by
    the test), the candidates, and those on each cluster of ``freed``: the indexed ones where they run (asked of
    ``index``, as the search does), the others on every cluster of ``freed``."""
    on: dict[str, list[Job]] = {cluster: [] for cluster in freed}
    for job in jobs:
        where = index.placed(job) if index is not None and index.candidate(job.id) else freed
        for cluster in where:
            on.setdefault(cluster, []).append(job)
    return rule, freed, jobs, on
