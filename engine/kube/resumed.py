"""A resumed binding's life, part of the Controller (a mixin: same state, own idea).

A binding that is neither paused nor waiting for Atoll holds resources. When the engine has no record of it
(admitted before this controller started, or never paused) it is adopted: it holds its queue usage and capacity
again, without a second admission. From then on its template's status (Karmada aggregates the members' into it)
says when it started, finished or failed; a failure goes to the recover stage (``Failures._fail``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping

from engine.core.scheduler import Engine
from engine.kube import plan
from engine.kube.bindings import binding_ref, failure_marker, scheduled_condition
from engine.kube.plan import Event, Patch
from engine.kube.translate import member_failure, meta, template_outcome, template_started
from engine.model import Failure, FailureKind, Job, JobState

log = logging.getLogger("atoll.controller")

Obj = dict[str, Any]


class Resumed:
    engine: Engine
    resumed_at: dict[str, float]
    failure_seen: dict[str, str]

    if TYPE_CHECKING:
        def _fail(self, key: str, failure: Failure, now: float, out: list[Patch | Event]) -> None: ...

        def _not_gated(self, key: str, obj: Obj, queue: str | None, out: list[Patch | Event]) -> None: ...

    def _adopt(self, key: str, obj: Obj, job: Job, template: Obj, now: float, out: list[Patch | Event]) -> None:
        """A resumed binding we have no record of: admitted before a restart (or never paused). It holds
        its capacity again, without a second admission. Bind mode: a controller that died between writing
        spec.clusters and the Scheduled condition left the status unwritten; it is written now."""
        annotations = meta(obj).get("annotations") or {}
        # no later than now: a future stamp would keep its pods from being seen stuck, and protect it from preemption
        admitted = min(plan.parse_stamp(annotations.get(plan.ADMITTED_ANNOTATION)) or now, now)
        clusters = plan.binding_clusters(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        generation = meta(obj).get("generation")
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        if ((spec or {}).get("schedulerName") == plan.SCHEDULER_NAME and clusters and isinstance(generation, int)
                and plan.ADMITTED_ANNOTATION in annotations
                and (status or {}).get("schedulerObservedGeneration") != generation):
            out.append(Patch(binding_ref(obj), plan.bind_status_patch(generation, now, (status or {}).get(
                "conditions")), "bind-status", subresource="status"))
        self.engine.adopt(job, plan.placement_on(clusters, job), admitted, running=template_started(template))
        outcome = template_outcome(template)
        if outcome is not None:
            self.engine.finished(key, outcome)
        elif plan.ADMITTED_ANNOTATION not in annotations:      # never paused by the webhook (engine/kube/not_gated.py)
            self._not_gated(key, obj, job.queue, out)
        log.info("adopted %s (resumed before this controller started; clusters %s)", key, clusters or "none yet")

    def _lifecycle(self, key: str, obj: Obj, job: Job, template: Obj, now: float, out: list[Patch | Event]) -> None:
        """Finished, failed, started: from the template's status (Karmada aggregates members into it)."""
        if not job.state.holds_resources or job.state is JobState.EVICTING:
            return
        outcome = template_outcome(template)
        ref = binding_ref(obj)
        if outcome is True:
            self.engine.finished(key, True)
            out.append(Event(plan.binding_involved(ref), "Finished", "workload completed; its quota is released"))
            return
        in_member = member_failure(obj)
        if outcome is False or in_member is not None:
            marker = in_member[1] if in_member is not None else failure_marker(template)
            if self.failure_seen.get(key) != marker:
                self.failure_seen[key] = marker
                clusters = plan.binding_clusters(obj)
                where = in_member[0] if in_member is not None else (clusters[0] if clusters else None)
                self._fail(key, Failure(FailureKind.JOB_FAILED, where or None,
                                        "the workload failed in its member cluster"), now, out)
            return
        if job.state is JobState.ADMITTED and template_started(template):
            self.engine.started(key, now)
        cond = scheduled_condition(obj)
        if cond is not None and cond.get("status") == "True":
            self.resumed_at.pop(key, None)
