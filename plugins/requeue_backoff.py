"""requeue-backoff: requeue a failed job after an exponential backoff, avoiding where it failed.

After the n-th failed admission (``job.attempts`` = n) the job waits
``min(maxDelay, initialDelay × factor^(n−1))`` seconds, optionally stretched by a
*seeded* jitter (hash of seed, job id and attempt: deterministic, no global RNG), then
competes again. On the configured failure kinds it avoids the cluster it failed on.
Only failures of the ``giveUpOn`` kinds (default: the workload failed, or did not start within
its deadline) count towards ``maxAttempts``: a job whose member could not host it
(``Unschedulable``, e.g. pods waiting for a node to free) or whose cluster was lost is not at
fault, and is requeued for as long as it takes, as Kueue does by default.
Exclusions never strand a job: if avoiding the failed cluster (on top of earlier
exclusions) would leave no ready cluster whose allocatable can hold the job's gang
minimum, the older exclusions are dropped, and if even the failed cluster alone is
the only such cluster, nothing is excluded (a flaky cluster beats no cluster). After
``maxAttempts`` such failures it gives up with a reason naming the last failure.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from engine.core.state import FleetState
from engine.errors import InputError
from engine.hookspecs import hookimpl
from engine.model import Failure, FailureKind, Job, Recovery
from engine.plugin import Plugin
from engine.resources import fits
from plugins._placeutil import configure, parse_duration


class RequeueBackoff(Plugin):
    """Exponential backoff requeue with failed-cluster exclusion and a give-up limit."""

    name = "requeue-backoff"
    stages = ("recover",)
    description = "requeue failed jobs with exponential backoff, avoiding the failed cluster; give up after maxAttempts"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.initial = parse_duration(self.config["initialDelay"], f"{self.where}.initialDelay")
        self.maximum = parse_duration(self.config["maxDelay"], f"{self.where}.maxDelay")
        if self.maximum < self.initial:     # every delay would be maxDelay: surely not what was meant
            raise InputError(f"maxDelay {self.config['maxDelay']!r} is below initialDelay "
                             f"{self.config['initialDelay']!r}", f"{self.where}.maxDelay")
        self.factor = float(self.config["factor"])
        self.max_attempts: int = self.config["maxAttempts"]
        self.exclude = bool(self.config["excludeFailedCluster"])
        self.exclude_on = {FailureKind(k) for k in self.config["excludeOn"]}
        self.give_up_on = {FailureKind(k) for k in self.config["giveUpOn"]}
        self.jitter = float(self.config["jitter"])
        self.seed = str(self.config["seed"])

    def delay(self, job: Job, attempt: int) -> float:
        base = min(self.maximum, self.initial * self.factor ** max(0, attempt - 1))
        if self.jitter:
            digest = hashlib.sha256(f"{self.seed}:{job.id}:{attempt}".encode()).digest()
            fraction = int.from_bytes(digest[:8], "big") / 2**64
            base = min(self.maximum, base * (1 + self.jitter * fraction))
        return base

    @hookimpl
    def atoll_recover(self, job: Job, failure: Failure, state: FleetState, now: float) -> Optional[Recovery]:
        attempt = max(1, job.attempts)
        where = f" on {failure.cluster}" if failure.cluster else ""
        what = f"{failure.kind.value}{where}" + (f": {failure.message}" if failure.message else "")
        counts = failure.kind in self.give_up_on
        # job.failures already holds this failure (the engine counts it before the recover stage)
        counted = sum(job.failures.get(kind.value, 0) for kind in self.give_up_on)
        if counts and counted >= self.max_attempts:
            return Recovery(requeue=False, reason=f"gave up after {attempt} attempt(s) (maxAttempts "
                                                  f"{self.max_attempts}); last failure: {what}")
        avoid = self._exclusions(job, failure, state)
        delay = self.delay(job, attempt)
        avoiding = f", avoiding {', '.join(sorted(avoid | job.excluded_clusters))}" if avoid or job.excluded_clusters \
            else ""
        retry = f"retry {counted + 1} of {self.max_attempts}" if counts else \
            f"retry ({failure.kind.value} does not count towards maxAttempts {self.max_attempts})"
        return Recovery(requeue=True, delay=delay, exclude_clusters=frozenset(avoid),
                        reason=f"{what}; {retry} after {delay:g}s{avoiding}")

    def _exclusions(self, job: Job, failure: Failure, state: FleetState) -> set[str]:
        """The clusters to add to the job's exclusions. May clear the job's older exclusions
        (the engine only ever adds them) so that at least one capable cluster stays usable."""
        failed = failure.cluster
        if not (self.exclude and failed and failure.kind in self.exclude_on):
            return set()
        need = job.min_demand
        capable = {c.name for c in state.clusters.values() if c.ready and fits(need, c.allocatable)}
        if capable - job.excluded_clusters - {failed}:
            return {failed}
        if capable - {failed}:
            job.excluded_clusters.clear()     # older exclusions would strand it: keep only the new one
            return {failed}
        job.excluded_clusters.clear()         # the failed cluster is the only one able to run it
        return set()


PLUGINS = [RequeueBackoff]
