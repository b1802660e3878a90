"""Where an admissible job goes: the place stage over the ready clusters (a mixin of ``Engine``: same state, own idea).

``_place`` narrows the candidates to the clusters where the gang minimum fits when every place plugin judges only
those (``Pipeline.fitting_clusters_only``), ``_decide`` runs filter → score → place over them, and ``_nowhere``
keeps the refusal of a job that fits nowhere for the jobs judged the same way (same place key, shape and excluded
clusters) while what placing them reads is unchanged. ``default_placement`` is the whole job in the first
candidate where all of it fits, when no place plugin decides.
"""

from __future__ import annotations

from typing import Hashable, Optional

from engine.core.state import FleetState
from engine.core.wake import Reads, Signature, placing_reads
from engine.model import Cluster, Job, Placement, Refusal
from engine.pipeline import Pipeline
from engine.resources import fits, format_resources

_NOWHERE_MAX = 4096
"""``Placing._nowhere_seen`` keeps at most this many refusals (then starts again)."""


class Placing:
    pipeline: Pipeline
    state: FleetState
    _keyed: bool
    _stamp: int
    _reads: Reads
    # (place key, shape, excluded clusters) -> the refusal of a job that fits nowhere, with the state it was
    # judged in and the signature of what judging it read (None: valid in that state only): see _nowhere
    _nowhere_seen: dict[Hashable, tuple[Hashable, Optional[Signature], Refusal]]

    def _place(self, job: Job) -> Placement | Refusal:
        state = self.state
        candidates = state.ready_clusters()
        if job.excluded_clusters:
            candidates = [c for c in candidates if c.name not in job.excluded_clusters]
        if not candidates:
            excluded = f" (excluded after failures: {', '.join(sorted(job.excluded_clusters))})" \
                if job.excluded_clusters else ""
            return Refusal(f"no ready cluster{excluded}", "engine")
        if self.pipeline.fitting_clusters_only and len(candidates) > 1:
            # Every place plugin judges clusters one by one and only places where the gang minimum
            # fits, so the others can be left out: the survivors keep their relative order and the
            # decision is the same. On a refusal the full list is judged again, so the reason (which
            # names the clusters filtered out) is exactly what it always was. In a filling fleet about
            # half the clusters are too full for a given job: this halves the per-admission work.
            fitting = state.clusters_fitting_pods(job.min_demand, job.min_pods, candidates) \
                if state.any_node_shapes else state.clusters_fitting(job.min_demand, candidates)
            if fitting and len(fitting) < len(candidates):
                decided = self._decide(job, fitting)
                if not isinstance(decided, Refusal):
                    return decided
            elif not fitting and self._keyed:
                return self._nowhere(job, candidates)
        return self._decide(job, candidates)

    def _nowhere(self, job: Job, candidates: list[Cluster]) -> Placement | Refusal:
        """``_decide`` over every candidate for a job whose gang minimum fits on none of them: its refusal, whose
        text names what each filter and place plugin saw, is kept for the jobs with the same place key, the same
        shape and the same excluded clusters. After a saturated start ~13,000 jobs of one state were judged over
        all 100 clusters each, the most costly part of the cycle (the admit check passes them: the most free per
        resource is summed over different clusters). It holds in the state it was judged in (``_stamp`` and
        ``FleetState.changes``, which every dry run moves too) and, across states, while what the place stage
        and the engine's placement read for the job (``Pipeline.place_reads``, ``placing_reads``) is unchanged:
        the plugins' contract (``Plugin.verdict_reads``) then says the verdict and its text are too, as for a
        parked key (engine.core.wake). Not across states when a place plugin declares nothing, for a nominated
        job, or with node shapes (node views are not among the reads: ``parkable``)."""
        key = self.pipeline.place_key(job)
        if key is None:
            return self._decide(job, candidates)
        key = (key, job.shape, frozenset(job.excluded_clusters) if job.excluded_clusters else None)
        state = self.state
        at = (self._stamp, state.changes)
        known = self._nowhere_seen.get(key)
        if known is not None:
            judged, signature, refusal = known
            # (a signature is kept only without node shapes, and the ("ready",) read says whether they count now)
            if judged == at or (signature is not None and job.nominated is None and self._reads.holds(signature)):
                return refusal
        decided = self._decide(job, candidates)
        if isinstance(decided, Refusal):
            reads = self.pipeline.place_reads(job, state)
            signature = None
            if reads is not None and job.nominated is None and not state.any_node_shapes:
                signature = self._reads.signature(placing_reads(job) + reads)
            if len(self._nowhere_seen) >= _NOWHERE_MAX:
                self._nowhere_seen.clear()
            self._nowhere_seen[key] = (at, signature, decided)
        return decided

    def _decide(self, job: Job, candidates: list[Cluster]) -> Placement | Refusal:
        """Filter, score and place ``job`` over ``candidates`` (ready clusters in name order)."""
        state = self.state
        if self.pipeline.has_filter:
            reasons: dict[str, str] = {}
            for part in self.pipeline.filter(job=job, clusters=candidates, state=state):
                reasons.update(part)
            if reasons:
                candidates = [c for c in candidates if c.name not in reasons]
            if not candidates:
                return Refusal("no cluster fits: " + _summarise(reasons), "place", capacity=True)
        if self.pipeline.has_score and len(candidates) > 1:
            parts = self.pipeline.score(job=job, clusters=candidates, state=state)
            scores: dict[str, int] = parts[0] if len(parts) == 1 else {}
            for part in parts if len(parts) > 1 else ():
                for cluster, value in part.items():
                    scores[cluster] = scores.get(cluster, 0) + value
            # candidates come in name order and sorted() is stable: ties stay by name
            negated = [-scores.get(c.name, 0) for c in candidates]
            order = sorted(range(len(candidates)), key=negated.__getitem__)
            candidates = [candidates[i] for i in order]
        decided = self.pipeline.place(job=job, clusters=candidates, state=state)
        if decided is not None:
            return decided
        return default_placement(job, candidates, state)


def default_placement(job: Job, candidates: list[Cluster], state: FleetState) -> Placement | Refusal:
    """The whole job in the first candidate where all of it fits, on its nodes too when the cluster
    reports node shapes (used when no place plugin decides)."""
    demand = job.demand
    if fits(demand, state.max_free):
        for cluster in candidates:
            if state.fits_tasks(cluster.name, job.pods):
                return {cluster.name: {t.name: t.replicas for t in job.tasks if t.replicas}}
        if state.any_node_shapes:
            return Refusal(f"no ready cluster has room for the whole job ({format_resources(demand)}) on its "
                           f"nodes (node shapes from resource models)", "engine")
    # no momentary free amounts: the text changes only when the verdict could (engine.core.wake)
    return Refusal(f"no ready cluster has room for the whole job ({format_resources(demand)})", "engine",
                   capacity=True)


def _summarise(reasons: dict[str, str], limit: int = 3) -> str:
    items = [f"{name}: {why}" for name, why in sorted(reasons.items())[:limit]]
    more = len(reasons) - limit
    return "; ".join(items) + (f"; and {more} more" if more > 0 else "")
