"""Utilisation scores kept per job shape and cluster while the cluster's free capacity stays the same.

binpack and spread score every candidate cluster for every admitted job (``utilisation_scores``): in the
100,000-job first cycle that was ~6,000 placements x 100 clusters, 13 % of the cycle. A cluster's score for a
job depends only on the job's shape (its demand, its gang minimum and their pods), the plugin's weights, and the
cluster: its allocatable, its free capacity and, where it reports node shapes, its node view. Every change of
those appends the cluster to ``FleetState.touched`` (a status report, a booking, a release, a claim), so a score
is reused until its cluster is touched again, and a placement rescores only the clusters touched since its shape
was last scored. Not used inside a dry run (``capacity_epoch < 0``): a supposed state is undone afterwards and
its touches are taken back (``FleetState.dry_run_end``), so nothing seen in it is kept.
"""

from __future__ import annotations

from typing import Hashable, Mapping, Optional, Sequence

from engine.core.state import FleetState
from engine.model import Cluster, Job
from plugins._placeutil import utilisation_scores

_SHAPES_MAX = 4096
"""Shapes kept at most (a new one beyond clears them all)."""


class ScoreCache:
    """``utilisation_scores(job, clusters, state.free, weights, state)``, cluster by cluster, reused while valid."""

    def __init__(self, weights: Mapping[str, int]) -> None:
        self.weights = weights
        self._state: Optional[FleetState] = None
        # shape -> (touched position scored at, node-aware or not, cluster -> score)
        self._kept: dict[int, tuple[int, bool, dict[str, Optional[int]]]] = {}

    def scores(self, job: Job, clusters: Sequence[Cluster], state: FleetState) -> list[Optional[int]]:
        known = self.by_name(job, clusters, state)
        return [known[cluster.name] for cluster in clusters]

    def by_name(self, job: Job, clusters: Sequence[Cluster], state: FleetState) -> Mapping[str, Optional[int]]:
        """``scores`` by cluster name: every one of ``clusters`` is a key (others may be too). Read only, and
        before the state changes again: a caller building its own per-cluster result reads it in that one
        pass (binpack and spread score ~50 candidates per admission in a large first cycle)."""
        if state.capacity_epoch < 0:                    # a dry run's supposed state: nothing kept
            return dict(zip([cluster.name for cluster in clusters],
                            utilisation_scores(job, clusters, state.free, self.weights, state)))
        if state is not self._state:
            self._state = state
            self._kept.clear()
        aware = state.any_node_shapes
        kept = self._kept.get(job.shape_key)
        since = state.touched_since(kept[0], 8 * len(clusters) + 64) if kept is not None and kept[1] == aware else None
        known: dict[str, Optional[int]] = {}
        if kept is not None and since is not None:
            known = kept[2]
            # the touches since repeat clusters many times over (100,000-job first cycle with node shapes: ~110
            # touches of ~4 clusters per placement), so each is dropped once
            for name in set(since) if len(since) > 8 else since:
                known.pop(name, None)
        if not known:               # nothing kept: every cluster scored
            known = dict(zip([cluster.name for cluster in clusters],
                             utilisation_scores(job, clusters, state.free, self.weights, state)))
        else:
            missing = [cluster for cluster in clusters if cluster.name not in known]
            if missing:
                for cluster, score in zip(missing, utilisation_scores(job, missing, state.free, self.weights, state)):
                    known[cluster.name] = score
        if kept is None and len(self._kept) >= _SHAPES_MAX:
            self._kept.clear()
        self._kept[job.shape_key] = (state.touched_end, aware, known)
        return known
