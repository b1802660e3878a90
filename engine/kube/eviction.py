"""Carrying out the engine's preemptions on Karmada, as part of the Controller (a mixin: same state, own idea).

A victim is evicted by ONE merge patch on its binding (``plan.evict_patch``): the intent as annotations
(``atoll.dev/preempted-by``, ``atoll.dev/evicting-since``, ``atoll.dev/preemptions``) together with
``spec.suspension.scheduling: true`` and no ``spec.clusters``. Karmada's binding controller then deletes the
binding's Works, and the execution controller deletes the member objects (and so their pods) before letting
each Work go. One request makes it atomic: after a crash the binding either still runs untouched (the new
leader decides afresh) or carries the intent (adopted as evicting, holding its capacity). A victim whose
workload ended (template Complete/Failed) before the eviction reached it is finished, not requeued: a Job
runs once. Capacity is freed (``Engine.evicted``) only when the binding shows the eviction and none of its
Works is left (the Works watch, metadata only: no GET per event), or after ``EVICTION_TIMEOUT`` for a member
that cannot delete. The victim then waits in its queue, paused, and is resumed like any job (placed afresh).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from engine.core.scheduler import Engine
from engine.kube import metrics, plan
from engine.kube.bindings import binding_ref, contained, is_paused, template_key
from engine.kube.plan import Event, Patch
from engine.kube.translate import meta, template_outcome
from engine.kube.works import WorkIndex
from engine.model import Job, JobState, Preemption

log = logging.getLogger("atoll.controller")

Obj = dict[str, Any]
EVICTION_TIMEOUT = 300.0       # seconds a victim's Works may take to disappear before its capacity is freed anyway


class Evictions:
    engine: Engine
    bindings: dict[str, Obj]
    requeued: set[str]
    resumed_at: dict[str, float]
    works: WorkIndex
    evicting: dict[str, float]                   # victim job id -> when its eviction was issued
    intents: dict[str, str]
    deferred: set[str]
    dirty: set[str]
    templates: dict[tuple[str, str], Obj]

    def on_work(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> bool:
        """A Work changed; True when it belongs to a victim being evicted (worth a step now)."""
        key = self.works.apply(new, old)
        return key is not None and key in self.evicting

    def track_intent(self, key: str, new: Optional[Obj]) -> None:
        """Index bindings carrying the eviction intent by preemptor; when the last one of a deferred preemptor
        is done (intent cleared or binding gone), the preemptor is synced again."""
        annotations = (meta(new).get("annotations") or {}) if new is not None else {}
        preemptor = str(annotations.get(plan.PREEMPTED_BY_ANNOTATION) or "")
        if new is not None and annotations.get(plan.EVICTING_ANNOTATION) and preemptor:
            self.intents[key] = preemptor
            return
        before = self.intents.pop(key, None)
        if before is not None and before in self.deferred and before not in self.intents.values():
            self.deferred.discard(before)
            self.dirty.add(before)

    def defer_preemptor(self, key: str) -> bool:
        """After a restart, a waiting job whose victims are still being evicted is not submitted until they
        are gone: the new leader has no record of its claim on their capacity and would otherwise look for
        more victims for it. True when deferred."""
        victims = sorted(v for v, p in self.intents.items() if p == key and self.works.has_works(v))
        if victims:
            self.deferred.add(key)
            log.info("%s: its victims (%s) are still being evicted; examined once they are gone", key,
                     ", ".join(victims))
            return True
        return False

    def _preempt(self, p: Preemption, now: float, out: list[Patch | Event]) -> None:
        """Evict each victim from every member: one merge patch records the intent and withdraws it."""
        for victim in p.victims:
            with contained(victim, "eviction for a preemption"):
                obj = self.bindings.get(victim)
                job = self.engine.state.jobs.get(victim)
                if obj is None or job is None or job.state is not JobState.EVICTING:
                    continue
                ref = binding_ref(obj)
                where = plan.binding_clusters(obj) or self.works.clusters(victim)
                out.append(Patch(ref, plan.evict_patch(job.queue, p.preemptor, p.reason, now, job.preemptions + 1),
                                 "evict"))
                out.append(Event(plan.binding_involved(ref), "Preempted",
                                 f"preempted by {p.preemptor} ({p.reason}); removing its workload from "
                                 f"{', '.join(where) or 'its members'}; it goes back to queue {job.queue} and runs "
                                 f"again later", "Warning"))
                self.evicting[victim] = now
                self.requeued.add(victim)            # re-admission places it afresh
                self.resumed_at.pop(victim, None)
                metrics.PREEMPTIONS.labels(job.queue, p.reason).inc()
                log.info("preempting %s for %s (%s) on %s", victim, p.preemptor, p.reason, where or "no cluster yet")

    def _check_evictions(self, now: float, out: list[Patch | Event]) -> None:
        """A victim's capacity is freed once its binding shows the eviction (paused, no clusters) and no Work
        of it is left, or after EVICTION_TIMEOUT (a member that cannot delete: NotReady, stuck finalizers)."""
        for key, since in list(self.evicting.items()):
            with contained(key, "eviction check"):
                obj = self.bindings.get(key)
                job = self.engine.state.jobs.get(key)
                if obj is None or job is None or job.state is not JobState.EVICTING:
                    self.evicting.pop(key, None)
                    continue
                annotations = meta(obj).get("annotations") or {}
                applied = (is_paused(obj) and not plan.binding_clusters(obj)
                           and plan.EVICTING_ANNOTATION in annotations)
                left = self.works.clusters(key)
                timed_out = now - since >= EVICTION_TIMEOUT
                if not timed_out and (not applied or left):
                    continue
                del self.evicting[key]
                self.engine.evicted(key, now)
                if job.preempted_by in self.deferred:
                    self.deferred.discard(job.preempted_by)
                    self.dirty.add(job.preempted_by)
                ref = binding_ref(obj)
                tkey = template_key(obj)
                template = self.templates.get(tkey) if tkey is not None else None
                outcome = template_outcome(template) if template is not None else None
                if outcome is not None:     # it ended in its member before the eviction reached it: never run again
                    self.engine.finished(key, outcome)
                    why = (f"preempted by {job.preempted_by} at {plan.stamp(since)}, but it had already "
                           f"{'succeeded' if outcome else 'failed'}: not run again")
                    out.append(Patch(ref, plan.evicted_patch(job.queue, why), "evicted"))
                    out.append(Event(plan.binding_involved(ref), "Evicted", why))
                    continue
                why = f"preempted by {job.preempted_by} at {plan.stamp(since)}; waiting to run again"
                out.append(Patch(ref, plan.evicted_patch(job.queue, why), "evicted"))
                if left or not applied:
                    msg = (f"eviction not confirmed after {EVICTION_TIMEOUT:g}s (Works left on "
                           f"{', '.join(left) or '?'}); its capacity is counted free anyway")
                    log.warning("%s: %s", key, msg)
                    out.append(Event(plan.binding_involved(ref), "EvictionTimeout", msg, "Warning"))
                else:
                    out.append(Event(plan.binding_involved(ref), "Evicted",
                                     f"its workload is gone from every member; back in queue {job.queue}"))

    def _restore_preemption(self, key: str, obj: Obj, job: Job, now: float, out: list[Patch | Event]) -> bool:
        """After a restart: a binding carrying the eviction intent is a victim still holding its capacity
        (Works left) or one waiting to run again (Works gone). True when handled here."""
        annotations = meta(obj).get("annotations") or {}
        try:
            job.preemptions = int(annotations.get(plan.PREEMPTIONS_ANNOTATION) or 0)
        except ValueError:
            job.preemptions = 0
        job.preempted_by = str(annotations.get(plan.PREEMPTED_BY_ANNOTATION) or "")
        since = plan.parse_stamp(annotations.get(plan.EVICTING_ANNOTATION))
        if since is None:
            return False
        since = min(since, now)         # a future stamp would keep the victim's capacity for ever (EVICTION_TIMEOUT)
        self.requeued.add(key)
        left = self.works.clusters(key)
        if left:
            job.preemptions = max(0, job.preemptions - 1)       # counted again when the eviction completes
            self.engine.adopt_evicting(job, plan.placement_on(left, job), job.preempted_by, since)
            self.evicting[key] = since
            log.info("adopted %s as evicting (preempted by %s; Works left on %s)", key, job.preempted_by, left)
            return True
        refusal = self.engine.submit(job)
        why = f"preempted by {job.preempted_by} at {plan.stamp(since)}; waiting to run again"
        if refusal is not None:
            why = f"rejected: {refusal.reason}"
        out.append(Patch(binding_ref(obj), plan.evicted_patch(job.queue, why), "evicted"))
        return True
