"""max-attempts: requeue a failed job until a CEL-computed number of attempts, then give up."""

from __future__ import annotations

from typing import Any, Optional

from engine.policy.cel import CelRuntimeError
from engine.policy.cel_vars import CelCache, job_vars
from engine.hookspecs import hookimpl
from engine.model import Failure, Job, Recovery
from engine.plugin import Plugin


class MaxAttempts(Plugin):
    """Requeue failed jobs (avoiding the failed cluster) until a per-job attempt limit, then give up."""

    name = "max-attempts"
    stages = ("recover",)
    description = "requeue a failed job away from its cluster until a CEL-computed attempt limit"
    config_schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "limit": {"type": "string", "default": "3",
                      "description": "CEL over job -> int: admissions allowed before giving up"},
            "fallbackLimit": {"type": "integer", "minimum": 1, "default": 3,
                              "description": "limit used when the expression fails on a job (e.g. a missing label)"},
            "delay": {"type": "number", "minimum": 0, "default": 0,
                      "description": "seconds to wait before the job may be admitted again"},
            "avoidFailedCluster": {"type": "boolean", "default": True},
        },
    }

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        # Compiled (and dry-run against sample jobs) once, at policy load: mistakes reject the policy.
        self.limit = cel.compile(config["limit"], f"{self.where}.limit", ("job",), "int")
        self.limits: CelCache[tuple[str, int]] = CelCache()     # (job.id, generation) -> (limit, note)

    def _limit(self, job: Job) -> tuple[int, str]:
        """(limit, '' or why the fallback was used). A CEL runtime error must never escape a hook."""
        try:
            return int(self.limit.evaluate({"job": job_vars(job)})), ""
        except CelRuntimeError as exc:
            return int(self.config["fallbackLimit"]), f"; fallback, {exc}"

    @hookimpl
    def atoll_recover(self, job: Job, failure: Failure) -> Optional[Recovery]:
        # Evaluated once per job generation, not on every failure of an unchanged job.
        limit, note = self.limits.get((job.id, job.generation), lambda: self._limit(job))
        if job.attempts >= limit:
            return Recovery(requeue=False, reason=f"{self.name}: gave up after {job.attempts} attempt(s) "
                                                  f"(limit {limit}{note}): {failure.kind.value} "
                                                  f"{failure.message}".rstrip())
        avoid = frozenset({failure.cluster}) if failure.cluster and self.config["avoidFailedCluster"] else frozenset()
        return Recovery(requeue=True, delay=float(self.config["delay"]), exclude_clusters=avoid,
                        reason=f"{self.name}: attempt {job.attempts} of {limit} failed ({failure.kind.value})")


PLUGINS: list[type[Plugin]] = [MaxAttempts]


@hookimpl
def atoll_plugin_classes() -> list[type[Plugin]]:
    """The discovery hook Atoll calls on every ``atoll.plugins`` entry point."""
    return PLUGINS
