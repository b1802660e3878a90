"""The controller's brain: cached API objects in, engine calls and planned API writes out. Synchronous.

Watch caches call the ``on_*`` handlers; ``step(now)`` turns what changed since the last step into engine
calls (submit / adopt / update_job / finished / fail), runs one engine cycle and returns the writes to make
(``plan.Patch`` / ``plan.Event``). The async runner executes them. Keeping I/O out of here makes every
decision unit-testable with plain dicts, and the engine core stays pure.

Invariants: a binding still paused is PENDING in the engine; a resumed one holds resources (adopted after a
restart); a binding that cannot be understood is kept aside with a visible reason, never dropped.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Optional

from engine.core.scheduler import Engine
from engine.errors import InputError
from engine.kube import plan
from engine.kube.bindings import addressed_unplaced, binding_ref, contained, is_paused, template_key
from engine.kube.not_gated import NotGated
from engine.kube.plan import Event, Patch
from engine.kube.resumed import Resumed
from engine.kube.step_errors import StepErrors
from engine.kube.stuck import StuckPods
from engine.kube.translate import (DEFAULT_QUEUE, PriorityClasses, cluster_from_obj, describe, job_fingerprint,
                                   job_from_template, meta, object_key, queue_from_obj, template_outcome)
from engine.kube.webhook import PAUSED_ANNOTATION, ManagedSelector
from engine.kube.eviction import EVICTION_TIMEOUT, Evictions
from engine.kube.failures import Failures
from engine.kube.works import WorkIndex
from engine.model import JobState, Queue
from engine.pipeline import Pipeline
from engine.resources import fits

log = logging.getLogger("atoll.controller")

CLOCK_SKEW = 5.0
"""Seconds the webhook's pause stamp may lie before the binding's creationTimestamp (clocks of two hosts, and
creationTimestamp's whole seconds) and still order the job (``Controller._submit_time``)."""

Obj = dict[str, Any]
STUCK_AFTER = 20.0             # seconds a pod may stay Unschedulable in its member: 2 x Karmada's status period


class Controller(Evictions, Failures, Resumed, NotGated, StepErrors):
    def __init__(self, pipeline: Pipeline, selector: ManagedSelector = ManagedSelector(), mode: str = "gate",
                 on_admit: Optional[Callable[[str, str, float], None]] = None, stuck_after: float = STUCK_AFTER
                 ) -> None:
        self.engine = Engine(pipeline)
        self.stuck = StuckPods(stuck_after)          # unschedulable pods in members (engine/kube/stuck.py)
        self.selector = selector
        self.mode = mode
        self.bindings: dict[str, Obj] = {}
        self.seen: dict[str, int] = {}               # binding -> order first seen (watch order = creation order)
        self._seen_next = 0
        self.templates: dict[tuple[str, str], Obj] = {}
        self.by_template: dict[tuple[str, str], set[str]] = {}
        self.classes = PriorityClasses()
        self.priority_objects: dict[str, Obj] = {}
        self.real_queues: set[str] = set()
        self.dirty: set[str] = set()
        self.lost_clusters: set[str] = set()
        self.fingerprints: dict[str, tuple[Any, ...]] = {}
        self.invalid: dict[str, str] = {}            # job id -> why its template cannot be scheduled
        self.resumed_at: dict[str, float] = {}       # job id -> when we resumed it (gate mode)
        self.failure_seen: dict[str, str] = {}       # job id -> failure marker already acted on
        self.requeued: set[str] = set()              # jobs paused again after a failure: resume reschedules
        self.works = WorkIndex()                     # binding -> its Works (metadata only)
        self.evicting: dict[str, float] = {}         # victim job id -> when its eviction was issued
        self.intents: dict[str, str] = {}            # binding carrying the eviction intent -> its preemptor
        self.deferred: set[str] = set()              # preemptors not submitted until those victims are gone
        self.model_warnings: dict[str, str] = {}     # cluster -> why its resource model is not used
        self.on_admit = on_admit
        self.pending: list[Patch | Event] = []
        self.plugin_errors_logged: set[tuple[str, str]] = set()   # (plugin, exception type) traceback logged
        self.sync_failed: dict[str, float] = {}      # binding whose sync raised -> when it is synced again
        self.sync_warned: dict[str, str] = {}        # binding -> the sync error its last SyncFailed Event told
        self.not_gated: set[str] = set()             # bindings told NotGated (the webhook did not pause them)
        self.engine.upsert_queue(Queue(DEFAULT_QUEUE))  # Volcano always has one; replaced by a real one

    # -- handlers (called by the watch caches) --------------------------------------------------------
    def on_binding(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        obj = new or old
        if obj is None:
            return
        key = object_key(obj)
        prev_tkey = template_key(old) if old else None
        if new is None:
            self.bindings.pop(key, None)
            self.seen.pop(key, None)
            self.sync_failed.pop(key, None)
            self.sync_warned.pop(key, None)
            self.not_gated.discard(key)
        else:
            self.bindings[key] = new
            if key not in self.seen:
                self.seen[key] = self._seen_next
                self._seen_next += 1
        tkey = template_key(obj)
        if prev_tkey and prev_tkey != tkey:
            self.by_template.get(prev_tkey, set()).discard(key)
        if tkey:
            self.by_template.setdefault(tkey, set()).add(key)
        self.dirty.add(key)
        self.track_intent(key, new)

    def on_template(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        obj = new or old
        if obj is None:
            return
        tkey = (f"{obj.get('apiVersion', '')}/{obj.get('kind', '')}", object_key(obj))
        if new is None:
            self.templates.pop(tkey, None)
        else:
            self.templates[tkey] = new
        self.dirty |= self.by_template.get(tkey, set())

    def on_cluster(self, event: str, new: Optional[Obj], old: Optional[Obj], now: float = 0.0) -> None:
        if new is None:
            name = str(meta(old or {}).get("name", ""))
            log.warning("cluster %s removed from the fleet", name)
            self.engine.remove_cluster(name)
            self.lost_clusters.add(name)
            return
        warnings: list[str] = []
        try:
            cluster = cluster_from_obj(new, now, warnings)
        except InputError as exc:
            log.warning("ignoring a bad Cluster update (keeping the previous one): %s", exc)
            return
        self._model_warning(new, cluster.name, warnings[0] if warnings else None)
        before = self.engine.state.clusters.get(cluster.name)
        self.engine.upsert_cluster(cluster)
        deleting = bool(meta(new).get("deletionTimestamp"))
        # lost: Ready -> not ready; or first seen already being deleted (a restart during a deletion: Karmada
        # waits for the bindings on it, so its jobs must be requeued now, not at a transition that never comes)
        if not cluster.ready and ((before is not None and before.ready) or (before is None and deleting)):
            log.warning("cluster %s is %s: %s", cluster.name,
                        "being deleted" if deleting else "NotReady",
                        [c for c in ((new.get("status") or {}).get("conditions") or ())
                         if isinstance(c, Mapping) and c.get("type") == "Ready"])
            self.lost_clusters.add(cluster.name)

    def on_member_pod(self, cluster: str, event: str, new: Optional[Obj], old: Optional[Obj], now: float) -> None:
        """An unbound pod in member ``cluster`` (the runner's per-member watch, fieldSelector spec.nodeName=)."""
        self.stuck.on_pod(cluster, new, old, now)

    def _model_warning(self, obj: Obj, name: str, warning: Optional[str]) -> None:
        """Say once (log + Warning Event on the Cluster) that its resource model is unusable, and again only
        when the reason changes; the cluster keeps working on summed totals meanwhile."""
        if self.model_warnings.get(name) == warning:
            return
        if warning is None:
            self.model_warnings.pop(name, None)
            return
        self.model_warnings[name] = warning
        log.warning("%s", warning)
        self.pending.append(Event({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": name,
                                   "uid": str(meta(obj).get("uid") or "")}, "ResourceModelIgnored", warning,
                                  "Warning"))

    def on_queue(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        if new is None:
            name = str(meta(old or {}).get("name", ""))
            self.real_queues.discard(name)
            if name == DEFAULT_QUEUE:
                self.engine.upsert_queue(Queue(DEFAULT_QUEUE))
            else:
                self.engine.remove_queue(name)
            return
        try:
            queue = queue_from_obj(new)
        except InputError as exc:
            log.warning("ignoring a bad Queue (keeping the previous version): %s", exc)
            return
        self.real_queues.add(queue.name)
        self.engine.upsert_queue(queue)

    def on_priority_class(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        obj = new or old
        if obj is None:
            return
        if new is None:
            self.priority_objects.pop(object_key(obj), None)
        else:
            self.priority_objects[object_key(obj)] = new
        self.classes.rebuild(self.priority_objects)
        self.dirty |= set(self.bindings)

    def set_pipeline(self, pipeline: Pipeline, selector: ManagedSelector, mode: str) -> None:
        self.engine.set_pipeline(pipeline)
        self.selector = selector
        self.mode = mode
        self.dirty |= set(self.bindings)

    # -- one step ---------------------------------------------------------------------------------------
    def step(self, now: float) -> list[Patch | Event]:
        """Apply what changed, run one engine cycle, return the API writes that carry out its decisions."""
        out, self.pending = [i for i in self.pending if self._still_wanted(i)], []
        self._sync_retries_due(now)
        order = sorted(self.dirty, key=lambda k: self._arrival(k))
        self.dirty.clear()
        for key in order:
            try:
                self._sync(key, now, out)
            except Exception as exc:      # a bug or an object shape we did not foresee: never stop the others
                self._sync_failed(key, exc, now, out)
            else:
                if self.sync_warned:
                    self.sync_warned.pop(key, None)
                    self.sync_failed.pop(key, None)
        if self.lost_clusters:
            lost, self.lost_clusters = self.lost_clusters, set()
            self._clusters_lost(lost, now, out)
        self._check_unscheduled(now, out)
        self._check_evictions(now, out)
        self._check_stuck(now, out)
        result = self.engine.cycle(now)
        failed = self._plugin_errors(result)
        for adm in result.admitted:
            with contained(adm.job_id, "admission"):
                self._admitted(adm.job_id, adm.queue, adm.placement, now, out)
        for preemption in result.preemptions:
            with contained(preemption.preemptor, "preemption"):
                self._preempt(preemption, now, out)
        for job_id, reason in result.reasons.items():
            with contained(job_id, "pending reason"):
                obj = self.bindings.get(job_id)
                job = self.engine.state.jobs.get(job_id)
                if obj is not None and job is not None and job.state is JobState.PENDING:
                    ref = binding_ref(obj)
                    out.append(Patch(ref, plan.pending_patch(job.queue, reason), "pending"))
                    # a job larger than the whole fleet waits until the fleet grows: say so as a Warning
                    # and so is a plugin's error (engine.core.contain)
                    kind = "Normal" if fits(job.demand, self.engine.state.fleet_allocatable) \
                        and job_id not in failed else "Warning"
                    out.append(Event(plan.binding_involved(ref), "Pending", reason, kind))
        return out

    def _arrival(self, key: str) -> tuple[float, int, str]:
        """Submission order: the submit time, then the order the watch delivered the bindings. Bindings the
        webhook did not pause have only creationTimestamp, whole seconds; within one second the watch's order
        (etcd's, i.e. creation order) keeps them first come, first served. The engine's FIFO breaks equal
        submit times by the order of submission."""
        obj = self.bindings.get(key)
        return (self._submit_time(obj) if obj else 0.0), self.seen.get(key, 0), key

    @staticmethod
    def _submit_time(obj: Mapping[str, Any]) -> float:
        """The webhook's microsecond pause stamp, else creationTimestamp: FIFO survives restarts. The stamp is an
        annotation anyone who may edit the binding can set, and the webhook writes it just before the API server
        sets creationTimestamp (whole seconds, from the API server's clock): it counts no earlier than
        ``CLOCK_SKEW`` before creationTimestamp, so a forged one cannot put a job ahead of the line by more."""
        m = meta(obj)
        annotations = m.get("annotations") if isinstance(m.get("annotations"), Mapping) else {}
        paused = plan.parse_stamp((annotations or {}).get(PAUSED_ANNOTATION))
        created = plan.parse_stamp(m.get("creationTimestamp"))
        if paused is not None:
            return paused if created is None else max(paused, created - CLOCK_SKEW)
        return created if created is not None else 0.0

    def _sync(self, key: str, now: float, out: list[Patch | Event]) -> None:
        obj = self.bindings.get(key)
        known = self.engine.state.jobs.get(key)
        if obj is None:
            if known is not None:
                self.engine.remove_job(key)
            for table in (self.fingerprints, self.invalid, self.resumed_at, self.failure_seen, self.evicting):
                table.pop(key, None)
            self.requeued.discard(key)
            return
        tkey = template_key(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        res = (spec or {}).get("resource") or {}
        managed = tkey is not None and self.selector.manages(
            str(res.get("apiVersion", "")), str(res.get("kind", "")), str(res.get("namespace") or ""),
            str(meta(obj).get("namespace") or ""))
        if self.mode == "bind" and (spec or {}).get("schedulerName") != plan.SCHEDULER_NAME:
            # placed by karmada-scheduler (gate): ours once the webhook paused it, and still ours after Atoll
            # resumed it (its admission stamp): its start and end must reach the engine, or it holds its
            # in-flight reservation and its capacity for ever
            ours = is_paused(obj) or plan.ADMITTED_ANNOTATION in (meta(obj).get("annotations") or {})
            if managed and not ours and tkey is not None:     # the webhook did not pause it (engine/kube/not_gated.py)
                template = self.templates.get(tkey)
                if template is not None and template_outcome(template) is None:
                    self._not_gated(key, obj, None, out)
            managed = managed and ours
        if not managed or tkey is None:
            if known is not None and not known.state.holds_resources:
                self.engine.remove_job(key)
            return
        template = self.templates.get(tkey)
        if template is None:
            self._invalid(key, obj, f"resource template {tkey[0]} {tkey[1]} not found (yet)", out, warn=False)
            return
        try:
            job = job_from_template(key, template, self.classes, self._submit_time(obj))
        except InputError as exc:
            self._invalid(key, obj, f"cannot schedule {describe(template)}: {exc}", out, warn=True)
            return
        if key in self.invalid:
            del self.invalid[key]
        fingerprint = job_fingerprint(job)
        if known is None:
            self.fingerprints[key] = fingerprint
            if self._restore_preemption(key, obj, job, now, out) or self.defer_preemptor(key):
                return
            if self._waiting(obj):
                if template_outcome(template) is not None:
                    # its workload already ended (e.g. a victim that completed while being evicted, seen after
                    # a restart): a Job runs once; admitting it again would run it a second time
                    log.debug("%s: its workload already ended; not admitted", key)
                    return
                refusal = self.engine.submit(job)
                if refusal is not None:
                    ref = binding_ref(obj)
                    out.append(Patch(ref, plan.pending_patch(job.queue, f"rejected: {refusal.reason}"), "pending"))
                    out.append(Event(plan.binding_involved(ref), "Rejected", refusal.reason, "Warning"))
            else:
                self._adopt(key, obj, job, template, now, out)
            return
        if self.fingerprints.get(key) != fingerprint:
            self.fingerprints[key] = fingerprint
            self.engine.update_job(job)
            known = self.engine.state.jobs[key]
        self._lifecycle(key, obj, known, template, now, out)

    def _waiting(self, obj: Mapping[str, Any]) -> bool:
        """Paused (by the webhook, a requeue or a preemption), or addressed to us and not placed yet (one the
        webhook did not pause: it was down). In gate mode such a binding, once resumed (its admission stamp), is
        not placed by anyone either; it is adopted, never admitted twice."""
        if is_paused(obj):
            return True
        return addressed_unplaced(obj) and (
            self.mode == "bind" or plan.ADMITTED_ANNOTATION not in (meta(obj).get("annotations") or {}))

    def _admitted(self, key: str, queue: str, placement: dict[str, dict[str, int]], now: float,
                  out: list[Patch | Event]) -> None:
        obj = self.bindings.get(key)
        if obj is None:
            return
        ref = binding_ref(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        if self.mode == "bind" and (spec or {}).get("schedulerName") == plan.SCHEDULER_NAME:
            out.append(Patch(ref, plan.bind_patch(queue, now, placement), "bind"))
            where = ", ".join(f"{c} ({sum(p.values())} pods)" for c, p in sorted(placement.items()))
        else:
            out.append(Patch(ref, plan.resume_patch(queue, now, reschedule=key in self.requeued), "admit"))
            self.resumed_at[key] = now
            where = "placement left to karmada-scheduler (gate mode)"
        self.requeued.discard(key)
        out.append(Event(plan.binding_involved(ref), "Admitted", f"admitted from queue {queue}; {where}"))
        if self.on_admit is not None:
            self.on_admit(key, queue, now)

    def _invalid(self, key: str, obj: Obj, why: str, out: list[Patch | Event], warn: bool) -> None:
        """Keep a job we cannot schedule visible (annotation + Event) instead of dropping it."""
        if self.invalid.get(key) == why:
            return
        self.invalid[key] = why
        if warn:
            log.warning("%s: %s", key, why)
        if self._waiting(obj):
            ref = binding_ref(obj)
            out.append(Patch(ref, plan.pending_patch(self._queue_hint(obj), why), "pending"))
            if warn:
                out.append(Event(plan.binding_involved(ref), "InvalidWorkload", why, "Warning"))

    def _queue_hint(self, obj: Obj) -> str:
        annotations = meta(obj).get("annotations") or {}
        return str(annotations.get(plan.QUEUE_ANNOTATION) or DEFAULT_QUEUE)

    # -- visibility ---------------------------------------------------------------------------------------
    def explain(self, key: str) -> str:
        if key in self.invalid:
            return f"job {key}: not schedulable: {self.invalid[key]}"
        text = self.engine.explain(key)
        obj = self.bindings.get(key)
        annotations = meta(obj).get("annotations") or {} if obj is not None else {}
        if annotations.get(plan.PREEMPTED_BY_ANNOTATION):
            text += (f"\npreempted by {annotations[plan.PREEMPTED_BY_ANNOTATION]} "
                     f"({annotations.get(plan.PREEMPTIONS_ANNOTATION, '?')} time(s) in all)")
        if key in self.evicting:
            since = self.evicting[key]
            left = self.works.clusters(key)
            text += (f"\nevicting since {plan.stamp(since)}: " +
                     (f"waiting for its Works to be gone on {', '.join(left)}" if left else "its Works are gone") +
                     f" (capacity freed at the latest {plan.stamp(since + EVICTION_TIMEOUT)})")
        return text
