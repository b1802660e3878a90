"""The discrete-event loop: a Karmada fleet around the same pure Engine the controller runs.

Faithfulness rules (see docs/simulator.md):
* The engine sees only what Karmada shows: per-cluster totals and readiness, refreshed
  every ``statusPeriod`` (Karmada's cluster status controller). Between reports, the
  engine's in-flight reservations cover its own admissions (``Engine.started`` marks
  when the pods exist, so the next newer report replaces the reservation).
* Node placement happens inside each member (``members.Member``), after admission.
* Preemption is carried out as a member does it: the victim's pods are terminated after
  the rule's grace period (its attempt ends ``Preempted``, naming the preemptor), and the
  engine sees the freed capacity at the next status report; the victim is requeued.
* Cycles are event-driven (submissions, finishes, failures, changed status reports,
  engine timers), at most one per ``schedulePeriod``: a controller batches too.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time
from typing import Any, Callable, Optional

from engine.core.scheduler import Engine
from engine.model import Admission, FailureKind, JobState, Placement, Preemption
from engine.pipeline import Pipeline
from engine.resources import PODS, Resources, add_into, dominant_share
from engine.sim.karmada import karmada_place
from engine.sim.endings import Endings, _demand
from engine.sim.members import Member
from engine.sim.outcome import Attempt, Sample, SimJob, SimResult
from engine.sim.scenario import JobSpec, Scenario

# event kinds, in the order they are applied within one timestamp
FINISH, CLUSTER, DEADLINE, STATUS, SUBMIT, CYCLE, EVICT, STUCK = range(8)
Progress = Callable[[float, int, int], None]


class Simulation(Endings):
    def __init__(self, scenario: Scenario, pipeline: Pipeline, policy_name: str = "",
                 progress: Optional[Progress] = None, placement_mode: str = "bind") -> None:
        if placement_mode not in ("gate", "bind"):
            raise ValueError(f"placement mode must be gate or bind, got {placement_mode!r}")
        self.scenario = scenario
        self.policy_name = policy_name
        self.placement_mode = placement_mode
        self._unplaced: dict[str, int] = {}    # gate: job id -> attempt number karmada-scheduler has not placed
        self.engine = Engine(pipeline)
        seed = scenario.seed
        self.members: dict[str, Member] = {
            c.name: Member(c.name, c.labels, c.nodes, scenario.member_scheduler, random.Random(f"{seed}/{c.name}"),
                           c.ready, c.grades)
            for c in scenario.clusters}
        self.jobs: dict[str, SimJob] = {j.id: SimJob(j) for j in scenario.jobs}
        self.progress = progress
        self.now = 0.0
        self._events: list[tuple[float, int, int, Any]] = []
        self._seq = itertools.count()
        self._dirty = False
        self._last_cycle = -float("inf")
        self._cycle_pending = False
        self._touched: set[str] = set()        # jobs whose bound pods changed this timestamp
        self._signatures: dict[str, Any] = {}
        self._done = 0
        self._unstarted_admitted = 0
        self._running = 0
        self._running_demand: Resources = {}
        self.timeline: list[Sample] = []
        self.held: dict[str, float] = {}
        self.cycles = 0
        self.examined = 0
        self.plugin_errors = 0
        self._fleet = scenario.fleet_allocatable
        self._started = 0.0
        self._stalled, self._previous = 0, -1.0

    # -- setup -----------------------------------------------------------------------------
    def _push(self, at: float, kind: int, payload: Any = None) -> None:
        heapq.heappush(self._events, (at, kind, next(self._seq), payload))

    def run(self) -> SimResult:
        self.start()
        while True:
            horizon_reached = self.step()
            if horizon_reached is not None:
                return self.finish(horizon_reached)

    def start(self) -> None:
        """Load the fleet into the engine and schedule every submission and cluster event."""
        self._started = time.perf_counter()
        for queue in self.scenario.build_queues():
            self.engine.upsert_queue(queue)
        for name, member in self.members.items():
            self.engine.upsert_cluster(member.snapshot(0.0))
            self._signatures[name] = member.signature()
        for spec in self.scenario.jobs:
            self._push(spec.submit_at, SUBMIT, spec)
        for event in self.scenario.events:
            self._push(event.at, CLUSTER, event)
        self._push(self.scenario.status_period, STATUS)

    def finish(self, horizon_reached: bool) -> SimResult:
        self._close()
        return SimResult(self.scenario, self.policy_name, self.jobs, self.timeline, self.held, self.now,
                         self.cycles, self.examined, time.perf_counter() - self._started, horizon_reached,
                         self.placement_mode, self.plugin_errors)

    # -- the loop ----------------------------------------------------------------------------
    def next_time(self) -> Optional[float]:
        """When the next step happens (simulated seconds), or None when nothing is left to happen.
        For a paced run (``atoll simulate --serve``), which sleeps until then."""
        next_time = self._events[0][0] if self._events else None
        timer = self.engine.next_timer()
        if timer is not None:
            timer = max(timer, self._last_cycle + self.scenario.schedule_period, self.now)
            if next_time is None or timer < next_time:
                next_time = timer
        return next_time

    def step(self) -> Optional[bool]:
        """Advance to the next timestamp and apply everything due then. None: more to come; otherwise
        the run is over (True if it stopped at the horizon)."""
        period = self.scenario.schedule_period
        self._stalled, self._previous = (self._stalled + 1 if self.now == self._previous else 0), self.now
        if self._stalled > 1000:              # a bug, not an input problem: fail loudly instead of spinning
            raise RuntimeError(f"simulator made no progress at t={self.now}")
        next_time = self._events[0][0] if self._events else None
        timer = self.engine.next_timer()
        if timer is not None:
            timer = max(timer, self._last_cycle + period, self.now)
            if next_time is None or timer < next_time:
                next_time = timer
                self._dirty = True
        if next_time is None:
            return False
        if next_time > self.scenario.horizon:
            self._advance(self.scenario.horizon)
            return True
        self._advance(next_time)
        while self._events and self._events[0][0] <= self.now:
            _, kind, _, payload = heapq.heappop(self._events)
            self._apply(kind, payload)
        self._schedule_members()
        if self._dirty:
            if self.now >= self._last_cycle + period:    # the timer's own expression: no float drift
                self._cycle()
                self._schedule_members()
            elif not self._cycle_pending:
                self._cycle_pending = True
                self._push(self._last_cycle + period, CYCLE)
        self._check_gangs()
        return None

    def _advance(self, to: float) -> None:
        dt = to - self.now
        if dt > 0:
            for member in self.members.values():
                for name, amount in member.allocated.items():
                    self.held[name] = self.held.get(name, 0.0) + amount * dt
            self.now = to

    def _apply(self, kind: int, payload: Any) -> None:
        if kind == SUBMIT:
            self._submit(payload)
        elif kind == FINISH:
            self._finish(*payload)
        elif kind == DEADLINE:
            job_id, attempt = payload
            sim = self.jobs[job_id]
            current = sim.attempts[-1] if sim.attempts else None
            if len(sim.attempts) == attempt and current is not None and current.outcome == "Unfinished" \
                    and current.start_time is None:
                self._fail(job_id, FailureKind.DEADLINE, None,
                           f"not all pods started within {sim.spec.deadline:g}s of admission")
        elif kind == CLUSTER:
            self._cluster_event(payload)
        elif kind == STATUS:
            self._status_tick()
        elif kind == CYCLE:
            self._cycle_pending = False
        elif kind == EVICT:
            self._evict(*payload)
        elif kind == STUCK:
            self._stuck(*payload)

    def _submit(self, spec: JobSpec) -> None:
        refusal = self.engine.submit(spec.build())
        if refusal is not None:
            sim = self.jobs[spec.id]
            sim.state, sim.finish_time, sim.reason = "Failed", self.now, f"rejected: {refusal.reason}"
            sim.note_reason(self.now, sim.reason)
            self._done += 1
        self._dirty = True

    def _cycle(self) -> None:
        self._dirty = False
        self._last_cycle = self.now
        result = self.engine.cycle(self.now)
        self.cycles += 1
        self.examined += result.examined
        self.plugin_errors += len(result.plugin_errors)
        for job_id, reason in result.reasons.items():
            if job_id in self.jobs:
                self.jobs[job_id].note_reason(self.now, reason)
        for admission in result.admitted:
            self._dispatch(admission)
        for preemption in result.preemptions:
            self._preempt(preemption)

    # -- carrying out decisions ------------------------------------------------------------
    def _dispatch(self, admission: Admission) -> None:
        """Karmada propagates the job; its pods appear in the chosen members at once. Bind mode: where
        Atoll placed it. Gate mode: where karmada-scheduler places it (``engine.sim.karmada``), or, if
        Karmada finds it Unschedulable, nowhere yet: retried at every status report."""
        job = self.engine.state.jobs[admission.job_id]
        sim = self.jobs[admission.job_id]
        if self.placement_mode == "gate":
            sim.attempts.append(Attempt(self.now, {}))
            self._unstarted_admitted += 1
            self._unplaced[job.id] = len(sim.attempts)
            self._place_by_karmada(job.id)
            if sim.spec.deadline is not None:
                self._push(self.now + sim.spec.deadline, DEADLINE, (job.id, len(sim.attempts)))
            return
        placement = {c: dict(p) for c, p in admission.placement.items()}
        sim.attempts.append(Attempt(self.now, placement))
        self._unstarted_admitted += 1
        self._create_pods(job.id, placement)
        if sim.spec.deadline is not None and sim.attempts[-1].outcome == "Unfinished":
            self._push(self.now + sim.spec.deadline, DEADLINE, (job.id, len(sim.attempts)))

    def _place_by_karmada(self, job_id: str) -> None:
        sim = self.jobs[job_id]
        if self._unplaced.get(job_id) != len(sim.attempts) or sim.attempts[-1].outcome != "Unfinished":
            self._unplaced.pop(job_id, None)
            return
        placement = karmada_place(sim.spec.tasks, list(self.engine.state.clusters.values()), sim.spec.propagation)
        if placement is None:
            return
        del self._unplaced[job_id]
        sim.attempts[-1].placement = placement
        self._create_pods(job_id, placement)

    def _create_pods(self, job_id: str, placement: Placement) -> None:
        job = self.engine.state.jobs[job_id]
        sim = self.jobs[job_id]
        sim.attempts[-1].placed_time = self.now
        self.engine.started(job.id, self.now)
        tasks = {t.name: t for t in job.tasks}
        for cluster, replicas in sorted(placement.items()):
            member = self.members.get(cluster)
            if member is None or not member.ready:
                self._fail(job.id, FailureKind.CLUSTER_LOST, cluster, f"cluster {cluster} is not ready")
                return
            if not member.could_ever_fit(replicas, tasks):
                self._fail(job.id, FailureKind.UNSCHEDULABLE, cluster,
                           f"no node of {cluster} can host these pods (the member scheduler reports Unschedulable)")
                return
            member.add(job.id, {t: n for t, n in replicas.items() if n}, tasks)
            if self.scenario.stuck_after > 0:
                self._push(self.now + self.scenario.stuck_after, STUCK, (job.id, len(sim.attempts), cluster))

    def _preempt(self, preemption: Preemption) -> None:
        """Karmada removes each victim's workload from its members; pods get the grace period."""
        for victim in preemption.victims:
            sim = self.jobs[victim]
            self._push(self.now + preemption.grace_period, EVICT,
                       (victim, len(sim.attempts), preemption.preemptor, preemption.reason))

    def _schedule_members(self) -> None:
        for member in self.members.values():
            self._touched |= member.schedule()

    def _check_gangs(self) -> None:
        """A job runs once minAvailable of every task is bound (across its members)."""
        for job_id in sorted(self._touched):
            sim = self.jobs[job_id]
            attempt = sim.attempts[-1] if sim.attempts else None
            if attempt is None or attempt.outcome != "Unfinished" or attempt.start_time is not None:
                continue
            bound: dict[str, int] = {}
            for cluster in attempt.placement:
                add_into(bound, self.members[cluster].bound(job_id))
            if all(bound.get(t.name, 0) >= t.min_available for t in sim.spec.tasks):
                attempt.start_time = self.now
                self._unstarted_admitted -= 1
                self._running += 1
                add_into(self._running_demand, _demand(sim.spec))
                self._push(self.now + sim.spec.duration, FINISH, (job_id, len(sim.attempts)))
            elif any(bound.values()):
                sim.partial = True
        self._touched.clear()

    # -- Karmada's cluster status controller ----------------------------------------------
    def _status_tick(self) -> None:
        for name, member in self.members.items():
            signature = member.signature()
            flights = self.engine.state.inflight(name)
            stale = any(at is not None and at < self.now for _, at in flights.values())
            if signature != self._signatures[name] or stale:
                self.engine.upsert_cluster(member.snapshot(self.now))
                self._signatures[name] = signature
                self._dirty = True
        for job_id in list(self._unplaced):         # karmada-scheduler retries unschedulable bindings
            self._place_by_karmada(job_id)
        self._sample()
        if self.progress is not None:
            self.progress(self.now, self._done, len(self.jobs))
        if self._done < len(self.jobs) and not self._quiescent():
            self._push(self.now + self.scenario.status_period, STATUS)

    def _quiescent(self) -> bool:
        """Nothing can change any more: no event to come (no running job will finish, no deadline,
        submission or cluster event), no engine timer, nothing new for the engine. Pods still waiting
        in members then wait forever: a deadlock, reported as such rather than simulated for 30 days."""
        return not self._events and self.engine.next_timer() is None and not self._dirty

    def _sample(self) -> None:
        util = {name: _dominant(m.allocated, m.allocatable) if m.ready else 0.0 for name, m in self.members.items()}
        shares = {q.name: _dominant(q.allocated, self._fleet) for q in self.engine.state.queues.values()}
        backlog = {q: self.engine.pending_count(q) for q in self.engine.state.queues}
        self.timeline.append(Sample(self.now, self.engine.pending_count(), self._unstarted_admitted, self._running,
                                    _dominant(self._running_demand, self._fleet), util, shares, backlog))

    def _close(self) -> None:
        """Anything not finished by the end is reported as it stands: nothing is lost."""
        for sim in self.jobs.values():
            if sim.state in ("Succeeded", "Failed"):
                continue
            attempt = sim.attempts[-1] if sim.attempts else None
            if attempt is not None and attempt.outcome == "Unfinished":
                sim.state = "Running" if attempt.start_time is not None else "Pending"
                if attempt.start_time is None and attempt.placed_time is None:
                    sim.reason = (f"admitted at t={attempt.admit_time:g} but karmada-scheduler never placed it (its "
                                  "estimator found too few available replicas); the simulation ended with nothing "
                                  "left that could change")
                elif attempt.start_time is None:
                    bound: Resources = {}
                    for cluster in attempt.placement:
                        add_into(bound, self.members[cluster].bound(sim.spec.id))
                    counts = ", ".join(f"{t.name} {bound.get(t.name, 0)}/{t.min_available}" for t in sim.spec.tasks)
                    sim.reason = (f"admitted at t={attempt.admit_time:g} but its gang never started (pods bound: "
                                  f"{counts}); the simulation ended with nothing left that could change")
            job = self.engine.state.jobs.get(sim.spec.id)
            if job is not None and job.state is JobState.PENDING:
                sim.reason = job.pending_reason


def _dominant(allocated: Resources, total: Resources) -> float:
    return dominant_share({k: v for k, v in allocated.items() if k != PODS}, total)


def simulate(scenario: Scenario, pipeline: Pipeline, policy_name: str = "",
             progress: Optional[Progress] = None, placement_mode: str = "bind") -> SimResult:
    return Simulation(scenario, pipeline, policy_name, progress, placement_mode).run()
