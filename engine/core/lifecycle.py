"""The engine's job lifecycle (a mixin of ``Engine``: same state, own idea): what adapters report about a
job and the state transitions it causes, apart from the cycle that decides (``engine.core.scheduler``).

submit (pending) -> the cycle admits it -> started -> finished; fail -> the recover stage requeues it (with
backoff and excluded clusters) or gives up; adopt / adopt_evicting restore a job admitted or being evicted
before a restart without a second admission; update_job re-keys a waiting job or re-charges an admitted one;
evicted returns a preemption victim to its queue once its workload is gone. Every transition that releases
capacity also ends what the job held for preemption (``Preemptions.stop_holding``).
"""

from __future__ import annotations

import itertools
from typing import Callable, Optional

from engine.core.nomination import Preemptions
from engine.core.state import FleetState
from engine.model import Failure, Job, JobState, Placement, Recovery, Refusal
from engine.pipeline import Pipeline


class JobLifecycle:
    pipeline: Pipeline
    state: FleetState
    _seq: "itertools.count[int]"
    _preempt: Preemptions
    _dirty: set[str]
    _enqueue: Callable[[Job], Optional[Refusal]]
    _unindex: Callable[[Job], None]

    def submit(self, job: Job) -> Optional[Refusal]:
        """A new job. Returns the enqueue Refusal if it was rejected (it is kept as Rejected)."""
        if job.id in self.state.jobs:
            raise ValueError(f"job {job.id} already exists; use update_job")
        job.seq = next(self._seq)
        job.state = JobState.PENDING
        self.state.jobs[job.id] = job
        try:
            return self._enqueue(job)
        except BaseException:
            # a plugin raised (its enqueue, job order or verdict key hook): the job is not taken in at all, so that
            # submitting it again (the controller syncs its binding again) starts afresh; kept, it would be a job
            # the engine knows but never indexed, never examined
            self._unindex(job)
            del self.state.jobs[job.id]
            self._dirty.discard(job.id)
            raise

    def adopt(self, job: Job, placement: Placement, admitted_at: float, running: bool = False) -> None:
        """Restore a job admitted before a restart (e.g. a resumed binding): it holds its queue usage
        and capacity again without passing through admission, so nothing is admitted twice."""
        if job.id in self.state.jobs:
            raise ValueError(f"job {job.id} already exists")
        job.seq = next(self._seq)
        job.state = JobState.RUNNING if running else JobState.ADMITTED
        job.placement = placement
        job.admitted_at = admitted_at
        job.attempts = max(job.attempts, 1)
        self.state.jobs[job.id] = job
        self.state.hold(job)
        if running:
            self.state.mark_started(job, admitted_at)
        self._preempt.index(job, fresh=False)

    def adopt_evicting(self, job: Job, placement: Placement, preempted_by: str, since: float) -> None:
        """Restore a victim whose eviction was under way before a restart (the intent is recorded on its
        object): it holds its capacity until ``evicted``, and is no candidate victim again."""
        self.adopt(job, placement, since)
        self._preempt.running.discard(job.id)
        job.state = JobState.EVICTING
        job.preempted_by = preempted_by
        job.evicted_at = since
        job.pending_reason = f"preempted by {preempted_by} at t={since:g}; its workload is being removed"

    def update_job(self, job: Job) -> None:
        """The job's spec changed (same id). Waiting jobs are re-keyed; admitted ones re-charged,
        so a scale-up after admission is counted against quota and capacity."""
        old = self.state.jobs[job.id]
        for name in ("state", "attempts", "failures", "excluded_clusters", "not_before", "pending_reason", "placement",
                     "admitted_at", "seq", "blocked_epoch", "preemptions", "preempted_by", "nominated",
                     "nominated_at", "victims", "evicted_at"):
            setattr(job, name, getattr(old, name))
        job.generation = old.generation + 1
        if old.state.holds_resources:
            evicting = old.state is JobState.EVICTING
            self.state.release(old)
            job.placement = _rescale(old.placement or {}, job)
            self.state.hold(job)
            if job.state in (JobState.RUNNING, JobState.EVICTING):   # its pods exist: the next newer report counts them
                self.state.mark_started(job, self.state.now)
            self.state.jobs[job.id] = job
            if not evicting:
                self._preempt.index(job, fresh=False)
            else:       # its queue's usage changed with no new candidate: wake searches looking at it
                self._preempt.usage_changed(job.queue)
            return
        self._unindex(old)
        self.state.jobs[job.id] = job
        if job.state in (JobState.PENDING, JobState.REJECTED):
            job.state = JobState.PENDING
            self._enqueue(job)

    def remove_job(self, job_id: str) -> None:
        job = self.state.jobs.pop(job_id, None)
        if job is None:
            return
        self._preempt.stop_holding(job, self._dirty)
        self.state.release(job)
        self._unindex(job)
        self._preempt.drop(job)
        self._dirty.discard(job_id)

    def started(self, job_id: str, now: float) -> None:
        job = self.state.jobs.get(job_id)
        if job is not None and job.state is JobState.ADMITTED:
            job.state = JobState.RUNNING
            self.state.mark_started(job, now)

    def finished(self, job_id: str, succeeded: bool = True, ended_at: Optional[float] = None) -> None:
        """The job ended in its member. Pass ``ended_at`` only when it is exact (the simulator): its
        freed capacity is then used before the cluster's next status report (see FleetState.release)."""
        job = self.state.jobs.get(job_id)
        if job is None or job.state.finished:
            return
        self._preempt.stop_holding(job, self._dirty)
        self.state.release(job, ended_at)
        self._unindex(job)
        self._preempt.drop(job)
        job.state = JobState.SUCCEEDED if succeeded else JobState.FAILED

    def fail(self, job_id: str, failure: Failure, now: float) -> Recovery:
        """A failure signal: release what the job held and let the recover stage decide."""
        job = self.state.jobs[job_id]
        self._preempt.stop_holding(job, self._dirty)
        self.state.release(job)
        self._unindex(job)
        self._preempt.drop(job)
        job.failures[failure.kind.value] = job.failures.get(failure.kind.value, 0) + 1
        recovery = self.pipeline.recover(job=job, failure=failure, state=self.state, now=now)
        if recovery is None:
            recovery = Recovery(requeue=False, reason=f"{failure.kind.value}: {failure.message or 'failed'}; "
                                                      "no recover plugin requeued it")
        if recovery.requeue:
            job.state = JobState.PENDING
            job.placement = None
            job.excluded_clusters |= set(recovery.exclude_clusters)
            job.not_before = now + recovery.delay
            job.pending_reason = recovery.reason
            self._enqueue(job)
        else:
            job.state = JobState.FAILED
            job.pending_reason = recovery.reason
        return recovery

    def evicted(self, job_id: str, now: float, ended_at: Optional[float] = None) -> None:
        """A victim's workload is gone from every member it ran on: its capacity is released (with
        ``ended_at``, credited at once as in ``finished``; otherwise seen at the next status report)
        and it goes back to its queue as it was (identity, priority, arrival order), ``preemptions``
        counted apart from failures."""
        job = self.state.jobs.get(job_id)
        if job is None or job.state is not JobState.EVICTING:
            return
        self._preempt.stop_holding(job, self._dirty)
        self.state.release(job, ended_at)
        job.state = JobState.PENDING
        job.placement = None
        job.preemptions += 1
        job.pending_reason = f"preempted by {job.preempted_by} at t={job.evicted_at or now:g}; waiting to run again"
        self._enqueue(job)


def _rescale(placement: Placement, job: Job) -> Placement:
    """Keep an admitted job's placement consistent with a changed replica count."""
    out: Placement = {c: dict(p) for c, p in placement.items()}
    first = next(iter(out), None)
    for task in job.tasks:
        placed = sum(p.get(task.name, 0) for p in out.values())
        if placed != task.replicas and first is not None:
            out[first][task.name] = max(0, out[first].get(task.name, 0) + task.replicas - placed)
    return out

