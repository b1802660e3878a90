"""The scheduling engine: changes in, decisions out, one pure synchronous cycle at a time.

A cycle serves queues in the order of their current ``atoll_queue_order`` keys (a
heap, re-keyed lazily after each admission so fair share is exact) and, inside a
queue, jobs in the order of their ``atoll_job_order`` keys (computed once, at
enqueue). Each examined job runs admit → place; an admission is booked at once so
the rest of the cycle sees the reduced capacity and queue headroom.

Work per cycle is O(changes): a job refused at capacity epoch E is re-examined only
when new capacity appears (the epoch moves), when its own retry time comes, or when
it changes. Otherwise only newly arrived jobs are looked at. When capacity does move,
the backlog is walked by verdict key (``engine.core.backlog``): a key refused once in
a state refuses every job of its queue with that key without calling the pipeline,
so the pipeline runs O(keys) times, not O(backlog). ``Engine(exhaustive=True)`` (and
any policy with a plugin that declares no ``verdict_key``) examines job by job.

What adapters report about a job between cycles (submit, started, finished, fail, ...) is the job lifecycle,
``engine.core.lifecycle``; how refusals are recorded, parked and indexed is ``engine.core.pending``; whose turn it
is, ``engine.core.turns``; where an admissible job goes (filter, score, place), ``engine.core.placing``: all
mixins of ``Engine``.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
from operator import itemgetter
from typing import Hashable, Optional, cast

from sortedcontainers import SortedList

from engine.core.admitshare import SharedAdmits
from engine.core.contain import contained
from engine.core.idle import QueueReads
from engine.core.nomination import Preemptions
from engine.core.lifecycle import JobLifecycle
from engine.core.pending import PendingBooks
from engine.core.placing import Placing
from engine.core.turns import QueueTurns
from engine.core.backlog import Backlog
from engine.core.sources import ListSource, Source, WalkSource
from engine.core.state import FleetState
from engine.core.wake import Reads, Signature
from engine.model import Admission, Cluster, CycleResult, Job, JobState, Placement, Queue, Refusal
from engine.pipeline import Pipeline
from engine.resources import format_resources

_ID = itemgetter(2)
"""A pending entry's job id (entries are (sort key, seq, id))."""


