"""queue-priority (order): serve queues with a higher ``Queue.spec.priority`` first (Volcano's
queue order, also volcano-global's)."""

from __future__ import annotations

from typing import Any, ClassVar

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Queue
from engine.plugin import Plugin


class QueuePriority(Plugin):
    """Queue key ``(-queue.priority,)``: higher priority is smaller, so served first."""

    name = "queue-priority"
    stages = ("order",)
    description = "serve queues in Queue.spec.priority order (higher first)"
    DEFAULTS: ClassVar[dict[str, Any]] = {}

    def keys_queues_by_line(self) -> bool:
        return True                     # the queue's own field

    @hookimpl
    def atoll_queue_order(self, queue: Queue, state: FleetState) -> tuple[int]:
        return (-queue.priority,)


PLUGINS = [QueuePriority]
