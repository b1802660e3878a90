"""The harness's fleet configuration, without a fleet: port blocks, overrides and precise errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from e2e.harness.config import DEFAULT_BASE_PORT, MAX_MEMBERS, ConfigError, load_config

EXAMPLE = Path(__file__).resolve().parent.parent / "fleet.example.yaml"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ATOLL_E2E_CONFIG", "ATOLL_E2E_MEMBERS", "ATOLL_E2E_BASE_PORT"):
        monkeypatch.delenv(var, raising=False)


def ports(base: int, members: int) -> list[int]:
    cfg = load_config(members=members, base_port=base)
    return [p for _, p in cfg.ports.table(cfg.members)]


def test_every_port_explicit_and_unique_within_a_fleet() -> None:
    used = ports(DEFAULT_BASE_PORT, MAX_MEMBERS)
    assert len(used) == len(set(used))
    assert not {2379, 2380, 6443, 8080, 8443, 10250, 10257, 10259} & set(used)


def test_second_fleet_port_block_never_collides_with_the_default() -> None:
    # the controller's fleet runs with ATOLL_E2E_BASE_PORT=33400 next to the default one at 31400
    assert not set(ports(DEFAULT_BASE_PORT, MAX_MEMBERS)) & set(ports(33400, MAX_MEMBERS))


def test_base_port_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOLL_E2E_BASE_PORT", "33400")
    cfg = load_config()
    assert cfg.ports.apiserver == 33410 and cfg.members[0].ports.apiserver == 33500


def test_bad_environment_integer_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOLL_E2E_MEMBERS", "member1 member2")
    with pytest.raises(ConfigError, match="ATOLL_E2E_MEMBERS"):
        load_config()


def test_example_config_overrides_one_member() -> None:
    cfg = load_config(EXAMPLE)
    assert [m.name for m in cfg.members] == ["member1", "member2", "member3"]
    m3 = cfg.members[2]
    assert m3.nodes.count == 1 and m3.nodes.allocatable["cpu"] == "64"
    assert m3.nodes.allocatable["memory"] == "256Gi"  # merged over the shared node group
    assert m3.nodes.labels["atoll.dev/pool"] == "cpu-only" and m3.cluster_labels["region"] == "eu"
    assert cfg.members[0].nodes.allocatable["nvidia.com/gpu"] == "8"


def test_unknown_override_key_is_named(tmp_path: Path) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text("members:\n  overrides:\n    member1:\n      nodes: {cuont: 3}\n")
    with pytest.raises(ConfigError, match=r"members\.overrides\.member1\.nodes: unknown keys \['cuont'\]"):
        load_config(f)
