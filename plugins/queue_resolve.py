"""queue-resolve (enqueue): decide which queue a job waits in.

Resolution order (first non-empty wins):

1. with ``override: true``, the CEL ``queue`` expression's result;
2. the queue the job names: adapters copy it from a Volcano Job's ``spec.queue``; a
   job without one is looked up under the ``queueKeys`` labels, then annotations
   (``volcano.sh/queue-name``, ``atoll.dev/queue``: volcano-global's convention);
3. without ``override``, the CEL ``queue`` expression's result;
4. the ``default`` queue.

A CEL runtime error *rejects* the job (kept, as Rejected, with the error as its reason)
rather than guessing a queue: a job charged to the wrong queue spends another team's
quota, which is worse than a visible refusal. Changing the job or the policy enqueues
it again. An unknown queue keeps the job pending (the engine says so) unless
``rejectUnknownQueues`` is set; a job rejected that way is enqueued again when it or
the policy changes, not when the queue appears.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from engine.policy.cel import CelCompiler
from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job, Refusal
from engine.plugin import Plugin
from plugins._celjob import JobCel
from plugins._queue_common import settings


class QueueResolve(Plugin):
    """Sets ``job.queue``; CEL results are shared by jobs with equal inputs (``plugins._celjob``)."""

    name = "queue-resolve"
    stages = ("enqueue",)
    description = "resolve a job's queue: its own, its queue label/annotation, a CEL expression, or the default"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "default": "default",
        "queueKeys": ["volcano.sh/queue-name", "atoll.dev/queue"],
        "override": False,
        "rejectUnknownQueues": False,
    }

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        conf = settings(config, self.DEFAULTS)
        self.default: str = conf["default"]
        self.keys: tuple[str, ...] = tuple(conf["queueKeys"])
        self.override: bool = bool(conf["override"])
        self.reject_unknown: bool = bool(conf["rejectUnknownQueues"])
        self.expression: Optional[JobCel] = None
        text = conf.get("queue")
        if text:
            compiler = cel if cel is not None else CelCompiler()
            self.expression = JobCel(compiler.compile(text, f"{self.where}.queue", ("job",), "string"))

    def named_queue(self, job: Job) -> str:
        """The queue the workload itself names ('' when none)."""
        if job.queue:
            return job.queue
        for source in (job.labels, job.annotations):
            for key in self.keys:
                value = source.get(key)
                if value:
                    return value
        return ""

    @hookimpl
    def atoll_enqueue(self, job: Job, state: FleetState) -> Optional[Refusal]:
        named = self.named_queue(job)
        chosen = ""
        if self.expression is not None and (self.override or not named):
            value, error = self.expression.evaluate(job)
            chosen = str(value or "")
            if error:
                return Refusal(f"cannot resolve the queue: {error}", self.name)
        queue = (chosen or named) if self.override else (named or chosen)
        job.queue = queue or self.default
        if self.reject_unknown and job.queue not in state.queues:
            return Refusal(f"queue {job.queue!r} does not exist (rejectUnknownQueues is set)", self.name)
        return None


PLUGINS = [QueueResolve]
