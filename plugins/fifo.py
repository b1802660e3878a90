"""fifo (order): inside a queue, earlier submissions first; arrival order breaks ties."""

from __future__ import annotations

from typing import Any, ClassVar

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Job
from engine.plugin import Plugin


class Fifo(Plugin):
    """Job key ``(submit_time, seq)``. ``seq`` is the engine's arrival counter, so jobs with the
    same submit time (a burst, or adapters with second resolution) keep their arrival order."""

    name = "fifo"
    stages = ("order",)
    description = "order jobs in a queue by submit time, then arrival"
    DEFAULTS: ClassVar[dict[str, Any]] = {}

    @hookimpl
    def atoll_job_order(self, job: Job, state: FleetState) -> tuple[float, int]:
        return (job.submit_time, job.seq)


PLUGINS = [Fifo]
