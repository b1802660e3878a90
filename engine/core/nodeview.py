"""FleetState's node view (issue 10): the only place that answers "does it fit", on nodes where it can.

A mixin of ``FleetState`` (same state, own idea): a cluster's reported node shapes (Karmada resource-model
grades as virtual nodes, ``engine.core.nodefit``) with Atoll's in-flight pods booked on them and a dry run's
supposed-gone victims given back; ``replicas_fit`` / ``fits_tasks`` check free totals and, where a cluster
reports node shapes, its nodes; ``clusters_fitting_pods`` / ``fits_somewhere`` answer for the fleet through
the FitIndex. Clusters without usable models (none, or Karmada's default cpu/memory ones) are totals only.
"""

from __future__ import annotations

from itertools import islice
from typing import Callable, Iterable, Mapping, Optional, Sequence

from engine.core.fitindex import FitIndex
from engine.core.nodefit import UNBOUNDED, NodeShapes, PerPod, Vector, fits, max_replicas, pairs, reserve, vector
from engine.model import Cluster, Job, Pods
from engine.resources import Resources


class NodeView:
    clusters: dict[str, Cluster]
    jobs: dict[str, Job]
    _inflight: dict[str, dict[str, tuple[Resources, Optional[float]]]]
    _nodes: dict[str, Optional[NodeShapes]]
    _booked: dict[str, list[NodeShapes]]
    _shaped: set[str]
    _fit_memo: dict[str, dict[object, int]]
    _gone: dict[str, dict[str, int]]
    _fits: FitIndex
    free: Callable[[str], Resources]
    ready_clusters: Callable[[], list[Cluster]]
    clusters_fitting: Callable[[Resources, list[Cluster]], list[Cluster]]

    def nodes(self, cluster: str) -> Optional[NodeShapes]:
        """The cluster's virtual nodes now: its reported node shapes with Atoll's in-flight pods booked
        on them (largest nodes first: ``nodefit.reserve``), job by job in booking order. None when it reports
        no resource models (then only its totals are known). Finished jobs are not credited back here, unlike
        ``free`` (which nodes they freed is unknown): the next report shows them. Karmada's *default*
        cpu/memory models are not used (None as well): their lower edges make e.g. a 10-cpu/10Gi node a
        1-cpu/4Gi one, so a conservative view from them would refuse nearly everything (see ARCHITECTURE.md).

        The view is a function of the state (the report, the in-flight jobs in booking order, a dry run's
        supposed-gone jobs), never of the path that led to it: caches keyed on ``touched`` rely on that, since
        a dry run drops its touches. Booking all pods at once would not do: ``reserve`` of two pods is not two
        ``reserve`` of one (it fills the largest node before the next). The views after each in-flight job
        (``_booked``) are kept, so that a dry run supposing in-flight jobs gone books only the jobs after the
        first of them again. Do not mutate."""
        if cluster in self._nodes:
            return self._nodes[cluster]
        shapes = self.clusters[cluster].node_shapes
        if shapes is not None and shapes.karmada_defaults:
            shapes = None
        if shapes is not None:
            flights = self._inflight.get(cluster) or {}
            gone = self._gone.get(cluster)
            jobs = self.jobs
            if not gone:
                shapes = self._booking(cluster, shapes, flights, len(flights))
            elif any(job_id in jobs and job_id not in flights for job_id in gone):
                # jobs the report counts, supposed gone: each pod gives back a node of its size, then every
                # in-flight job is booked again
                shapes = _freed(shapes, [pod for job_id in gone if job_id in jobs and job_id not in flights
                                         for pod in jobs[job_id].placed_pods(cluster)])
                shapes = _book(shapes, jobs, cluster, (job_id for job_id in flights if job_id not in gone))
            else:               # only in-flight jobs supposed gone: from the view before the first of them
                order = list(flights)
                first = min((i for i, job_id in enumerate(order) if job_id in gone), default=len(order))
                shapes = _book(self._booking(cluster, shapes, flights, first), jobs, cluster,
                               (job_id for job_id in order[first:] if job_id not in gone))
        self._nodes[cluster] = shapes
        return shapes

    def _booking(self, cluster: str, report: NodeShapes, flights: Mapping[str, object], k: int) -> NodeShapes:
        """The reported view with the first ``k`` in-flight jobs booked, kept in ``_booked``."""
        booked = self._booked.get(cluster)
        if booked is None:
            booked = self._booked[cluster] = [report]
        if len(booked) <= k:
            view = booked[-1]
            jobs = self.jobs
            for job_id in islice(flights, len(booked) - 1, k):
                view = _book(view, jobs, cluster, (job_id,))
                booked.append(view)
        return booked[k]

    def _book_more(self, cluster: str, job: Job, fresh: bool) -> None:
        """``hold`` booked ``job`` on the cluster (``fresh``: it was not in flight there before, so it is the last
        in booking order): book its pods on the kept views, or drop those it changes (see ``nodes``)."""
        if cluster not in self._shaped:
            return                                  # no node view (None): nothing to book on
        flights = self._inflight[cluster]
        if not fresh:
            self._unbook(cluster, job.id)
            return
        booked = self._booked.get(cluster)
        if booked is not None and len(booked) == len(flights):          # complete before this job
            pods = job.placed_pods(cluster)
            booked.append(reserve(booked[-1], pods) if pods else booked[-1])
            if cluster in self._nodes and cluster not in self._gone:
                self._nodes[cluster] = booked[-1]                       # the kept view: the same one
                return
        self._nodes.pop(cluster, None)      # a dry run's supposed view, or none kept: built when next asked

    def _unbook(self, cluster: str, job_id: str) -> None:
        """The in-flight job ``job_id`` on the cluster is released or booked anew (call while it is still in
        flight): the views from it on are dropped."""
        booked = self._booked.get(cluster)
        if booked is not None and len(booked) > 1:
            del booked[list(self._inflight[cluster]).index(job_id) + 1:]
        self._nodes.pop(cluster, None)

    def replicas_fit(self, cluster: str, per_pod: PerPod) -> int:
        """How many pods of this shape the cluster can host now: its free totals, and its virtual nodes
        when it reports node shapes (each pod on one node). ``nodefit.UNBOUNDED`` for an empty request.
        Memoised per cluster like ``fits_tasks`` (for a request in its canonical tuple form)."""
        if not per_pod or not isinstance(per_pod, tuple):
            return self._replicas_fit(cluster, per_pod)
        memo = self._fit_memo.get(cluster)
        if memo is None:
            memo = self._fit_memo[cluster] = {}
        known = memo.get(per_pod)       # a vector never equals a pods key: ((str, int), ...) vs ((vector, int), ...)
        if known is None:
            if len(memo) > 4096:
                memo.clear()
            known = memo[per_pod] = self._replicas_fit(cluster, per_pod)
        return known

    def _replicas_fit(self, cluster: str, per_pod: PerPod) -> int:
        free = self.free(cluster)
        best = UNBOUNDED
        # ``pairs`` and ``min`` inlined: this runs per cluster changed for every pod shape recounted (FitIndex.counts)
        for name, amount in per_pod if isinstance(per_pod, tuple) else per_pod.items():
            if amount > 0:
                n = free.get(name, 0) // amount
                if n < best:
                    best = n
        if not best:
            return best
        shapes = self._nodes[cluster] if cluster in self._nodes else self.nodes(cluster)
        if shapes is not None:
            n = max_replicas(shapes, per_pod)
            if n < best:
                best = n
        return best

    def fits_tasks(self, cluster: str, pods: Sequence[tuple[PerPod, int]]) -> bool:
        """Whether all these pods ((per-pod request, count) pairs, e.g. ``job.min_pods``) fit the
        cluster at once: in its free totals, and packed first-fit on its virtual nodes when it has
        node shapes (conservative: the nodes are the grades' lower edges).

        The answer is memoised per cluster until its free totals or node view change (FleetState
        drops ``_fit_memo[cluster]`` whenever either does): a cycle asks the same few gang minima of
        the same clusters thousands of times between two admissions. One pod shape is answered by
        ``replicas_fit`` (``count`` pods fit iff ``count`` <= how many fit: totals and the sum over
        nodes of what each holds), so gangs of any size of one pod shape share one computation."""
        single = one_pod_shape(pods)
        if single is not None:
            return self.replicas_fit(cluster, single[0]) >= single[1]
        memo = self._fit_memo.get(cluster)
        if memo is None:
            memo = self._fit_memo[cluster] = {}
        try:
            known = memo.get(pods)
        except TypeError:                 # unhashable (a list of dicts): no memo
            return self._fits_tasks(cluster, pods)
        if known is None:
            if len(memo) > 4096:
                memo.clear()
            known = memo[pods] = self._fits_tasks(cluster, pods)
        return known > 0

    def fits_tasks_on(self, pods: Sequence[tuple[PerPod, int]]) -> Callable[[str], bool]:
        """``lambda name: fits_tasks(name, pods)``, for asking many clusters in one state (a placement's
        scores): one pod shape reads its replica count per cluster (``FitIndex.counts``, the same numbers
        ``replicas_fit`` gives) instead of going through the memo cluster by cluster. Use before the state
        changes again."""
        single = self.replica_counts_for(pods)
        if single is None:
            return lambda name: self.fits_tasks(name, pods)
        counts, count = single
        return lambda name: counts.get(name, 0) >= count

    def replica_counts_for(self, pods: Sequence[tuple[PerPod, int]]) -> Optional[tuple[dict[str, int], int]]:
        """When ``pods`` are one pod shape: the replica count per cluster (``FitIndex.counts``) and the count
        asked, so ``fits_tasks(name, pods)`` is ``counts.get(name, 0) >= count`` for every cluster in this
        state (a loop over clusters compares inline, no call per cluster); else None. The dict is the index's
        own: read it before the state changes again."""
        single = one_pod_shape(pods)
        if single is None:
            return None
        return self._replica_counts(single[0])[0], single[1]

    def _fits_tasks(self, cluster: str, pods: Sequence[tuple[PerPod, int]]) -> bool:
        free = self.free(cluster)
        for name, amount in _summed(pods):
            if amount > free.get(name, 0):
                return False
        shapes = self.nodes(cluster)
        return shapes is None or fits(shapes, pods)

    def node_note(self, cluster: str) -> str:
        """What "fits" means for this cluster, for explain and the docs."""
        shapes = self.clusters[cluster].node_shapes
        if shapes is None:
            return "node shapes: totals only (no resource models)"
        if shapes.karmada_defaults:
            return "node shapes: totals only (Karmada's default cpu/memory models are too coarse to use)"
        return f"node shapes: from resource models ({', '.join(sorted(shapes.resources))})"

    @property
    def any_node_shapes(self) -> bool:
        return bool(self._shaped)

    def clusters_fitting_pods(self, need: Resources, pods: Pods, clusters: list[Cluster]) -> list[Cluster]:
        """Those of ``clusters`` where the pods ``pods`` (whose sum is ``need``) fit now: node-aware
        where clusters report node shapes, else the same as ``clusters_fitting(need)``."""
        if not self._shaped:
            return self.clusters_fitting(need, clusters)
        single = one_pod_shape(pods)
        if single is not None:
            get = self._replica_counts(single[0])[0].get
            count = single[1]
            return [c for c in clusters if get(c.name, 0) >= count]     # per admission, every candidate
        fit = self._fits.fitting(("pods", pods), self.clusters, self.free, self.clusters.__contains__,
                                 lambda name: self.fits_tasks(name, pods), False)   # packing: not monotone
        return [c for c in clusters if c.name in fit]

    def fits_somewhere(self, need: Resources, pods: Pods) -> bool:
        """Whether some ready cluster holds these pods (summing to ``need``) now: ``clusters_fitting_pods``
        over the ready clusters without building the list (admit-time checks)."""
        clusters = self.clusters
        if not self._shaped:        # clusters_fitting over the ready ones, without the list (gang's admit, per shape)
            request = tuple((name, amount) for name, amount in need.items() if amount > 0)
            if not request:
                return bool(self.ready_clusters())
            fit = self._fits.fitting(request, clusters, self.free, clusters.__contains__)
            return any(clusters[name].ready for name in fit)
        single = one_pod_shape(pods)
        if single is not None:
            return self.fits_one_somewhere(single[0], single[1])
        fit = self._fits.fitting(("pods", pods), clusters, self.free, clusters.__contains__,
                                 lambda name: self.fits_tasks(name, pods), False)   # packing: not monotone
        return any(clusters[name].ready for name in fit)

    def fits_one_somewhere(self, per_pod: Vector, count: int) -> bool:
        """``fits_somewhere`` of ``count`` pods of one shape, given as ``one_pod_shape`` gives it (clusters
        with node shapes exist): an admit check run for nearly every job of a large backlog, answered in O(1)
        by ``FitIndex.holds`` while it knows."""
        known = self._fits.holds(per_pod, count)
        if known is None:
            return self._replica_counts(per_pod)[1] >= count
        return known

    def _replica_counts(self, per_pod: Vector) -> tuple[dict[str, int], int]:
        """``replicas_fit`` of ``per_pod`` on every cluster, and the most on a ready one (FitIndex.counts)."""
        clusters = self.clusters
        fit_memo = self._fit_memo
        replicas_fit = self._replicas_fit

        def count(name: str) -> int:        # ``replicas_fit(name, per_pod)``, one call less per cluster recounted
            memo = fit_memo.get(name)
            if memo is None:
                memo = fit_memo[name] = {}
            known = memo.get(per_pod)
            if known is None:
                if len(memo) > 4096:
                    memo.clear()
                known = memo[per_pod] = replicas_fit(name, per_pod)
            return known

        return self._fits.counts(per_pod, clusters, count, clusters.__contains__, lambda name: clusters[name].ready)


