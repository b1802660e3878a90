"""cluster-filter and cluster-score: the policy's own CEL over (job, cluster) pairs.

``cluster-filter`` keeps a candidate cluster when its ``expression`` is true (e.g.
``job.labels['tier'] != 'prod' || cluster.labels['env'] == 'prod'``); the reason for a
removed cluster names the expression. ``cluster-score`` adds ``weight × expression``
(a number) to a candidate's score. Both evaluate only candidate clusters and cache
results on what the expression reads (see ``plugins._celpair``).

An expression that fails on a real pair (say a label the job lacks) removes the
cluster (filter: fail closed, with the error as the reason) or scores 0 (score), and so
does a score that is not a finite number (``x / 0.0`` is inf in CEL, not an error).
"""

from __future__ import annotations

import math
from typing import Any, Hashable, Optional

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Cluster, Job
from engine.plugin import Plugin
from plugins._celpair import PairCel
from plugins._placeutil import configure


def _compiler(cel: Any) -> Any:
    if cel is None:
        from engine.policy.cel import CelCompiler
        return CelCompiler()
    return cel


class ClusterFilter(Plugin):
    """Remove candidate clusters for which the policy's CEL expression is false."""

    name = "cluster-filter"
    stages = ("place",)
    description = "CEL bool expression over job and cluster; true keeps the cluster as a candidate"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.text: str = self.config["expression"]
        compiled = _compiler(cel).compile(self.text, f"{self.where}.expression", ("job", "cluster"), "bool")
        self.pairs = PairCel(compiled)
        # job key -> (the ready-cluster list it is valid for, clusters judged, reasons of those removed)
        self._verdicts: dict[Hashable, tuple[list[Cluster], dict[str, Cluster], dict[str, str]]] = {}

    def judges_fitting_clusters_only(self) -> bool:
        return True       # one CEL result per (job, cluster) pair

    def verdict_reads(self, job: Job, state: Any) -> Optional[tuple[Hashable, ...]]:
        # the engine reads the ready clusters' names and labels for every job; other fields are not declared
        return () if self.pairs.reads_labels_only else None

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return self.pairs.job_key(job)    # the values of the job fields the expression reads

    @hookimpl
    def atoll_filter(self, job: Job, clusters: list[Cluster], state: FleetState) -> dict[str, str]:
        if self.pairs.uses_free or not self.pairs.keys_shared_by_jobs:
            return self._judge(job, clusters, state)      # verdicts would not outlive the job or the cycle
        # The results depend only on the job key and the cluster objects; no cluster changed while
        # state.ready_clusters() returns the same list. Answer from the verdicts of earlier jobs with the
        # same key (no CEL, no per-cluster result dicts) and judge only clusters not seen before.
        ready = state.ready_clusters()
        key = self.pairs.job_key(job)
        known = self._verdicts.get(key)
        if known is None or known[0] is not ready:
            if len(self._verdicts) >= 10_000:
                self._verdicts.clear()
            known = self._verdicts[key] = (ready, {}, {})
        _, judged, removed = known
        fresh = [c for c in clusters if judged.get(c.name) is not c]
        if fresh:
            for name in [c.name for c in fresh if c.name in removed]:
                del removed[name]
            removed.update(self._judge(job, fresh, state))
            judged.update((c.name, c) for c in fresh)
        if not removed:
            return {}
        return {c.name: removed[c.name] for c in clusters if c.name in removed}

    def _judge(self, job: Job, clusters: list[Cluster], state: FleetState) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, (ok, value) in self.pairs.evaluate(job, clusters, state).items():
            if not ok:
                out[name] = f"cluster-filter {self.text!r} failed: {value}"
            elif not value:
                out[name] = f"cluster-filter {self.text!r} is false"
        return out


class ClusterScore(Plugin):
    """Add weight × the policy's CEL number to each candidate cluster's score."""

    name = "cluster-score"
    stages = ("place",)
    description = "CEL number expression over job and cluster, times weight, added to the cluster's score"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.text = self.config["expression"]
        self.weight: int = self.config["weight"]
        compiled = _compiler(cel).compile(self.text, f"{self.where}.expression", ("job", "cluster"), "number")
        self.pairs = PairCel(compiled)

    def judges_fitting_clusters_only(self) -> bool:
        return True       # one CEL result per (job, cluster) pair

    def verdict_reads(self, job: Job, state: Any) -> Optional[tuple[Hashable, ...]]:
        # the engine reads the ready clusters' names and labels for every job; other fields are not declared
        return () if self.pairs.reads_labels_only else None

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return self.pairs.job_key(job)

    @hookimpl
    def atoll_score(self, job: Job, clusters: list[Cluster], state: FleetState) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, (ok, value) in self.pairs.evaluate(job, clusters, state).items():
            score = value * self.weight if ok else 0
            # a double can be inf or NaN (``x / 0.0`` on a cluster of 0 cpu): no score, as for an error, where
            # round() raised, failing every placement of the job as a plugin error
            out[name] = round(score) if not isinstance(score, float) or math.isfinite(score) else 0
        return out


PLUGINS = [ClusterFilter, ClusterScore]
