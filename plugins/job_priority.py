"""job-priority (enqueue + order): serve higher-priority jobs first inside a queue, with a
CEL-tunable effective priority.

The effective priority is computed once per job version, at enqueue, and remembered on
``(job.id, job.generation, job.attempts, job.queue)`` — every input of ``job_vars`` that
can change without a new generation — so ordering never evaluates CEL. The CEL result
itself is shared by every job with the same values of the fields the expression reads
(``plugins._celjob``): a burst of jobs with a handful of priorities and label sets costs
a handful of evaluations. ``job.priority`` is left alone: it is the user's value.

The default expression ``job.priority`` skips CEL entirely (no evaluation cost).

A CEL runtime error on a real job (a label the sample had but this job lacks, a
division by zero) does not stop scheduling: the job is ordered by its plain
``job.priority``; ``cel_errors`` counts these fallbacks and ``fallbacks[job.id]`` keeps
the message (the newest 10,000 jobs) for ``explain`` and metrics.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from engine.policy.cel import CelCompiler
from engine.policy.cel_vars import CelCache
from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job, Refusal
from engine.plugin import Plugin
from plugins._celjob import JobCel
from plugins._queue_common import settings

FALLBACK_LIMIT = 10_000
_PLAIN = "job.priority"


class JobPriority(Plugin):
    """Job key ``(-effective_priority,)``."""

    name = "job-priority"
    stages = ("enqueue", "order")
    description = "order jobs in a queue by priority (CEL-tunable, computed once per job version)"
    DEFAULTS: ClassVar[dict[str, Any]] = {"priority": _PLAIN}

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        text = str(settings(config, self.DEFAULTS)["priority"])
        self.expression: Optional[JobCel] = None
        if text.strip() != _PLAIN:
            compiler = cel if cel is not None else CelCompiler()
            self.expression = JobCel(compiler.compile(text, f"{self.where}.priority", ("job",), "int"), compiler)
        self._cache: CelCache[tuple[str, int, int, str]] = CelCache()
        self.cel_errors = 0
        self.fallbacks: dict[str, str] = {}

    def effective(self, job: Job) -> int:
        """The priority this plugin orders ``job`` by."""
        if self.expression is None:
            return job.priority
        key = (job.id, job.generation, job.attempts, job.queue)
        value: int = self._cache.get(key, lambda: self._evaluate(job))
        return value

    def _evaluate(self, job: Job) -> int:
        assert self.expression is not None
        value, error = self.expression.evaluate(job)
        if error:
            self.cel_errors += 1
            if len(self.fallbacks) >= FALLBACK_LIMIT:
                self.fallbacks.pop(next(iter(self.fallbacks)))
            self.fallbacks[job.id] = f"{error}; ordered by job.priority {job.priority} instead"
            return job.priority
        self.fallbacks.pop(job.id, None)
        return int(value)

    @hookimpl
    def atoll_enqueue(self, job: Job, state: FleetState) -> Optional[Refusal]:
        self.effective(job)              # evaluate (and report errors) once, when the job arrives
        return None

    @hookimpl
    def atoll_job_order(self, job: Job, state: FleetState) -> tuple[int]:
        return (-self.effective(job),)


PLUGINS = [JobPriority]
