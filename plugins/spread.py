"""spread: prefer the emptiest cluster, and optionally divide replicas of non-gang jobs.

Spreading keeps load (and the blast radius of a lost cluster) even across the fleet.
The score of a candidate is ``weight × (100 − utilisation after placing)``: the job
(or its minimum) in the emptiest cluster scores highest; 0 where not even the minimum
fits. With ``splitReplicas`` the plugin also *places* jobs that are not gangs (no task
needs more than one pod started with others): each task's replicas are divided as
evenly as capacity allows over the candidates, best score first. A gang, or a job
whose replicas do not all fit, is left to the next place plugin.
"""

from __future__ import annotations

from typing import Any, Hashable, Optional

from engine.core.nodefit import max_replicas, pack
from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Cluster, Job, Placement
from engine.plugin import Plugin
from engine.resources import add_into, scale
from plugins._placeutil import configure, fit_count, is_gang
from plugins._scorecache import ScoreCache


class Spread(Plugin):
    """Score clusters by how empty they stay with the job placed; optionally divide replicas."""

    name = "spread"
    stages = ("place",)
    description = "prefer the emptiest cluster (score); optionally divide replicas of non-gang jobs across clusters"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.weight: int = self.config["weight"]
        self.resources: dict[str, int] = dict(self.config["resources"])
        self._scores = ScoreCache(self.resources)
        self.split = bool(self.config["splitReplicas"])

    def judges_fitting_clusters_only(self) -> bool:
        return not self.split      # a score per cluster; splitting replicas uses clusters too small for the job

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return job.shape

    @hookimpl
    def atoll_score(self, job: Job, clusters: list[Cluster], state: FleetState) -> dict[str, int]:
        scores = self._scores.scores(job, clusters, state)
        out: dict[str, int] = {}
        for cluster, used in zip(clusters, scores):
            out[cluster.name] = 0 if used is None else self.weight * (100 - used)
        return out

    @hookimpl
    def atoll_place(self, job: Job, clusters: list[Cluster], state: FleetState) -> Optional[Placement]:
        if not self.split or len(clusters) < 2 or is_gang(job):
            return None
        names = [c.name for c in clusters]
        left = {name: dict(state.free(name)) for name in names}
        nodes = {name: state.nodes(name) for name in names}     # virtual nodes where node shapes are known
        placement: Placement = {}
        for task in job.tasks:
            caps = []
            for name in names:
                cap = fit_count(task.resources, left[name], task.replicas)
                shapes = nodes[name]
                caps.append(cap if shapes is None or not cap else min(cap, max_replicas(shapes, task.resources)))
            counts = divide_evenly(task.replicas, caps)
            if counts is None:
                return None
            for name, n in zip(names, counts):
                if n:
                    placement.setdefault(name, {})[task.name] = n
                    add_into(left[name], scale(task.resources, n), -1)
                    shapes = nodes[name]
                    if shapes is not None:
                        nodes[name] = pack(shapes, [(task.resources, n)]) or shapes
        return placement or None


def divide_evenly(replicas: int, caps: list[int]) -> Optional[list[int]]:
    """Water-fill ``replicas`` over slots with capacities ``caps`` (earlier slots take the
    remainder first); None when they do not all fit."""
    if replicas > sum(caps):
        return None
    counts = [0] * len(caps)
    remaining = replicas
    active = [i for i, cap in enumerate(caps) if cap > 0]
    while remaining and active:
        share = max(1, remaining // len(active))
        still: list[int] = []
        for i in active:
            if not remaining:
                break
            give = min(share, caps[i] - counts[i], remaining)
            counts[i] += give
            remaining -= give
            if counts[i] < caps[i]:
                still.append(i)
        active = still
    return counts


PLUGINS = [Spread]
