"""What a simulation records: per job its attempts and the history of its pending reason (``SimJob``), the fleet at
each status tick (``Sample``), and the run's result (``SimResult``), which the report (engine.sim.report), the CLI
and the live dashboard read. The loop that fills them is engine.sim.driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from engine.model import Placement
from engine.reasons import reason_kind
from engine.sim.scenario import JobSpec, Scenario

REASONS_KEPT = 32          # reason changes kept per job: the first REASONS_FIRST and the latest (SimJob.note_reason)
REASONS_FIRST = 8


@dataclass
class Attempt:
    admit_time: float
    placement: Placement
    start_time: Optional[float] = None
    end_time: Optional[float] = None
    outcome: str = "Unfinished"
    message: str = ""
    preempted_by: str = ""             # outcome Preempted: the job it was evicted for
    placed_time: Optional[float] = None   # when its pods were created in members (gate: karmada-scheduler placed it)


@dataclass
class SimJob:
    spec: JobSpec
    attempts: list[Attempt] = field(default_factory=list)
    state: str = "Pending"             # Pending, Succeeded, Failed (Running only if cut by the horizon)
    finish_time: Optional[float] = None
    reason: str = ""
    partial: bool = False              # had some but not all of its gang running at some time
    reasons: list[tuple[float, str]] = field(default_factory=list)   # (time, new pending reason), changes only
    reasons_dropped: int = 0           # changes not kept: they came after reasons[REASONS_FIRST - 1], before the rest
    dropped_kinds: Optional[dict[str, str]] = None    # reason_kind -> first such reason among those not kept

    def note_reason(self, now: float, reason: str) -> None:
        """Keep a change of the job's pending reason: the first ``REASONS_FIRST`` and the latest ones, up to
        ``REASONS_KEPT`` in all. A job waiting through a saturated fleet sees its reason change at many
        capacity changes; kept whole, that history grew with wait x backlog (28 million changes, 9.2 GB peak
        on scenarios/churn-100k.yaml)."""
        reasons = self.reasons
        if len(reasons) >= REASONS_KEPT:
            _, dropped = reasons.pop(REASONS_FIRST)
            self.reasons_dropped += 1
            if self.dropped_kinds is None:
                self.dropped_kinds = {}
            self.dropped_kinds.setdefault(reason_kind(dropped), dropped)
        reasons.append((now, reason))


@dataclass
class Sample:
    """The fleet at one status tick, for the report's timeline and the plot."""

    time: float
    backlog: int                       # waiting for admission in the engine
    waiting_in_members: int            # admitted, gang not yet running
    running: int
    useful: float                      # dominant share of the fleet held by running jobs (gang complete)
    cluster_util: dict[str, float]     # dominant share of allocated/allocatable per cluster
    queue_share: dict[str, float]      # dominant share of the fleet admitted per queue
    queue_backlog: dict[str, int]


@dataclass
class SimResult:
    scenario: Scenario
    policy: str
    jobs: dict[str, SimJob]
    timeline: list[Sample]
    held: dict[str, float]             # resource -> amount-seconds bound to pods (partial gangs too)
    end_time: float
    cycles: int
    examined: int
    wall_seconds: float
    horizon_reached: bool
    placement_mode: str = "bind"
    plugin_errors: int = 0             # jobs' judgings a plugin's exception failed (engine.core.contain)
