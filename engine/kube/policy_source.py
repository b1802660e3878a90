"""Policy text (the ConfigMap's ``policy.yaml``) -> what the controller runs: pipeline, selector, mode."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import InputError
from engine.kube.webhook import ManagedSelector, selector_from_policy
from engine.pipeline import Pipeline
from engine.policy import load_policy_text

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
    policy = load_policy_text(text, source)
    mode = policy.placement_mode or "gate"
    if mode not in MODES:
        raise InputError(f"placementMode must be one of {list(MODES)}, got {mode!r}", f"{source}: spec.placementMode")
    return RunningPolicy(policy.name, policy.digest, policy.pipeline, selector_from_policy(policy), mode)
