"""priority-preemption (preempt): a job refused for lack of capacity evicts strictly lower-priority jobs.

Priority is an effective priority computed by the ``priority`` CEL expression (default
``job.priority``; give it the same expression as job-priority so both stages agree), once
per job version. It is also every job's *rank* as a victim (``atoll_victim_rank``): lower
ranks are evicted first. Which queues' jobs a job may evict (``acrossQueues``):

* ``none``: only jobs of its own queue with a strictly lower priority.
* ``queuePriority``: those, and any job of a queue with a lower ``Queue.spec.priority``
  (Volcano: queue priority is "considered during reclamation").
* ``queueThenJob`` (default): (queue priority, job priority) compared in that order, as the
  order stage serves them: any job of a lower-priority queue, and strictly lower-priority
  jobs of its own queue and of queues with the same queue priority.

Strict dominance means no cycle: a victim can never evict its preemptor back. The shared
rules (useful, minimal, whole jobs, guarantees of other queues kept, protections) are
``engine.core.preempt``'s.
"""

from __future__ import annotations

from typing import Any, Hashable, Optional

from engine.core.preempt import ANY, PreemptRule
from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job, Queue
from engine.plugin import Plugin
from engine.policy.cel import CelCompiler
from plugins._celjob import JobCel
from plugins._placeutil import configure
from plugins._protections import Protections

_PLAIN = "job.priority"


class PriorityPreemption(Plugin):
    """Evict strictly lower-priority jobs (own queue; other queues as ``acrossQueues`` says)."""

    name = "priority-preemption"
    stages = ("preempt",)
    description = "a job refused for lack of capacity evicts strictly lower-priority jobs (whole, minimal set)"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.protections = Protections(self.config, self.where)
        self.across: str = self.config["acrossQueues"]
        self._rules: dict[Hashable, PreemptRule] = {}           # scope -> its rule (``atoll_preempt_rule``)
        self._rules_read: Optional[dict[str, Queue]] = None     # the queues those rules read
        text = str(self.config["priority"])
        self.expression: Optional[JobCel] = None
        if text.strip() != _PLAIN:
            compiler = cel if cel is not None else CelCompiler()
            self.expression = JobCel(compiler.compile(text, f"{self.where}.priority", ("job",), "int"), compiler)

    def rank(self, job: Job) -> int:
        """The effective priority (a CEL runtime error falls back to ``job.priority``)."""
        if self.expression is None:
            return job.priority
        value, error = self.expression.evaluate(job)
        return job.priority if error else int(value)

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        # job.shape: the demand and the gang minimum (one shared tuple, nothing sorted or built per job)
        return (self.rank(job), job.queue, job.preempted_by, job.shape)

    def verdict_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        return (("queues",),)         # the rule reads queues' priorities (engine.core.searchwake)

    @hookimpl
    def atoll_victim_rank(self, job: Job, state: FleetState) -> int:
        return self.rank(job)

    @hookimpl
    def atoll_preempt_rule(self, job: Job, state: FleetState, now: float) -> Optional[PreemptRule]:
        """The rule of ``job``'s scope: kept per scope (the rule is a function of it and of the queues it reads
        live), so that the 15,000 searches of a saturated start build ~3,000 rules, not 15,000."""
        mine = self.rank(job)
        queues = state.queues
        own = queues.get(job.queue)
        if own is None:
            return None
        scope = (job.queue, mine, own.priority, self.across)
        if self._rules_read is not queues:
            self._rules.clear()
            self._rules_read = queues
        rule = self._rules.get(scope)
        if rule is None:
            if len(self._rules) >= 65536:
                self._rules.clear()
            rule = self._rules[scope] = self._rule(job.queue, mine, own.priority, queues)
        return rule

    def _rule(self, mine_queue: str, mine: int, level: int, queues: dict[str, Queue]) -> PreemptRule:
        across = self.across

        def victim_queues(name: str) -> Optional[float]:
            if name == mine_queue:
                return mine
            if across == "none":
                return None
            queue = queues.get(name)
            if queue is None or queue.priority > level:
                return None
            if queue.priority < level:
                return ANY
            return mine if across == "queueThenJob" else None

        # victim_queues reads the queues' priorities live (no usage, no guarantee); the rest is fixed by the scope,
        # and outside the preemptor's own queue by the shared scope
        return self.protections.rule("priority", self.name, victim_queues, scope=(mine_queue, mine, level, across),
                                     shared_scope=(mine, level, across), own_queues=frozenset((mine_queue,)),
                                     reads_usage=False)


PLUGINS = [PriorityPreemption]
