"""The engine's books of waiting jobs (a mixin of ``Engine``: same state, own idea): how a refusal is recorded
(``_block``, and for a whole run of a verdict-key group at once ``_block_range``), when it is parked until what it
read changes (``_park``/``_still_parked``, engine.core.wake) or shared by every job of its group (``_shares``),
the pending index by queue and verdict key (``_enqueue``, ``_verdict_key``, ``_unindex``), and the retry and
backoff timers. The cycle that examines the jobs is ``engine.core.scheduler``.
"""

from __future__ import annotations

import heapq
from typing import Hashable, Optional

from sortedcontainers import SortedList

from engine.core.idle import QueueReads
from engine.core.backlog import Backlog, Entry, Group
from engine.core.nomination import Preemptions
from engine.core.state import FleetState
from engine.core.wake import Reads, admitting_reads, engine_reads, parkable
from engine.model import CycleResult, Job, JobState, Refusal
from engine.pipeline import Pipeline, join_keys


class PendingBooks:
    pipeline: Pipeline
    state: FleetState
    _keyed: bool
    _sharing: bool
    _backlog: Backlog
    _result: CycleResult
    _pending: dict[str, SortedList]
    _dirty: set[str]
    _timers: list[tuple[float, str]]
    _preempt: Preemptions
    _reads: Reads
    _quiet: QueueReads

    def _block(self, job: Job, refusal: Refusal, result: CycleResult) -> None:
        job.blocked_epoch = self.state.capacity_epoch
        reason = refusal.reason
        if reason != job.pending_reason:
            job.pending_reason = reason
            result.reasons[job.id] = reason
            # (Backlog.group, inlined: once per refused job of a first cycle)
            group = self._backlog._group_of.get(job.id) if self._keyed else None
            if group is not None and group.reason != reason:
                self._quiet.remove(group)
                # a group not shared holds its one job; else its size says (its entries are cold: one per pending job)
                group.reason = reason if not group.shared or group.size == 1 else None
        if refusal.retry_at is not None:
            heapq.heappush(self._timers, (refusal.retry_at, job.id))

    def _block_range(self, group: Group, refusal: Refusal, since: Entry, upto: Optional[Entry]) -> None:
        """``refusal`` for the jobs of ``group`` from ``since`` to ``upto`` (None: its last), as if each had
        been examined: O(1) when they all show that reason already."""
        text = refusal.reason
        if group.reason == text:
            return
        entries = group.entries
        if not entries:
            return
        jobs, reasons, epoch = self.state.jobs, self._result.reasons, self.state.capacity_epoch
        for _, _, job_id in entries.irange(since, upto):
            job = jobs[job_id]
            job.blocked_epoch = epoch
            if job.pending_reason != text:
                job.pending_reason = text
                reasons[job_id] = text
        self._quiet.remove(group)
        group.reason = text if upto is None and since <= entries[0] else None

    def _park(self, group: Group, job: Job, shared: Optional[Refusal], admit: bool = False) -> None:
        """After an examination: a shared refusal that no state change but one of its reads can lift is
        parked with their values (engine.core.wake), and counted for its queue (engine.core.idle); anything
        else unparks the group. ``admit``: the admit stage gave it, so placement read nothing for it and it is
        parked on the admit plugins' ``admit_reads`` and the engine's own reads for admission alone."""
        self._quiet.remove(group)
        search: Optional[tuple[Hashable, ...]] = ()
        if shared is not None and shared.capacity and self.pipeline.has_preempt:
            search = self._preempt.wake_reads(job)        # with its parked victim search (engine.core.searchwake)
        if shared is None or search is None or not parkable(job, shared, self.state):
            group.parked = None
            return
        # asked at each parking (they may follow the state); a refusal of the admit stage read nothing of placement
        declared = self.pipeline.admit_reads(job, self.state) if admit else self.pipeline.verdict_reads(job, self.state)
        if declared is None:
            group.parked = None
            return
        own = admitting_reads(job) if admit else engine_reads(job)
        group.parked = (self._reads.signature(own + declared + search), shared)
        self._quiet.add(group)

    def _still_parked(self, group: Group, job: Job) -> Optional[Refusal]:
        """The group's parked refusal when ``job`` (one of its jobs) would get it now without asking."""
        parked = group.parked
        if parked is None or job.nominated is not None or job.not_before > self.state.now:
            return None
        if not self._reads.holds(parked[0]):
            self._quiet.remove(group)
            group.parked = None
            return None
        self._quiet.add(group)                  # counted again for its queue once its jobs all show the refusal
        return parked[1]

    def _shares(self, job: Job, refusal: Optional[Refusal], now: float) -> Optional[Refusal]:
        """``refusal`` when every job of ``job``'s group would get it in the same state, else None."""
        if refusal is None or refusal.retry_at is not None or job.not_before > now:
            return None
        group = self._backlog.group(job.id)
        return refusal if group is not None and group.shared else None

    # -- pending index ----------------------------------------------------------------
    def _enqueue(self, job: Job) -> Optional[Refusal]:
        job.demand, job.min_demand    # computed once on arrival (cached), not inside the next cycle
        if self.state.any_node_shapes:
            job.min_pods              # likewise the gang minimum's pods, for node-aware fit
        refusal = self.pipeline.enqueue(job=job, state=self.state)
        if refusal is not None:
            job.state = JobState.REJECTED
            job.pending_reason = refusal.reason
            return refusal
        job.sort_key = join_keys(self.pipeline.job_order(job=job, state=self.state))
        job.admit_key = self.pipeline.shared_admit_key(job) if self._sharing else None
        self._pending.setdefault(job.queue, SortedList()).add((job.sort_key, job.seq, job.id))
        if self._keyed:
            self._backlog.add(job, self._verdict_key(job))
        self._dirty.add(job.id)
        if job.not_before > self.state.now:
            heapq.heappush(self._timers, (job.not_before, job.id))
        return None

    def _verdict_key(self, job: Job) -> Optional[Hashable]:
        """The engine's part (queue, exclusions, tasks) joined with the plugins' keys; None (a group of its
        own) while the job backs off, since its refusal then names its own end time."""
        if job.not_before > self.state.now:
            return None
        plugins = self.pipeline.verdict_key(job)
        if plugins is None:
            return None
        return (job.queue, frozenset(job.excluded_clusters), job.shape, plugins)

    def _unindex(self, job: Job) -> None:
        entries = self._pending.get(job.queue)
        if entries is not None:
            entries.discard((job.sort_key, job.seq, job.id))
        if self._keyed:
            self._backlog.remove(job)

    def _fire_timers(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            _, job_id = heapq.heappop(self._timers)
            self._dirty.add(job_id)
            job = self.state.jobs.get(job_id)
            if self._keyed and job is not None and job.state is JobState.PENDING and job.not_before <= now:
                group = self._backlog.group(job_id)
                if group is not None and not group.shared:      # its backoff ended: join its key's group
                    self._backlog.remove(job)
                    self._backlog.add(job, self._verdict_key(job))

    def next_timer(self) -> Optional[float]:
        """When the next retry or backoff ends (for adapters that sleep between cycles)."""
        return self._timers[0][0] if self._timers else None