def one_pod_shape(pods: Sequence[tuple[PerPod, int]]) -> Optional[tuple[Vector, int]]:
    """``pods`` as (request, count) when it is one pod shape in canonical tuple form with count >= 1
    and a non-empty request (``Job.pods``/``min_pods`` of a one-task job), else None."""
    if len(pods) != 1:
        return None
    per_pod, count = pods[0]
    if count >= 1 and per_pod and isinstance(per_pod, tuple):
        return per_pod, count
    return None


def _summed(pods: Sequence[tuple[PerPod, int]]) -> tuple[tuple[str, int], ...]:
    """The summed request of ``pods`` (per resource, amounts > 0 included as given), memoised by
    ``pods`` when hashable (``Job.pods`` / ``min_pods`` are tuples shared by a job's checks)."""
    try:
        known = _SUMS.get(pods)
    except TypeError:
        known = None
        hashable = False
    else:
        hashable = True
    if known is None:
        need: dict[str, int] = {}
        for per_pod, count in pods:
            for name, amount in pairs(per_pod):
                need[name] = need.get(name, 0) + amount * count
        known = tuple(need.items())
        if hashable:
            if len(_SUMS) > 8192:
                _SUMS.clear()
            _SUMS[pods] = known   
    return known


_SUMS: dict[Sequence[tuple[PerPod, int]], tuple[tuple[str, int], ...]] = {}


def _book(shapes: NodeShapes, jobs: dict[str, Job], cluster: str, job_ids: Iterable[str]) -> NodeShapes:
    """``shapes`` with the pods of these jobs on ``cluster`` booked, job by job in this order."""
    for job_id in job_ids:
        job = jobs.get(job_id)
        pods = job.placed_pods(cluster) if job is not None else None
        if pods:
            shapes = reserve(shapes, pods)
    return shapes


def _freed(shapes: NodeShapes, pods: Sequence[tuple[PerPod, int]]) -> NodeShapes:
    """``shapes`` plus, for each pod given back, a virtual node of the pod's size (its graded resources)."""
    extra = [(vector({k: v for k, v in pairs(per_pod) if k in shapes.resources}), count) for per_pod, count in pods]
    return NodeShapes.of([*shapes.nodes, *((vec, n) for vec, n in extra if vec)], shapes.resources,
                         shapes.karmada_defaults)
