"""preemptable (preempt): the policy's CEL decides which jobs may be evicted at all.

``expression`` is a CEL bool over ``job`` (the candidate victim), e.g.
``!('tier' in job.labels) || job.labels['tier'] != 'prod'``. A false result, or a runtime
error (fail closed), protects the job from every preempt rule of the policy; the reason
names the expression. Results are cached on the fields the expression reads
(``plugins._celjob``).
"""

from __future__ import annotations

from typing import Any, Hashable, Optional

from engine.core.preempt import PreemptRule
from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job
from engine.plugin import Plugin
from engine.policy.cel import CelCompiler
from plugins._celjob import JobCel
from plugins._placeutil import configure


class Preemptable(Plugin):
    """Protect every job for which the CEL ``expression`` is not true."""

    name = "preemptable"
    stages = ("preempt",)
    description = "CEL bool over the candidate victim `job`: false protects it from preemption and reclaim"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.text: str = self.config["expression"]
        compiler = cel if cel is not None else CelCompiler()
        self.expression = JobCel(compiler.compile(self.text, f"{self.where}.expression", ("job",), "bool"))
        self._verdicts: dict[tuple[str, int], Optional[str]] = {}     # (victim id, generation) -> reason

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return ()                     # judges victims only: the same for every preemptor

    def verdict_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        return ()                     # reads the victim only (a changed victim is indexed again)

    @hookimpl
    def atoll_protect(self, preemptor: Job, victim: Job, rule: PreemptRule, state: FleetState,
                      now: float) -> Optional[str]:
        key = (victim.id, victim.generation)
        try:
            return self._verdicts[key]
        except KeyError:
            pass
        value, error = self.expression.evaluate(victim)
        verdict = f"preemptable expression failed ({error}): protected" if error else \
            None if value is True else f"not preemptable ({self.text} is false)"
        if len(self._verdicts) >= 100_000:
            self._verdicts.clear()
        self._verdicts[key] = verdict
        return verdict


PLUGINS = [Preemptable]
