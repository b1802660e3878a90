"""A plugin's error is the refusal of the job it failed on, not the end of the cycle.

Plugins are third-party code (entry points) and read user objects: one that raises on an odd job would, uncaught,
end ``Engine.cycle`` and with it ``atoll run``; restarted, the controller would meet the same job in the same state
and crash again, and no job of the fleet would be admitted any more. So an exception raised while one job is judged
(its admit, filter, score, place and preempt hooks, ``Engine._examine``) is contained there: that job stays pending
with a refusal naming the plugin and the error, is examined again ``RETRY_AFTER`` seconds later, or sooner when
capacity moves, as any refused job (the plugin may be fixed by a policy reload, or the error may have been
momentary), and the cycle goes on with the others. The refusal is never shared with the job's verdict-key group (it
has a ``retry_at``): the error may be the job's own. Every contained error is handed to the adapter with its
traceback (``CycleResult.plugin_errors``): the controller logs it and counts it (``atoll_plugin_errors_total``), the
simulator counts it in its summary.

Only per-job hooks are contained. A hook that judges no single job (``atoll_cycle_start``, queue order) still ends
the cycle: its state may be half updated with admissions already booked, and a restart rebuilding it from the API is
safer than carrying on. Errors raised by the engine's own code on the way (called from a plugin) are contained too
and blamed on that plugin; tests set ``STRICT`` so that no bug hides behind a refusal.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Optional

from engine.model import Job, Refusal

RETRY_AFTER = 60.0
"""Seconds until a job whose judging raised is examined again."""

STRICT = False
"""Raise instead of containing (the unit tests set it: a bug must fail them, not become a refusal)."""

_MESSAGE_MAX = 300


@dataclass(frozen=True)
class PluginError:
    """An exception contained while ``job_id`` was judged."""

    job_id: str
    plugin: str                 # the innermost plugin on the stack, "" when none was
    error: str                  # "TypeError: ...", shortened
    traceback: str


def contained(job: Job, exc: Exception, now: float, errors: list[PluginError]) -> Refusal:
    """``job``'s refusal for ``exc`` (raised while it was judged), noted in ``errors``; re-raised when ``STRICT``.
    The text has no time in it: it is written to the job once, not again at every retry that fails the same way."""
    if STRICT:
        raise exc
    plugin = _culprit(exc.__traceback__)
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > _MESSAGE_MAX:
        text = text[:_MESSAGE_MAX - 3] + "..."
    errors.append(PluginError(job.id, plugin, text, "".join(traceback.format_exception(exc))))
    who = f"plugin {plugin!r}" if plugin else "a plugin"
    return Refusal(f"{who} failed while judging this job ({text}); it is examined again within "
                   f"{RETRY_AFTER:g} s", plugin or "engine", retry_at=now + RETRY_AFTER)


def _culprit(tb: Optional[TracebackType]) -> str:
    """The name of the innermost plugin whose method is on the traceback (its frame's ``self``)."""
    from engine.plugin import Plugin

    name = ""
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, Plugin) and owner.name:
            name = owner.name
        tb = tb.tb_next
    return name
