"""Policy text (the ConfigMap's ``policy.yaml``) -> what the controller runs: pipeline, selector, mode.

``engine.policy`` (JSON Schema, plugins, CEL) is imported lazily: when it is not installed in this build the
controller still runs with an empty pipeline (FIFO; the whole job in the first cluster where it fits) and
reads ``managedWorkloads``/``placementMode`` itself, and says so in its log.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import yaml

from engine.errors import InputError
from engine.kube.webhook import ManagedSelector, selector_from_policy
from engine.pipeline import Pipeline

log = logging.getLogger("atoll.policy")
MODES = ("gate", "bind")


@dataclass(frozen=True)
class RunningPolicy:
    name: str
    digest: str
    pipeline: Pipeline
    selector: ManagedSelector
    mode: str


def load(text: str, source: str) -> RunningPolicy:
    """Validate and build; raises InputError naming ``source`` and the field on any problem."""
    try:
        from engine.policy import load_policy_text  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return _fallback(text, source)
    policy = load_policy_text(text, source)
    mode = str(getattr(policy, "placement_mode", "gate") or "gate")
    if mode not in MODES:
        raise InputError(f"placementMode must be one of {list(MODES)}, got {mode!r}", f"{source}: spec.placementMode")
    return RunningPolicy(str(getattr(policy, "name", "")), str(getattr(policy, "digest", _digest(text))),
                         policy.pipeline, selector_from_policy(policy), mode)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _fallback(text: str, source: str) -> RunningPolicy:
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", source) from None
    if not isinstance(doc, dict):
        raise InputError("policy must be a mapping", source)
    spec: Any = doc.get("spec", {})
    if not isinstance(spec, dict):
        raise InputError("spec must be a mapping", f"{source}: spec")
    mode = str(spec.get("placementMode", "gate"))
    if mode not in MODES:
        raise InputError(f"placementMode must be one of {list(MODES)}, got {mode!r}", f"{source}: spec.placementMode")
    managed = spec.get("managedWorkloads")
    selector = selector_from_policy(managed) if managed else ManagedSelector()
    name = str((doc.get("metadata") or {}).get("name", "")) if isinstance(doc.get("metadata"), dict) else ""
    log.warning("engine.policy is not available in this build: %s runs with an empty pipeline "
                "(FIFO, whole job in the first cluster where it fits)", source)
    return RunningPolicy(name, _digest(text), Pipeline({}), selector, mode)
