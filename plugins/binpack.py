"""binpack: prefer the cluster the job fills most (Volcano's binpack, per cluster).

Packing jobs into the fullest clusters that still fit them keeps whole clusters free
for the next large gang, which is what fragments a fleet first. The score of a
candidate is ``weight × utilisation after placing`` (0-100, resource-weighted as in
Volcano's binpack): the whole job when it fits there, else its gang minimum; a
cluster where not even the minimum fits scores 0. The engine sorts candidates by the
summed scores, so the place plugin (gang, or the default whole-job placement) puts the
job whole into the fullest cluster that fits.
"""

from __future__ import annotations

from typing import Any, Hashable, Optional

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Cluster, Job
from engine.plugin import Plugin
from plugins._placeutil import configure
from plugins._scorecache import ScoreCache


class Binpack(Plugin):
    """Score clusters by how full they would be with the job placed (fuller is better)."""

    name = "binpack"
    stages = ("place",)
    description = "prefer the fullest cluster that fits the job (score), keeping whole clusters free for big gangs"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.weight: int = self.config["weight"]
        self.resources: dict[str, int] = dict(self.config["resources"])
        self._scores = ScoreCache(self.resources)

    def judges_fitting_clusters_only(self) -> bool:
        return True      # a score per cluster, no placement of its own

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return job.shape

    def verdict_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        return ()                        # scores never refuse

    @hookimpl
    def atoll_score(self, job: Job, clusters: list[Cluster], state: FleetState) -> dict[str, int]:
        weight = self.weight
        scores = self._scores.by_name(job, clusters, state)     # read by name: one pass over the candidates
        out: dict[str, int] = {}
        for cluster in clusters:
            name = cluster.name
            out[name] = weight * (scores[name] or 0)
        return out


PLUGINS = [Binpack]
