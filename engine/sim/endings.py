"""How an attempt ends in the simulated fleet, part of the Simulation (a mixin: same state, own idea).

An attempt finishes (its duration after the gang started), fails (its pods stuck Unschedulable for
``spec.stuckAfter``, its cluster NotReady, its deadline passed) or is evicted by a preemption after the grace
period. Each ending deletes its pods in every member (``_release``), keeps the run's counters (unstarted,
running, running demand, done) and tells the engine (``finished`` / ``fail`` → recover stage / ``evicted``).
An ending that arrives for an attempt already over (a later attempt, or one that ended on its own) is ignored.
"""

from __future__ import annotations

from typing import Optional

from engine.core.scheduler import Engine
from engine.model import Failure, FailureKind, JobState
from engine.resources import Resources, add_into
from engine.sim.members import Member
from engine.sim.outcome import Attempt, SimJob
from engine.sim.scenario import ClusterEvent, JobSpec, Scenario


class Endings:
    engine: Engine
    scenario: Scenario
    members: dict[str, Member]
    jobs: dict[str, SimJob]
    placement_mode: str
    now: float
    _dirty: bool
    _done: int
    _unstarted_admitted: int
    _running: int
    _running_demand: Resources

    def _stuck(self, job_id: str, attempt_no: int, cluster: str) -> None:
        """The controller's stuck-pod check (``spec.stuckAfter``, its ``--stuck-after``): pods of this attempt
        still unbound in ``cluster`` that long after they were created (Volcano binds a gang all at once, so they
        were unbound all along) fail the job there as Unschedulable."""
        sim = self.jobs[job_id]
        attempt = sim.attempts[-1] if sim.attempts else None
        if len(sim.attempts) != attempt_no or attempt is None or attempt.outcome != "Unfinished" \
                or attempt.start_time is not None:
            return
        member = self.members[cluster]
        if member.jobs.get(job_id) is None or all(p.node is not None for p in member.jobs[job_id].pods):
            return
        self._fail(job_id, FailureKind.UNSCHEDULABLE, cluster,
                   f"pods stayed Unschedulable in {cluster} for {self.scenario.stuck_after:g}s (stuck-pod check)")

    def _evict(self, job_id: str, attempt_no: int, preemptor: str, reason: str) -> None:
        sim = self.jobs[job_id]
        job = self.engine.state.jobs.get(job_id)
        if len(sim.attempts) != attempt_no or sim.attempts[-1].outcome != "Unfinished" \
                or job is None or job.state is not JobState.EVICTING:
            return                               # it ended on its own during the grace period
        attempt = sim.attempts[-1]
        self._release(job_id, attempt)
        attempt.end_time, attempt.outcome, attempt.preempted_by = self.now, "Preempted", preemptor
        attempt.message = f"preempted by {preemptor} ({reason})"
        if attempt.start_time is None:
            self._unstarted_admitted -= 1
        else:
            self._running -= 1
            add_into(self._running_demand, _demand(sim.spec), -1)
        self.engine.evicted(job_id, self.now)    # capacity: seen at the member's next status report
        self._dirty = True

    def _finish(self, job_id: str, attempt_no: int) -> None:
        sim = self.jobs[job_id]
        if len(sim.attempts) != attempt_no or sim.attempts[-1].outcome != "Unfinished":
            return                               # that attempt was killed before it could finish
        attempt = sim.attempts[-1]
        self._release(job_id, attempt)
        attempt.end_time, attempt.outcome = self.now, "Succeeded"
        self._running -= 1
        add_into(self._running_demand, _demand(sim.spec), -1)
        # Bind: the engine credits the capacity at the exact end (the simulator knows it; the controller waits for
        # the report, a difference of timing only: Atoll places on what was freed). Gate: no credit, as in the
        # controller. karmada-scheduler places from the last report, which still shows the finished job: a job
        # admitted on credited capacity would be placed without it (split over members, or elsewhere), which the
        # controller never does (it admits once a report shows the room; tests/sim/test_driver.py, e2e parity).
        self.engine.finished(job_id, True, ended_at=self.now if self.placement_mode == "bind" else None)
        sim.state, sim.finish_time = "Succeeded", self.now
        self._done += 1
        self._dirty = True

    def _fail(self, job_id: str, kind: FailureKind, cluster: Optional[str], message: str) -> None:
        sim = self.jobs[job_id]
        attempt = sim.attempts[-1]
        self._release(job_id, attempt)
        attempt.end_time, attempt.outcome, attempt.message = self.now, kind.value, message
        if attempt.start_time is None:
            self._unstarted_admitted -= 1
        else:
            self._running -= 1
            add_into(self._running_demand, _demand(sim.spec), -1)
        recovery = self.engine.fail(job_id, Failure(kind, cluster, message), self.now)
        if recovery.reason:
            sim.note_reason(self.now, recovery.reason)
        if not recovery.requeue:
            sim.state, sim.finish_time, sim.reason = "Failed", self.now, recovery.reason
            self._done += 1
        self._dirty = True

    def _release(self, job_id: str, attempt: Attempt) -> None:
        """Delete the job's pods in every member it was placed on."""
        for cluster in attempt.placement:
            member = self.members.get(cluster)
            if member is not None:
                member.remove(job_id)

    def _cluster_event(self, event: ClusterEvent) -> None:
        member = self.members[event.cluster]
        if event.ready == member.ready:
            return
        member.ready = event.ready
        if not event.ready:
            for job_id in member.kill_all():
                self._fail(job_id, FailureKind.CLUSTER_LOST, member.name, f"cluster {member.name} became NotReady")


def _demand(spec: JobSpec) -> Resources:
    """All replicas of all tasks (a running job's pods, extras included once bound)."""
    total: Resources = {}
    for task in spec.tasks:
        add_into(total, {k: v * task.replicas for k, v in task.resources.items()})
    return total
