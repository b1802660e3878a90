"""Config shared by the preempt plugins (not a plugin module): the protections every rule carries.

Each preempt plugin's schema lists the same keys (``PROTECTION_PROPERTIES`` is their one
definition; a test keeps the schema files equal to it), so a policy tunes them per rule.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Mapping, Optional

from engine.core.preempt import PreemptRule
from engine.model import Job
from plugins._placeutil import parse_duration

_DURATION = {"anyOf": [{"type": "number", "minimum": 0},
                       {"type": "string", "pattern": "^([0-9.]+h)?([0-9.]+m)?([0-9.]+s)?$"}]}

PROTECTION_PROPERTIES: dict[str, dict[str, Any]] = {
    "minRuntime": {**_DURATION, "default": "0s",
                   "description": "A job admitted less than this long ago is never a victim (seconds or a duration such as '5m'): no thrash of jobs that just started."},
    "maxPreemptions": {"type": "integer", "minimum": 0, "default": 3,
                       "description": "A job already preempted this many times is never a victim again (0: nothing is ever preempted)."},
    "gracePeriod": {**_DURATION, "default": "30s",
                    "description": "Termination grace the adapter gives a victim's pods before they are killed; its capacity is free once they are gone."},
    "nominationTimeout": {**_DURATION, "default": "5m",
                          "description": "The capacity victims free is held for their preemptor until they are gone, at most this long; then it is free for everyone."},
    "maxCandidates": {"type": "integer", "minimum": 1, "default": 2000,
                      "description": "Victim search bound: at most this many candidates are looked at per refused job (lowest rank first)."},
}


class Protections:
    """The parsed protection keys of one plugin's config."""

    def __init__(self, config: Mapping[str, Any], where: str) -> None:
        self.min_runtime = parse_duration(config["minRuntime"], f"{where}.minRuntime")
        self.max_preemptions = int(config["maxPreemptions"])
        self.grace_period = parse_duration(config["gracePeriod"], f"{where}.gracePeriod")
        self.nomination_timeout = parse_duration(config["nominationTimeout"], f"{where}.nominationTimeout")
        self.max_candidates = int(config["maxCandidates"])

    def rule(self, reason: str, plugin: str, victim_queues: Callable[[str], Optional[float]],
             allows: Optional[Callable[[Job], bool]] = None, scope: Optional[Hashable] = None,
             shared_scope: Optional[Hashable] = None, own_queues: frozenset[str] = frozenset(),
             reads_usage: bool = True) -> PreemptRule:
        return PreemptRule(reason, plugin, victim_queues, allows, min_runtime=self.min_runtime,
                           max_preemptions=self.max_preemptions, grace_period=self.grace_period,
                           nomination_timeout=max(self.nomination_timeout, self.grace_period),
                           max_candidates=self.max_candidates, scope=scope, shared_scope=shared_scope,
                           own_queues=own_queues, reads_usage=reads_usage)

    def key(self) -> tuple[float, int, float, float, int]:
        return (self.min_runtime, self.max_preemptions, self.grace_period, self.nomination_timeout,
                self.max_candidates)
