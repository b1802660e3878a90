"""Small helpers shared by the queue/order/admit plugins (not a plugin module: no PLUGINS).

Defaults live in each plugin class (``DEFAULTS``) *and* in its JSON schema; a test keeps
them equal, so a plugin built with ``{}`` (tests, a policy without config) behaves exactly
like one built from a validated config with the schema's defaults applied.
"""

from __future__ import annotations

from typing import Any, Mapping

from engine.resources import format_quantity


def settings(config: Mapping[str, Any] | None, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` overlaid with ``config`` (unknown keys are the schema's business, not ours)."""
    merged = dict(defaults)
    merged.update(config or {})
    return merged


def qty(resource: str, amount: int) -> str:
    """``cpu 1500`` -> ``1500m``, ``cpu 2000`` -> ``2``: the same units users wrote."""
    return format_quantity(resource, amount)
