"""gang: all-or-nothing admission and placement (Volcano's gang, for a fleet).

A job is admitted only if minAvailable of every task can start at once. By default the
whole gang must fit in ONE cluster, because pods of one gang in two clusters cannot
see each other's member scheduler: Volcano in each member would only ever hold its own
part. With ``allowSplit: true`` the gang's minimum may span clusters; that is only
useful when the member schedulers cooperate (e.g. one PodGroup per cluster with a
fleet-level barrier) — Atoll then guarantees the capacity, not the joint start.

Admit refuses when no single ready cluster has the minimum free (in O(1) when it exceeds
``state.max_free``, else by the FitIndex) or, for a split gang, when it exceeds ``state.fleet_free``;
the placement runs at place time, after the filters, over the candidate clusters, on each
cluster's nodes when it reports resource models (a split gang too: each cluster takes only the
replicas its nodes can host). The admit check is exact, not only the per-resource most free (which
sums the most of each resource over different clusters): a job no single cluster can hold is refused
at admit with one text, whatever the filters would say, and a refusal of the admit stage sleeps on the
admit reads alone (``admit_reads``: where the minimum fits), not on every cluster's free capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Optional, Union

from engine.core.nodefit import Vector
from engine.core.nodeview import one_pod_shape
from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Cluster, Job, Placement, Pods, Queue, Refusal
from engine.plugin import Plugin
from engine.resources import fits, format_resources
from plugins._placeutil import ReasonCache, configure, merge, pack_across, place_on_nodes, pods_text, whole_fits

_ONE = "gang needs {need} in one cluster; no ready cluster has that much free"
_ACROSS = "gang needs {need} across the fleet; the fleet has {have} free"


@dataclass(slots=True)
class _Minimum:
    """A job shape's gang minimum (``Job.min_demand``, ``Job.min_pods``) and, once given, its node refusal;
    ``items``: the demand's pairs, ``one``: the pods as one (request, count) when they are one pod shape
    (``NodeView.one_pod_shape``), both read by every admit of the shape. ``state``, ``changes``, ``verdict``:
    the last admit verdict of the shape and the state it was given in (``Gang.atoll_admit``)."""
    need: dict[str, int]
    pods: Pods
    items: tuple[tuple[str, int], ...] = ()
    one: Optional[tuple[Vector, int]] = None
    refusal: Optional[Refusal] = None
    state: Optional[FleetState] = None
    changes: int = -1
    verdict: Optional[Refusal] = None


class Gang(Plugin):
    """Admit a job only when its gang minimum can start at once; place it whole when it fits."""

    name = "gang"
    stages = ("admit", "place")
    description = "all-or-nothing: admit only if minAvailable of every task can start at once (one cluster by default)"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.allow_split = bool(self.config["allowSplit"])
        self._reasons = ReasonCache()
        self._node_refusals: dict[object, Refusal] = {}  # node-view refusals by the gang minimum's pods
        self._minimums: dict[int, _Minimum] = {}   # job shape (its key) -> its gang minimum

    def judges_fitting_clusters_only(self) -> bool:
        return not self.allow_split      # one cluster holding the minimum; a split gang also uses smaller ones

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return job.shape                  # tasks, minimum and demand; nothing of the queue

    def shared_verdict_key(self, job: Job) -> Optional[Hashable]:
        return job.shape_key              # the shape's number: tasks, minimum and demand

    def admits_alike(self, queue: Queue, state: FleetState) -> bool:
        return True                       # reads nothing of the queue

    def verdict_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        if self.allow_split:
            return None                   # a split gang reads the fleet's free capacity cluster by cluster
        minimum = tuple(job.min_demand.items())
        if minimum:
            return (("max", minimum), ("each", minimum))
        # minAvailable 0 everywhere: placed where one replica of some task fits (``place_in_one``)
        return tuple(("each", tuple(task.resources.items())) for task in job.tasks if task.replicas)

    def admit_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        if self.allow_split:
            return None
        minimum = tuple(job.min_demand.items())
        return (("each", minimum),) if minimum else ()     # the ready clusters where the minimum fits whole

    # -- admit ------------------------------------------------------------------------------
    @hookimpl
    def atoll_cycle_start(self, state: FleetState, now: float) -> None:
        for known in self._minimums.values():   # a state seen last cycle is not trusted (see atoll_admit)
            known.state = None

    @hookimpl
    def atoll_admit(self, job: Job, state: FleetState) -> Optional[Refusal]:
        """The verdict reads only the job's shape and the state's free capacity, node views and readiness, all of
        which change only with ``state.changes``: so the verdict of a shape is kept with the state and its
        ``changes`` and handed to the next job of that shape while both are the same (in the 100,000-job first
        cycle 93 % of the calls: most jobs are refused, and refusals change nothing). A new cycle asks again
        (``atoll_cycle_start``), so a state whose facts are replaced without a change (a measurement's oracle,
        engine.sim.node_oracle, between cycles) never gets a verdict of the cycle before."""
        known = self._minimums.get(job.shape_key) or self._minimum(job)     # the lookup inlined: ~100,000 calls a cycle
        if known.state is state and known.changes == state.changes:
            return known.verdict
        verdict = known.verdict = self._admit(known, state)
        known.state, known.changes = state, state.changes
        return verdict

    def _admit(self, known: _Minimum, state: FleetState) -> Optional[Refusal]:
        need = known.need
        if self.allow_split:
            have = state.fleet_free
            if fits(need, have):
                return None
            return Refusal(self._reasons.get(_ACROSS, need, have), self.name, capacity=True)
        have = state.max_free
        for resource, amount in known.items:      # fits(need, have), inlined
            if amount > have.get(resource, 0):
                return Refusal(self._reasons.get(_ONE, need, have), self.name, capacity=True)
        if not state.any_node_shapes:
            # the most free per resource may be on different clusters: one ready cluster must hold it all
            if not known.items or state.fits_somewhere(need, known.pods):
                return None
            return Refusal(self._reasons.get(_ONE, need, have), self.name, capacity=True)
        one = known.one
        if state.fits_one_somewhere(one[0], one[1]) if one is not None else state.fits_somewhere(need, known.pods):
            return None
        refusal = known.refusal
        if refusal is None:             # the node refusal says nothing but the minimum: kept with it
            refusal = known.refusal = self._node_refusal(need, known.pods)
        return refusal

    def _minimum(self, job: Job) -> _Minimum:
        """``job.min_demand`` and ``job.min_pods`` (and its node refusal once needed), shared by every job of its
        shape (they depend on its tasks only): a large first cycle refuses ~100,000 jobs of a few hundred
        shapes, and building them per job cost ~6 us of its ~10. Read only, but for the refusal."""
        known = self._minimums.get(job.shape_key)
        if known is None:
            if len(self._minimums) >= 4096:
                self._minimums.clear()
            need, pods = job.min_demand, job.min_pods
            known = self._minimums[job.shape_key] = _Minimum(need, pods, tuple(need.items()), one_pod_shape(pods))
        return known

    def _node_refusal(self, need: dict[str, int], pods: Pods) -> Refusal:
        """The refusal when the totals hold the gang minimum but no ready cluster's nodes do, memoised by
        the minimum's pods (it says nothing else; a Refusal is immutable)."""
        refusal = self._node_refusals.get(pods)
        if refusal is None:
            if len(self._node_refusals) >= 4096:
                self._node_refusals.clear()
            refusal = self._node_refusals[pods] = Refusal(
                f"gang needs {format_resources(need)} in one cluster and its pods ({pods_text(pods)}) "
                f"on nodes: no ready cluster's nodes can hold them (node shapes from resource models)",
                self.name, capacity=True)
        return refusal

    # -- place ------------------------------------------------------------------------------
    @hookimpl
    def atoll_place(self, job: Job, clusters: list[Cluster], state: FleetState) -> Union[Placement, Refusal, None]:
        """First candidate (best score first) where the whole job fits; else the first where the
        gang minimum fits, with as many extra replicas as fit there; else (allowSplit) a greedy
        spread of the minimum, then of the extras, over the candidates in order."""
        if not clusters:
            return None
        try_whole = fits(job.demand, state.max_free)
        fallback: Optional[Placement] = None
        shaped = state.any_node_shapes
        for cluster in clusters:
            free = state.free(cluster.name)
            if try_whole and (state.fits_tasks(cluster.name, job.pods) if shaped else whole_fits(job, free)):
                return {cluster.name: {t.name: t.replicas for t in job.tasks if t.replicas}}
            if fallback is None:
                part = place_on_nodes(job, state, cluster.name)
                if part is not None:
                    if not try_whole:
                        return {cluster.name: part}
                    fallback = {cluster.name: part}
        if fallback is not None:
            return fallback
        if not self.allow_split:
            on_nodes = f" on its nodes (pods: {pods_text(job.min_pods)})" if shaped else ""
            return Refusal(f"gang needs {format_resources(job.min_demand)} in one cluster; none of the "
                           f"{len(clusters)} candidate cluster(s) has it free{on_nodes}", self.name, capacity=True)
        return self._split(job, clusters, state)

    def _split(self, job: Job, clusters: list[Cluster], state: FleetState) -> Union[Placement, Refusal]:
        names = [c.name for c in clusters]
        free = {name: state.free(name) for name in names}
        minimum = {t.name: t.min_available for t in job.tasks}
        nodes = {name: state.nodes(name) for name in names}     # node views, cut as replicas land
        placement, missing, left = pack_across(job.tasks, names, free, minimum, nodes)
        if missing:
            unplaced = ", ".join(f"{task}: {n}" for task, n in sorted(missing.items()))
            return Refusal(f"gang needs {format_resources(job.min_demand)} across clusters; the candidates "
                           f"cannot hold the minimum (replicas left over: {unplaced})", self.name, capacity=True)
        extras = {t.name: t.replicas - t.min_available for t in job.tasks}
        more, _, _ = pack_across(job.tasks, names, left, extras, nodes)
        placed = merge(placement, more)
        if not placed and any(t.replicas for t in job.tasks):
            return Refusal("not a single replica fits in any candidate cluster", self.name, capacity=True)
        return placed


PLUGINS = [Gang]
