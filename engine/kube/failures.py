"""Noticing that an admitted job failed, part of the Controller (a mixin: same state, own idea).

Three signals, each turned into ``Engine.fail`` (the recover stage decides: requeue with backoff and
exclusions, or give up) and one planned write that pauses the binding again and clears spec.clusters:

* karmada-scheduler's ``Scheduled=False`` on a resumed binding for longer than ``UNSCHEDULED_GRACE``
  (a transient ``SchedulerError`` is timed from when it appeared);
* a pod of the job Unschedulable in a member it was placed on for ``stuck_after`` seconds
  (engine/kube/stuck.py, through Karmada's cluster proxy);
* a cluster the job runs on going NotReady, being deleted, or leaving the fleet.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.core.scheduler import Engine
from engine.kube import metrics, plan
from engine.kube.bindings import binding_ref, contained, scheduled_condition
from engine.kube.plan import Event, Patch
from engine.kube.stuck import StuckPods
from engine.model import Failure, FailureKind, JobState, Recovery

log = logging.getLogger("atoll.controller")

Obj = dict[str, Any]
UNSCHEDULED_GRACE = 30.0       # seconds a resumed binding may stay Scheduled=False before it counts as failed


class Failures:
    engine: Engine
    bindings: dict[str, Obj]
    resumed_at: dict[str, float]
    requeued: set[str]
    stuck: StuckPods
    by_template: dict[tuple[str, str], set[str]]

    def _check_unscheduled(self, now: float, out: list[Patch | Event]) -> None:
        """Resumed, but karmada-scheduler says Scheduled=False for longer than the grace period."""
        for key, resumed in list(self.resumed_at.items()):
            with contained(key, "Scheduled=False check"):
                obj = self.bindings.get(key)
                job = self.engine.state.jobs.get(key)
                if obj is None or job is None or not job.state.holds_resources:
                    self.resumed_at.pop(key, None)
                    continue
                cond = scheduled_condition(obj)
                if cond is None or cond.get("status") != "False":
                    continue
                changed = plan.parse_stamp(cond.get("lastTransitionTime")) or 0.0
                changed_after = changed >= int(resumed)
                if cond.get("reason") == "SchedulerError":
                    # karmada-scheduler failing to write (e.g. its API server restarting): it retries by itself, so
                    # only an error lasting the grace period counts, timed from when it appeared (acting on it at
                    # once re-admitted jobs after an API restart)
                    failed = now - max(changed, resumed) > UNSCHEDULED_GRACE
                else:
                    failed = changed_after or now - resumed > UNSCHEDULED_GRACE
                if failed:
                    self.resumed_at.pop(key, None)
                    self._fail(key, Failure(FailureKind.UNSCHEDULABLE, None,
                                            f"karmada-scheduler: {cond.get('reason', '')}: {cond.get('message', '')}"),
                               now, out)

    def _check_stuck(self, now: float, out: list[Patch | Event]) -> None:
        """A pod of an admitted job Unschedulable in a member it was placed on for ``stuck_after`` seconds: the
        job fails there (recover stage), as in the simulator. Pods seen before this admission are not its own."""
        for pod in self.stuck.overdue(now):
            for key in sorted(self.by_template.get(pod.workload, ())):
                with contained(key, "stuck-pod check"):
                    job, obj = self.engine.state.jobs.get(key), self.bindings.get(key)
                    if job is None or obj is None or not job.state.holds_resources or \
                            pod.since < (job.admitted_at or 0.0) - 1.0 or \
                            pod.cluster not in set(job.placement or {}) | set(plan.binding_clusters(obj)):
                        continue
                    self._fail(key, Failure(FailureKind.UNSCHEDULABLE, pod.cluster,
                                            f"pod {pod.pod} unschedulable in {pod.cluster} for {now - pod.since:.0f}s: "
                                            f"{pod.message}"), now, out)

    def _clusters_lost(self, lost: set[str], now: float, out: list[Patch | Event]) -> None:
        for key, job in list(self.engine.state.jobs.items()):
            with contained(key, "lost-cluster check"):
                if not job.state.holds_resources or job.state is JobState.EVICTING:
                    continue
                obj = self.bindings.get(key)
                # where it runs: spec.clusters once placed (in gate mode karmada-scheduler may have chosen other
                # clusters than the engine planned: a job running elsewhere was requeued), else the engine's plan
                placed = plan.binding_clusters(obj) if obj else []
                where = set(placed) if placed else set(job.placement or {})
                hit = sorted(where & lost)
                if hit:
                    self._fail(key, Failure(FailureKind.CLUSTER_LOST, hit[0],
                                            f"cluster {hit[0]} is NotReady, being deleted or gone"), now, out)

    def _fail(self, key: str, failure: Failure, now: float, out: list[Patch | Event]) -> None:
        recovery: Recovery = self.engine.fail(key, failure, now)
        metrics.FAILURES.labels(failure.kind.value).inc()
        obj = self.bindings.get(key)
        job = self.engine.state.jobs.get(key)
        log.warning("%s failed (%s%s): %s", key, failure.kind.value,
                    f" in {failure.cluster}" if failure.cluster else "", recovery.reason or failure.message)
        if obj is None or job is None:
            return
        ref = binding_ref(obj)
        self.resumed_at.pop(key, None)
        if recovery.requeue:
            self.requeued.add(key)
            why = recovery.reason or f"requeued after {failure.kind.value}"
            out.append(Patch(ref, plan.requeue_patch(job.queue, why), "requeue"))
            out.append(Event(plan.binding_involved(ref), "Requeued",
                             f"{failure.kind.value}: {failure.message}; {why}", "Warning"))
        else:
            why = recovery.reason or f"gave up after {failure.kind.value}"
            out.append(Patch(ref, plan.requeue_patch(job.queue, f"gave up: {why}"), "giveup"))
            out.append(Event(plan.binding_involved(ref), "GaveUp", why, "Warning"))
