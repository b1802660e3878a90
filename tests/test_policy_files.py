"""Every shipped policy in policies/ validates with the installed plugins (and the CLI says OK)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.plugin import discover
from engine.policy import load_policy
from engine.yaml_source import load_yaml

ROOT = Path(__file__).resolve().parents[1]
POLICIES = sorted((ROOT / "policies").glob("*.yaml"))
SHIPPED = {"default.yaml", "karmada-fifo.yaml", "volcano-global.yaml"}
# The built-in plugin names fixed in the team brief, written on branches plugins-queue and plugins-place.
# Only these may be missing (skip until merged); any other unknown name is a real error.
TEAM_PLUGINS = {"queue-resolve", "job-priority", "queue-priority", "drf", "fifo", "round-robin", "queue-state",
                "capacity", "gpu-capacity", "gang", "volcano-capacity", "cluster-filter", "cluster-score",
                "binpack", "spread", "karmada-divided", "requeue-backoff"}


def missing_plugins(path: Path) -> list[str]:
    """Plugin names the file lists that no installed package provides (teammates' branches not merged)."""
    doc = load_yaml(path.read_text(), str(path))
    names = {name for names in doc["spec"]["pipeline"].values() for name in names}
    known = set(discover().names())
    return sorted(names - known)


def test_the_three_shipped_policies_exist() -> None:
    assert SHIPPED <= {p.name for p in POLICIES}


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_file_validates(path: Path) -> None:
    missing = missing_plugins(path)
    assert set(missing) <= TEAM_PLUGINS, f"{path.name} names plugins nobody is writing: {set(missing) - TEAM_PLUGINS}"
    if missing:
        pytest.skip(f"{path.name}: plugins not merged yet: {', '.join(missing)} "
                    "(branches plugins-queue / plugins-place); the lead removes this skip at merge")
    policy = load_policy(path)
    assert policy.name == path.stem
    assert policy.placement_mode in ("gate", "bind")
    assert any(policy.pipeline.describe().values())
