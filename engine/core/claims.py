"""What preemption does to FleetState (a mixin of it: same state, own idea).

A *dry run* (``dry_run_begin`` .. ``dry_run_end``) supposes victims gone (``suppose_gone``): their queue usage and
what they hold on each cluster count as free until undone, exactly, with integers. A *nomination* is a preemptor's
claim on the capacity its victims hold while they are evicted (``nominate``, ``victim_gone``, ``unnominate``):
nobody else may take it, and what the victims free beyond the claims (the *excess*) counts as free in a dry run and
answers ``freeing`` (engine.core.wake's ``("freeing", need)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from engine.model import Cluster, Job, Queue
from engine.resources import Resources, add_into

if TYPE_CHECKING:
    from engine.core.fitindex import FitIndex
    from engine.core.nodefit import NodeShapes


class Claims:
    clusters: dict[str, Cluster]
    queues: dict[str, Queue]
    capacity_epoch: int
    touched: list[str]
    touched_base: int
    _touched_at: int
    grown: list[str]
    grown_base: int
    _grown_at: int
    _reserved: dict[str, Resources]
    _nodes: dict[str, Optional["NodeShapes"]]
    # preemptor job id -> (claimed capacity per cluster, capacity its victims still hold): see nominate
    _nominations: dict[str, tuple[dict[str, Resources], dict[str, Resources]]]
    _excess: dict[str, Resources]       # cluster -> victims' capacity beyond their preemptors' claims
    _dry_runs: int
    _gone: dict[str, dict[str, int]]    # dry run: cluster -> job id supposed gone -> times
    changes: int
    _free: dict[str, Resources]
    _fleet_free: Optional[Resources]
    _max_free: Optional[Resources]
    _fit_memo: dict[str, dict[object, int]]
    _fits: "FitIndex"
    # the dry run under way: fleet free and most free as it began (the dry run changes copies), the clusters
    # credited their excess, and each one's cached free then (None: not cached); see dry_run_end
    _dry_views: tuple[Optional[Resources], Optional[Resources], list[str], list[Optional[Resources]]]
    # the last dry run's credited state, for the next one while nothing changes in between: (touched_end, changes)
    # after it ended, and its _Credited (see dry_run_begin); None before the first
    _dry_kept: Optional[tuple[tuple[int, int], "_Credited"]]
    _dry_credited: "_Credited"          # the dry run under way's

    if TYPE_CHECKING:                   # FleetState's own
        def _charge(self, queue: str, demand: Resources, sign: int) -> None: ...

        def _usage_changed(self, cluster: str, shrunk: bool = False, grew: bool = True) -> None: ...

        def _touch(self, cluster: str, grew: bool = True) -> None: ...

        def free(self, cluster: str) -> Resources: ...

        @property
        def touched_end(self) -> int: ...

        @property
        def fleet_free(self) -> Resources: ...

        @property
        def max_free(self) -> Resources: ...

    def suppose_gone(self, job: Job, placed: dict[str, Resources], sign: int = 1) -> None:
        """Dry run only (between ``dry_run_begin``/``dry_run_end``): count ``job``'s queue usage and what it
        holds on each cluster (``placed``: cluster -> its placed demand) as free (``sign=-1`` undoes it).
        Whether the last report counts the job or an in-flight reservation does, free capacity grows by it,
        and so does the node view (``nodes``): an in-flight job's pods are no longer booked on it, a
        reported job's pods each give back a virtual node of the pod's size (which nodes they free is
        unknown; a pod's own room is the least its node has free once it is gone). Every call takes a
        fresh ``capacity_epoch``: caches keyed on it (the capacity plugin's guarantee ledger) must not
        carry a verdict from one supposed state to the next (the fill-back gives victims back one by one)."""
        self._charge(job.queue, job.demand, -sign)
        if self.capacity_epoch < 0:
            self._dry_runs += 1
            self.capacity_epoch = -self._dry_runs
        for cluster, amount in placed.items():
            if cluster in self.clusters:
                add_into(self._reserved.setdefault(cluster, {}), amount, -sign)
                gone = self._gone.setdefault(cluster, {})
                times = gone.get(job.id, 0) + sign
                if times > 0:
                    gone[job.id] = times
                else:
                    gone.pop(job.id, None)
                    if not gone:
                        del self._gone[cluster]
                self._nodes.pop(cluster, None)
                self._usage_changed(cluster)

    def dry_run_begin(self) -> int:
        """Enter a dry run: ``capacity_epoch`` takes a value never used before (caches keyed on it, such
        as the capacity plugin's guarantee ledger, see the supposed state), and the capacity being freed
        by evictions beyond what their preemptors claim counts as free; returns the epoch to restore."""
        self._dry_runs += 1
        saved = self.capacity_epoch
        self.capacity_epoch = -self._dry_runs
        self._touched_at = self.touched_base + len(self.touched)
        self._grown_at = self.grown_base + len(self.grown)
        fleet, most = self._fleet_free, self._max_free
        kept = self._dry_kept
        if kept is not None and kept[0] == (self.touched_end, self.changes):
            # Nothing touched a cluster's free or excess since the last dry run ended (most of a cycle's searches
            # find nothing and change nothing: 94 % of churn-2k's dry runs), and that one took back all it did:
            # the state is the one it began from, so is the credited one. Its views are put in place of computing
            # them again (the same dicts: free dicts are never changed in place, and their key order is the one
            # computing them gives, see dry_run_end; the dry run changes copies of the fleet and most free)
            known = self._dry_credited = kept[1]
            credited = known.clusters
            self._dry_views = (fleet, most, credited, [self._free.get(c) for c in credited])
            self._fleet_free, self._max_free = dict(known.fleet_free), dict(known.max_free)
            for cluster, free in zip(credited, known.frees):
                add_into(self._reserved.setdefault(cluster, {}), self._excess[cluster], -1)
                self._logged(cluster)
                self._free[cluster] = free
            return saved
        credited = [cluster for cluster, amount in self._excess.items()
                    if amount and cluster in self.clusters and any(v > 0 for v in amount.values())]
        self._dry_views = (fleet, most, credited, [self._free.get(c) for c in credited])
        # _usage_changed updates these two in place: the dry run gets copies, dry_run_end puts the originals back
        self._fleet_free = dict(fleet) if fleet is not None else None
        self._max_free = dict(most) if most is not None else None
        for cluster in credited:
            add_into(self._reserved.setdefault(cluster, {}), self._excess[cluster], -1)
            self._usage_changed(cluster)
        # computed now if not yet (pure functions of the state: only when they are read differs)
        self._dry_credited = _Credited(credited, [self.free(c) for c in credited], dict(self.fleet_free),
                                       dict(self.max_free))
        return saved

    def dry_run_end(self, saved: int) -> None:
        # Every change the dry run made to free capacity is undone by now (suppose_gone(-1), exact integers) but the
        # excess credit: taking it back leaves each cluster's free, the fleet free and the most free as they were at
        # dry_run_begin, so those are put back instead of computed again (the most free was often dropped and
        # counted again over every cluster). The same dicts: a free dict's key order is that of the reported free
        # then of the reservations' keys absent from it, and the latter only reach the free dict while negative
        # (credits), which no dry-run step takes through 0 (excess and victims' demands are positive), so their
        # order is kept as well; the fleet free and the most free are only read by key. What _usage_changed logs is
        # logged alike: the FitIndex and the fit memos may hold what they saw inside the dry run.
        fleet, most, credited, frees = self._dry_views
        for cluster, free in zip(credited, frees):
            add_into(self._reserved[cluster], self._excess[cluster])
            self._logged(cluster)
            if free is None:
                self._free.pop(cluster, None)
            else:
                self._free[cluster] = free
        self._fleet_free, self._max_free = fleet, most
        self._dry_views = (None, None, [], [])
        self.capacity_epoch = saved
        # free capacity and excess are as before the dry run (its changes are undone, exact integers), so are node
        # views (a function of the state, NodeView.nodes), and no room keeps what it saw inside one
        # (engine.core.searchroom): its clusters need not count as touched
        at = self._touched_at - self.touched_base
        if at >= 0:
            del self.touched[at:]
        at = self._grown_at - self.grown_base
        if at >= 0:
            del self.grown[at:]
        # every change of a cluster's free or excess is touched (_usage_changed, _invalidate, _apply_nomination)
        # and counted in ``changes`` but nominations' (touched only): the two unchanged at the next dry_run_begin
        # mean its state is this one's
        self._dry_kept = ((self.touched_end, self.changes), self._dry_credited)

    def _logged(self, cluster: str) -> None:
        """What ``_usage_changed(cluster)`` logs (a change that may have raised free capacity), without its views."""
        self.changes += 1
        self._touch(cluster)
        self._fit_memo.pop(cluster, None)
        self._fits.changed(cluster)

    def excess(self, cluster: str) -> Resources:
        """What evictions under way free on ``cluster`` beyond their preemptors' claims (a dry run counts
        it as free). Do not mutate."""
        return self._excess.get(cluster, {})

    def freeing(self, need: Resources) -> bool:
        """Evictions under way free more than their preemptors claimed (see ``_excess``) on some ready
        cluster, enough that ``need`` could fit there with what is free now."""
        for cluster, amount in self._excess.items():
            if cluster in self.clusters and self.clusters[cluster].ready and any(v > 0 for v in amount.values()):
                free = self.free(cluster)
                if all(free.get(r, 0) + amount.get(r, 0) >= v for r, v in need.items() if v > 0):
                    return True
        return False

    # A nomination is a preemptor's claim ``need`` (cluster -> resources) on the capacity its victims hold
    # (``holding``, shrinking as they go). Others must see max(holding, need) taken on each cluster: the
    # victims' pods are counted by reports or in-flight reservations, so the booking added is
    # max(0, need - holding). In a dry run the victims are as good as gone and the preemptor holds its
    # need: max(0, holding - need) (``_excess``) is credited back.
    def _apply_nomination(self, job_id: str, sign: int) -> None:
        need, holding = self._nominations[job_id]
        for cluster in set(need) | set(holding):
            wanted, held = need.get(cluster, {}), holding.get(cluster, {})
            booking = {r: v - held.get(r, 0) for r, v in wanted.items() if v > held.get(r, 0)}
            excess = {r: v - wanted.get(r, 0) for r, v in held.items() if v > wanted.get(r, 0)}
            add_into(self._excess.setdefault(cluster, {}), excess, sign)
            self._touch(cluster)
            if booking and cluster in self.clusters:
                add_into(self._reserved.setdefault(cluster, {}), booking, sign)
                self._usage_changed(cluster)

    def nominate(self, job_id: str, need: dict[str, Resources], victims: list[Job]) -> None:
        """Book capacity for a preemptor until ``unnominate``: what its victims free is not free for
        anyone else (up to ``need`` on each cluster)."""
        self.unnominate(job_id)
        holding: dict[str, Resources] = {}
        for victim in victims:
            for cluster in victim.placement or {}:
                add_into(holding.setdefault(cluster, {}), victim.placed_demand(cluster))
        self._nominations[job_id] = (need, holding)
        self._apply_nomination(job_id, 1)

    def victim_gone(self, job_id: str, victim: Job) -> None:
        """A victim of ``job_id``'s nomination stopped holding capacity (call before releasing it)."""
        if job_id not in self._nominations:
            return
        self._apply_nomination(job_id, -1)
        holding = self._nominations[job_id][1]
        for cluster in victim.placement or {}:
            if cluster in holding:
                add_into(holding[cluster], victim.placed_demand(cluster), -1)
        self._apply_nomination(job_id, 1)

    def unnominate(self, job_id: str) -> Optional[tuple[dict[str, Resources], dict[str, Resources]]]:
        """Drop a preemptor's booking; returns it (for ``renominate``), None if it had none."""
        if job_id not in self._nominations:
            return None
        self._apply_nomination(job_id, -1)
        return self._nominations.pop(job_id)

    def renominate(self, job_id: str, booking: tuple[dict[str, Resources], dict[str, Resources]]) -> None:
        """Put back a booking ``unnominate`` returned (the preemptor could not be admitted yet)."""
        self._nominations[job_id] = booking
        self._apply_nomination(job_id, 1)

    def nominations(self) -> dict[str, tuple[dict[str, Resources], dict[str, Resources]]]:
        """Preemptor id -> (capacity claimed per cluster, capacity its victims still hold per cluster)."""
        return self._nominations


class _Credited:
    """A dry run's credited state as ``dry_run_begin`` left it: the clusters credited their excess (in ``_excess``
    order), their free dicts, and copies of the fleet free and the most free."""

    __slots__ = ("clusters", "frees", "fleet_free", "max_free")

    def __init__(self, clusters: list[str], frees: list[Resources], fleet_free: Resources, max_free: Resources) -> None:
        self.clusters = clusters
        self.frees = frees
        self.fleet_free = fleet_free
        self.max_free = max_free
