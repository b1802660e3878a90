"""What goes wrong in a controller step without stopping it, part of the Controller (a mixin: same state, own idea).

Three kinds, each told where it is seen and never allowed to stop the other bindings:

* a plugin's exception while one job is judged (contained by the engine, ``engine.core.contain``): counted in
  ``atoll_plugin_errors_total{plugin}`` and logged, with the traceback once per plugin and exception type;
* a binding whose sync raised (a bug, an object shape not foreseen, a plugin's enqueue hook): it stays as it
  was, is synced again at its next change or ``SYNC_RETRY`` seconds later, and says so with a Warning Event;
* an API write that failed: handed back (``retry_later``) and re-issued at the next step only if the engine
  still means it (``_still_wanted``).
"""

from __future__ import annotations

import logging
from typing import Any

from engine.core.scheduler import Engine
from engine.kube import metrics, plan
from engine.kube.bindings import binding_ref
from engine.kube.plan import Event, Patch
from engine.model import CycleResult, JobState

log = logging.getLogger("atoll.controller")

Obj = dict[str, Any]
SYNC_RETRY = 60.0              # seconds until a binding whose sync raised is synced again without a change


class StepErrors:
    engine: Engine
    bindings: dict[str, Obj]
    invalid: dict[str, str]
    dirty: set[str]
    pending: list[Patch | Event]
    plugin_errors_logged: set[tuple[str, str]]
    sync_failed: dict[str, float]
    sync_warned: dict[str, str]

    def _plugin_errors(self, result: CycleResult) -> set[str]:
        """Count and log the cycle's contained plugin errors; the ids of the jobs they failed."""
        failed = {error.job_id for error in result.plugin_errors}
        for error in result.plugin_errors:
            metrics.PLUGIN_ERRORS.labels(error.plugin or "unknown").inc()
            # the traceback once per plugin and exception type: a broken plugin meets many jobs, each again and again
            which = (error.plugin, error.error.split(":", 1)[0])
            first = which not in self.plugin_errors_logged
            if first and len(self.plugin_errors_logged) < 1000:
                self.plugin_errors_logged.add(which)
            log.error("%s: plugin %s failed while judging it (%s); it stays pending and is examined again later%s",
                      error.job_id, error.plugin or "(unknown)", error.error,
                      "\n" + error.traceback.rstrip() if first else "")
        return failed

    def _sync_retries_due(self, now: float) -> None:
        """Bindings whose sync raised ``SYNC_RETRY`` seconds ago are synced again, changed or not."""
        if self.sync_failed:
            for key in [k for k, at in self.sync_failed.items() if at <= now]:
                del self.sync_failed[key]
                self.dirty.add(key)

    def _sync_failed(self, key: str, exc: Exception, now: float, out: list[Patch | Event]) -> None:
        """A binding whose sync raised (e.g. a plugin's enqueue hook on its job) stays as it was; it is synced again
        at its next change or ``SYNC_RETRY`` seconds later, whichever comes first, and says so on the binding with a
        Warning Event once per error (not at every retry): paused and silent, it would look lost."""
        text = f"{type(exc).__name__}: {exc}"[:300]
        new = self.sync_warned.get(key) != text
        # the traceback when the error is new for the binding, one line at each retry that fails the same way
        log.error("binding %s could not be synced (%s); it stays as it was and is retried on its next change or "
                  "within %g s", key, text, SYNC_RETRY, exc_info=exc if new else None)
        obj = self.bindings.get(key)
        if obj is None:
            return
        self.sync_failed[key] = now + SYNC_RETRY
        if new:
            self.sync_warned[key] = text
            out.append(Event(plan.binding_involved(binding_ref(obj)), "SyncFailed",
                             f"Atoll could not take this binding in ({text}); it stays as it is and is tried again "
                             f"at its next change or within {SYNC_RETRY:g} s (the controller's log has the traceback)",
                             "Warning"))

    def _still_wanted(self, item: Patch | Event) -> bool:
        """A write handed back after a failure is re-issued only if the engine still means it: a requeue
        that failed while the API was away must not pause a binding that has since been adopted as running
        (it would stay paused and holding for ever), nor an admission land on a job requeued since."""
        if not isinstance(item, Patch):
            return True
        job = self.engine.state.jobs.get(item.ref.key)
        if item.why in ("admit", "bind", "bind-status"):
            wanted = job is not None and job.state.holds_resources
        elif item.why in ("requeue", "giveup"):
            wanted = job is not None and not job.state.holds_resources
        else:                                   # pending: a waiting job, or one kept aside as invalid
            wanted = (job is not None and job.state is JobState.PENDING) or item.ref.key in self.invalid
        if not wanted:
            log.info("dropping a stale %s write for %s (the job is now %s)", item.why, item.ref.key,
                     job.state.value if job is not None else "unknown")
        return wanted

    def retry_later(self, item: Patch | Event) -> None:
        """An API write failed: carry it into the next step."""
        self.pending.append(item)