class Engine(JobLifecycle, PendingBooks, QueueTurns, Placing):
    """Owns a FleetState and a Pipeline; adapters call its methods and carry out CycleResults."""

    def __init__(self, pipeline: Pipeline, state: Optional[FleetState] = None, exhaustive: bool = False) -> None:
        self.pipeline = pipeline
        self.state = state or FleetState()
        self.exhaustive = exhaustive                   # examine job by job (the reference the tests compare with)
        self._keyed = not exhaustive and pipeline.declares_verdict_keys
        self._sharing = not exhaustive and pipeline.shares_admit     # admit verdicts shared across queues
        self._backlog = Backlog()                      # pending jobs by queue and verdict key (when keyed)
        self._memo: dict[Hashable, tuple[int, Refusal]] = {}    # group key -> (admissions, refusal) this cycle
        self._admit_refusal: Optional[Refusal] = None   # the admit stage's refusal of the job examined last, if any
        # a refusal of a job that fits nowhere, kept for the jobs judged the same way (engine.core.placing)
        self._nowhere_seen: dict[Hashable, tuple[Hashable, Optional[Signature], Refusal]] = {}
        self._result = CycleResult()
        self._pending: dict[str, SortedList] = {}      # queue name -> pending jobs in order
        self._dirty: set[str] = set()                  # job ids to examine next cycle
        self._timers: list[tuple[float, str]] = []     # (time, job id) retries and backoffs
        self._seq = itertools.count()
        self._epoch_seen = -1                          # capacity epoch of the last full cycle
        # bumped at each cycle start, admission and preemption issued (each changes FleetState): what cached queue
        # keys, a key's refusal shared in this state (engine.core.backlog) and the memo are valid for
        self._stamp = 0
        # queue name -> candidate's shape (None: no candidate) -> (stamp, key): a key depends on the
        # candidate only through its shape (hookspec atoll_queue_order), so jobs of one shape share it
        self._queue_keys: dict[str, dict[Hashable, tuple[Hashable, tuple]]] = {}
        # parked keys' reads (engine.core.wake); new victim candidates count as a change (engine.core.searchwake)
        self._reads = Reads(self.state, self._version)
        self._preempt = Preemptions(self.state, pipeline, None if exhaustive else self._reads)   # victims, nominations
        # per queue, its parked groups' reads (engine.core.idle)
        self._quiet = QueueReads(self.state, self._reads, self._preempt.log, lambda: self._preempt.running.removed)
        self._admits = SharedAdmits(pipeline, self.state)      # admit verdicts shared across queues, per state
        self._backlog.changed = self._quiet.remove

    # -- policy ----------------------------------------------------------------------
    def set_pipeline(self, pipeline: Pipeline) -> None:
        """Switch policy: every waiting or rejected job is enqueued and keyed again."""
        self.pipeline = pipeline
        self._keyed = not self.exhaustive and pipeline.declares_verdict_keys
        self._sharing = not self.exhaustive and pipeline.shares_admit
        self._admits = SharedAdmits(pipeline, self.state)
        self._quiet.clear()
        self._nowhere_seen.clear()           # judged by the old policy's place stage
        self._backlog.clear()
        self._pending.clear()
        self._queue_keys.clear()
        self._preempt.set_pipeline(pipeline)
        for job in self.state.jobs.values():
            if job.state in (JobState.PENDING, JobState.REJECTED):
                job.state = JobState.PENDING
                self._enqueue(job)
            elif job.state in (JobState.ADMITTED, JobState.RUNNING):
                self._preempt.index(job, fresh=False)
        self._epoch_seen = -1

    # -- cluster and queue changes ------------------------------------------------
    def upsert_cluster(self, cluster: Cluster) -> None:
        self.state.upsert_cluster(cluster)

    def remove_cluster(self, name: str) -> None:
        self.state.remove_cluster(name)

    def upsert_queue(self, queue: Queue) -> None:
        self.state.upsert_queue(queue)
        self._queue_keys.pop(queue.name, None)

    def remove_queue(self, name: str) -> None:
        self.state.remove_queue(name)

    # -- the cycle -------------------------------------------------------------------
    def cycle(self, now: float) -> CycleResult:
        """One scheduling cycle at ``now``. Python's cyclic garbage collector is paused while it runs: a cycle
        allocates hundreds of thousands of short-lived containers, and every full collection they trigger scans
        every object the engine keeps (0.9 s at 100,000 pending jobs, finding no garbage: the books hold no
        reference cycles to free). Reference counting still frees everything as usual; the collector catches up
        between cycles, on what the cycle left (100,000 / 1,000 / 100 first cycle: 2.99 -> 1.82 s CPU)."""
        if not gc.isenabled():
            return self._cycle(now)
        gc.disable()
        try:
            return self._cycle(now)
        finally:
            gc.enable()

    def _cycle(self, now: float) -> CycleResult:
        state = self.state
        state.now = now
        self._fire_timers(now)
        full = state.capacity_epoch != self._epoch_seen
        self._epoch_seen = state.capacity_epoch
        result = self._result = CycleResult(full=full)
        self.pipeline.cycle_start(state=state, now=now)
        self._stamp += 1                # cached queue keys are stale: overwritten when next asked, not freed here
        if len(self._queue_keys) > 4 * len(state.queues) + 64:
            self._queue_keys.clear()    # queues gone since: drop them all now and then
        self._preempt.cycle_start(self._dirty)
        self._memo.clear()
        sources = self._sources(full, now)
        self._dirty.clear()
        if self.pipeline.queue_order_candidate:
            self._serve_by_candidate(cast(dict[str, "ListSource | WalkSource"], sources), now, result)
            return result
        self._serve_by_key(sources, now, result)
        return result

    def _sources(self, full: bool, now: float) -> dict[str, Source]:
        """Per queue, the jobs this cycle examines, in order: a QueueWalk by verdict key over the whole
        backlog (full cycle, keyed policy), else the candidates one by one."""
        lookback = self.pipeline.lookback
        if lookback:
            self._behind_lookback(lookback)
        if not (full and self._keyed):
            return {q: ListSource(self, jobs, now) for q, jobs in self._candidates(full).items()}
        # A walk by key pays a heap step per examined key; where most jobs have keys of their own, going
        # through the jobs one by one (a refused key still skips the pipeline) is cheaper. Both are exact.
        sources: dict[str, Source] = {}
        groups_of, jobs = self._backlog.queues, self.state.jobs
        for q, entries in self._pending.items():
            if not entries:
                continue
            groups = groups_of.get(q, {})
            source: "WalkSource | ListSource"
            if len(entries) >= 4 * len(groups):
                bound = entries[lookback - 1] if 0 < lookback < len(entries) else None
                source = WalkSource(self, q, bound, now)      # its walk is built when the queue is served
            else:
                head = entries.islice(0, lookback) if lookback else entries
                # nearly every job a key of its own: the memo would rarely hit, skip its bookkeeping
                memo = 5 * len(groups) < 4 * len(entries)
                source = ListSource(self, list(map(jobs.__getitem__, map(_ID, head))), now, memo)
            source.whole = True                  # the queue's whole backlog: passed whole when quiet (_quiet_now)
            sources[q] = source
        return sources

    def _behind_lookback(self, lookback: int) -> None:
        """Policy ``spec.lookback``: a cycle considers only the first N jobs of each queue. Candidates behind
        them are told so (new jobs would otherwise show no reason) and left for a later cycle."""
        jobs = self.state.jobs
        for job_id in list(self._dirty):
            job = jobs.get(job_id)
            entries = self._pending.get(job.queue) if job is not None else None
            if job is None or job.state is not JobState.PENDING or not entries:
                continue
            if entries.bisect_left((job.sort_key, job.seq, job.id)) >= lookback:
                self._dirty.discard(job_id)
                self._block(job, Refusal(f"not considered yet: behind the first {lookback} jobs of queue "
                                         f"{job.queue} (policy lookback)", "engine"), self._result)

    def _candidates(self, full: bool) -> dict[str, list[Job]]:
        jobs = self.state.jobs
        if full:
            n = self.pipeline.lookback or None
            return {q: list(map(jobs.__getitem__, map(_ID, entries.islice(0, n))))
                    for q, entries in self._pending.items() if entries}
        by_queue: dict[str, list[Job]] = {}
        for job_id in self._dirty:
            job = jobs.get(job_id)
            if job is not None and job.state is JobState.PENDING:
                by_queue.setdefault(job.queue, []).append(job)
        return {q: sorted(js, key=lambda j: (j.sort_key, j.seq)) for q, js in by_queue.items()}

    def _examine(self, job: Job, now: float, result: CycleResult) -> Optional[Refusal]:
        """Admit ``job`` or keep it pending. Returns the refusal when it stays pending with nothing
        changed, None when it was admitted or a preemption was issued for it (it is then nominated)."""
        state = self.state
        self._admit_refusal = None
        if job.not_before > now:
            # no retry_at: _enqueue already set the timer for not_before; another would pile up per cycle
            refusal = Refusal(f"backing off after failure until t={job.not_before:g}", "engine")
            self._block(job, refusal, result)
            return refusal
        if job.queue not in state.queues:
            refusal = Refusal(f"queue {job.queue!r} does not exist", "engine")
            self._block(job, refusal, result)
            return refusal
        booking = None
        if job.nominated is not None:
            waiting = self._preempt.still_waiting(job, now)
            if waiting is not None:
                self._block(job, waiting, result)
                return waiting
            booking = self._preempt.lift(job)
        decided: Placement | Refusal
        try:
            key = job.admit_key
            # a nominee's booking is lifted around its admit call: never shared (engine.core.admitshare)
            verdict: Optional[Refusal] = self.pipeline.admit_positional(job, state) \
                if key is None or job.nominated is not None else self._admits.admit(job, key, self._stamp)
            self._admit_refusal = verdict       # a refusal of the admit stage parks on its reads alone (Parking)
            decided = verdict if verdict is not None else self._place(job)
        except Exception as exc:        # a plugin's bug: this job's refusal, not the cycle's end (engine.core.contain)
            decided = contained(job, exc, now, result.plugin_errors)
        if booking is not None:
            waiting = self._preempt.settle(job, booking, not isinstance(decided, Refusal), now)
            if waiting is not None:
                self._block(job, waiting, result)
                return waiting
        if isinstance(decided, Refusal):
            return self._refused(job, decided, now, result)
        job.state = JobState.ADMITTED
        job.placement = decided
        job.admitted_at = now
        job.attempts += 1
        job.pending_reason = ""
        self._unindex(job)
        state.hold(job)
        self._preempt.index(job, fresh=True)
        self._stamp += 1
        result.admitted.append(Admission(job.id, job.queue, decided, now))
        return None

    def _refused(self, job: Job, decided: Refusal, now: float, result: CycleResult) -> Optional[Refusal]:
        """The end of ``_examine`` for a job the admit or place stage refused (``decided``): a preemption
        attempted for a capacity refusal, else the refusal recorded. The settled rest of a cycle
        (engine.core.settle) enters here with the shared admit answer."""
        if decided.capacity and self.pipeline.has_preempt:
            try:
                preemption, retry_at = self._preempt.attempt(job, now, self._fit)
            except Exception as exc:      # (its dry runs restore the state in their own ``finally``)
                preemption, retry_at, decided = None, None, contained(job, exc, now, result.plugin_errors)
            if preemption is not None:
                result.preemptions.append(preemption)
                self._stamp += 1      # its nomination booked capacity: refusals of the state before are stale
                if self._keyed:        # a nominee's verdict is its own: never handed a refusal of its key
                    self._backlog.remove(job)
                    self._backlog.add(job, None)
                self._block(job, self._preempt.waiting(job, preemption.victims, preemption.reason), result)
                return None
            if retry_at is not None:       # victims protected by a minimum runtime: look again then
                decided = dataclasses.replace(decided, retry_at=retry_at)
        self._block(job, decided, result)
        return decided

    # -- preemption (engine.core.preempt) --------------------------------------------------
    def _fit(self, job: Job) -> Optional[Placement]:
        """The dry run of a preemption: the same admit and place calls as an examination."""
        if self.pipeline.admit_positional(job, self.state) is not None:
            return None
        decided = self._place(job)
        return None if isinstance(decided, Refusal) else decided

    # -- visibility --------------------------------------------------------------------
    def pending_count(self, queue: Optional[str] = None) -> int:
        if queue is not None:
            return len(self._pending.get(queue, ()))
        return sum(len(entries) for entries in self._pending.values())

    def explain(self, job_id: str) -> str:
        job = self.state.jobs.get(job_id)
        if job is None:
            return f"job {job_id} is not known to the engine"
        lines = [f"job {job.id}: {job.state.value} in queue {job.queue} (priority {job.priority}, "
                 f"attempts {job.attempts})", f"demand: {format_resources(job.demand)}"]
        if job.pending_reason:
            lines.append(f"reason: {job.pending_reason}")
        if job.state is JobState.PENDING and job.demand:
            # the momentary amounts live here, not in the reason: a reason quoting them would change (and be
            # written to the job again) on every finish anywhere in the fleet
            names = list(job.demand)
            lines.append(f"free now: fleet {format_resources({n: self.state.fleet_free.get(n, 0) for n in names})}; "
                         f"most in one cluster {format_resources({n: self.state.max_free.get(n, 0) for n in names})}")
        if job.placement:
            lines.append("placement: " + ", ".join(f"{c}: {p}" for c, p in sorted(job.placement.items())))
        if job.excluded_clusters:
            lines.append("avoids: " + ", ".join(sorted(job.excluded_clusters)))
        if job.preemptions or job.state is JobState.EVICTING:
            when = f" at t={job.evicted_at:g}" if job.evicted_at is not None else ""
            lines.append(f"preempted {job.preemptions} time(s); last by {job.preempted_by}{when}")
        if job.nominated is not None:
            lines.append("waiting for its victims to be gone: " + ", ".join(job.victims))
        notes = {name: self.state.node_note(name) for name in sorted(job.placement or self.state.clusters)}
        if len(set(notes.values())) == 1 and len(notes) > 1:
            lines.append(f"fit checked by: {next(iter(notes.values()))} (every cluster)")
        else:
            lines.extend(f"fit checked by: {name}: {note}" for name, note in notes.items())
        return "\n".join(lines)
