"""A binding that bypassed Atoll's webhook is said so, part of the Controller (a mixin: same state, own idea).

The webhook pauses every managed binding at CREATE (docs/webhook.md). One it did not pause (created while the
webhook was down with ``failurePolicy: Ignore``, or before Atoll was installed) reaches the controller unpaused
and without Atoll's admission stamp (``atoll.dev/admitted-at``), which every resume or bind of Atoll's writes:

* adopted (``Resumed._adopt``; gate mode, or bind mode when it is addressed to ``schedulerName: atoll`` and
  already placed): Atoll counts its usage from then on, but karmada-scheduler placed it without Atoll's
  admission (no queue order, quota or fair share decided it);
* ignored (bind mode, left to karmada-scheduler: ``Controller._sync``): not Atoll's to schedule at all, and its
  usage is in no queue.

Silent, either looks like Atoll at work. So each is told once: a Warning Event ``NotGated`` on the binding and
``atoll_bindings_not_gated_total{handling}``. Once per binding while it exists, not at every resync (``not_gated``:
the keys told, dropped when the binding is deleted, so it holds no more than the bindings there are). A binding
whose workload already ended holds nothing and is not told. One the webhook paused (its stamp) but someone else
resumed is told the same, in those words. A restarted controller keeps no record and tells the bindings still
running again.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from engine.kube import metrics, plan
from engine.kube.bindings import binding_ref
from engine.kube.plan import Event, Patch
from engine.kube.translate import meta
from engine.kube.webhook import PAUSED_ANNOTATION

log = logging.getLogger("atoll.controller")

Obj = dict[str, Any]
NOT_GATED = "NotGated"


class NotGated:
    not_gated: set[str]

    def _not_gated(self, key: str, obj: Obj, queue: str | None, out: list[Patch | Event]) -> None:
        """Tell once that ``key`` was not paused by the webhook: adopted into ``queue``'s usage, or (None) ignored."""
        if key in self.not_gated:
            return
        self.not_gated.add(key)
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        annotations = meta(obj).get("annotations")
        if isinstance(annotations, Mapping) and PAUSED_ANNOTATION in annotations:
            how = "paused by Atoll's webhook but resumed by someone else, not by Atoll"
        else:
            how = "not paused by Atoll's webhook (it was down with failurePolicy Ignore, or the binding predates Atoll)"
        if (spec or {}).get("schedulerName") == plan.SCHEDULER_NAME:
            placed = "its spec.clusters were written without Atoll's admission"
        else:
            placed = "karmada-scheduler places it without Atoll's admission"
        if queue is not None:
            counted = f"Atoll counts its usage (queue {queue}) from now on"
        else:
            counted = (f"Atoll does not count its usage in any queue (in bind mode it schedules only the bindings its "
                       f"webhook paused or that are addressed to schedulerName {plan.SCHEDULER_NAME})")
        message = f"{how}: {placed}; {counted}"
        metrics.NOT_GATED.labels("adopted" if queue is not None else "ignored").inc()
        log.warning("%s: %s", key, message)
        out.append(Event(plan.binding_involved(binding_ref(obj)), NOT_GATED, message, "Warning"))
