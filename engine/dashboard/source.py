"""What the dashboard reads: an Engine plus what its adapter knows and the engine does not.

The engine holds the present (jobs, queues, clusters, pending reasons). The adapter adds the past
and its own state: the simulator knows every attempt and every reason change of a job; the
controller knows which policy text it runs, when it loaded it and the last edit it refused. A
``Source`` bundles them behind a few methods; the view-model (``engine.dashboard.view``) reads
only this, so the pages are the same for a simulation and a live fleet.

``version()`` is the cheap change counter that drives live updates: the adapter bumps it when it
carried out a cycle that changed something. Reading it costs nothing per job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from engine.core.scheduler import Engine


@dataclass
class PolicyLog:
    """The running policy and the last refused edit, as the adapter saw them (no engine state)."""

    name: str = ""
    digest: str = ""
    source: str = ""
    text: str = ""
    mode: str = ""
    generation: int = 0
    loaded_at: Optional[float] = None            # wall-clock seconds (time.time())
    refused_text: str = ""
    refused_error: str = ""
    refused_at: Optional[float] = None
    refused_count: int = 0

    def loaded(self, name: str, digest: str, text: str, source: str, mode: str = "",
               at: Optional[float] = None) -> None:
        self.name, self.digest, self.text, self.source, self.mode = name, digest, text, source, mode
        self.generation += 1
        self.loaded_at = time.time() if at is None else at

    def refused(self, text: str, error: str, at: Optional[float] = None) -> None:
        self.refused_text, self.refused_error = text, error
        self.refused_at = time.time() if at is None else at
        self.refused_count += 1


@dataclass
class Attempt:
    """One admission of a job and how it ended (the adapter's history; the engine keeps only the latest)."""

    admitted_at: float
    placement: dict[str, dict[str, int]]
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    outcome: str = ""
    message: str = ""


@dataclass
class History:
    attempts: list[Attempt] = field(default_factory=list)
    reasons: list[tuple[float, str]] = field(default_factory=list)     # (time, new pending reason)
    not_kept: int = 0               # reason changes the adapter did not keep, after reasons[first - 1]
    first: int = 0


class Source:
    """Base: an engine and nothing else known (tests, minimal adapters)."""

    kind = "engine"

    def __init__(self, engine: Optional[Engine] = None, policy: Optional[PolicyLog] = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self.policy = policy or PolicyLog()
        self.clock = clock
        self._version = 0

    def engine(self) -> Optional[Engine]:
        """The live engine, or None (a controller replica that does not lead has none)."""
        return self._engine

    def now(self) -> float:
        """The engine's time (simulated seconds for a simulation, epoch seconds for a controller)."""
        return self.clock()

    def version(self) -> int:
        return self._version

    def bump(self) -> None:
        self._version += 1

    def history(self, job_id: str) -> Optional[History]:
        return None

    def info(self) -> dict[str, Any]:
        """A few adapter facts for the page header (what is running, how far it got)."""
        return {"kind": self.kind}

    def absolute_times(self) -> bool:
        """Whether ``now()`` is wall-clock time (show dates) or seconds from a start (show t=...)."""
        return self.kind == "controller"


class AdmissionLog:
    """The controller's admissions per job (the engine keeps only the latest placement), for the Job page's
    timeline. O(1) per admission; bounded: past ``limit`` jobs the oldest job's entries are dropped."""

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self.jobs: dict[str, list[Attempt]] = {}

    def admitted(self, job_id: str, placement: dict[str, dict[str, int]], at: float) -> None:
        attempts = self.jobs.pop(job_id, [])
        attempts.append(Attempt(at, {c: dict(p) for c, p in placement.items()}))
        self.jobs[job_id] = attempts                  # re-inserted: most recently admitted last
        if len(self.jobs) > self.limit:
            del self.jobs[next(iter(self.jobs))]


class ControllerSource(Source):
    """``atoll run``'s view: the leader's engine (None on a standby) and the runner's policy log.

    Reads the runner through attributes only (``controller``, ``policy_log``, ``dashboard_version``,
    ``identity``, ``leading``, ``synced``), so the runner needs no dashboard code beyond recording."""

    kind = "controller"

    def __init__(self, runner: Any) -> None:
        super().__init__(None, runner.policy_log)
        self.runner = runner

    def engine(self) -> Optional[Engine]:
        controller = getattr(self.runner, "controller", None)
        return controller.engine if controller is not None else None

    def version(self) -> int:
        return int(getattr(self.runner, "dashboard_version", 0))

    def history(self, job_id: str) -> Optional[History]:
        log = getattr(self.runner, "admissions", None)
        attempts = log.jobs.get(job_id) if isinstance(log, AdmissionLog) else None
        return History(list(attempts)) if attempts else None

    def info(self) -> dict[str, Any]:
        return {"kind": self.kind, "identity": getattr(self.runner, "identity", ""),
                "leading": bool(getattr(self.runner, "leading", False)),
                "synced": bool(getattr(self.runner, "synced", False))}
