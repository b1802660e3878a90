"""queue-state (admit): a Closed queue admits nothing (Volcano's Queue.status.state).

volcano-global ignores the queue state (its weakness 1); here closing a queue, or any of
its parents, stops admissions from it while its jobs keep waiting, visibly.
"""

from __future__ import annotations

from typing import Any, ClassVar, Hashable, Optional

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job, Queue, Refusal
from engine.plugin import Plugin


class QueueState(Plugin):
    """Refuses jobs of a closed queue, or of a queue whose parent is closed. No ``retry_at``:
    reopening a queue is a queue edit, which moves the capacity epoch and re-examines its jobs."""

    name = "queue-state"
    stages = ("admit",)
    description = "a Closed queue (or a queue under a Closed parent) admits nothing"
    DEFAULTS: ClassVar[dict[str, Any]] = {}

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return job.queue                  # only the queue's (and its parents') open state is read

    def verdict_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        return ()                         # the queue line: read by the engine for every job

    def shared_verdict_key(self, job: Job) -> Optional[Hashable]:
        return ()                         # nothing of the job

    def admits_alike(self, queue: Queue, state: FleetState) -> bool:
        # an open line admits every job alike (a closed one names the queue)
        return all(q.open for q in (queue, *state.ancestors(queue.name)))

    @hookimpl
    def atoll_admit(self, job: Job, state: FleetState) -> Optional[Refusal]:
        queue = state.queues.get(job.queue)
        if queue is None:
            return None                   # the engine itself reports unknown queues
        if not queue.open:
            return Refusal(f"queue {queue.name} is Closed", self.name)
        if queue.parent:
            for parent in state.ancestors(queue.name):
                if not parent.open:
                    return Refusal(f"queue {queue.name} is in queue {parent.name}, which is Closed", self.name)
        return None


PLUGINS = [QueueState]
