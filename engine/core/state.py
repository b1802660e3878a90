"""FleetState: the engine's cache of clusters, queues and jobs, with exact accounting.

Free capacity of a cluster is what Karmada last reported (allocatable - allocated -
allocating) minus the engine's own *in-flight* reservations: jobs it admitted whose
pods the last status report could not yet include. A reservation is dropped once a
status report newer than the job's start arrives, so nothing is double-booked and
nothing stays booked forever.

``capacity_epoch`` grows whenever capacity may have been freed (a job released, a
cluster grew or came back, a queue was edited). A job refused at epoch E is not
re-examined until the epoch moves on: that is what makes a cycle O(changes).
"""

from __future__ import annotations

from typing import Optional

from engine.core.fitindex import FitIndex
from engine.core.nodefit import NodeShapes, more_room
from engine.core.claims import Claims, _Credited
from engine.core.nodeview import NodeView
from engine.core.touchlog import TouchLog
from engine.model import Cluster, Job, JobState, Queue
from engine.resources import Resources, add_into, clamp_nonnegative, sub


class FleetState(NodeView, Claims, TouchLog):
    def __init__(self) -> None:
        self.clusters: dict[str, Cluster] = {}
        self.queues: dict[str, Queue] = {}
        self.jobs: dict[str, Job] = {}
        self.capacity_epoch = 0
        self.changes = 0            # grows with every change of free capacity, queue usage or queues (caches key on it)
        self.queue_edits = 0        # grows when a queue is added, edited or removed
        self.allocatable_edits = 0  # grows when the fleet's allocatable (the DRF denominator) changes
        # queue -> when its usage last changed (a count of usage changes; ancestors share a descendant's)
        self._usage_stamps: dict[str, int] = {}
        self._usage_changes = 0
        self._allocatable_seen: Optional[Resources] = None
        # clusters whose free capacity or excess (may have) changed, in order, from absolute position
        # ``touched_base`` on: a parked search's room looks again only at those (engine.core.searchroom)
        self.touched: list[str] = []
        self.touched_base = 0
        self._touched_at = 0        # where the dry run under way began in it
        # the touches that may have *raised* the cluster's free capacity or excess (all but bookings that only
        # take), from ``grown_base`` on: a room short on a cluster not among them is short there still
        # (engine.core.idle)
        self.grown: list[str] = []
        self.grown_base = 0
        self._grown_at = 0          # where the dry run under way began in it
        self.now = 0.0
        # cluster -> job id -> (reserved resources, started_at or None)
        self._inflight: dict[str, dict[str, tuple[Resources, Optional[float]]]] = {}
        # cluster -> job id -> (resources, finished at): pods of finished jobs that the last status
        # report still counted as allocated; credited back until a report newer than the finish
        self._credits: dict[str, dict[str, tuple[Resources, float]]] = {}
        self._reserved: dict[str, Resources] = {}      # cluster -> in-flight reservations minus credits
        self._free: dict[str, Resources] = {}
        # cluster -> allocatable - allocated - allocating of its last report (what ``free`` subtracts reservations
        # from): a booking or a dry run recomputes ``free`` with one subtraction instead of three
        self._reported: dict[str, Resources] = {}
        self._fleet_free: Optional[Resources] = None
        self._fleet_allocatable: Optional[Resources] = None
        self._max_free: Optional[Resources] = None
        self._ready: Optional[list[Cluster]] = None
        self._children: Optional[dict[str, list[str]]] = None
        self._fits = FitIndex()                         # request -> clusters where it fits, kept incrementally
        # preemptor job id -> (claimed capacity per cluster, capacity its victims still hold): see nominate
        self._nominations: dict[str, tuple[dict[str, Resources], dict[str, Resources]]] = {}
        self._excess: dict[str, Resources] = {}         # cluster -> victims' capacity beyond their preemptors' claims
        self._dry_runs = 0
        # the dry run under way, and the last one's credited state (Claims.dry_run_begin, dry_run_end)
        self._dry_views: tuple[Optional[Resources], Optional[Resources], list[str], list[Optional[Resources]]] = \
            (None, None, [], [])
        self._dry_kept: Optional[tuple[tuple[int, int], _Credited]] = None
        self._dry_credited = _Credited([], [], {}, {})
        self._nodes: dict[str, Optional[NodeShapes]] = {}   # cluster -> reported shapes minus in-flight pods
        self._booked: dict[str, list[NodeShapes]] = {}      # cluster -> the view after each in-flight job (nodes)
        self._shaped: set[str] = set()                      # clusters that report node shapes
        self._fit_memo: dict[str, dict[object, int]] = {}   # cluster -> pods -> fits now; pod -> replicas_fit
        self._gone: dict[str, dict[str, int]] = {}          # dry run: cluster -> job id supposed gone -> times

    # -- capacity views ----------------------------------------------------------
    def free(self, cluster: str) -> Resources:
        """Schedulable capacity of a cluster now, in-flight admissions included. Do not mutate."""
        cached = self._free.get(cluster)
        if cached is None:
            free = sub(self._reported_free(cluster), self._reserved.get(cluster, {}))
            cached = self._free[cluster] = clamp_nonnegative(free)
        return cached

    def _reported_free(self, cluster: str) -> Resources:
        """allocatable - allocated - allocating of the cluster's last report (cached until ``_invalidate``). Do not
        mutate."""
        base = self._reported.get(cluster)
        if base is None:
            c = self.clusters[cluster]
            base = self._reported[cluster] = sub(sub(c.allocatable, c.allocated), c.allocating)
        return base

    def unclamped_free(self, cluster: str) -> Resources:
        """``free`` before negative amounts are clamped to 0 (a cluster over-committed by in-flight
        admissions or bookings shows how far): what a dry run adds freed capacity to. Not cached."""
        return sub(self._reported_free(cluster), self._reserved.get(cluster, {}))

    def ready_clusters(self) -> list[Cluster]:
        """Ready clusters in name order (cached; do not mutate the list)."""
        if self._ready is None:
            self._ready = sorted((c for c in self.clusters.values() if c.ready), key=lambda c: c.name)
        return self._ready

    def clusters_fitting(self, need: Resources, clusters: list[Cluster]) -> list[Cluster]:
        """Those of ``clusters`` (in their order) where ``need`` fits in what is free now."""
        request = tuple((name, amount) for name, amount in need.items() if amount > 0)
        if not request:
            return list(clusters)
        fit = self._fits.fitting(request, self.clusters, self.free, self.clusters.__contains__)
        return [c for c in clusters if c.name in fit]

    @property
    def max_free(self) -> Resources:
        """Per resource, the most any single ready cluster has free. A demand that does not fit
        here fits in no single cluster: an O(1) refusal for the common saturated case."""
        if self._max_free is None:
            best: Resources = {}
            for c in self.ready_clusters():
                for name, amount in self.free(c.name).items():
                    if amount > best.get(name, 0):
                        best[name] = amount
            self._max_free = best
        return self._max_free

    @property
    def fleet_allocatable(self) -> Resources:
        """Sum of allocatable over ready clusters: the DRF denominator."""
        if self._fleet_allocatable is None:
            total: Resources = {}
            for c in self.ready_clusters():
                add_into(total, c.allocatable)
            self._fleet_allocatable = total
            if total != self._allocatable_seen:
                self._allocatable_seen = dict(total)
                self.allocatable_edits += 1
        return self._fleet_allocatable

    def line_stamp(self, queue: str) -> int:
        """When the usage of ``queue`` or of one of its ancestors last changed (compare for equality only):
        with ``queue_edits`` and ``allocatable_edits``, what a queue order key that reads only the queue's
        line tells about whether the key can have changed (``Plugin.keys_queues_by_line``)."""
        stamps = self._usage_stamps
        stamp = stamps.get(queue, 0)
        q = self.queues.get(queue)
        if q is not None and q.parent:
            for parent in self.ancestors(queue):
                other = stamps.get(parent.name, 0)
                if other > stamp:
                    stamp = other
        return stamp

    @property
    def fleet_free(self) -> Resources:
        if self._fleet_free is None:
            total: Resources = {}
            for c in self.ready_clusters():
                add_into(total, self.free(c.name))
            self._fleet_free = total
        return self._fleet_free

    def inflight(self, cluster: str) -> dict[str, tuple[Resources, Optional[float]]]:
        return self._inflight.get(cluster, {})

    def reports_to_redate(self, horizon: float) -> list[str]:
        """Clusters whose last report is older than ``horizon`` while one of their in-flight reservations is for a
        job started before it. An adapter that knows every report it holds was current as of ``horizon`` (a live
        watch on a source that writes only on change, collecting every period) re-dates those reports to
        ``horizon`` (``upsert_cluster``), so such a reservation ends although no newer report ever comes."""
        return [name for name, flights in self._inflight.items()
                if name in self.clusters and self.clusters[name].status_time < horizon
                and any(started is not None and started < horizon for _, started in flights.values())]

    def credits(self, cluster: str) -> dict[str, tuple[Resources, float]]:
        """Finished jobs' resources the last report of ``cluster`` still counts: job id -> (resources, ended at)."""
        return self._credits.get(cluster, {})

    # -- clusters ------------------------------------------------------------------
    def upsert_cluster(self, cluster: Cluster) -> None:
        """Add or refresh a cluster from a status report."""
        old = self.clusters.get(cluster.name)
        self._reported.pop(cluster.name, None)     # the object may have been edited in place (engine.bench)
        old_free = dict(self.free(old.name)) if old is not None else None
        if old is not None and old is not cluster:
            cluster.generation = old.generation + 1
        self.clusters[cluster.name] = cluster
        if cluster.node_shapes is not None and not cluster.node_shapes.karmada_defaults:
            self._shaped.add(cluster.name)
        else:
            self._shaped.discard(cluster.name)
        flights = self._inflight.get(cluster.name)
        if flights:
            for job_id in [j for j, (_, started) in flights.items() if started is not None and started < cluster.status_time]:
                add_into(self._reserved[cluster.name], flights.pop(job_id)[0], -1)
        credits = self._credits.get(cluster.name)
        if credits:
            for job_id in [j for j, (_, at) in credits.items() if at <= cluster.status_time]:
                add_into(self._reserved[cluster.name], credits.pop(job_id)[0])
        self._invalidate(cluster.name)
        if old is None or old_free is None:
            grew = True
        else:
            grew = ((cluster.ready and not old.ready) or old.labels != cluster.labels
                    or any(v > old_free.get(k, 0) for k, v in self.free(cluster.name).items())
                    or (cluster.name in self._shaped and cluster.node_shapes is not None
                        and more_room(cluster.node_shapes, old.node_shapes)))
        if grew:
            self.capacity_epoch += 1

    def remove_cluster(self, name: str) -> None:
        self.clusters.pop(name, None)
        self._inflight.pop(name, None)
        self._shaped.discard(name)
        self._reserved.pop(name, None)
        self._credits.pop(name, None)
        self._invalidate(name)

    def _invalidate(self, cluster: str) -> None:
        """The cluster itself changed (status, readiness, labels, removal): drop every derived view."""
        self.changes += 1
        self._touch(cluster)
        self._free.pop(cluster, None)
        self._reported.pop(cluster, None)
        self._nodes.pop(cluster, None)
        self._booked.pop(cluster, None)
        self._fit_memo.pop(cluster, None)
        self._fits.changed(cluster)
        self._fleet_free = None
        self._fleet_allocatable = None
        self._max_free = None
        self._ready = None

    def _usage_changed(self, cluster: str, shrunk: bool = False, grew: bool = True) -> None:
        """Only the engine's own bookings on a cluster changed: update derived views incrementally.
        ``shrunk``: only taken, totals and node view alike (``FitIndex.changed``); ``grew``: unless only taken
        from the totals (``free``), whatever the node view (``grown``)."""
        self.changes += 1
        self._touch(cluster, grew)
        old = self._free.pop(cluster, None)
        self._fit_memo.pop(cluster, None)
        self._fits.changed(cluster, shrunk)
        c = self.clusters.get(cluster)
        if old is None or c is None or not c.ready:
            self._fleet_free = self._max_free = None
            return
        new = self.free(cluster)
        if self._fleet_free is not None:
            add_into(self._fleet_free, new)
            add_into(self._fleet_free, old, -1)
        if self._max_free is not None:
            best = self._max_free
            for name, amount in old.items():
                if amount >= best.get(name, 0) and new.get(name, 0) < amount:
                    self._max_free = None       # it held the maximum and shrank: recompute lazily
                    break
            else:
                for name, amount in new.items():
                    if amount > best.get(name, 0):
                        best[name] = amount

    # -- queues ----------------------------------------------------------------------
    def upsert_queue(self, queue: Queue) -> None:
        self.changes += 1
        self.queue_edits += 1
        old = self.queues.get(queue.name)
        if old is not None:
            queue.allocated = old.allocated
            queue.generation = old.generation + 1
        self.queues[queue.name] = queue
        self._children = None
        self.capacity_epoch += 1

    def remove_queue(self, name: str) -> None:
        self.changes += 1
        self.queue_edits += 1
        self.queues.pop(name, None)
        self._children = None
        self.capacity_epoch += 1

    def children(self, queue: Optional[str]) -> list[str]:
        """Child queue names of ``queue`` (None: the roots)."""
        if self._children is None:
            kids: dict[str, list[str]] = {}
            for q in self.queues.values():
                parent = q.parent if q.parent in self.queues else ""
                kids.setdefault(parent or "", []).append(q.name)
            self._children = kids
        return self._children.get(queue or "", [])

    def ancestors(self, queue: str) -> list[Queue]:
        """The queue's parents, nearest first (cycles in bad input are cut)."""
        out: list[Queue] = []
        seen = {queue}
        q = self.queues.get(queue)
        while q is not None and q.parent and q.parent not in seen and q.parent in self.queues:
            seen.add(q.parent)
            q = self.queues[q.parent]
            out.append(q)
        return out

    def _charge(self, queue: str, demand: Resources, sign: int) -> None:
        """Queue usage is kept for the queue and every ancestor (hierarchical quota)."""
        self.changes += 1
        q = self.queues.get(queue)
        if q is None:
            return
        self._usage_changes += 1
        stamp = self._usage_stamps[queue] = self._usage_changes
        add_into(q.allocated, demand, sign)
        for parent in self.ancestors(queue):
            add_into(parent.allocated, demand, sign)
            self._usage_stamps[parent.name] = stamp

    # -- jobs ------------------------------------------------------------------------
    def hold(self, job: Job) -> None:
        """Book an admitted job: queue usage and in-flight reservations on its clusters."""
        self._charge(job.queue, job.demand, +1)
        for cluster in job.placement or {}:
            if cluster in self.clusters:
                reserved = job.placed_demand(cluster)
                previous = self._inflight.setdefault(cluster, {}).get(job.id)
                if previous is not None:
                    add_into(self._reserved[cluster], previous[0], -1)
                self._inflight[cluster][job.id] = (reserved, None)
                add_into(self._reserved.setdefault(cluster, {}), reserved)
                # a first booking on a cached view (or a cluster without one) only takes capacity; a first booking
                # only takes from the totals in any case
                self._usage_changed(cluster, previous is None and (cluster in self._nodes
                                                                   or cluster not in self._shaped),
                                    grew=previous is not None)
                self._book_more(cluster, job, previous is None)     # on the kept node views

    def release(self, job: Job, ended_at: Optional[float] = None) -> None:
        """Undo ``hold``: the job finished, failed, or was deleted. With ``ended_at`` (the caller knows
        exactly when its pods ended, so any report taken at or after that excludes them) a running job
        the last report still counted is credited back until a newer report: freed capacity is
        usable now rather than one status period (10 s in Karmada) later. Without it, nothing is
        credited (a restart adopting long-finished jobs, or a controller that learns of the end
        later than the cluster report does, must not count the same capacity twice)."""
        if not job.state.holds_resources:
            return
        self._charge(job.queue, job.demand, -1)
        for cluster in job.placement or {}:
            flights = self._inflight.get(cluster)
            booked = flights.get(job.id) if flights else None
            if flights and booked is not None:
                self._unbook(cluster, job.id)
                del flights[job.id]
                add_into(self._reserved[cluster], booked[0], -1)
                self._usage_changed(cluster)
            elif ended_at is not None and job.state in (JobState.RUNNING, JobState.EVICTING) \
                    and cluster in self.clusters \
                    and self.clusters[cluster].status_time < ended_at:
                credit = job.placed_demand(cluster)
                self._credits.setdefault(cluster, {})[job.id] = (credit, ended_at)
                add_into(self._reserved.setdefault(cluster, {}), credit, -1)
                self._usage_changed(cluster)      # the node view is unchanged: credits do not reach it
        self.capacity_epoch += 1

    def mark_started(self, job: Job, at: float) -> None:
        """The job's pods exist in its members: the next newer status report includes them."""
        for cluster in job.placement or {}:
            flights = self._inflight.get(cluster)
            if flights and job.id in flights:
                reserved, _ = flights[job.id]
                flights[job.id] = (reserved, at)

