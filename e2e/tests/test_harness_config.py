"""The harness's fleet configuration, without a fleet: port blocks, overrides and precise errors."""
from __future__ import annotations

from pathlib import Path

import pytest

import re

from e2e.harness.config import (DEFAULT_BASE_PORT, MAX_MEMBERS, ConfigError, check_outside_ephemeral, ephemeral_ports,
                                load_config)
from e2e.harness.fleet import Fleet
from e2e.tests.test_lifecycle import OFFSET
from e2e.tests.webhook_support import LISTEN_PORTS, free_port

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
    # a second fleet (e.g. CI's, or one per engineer) runs 1000 below the default one at 31400
    assert not set(ports(DEFAULT_BASE_PORT, MAX_MEMBERS)) & set(ports(DEFAULT_BASE_PORT - 1000, MAX_MEMBERS))


def test_base_port_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOLL_E2E_BASE_PORT", "29400")
    cfg = load_config()
    assert cfg.ports.apiserver == 29410 and cfg.members[0].ports.apiserver == 29500


def ci_base_port() -> int:
    found = re.search(r"ATOLL_E2E_BASE_PORT \?= (\d+)", (Path(__file__).parents[2] / "Makefile").read_text())
    assert found, "the Makefile sets CI's port block"
    return int(found.group(1))


@pytest.mark.parametrize("ephemeral", [range(32768, 61000), ephemeral_ports()], ids=["linux-default", "this-machine"])
def test_shipped_port_blocks_stay_out_of_the_ephemeral_range(ephemeral: range) -> None:
    # the default fleet, CI's fleet, and the second fleet test_lifecycle starts next to either
    for base in (DEFAULT_BASE_PORT, ci_base_port()):
        check_outside_ephemeral(ports(base, 2), ephemeral)
        check_outside_ephemeral(ports(base + OFFSET, 1), ephemeral)
        assert not set(ports(base, 2)) & set(ports(base + OFFSET, 1))


def test_ephemeral_range_read_from_the_kernel_file(tmp_path: Path) -> None:
    f = tmp_path / "ip_local_port_range"
    f.write_text("40000\t50000\n")
    assert ephemeral_ports(f) == range(40000, 50001)
    assert ephemeral_ports(tmp_path / "missing") == range(32768, 61000)


def test_up_refuses_a_block_in_the_ephemeral_range_before_starting_anything(tmp_path: Path) -> None:
    low = ephemeral_ports().start
    fleet = Fleet(load_config(members=1, base_port=low), tmp_path / "state")
    with pytest.raises(ConfigError, match=rf"ports {low}-{low + 103} overlap the kernel's ephemeral port range"):
        fleet.up()
    assert not (tmp_path / "state" / "logs").exists()


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


def test_ports_for_test_processes_stay_clear_of_fleets_and_the_ephemeral_range() -> None:
    taken = set(ports(DEFAULT_BASE_PORT, MAX_MEMBERS)) | set(ports(ci_base_port(), MAX_MEMBERS))
    assert not taken & set(LISTEN_PORTS)
    assert not set(LISTEN_PORTS) & set(ephemeral_ports())
    assert free_port() in LISTEN_PORTS


SHAPES = Path(__file__).resolve().parent.parent / "fleet.gpu-shapes.yaml"


def test_gpu_shapes_config_declares_node_groups_and_resource_models() -> None:
    from e2e.harness import member
    cfg = load_config(SHAPES)
    m1, m2 = cfg.members
    assert m1.node_names() == ["member1-node-0", "member1-node-1", "member1-cpu-0"]
    assert m1.group_of("member1-cpu-0").allocatable == {"cpu": "16", "memory": "64Gi", "pods": "110",
                                                         "nvidia.com/gpu": "0"}      # merged over the member's nodes
    assert member.node_status(m1, "member1-node-1")["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert m2.node_names() == ["member2-node-0", "member2-node-1"] and m2.nodes.labels["atoll.dev/pool"] == "b"
    objs = member.join_objects(m2, _FakePki())  # type: ignore[arg-type]
    cluster = [o for o in objs if o["kind"] == "Cluster"][0]
    assert [g["grade"] for g in cluster["spec"]["resourceModels"]] == list(range(9))


class _FakePki:
    def token(self) -> str:
        return "t"

    def ca_pem(self) -> bytes:
        return b"ca"


def test_bad_extra_nodes_and_models_are_named(tmp_path: Path) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text("members:\n  overrides:\n    member1:\n      extraNodes: [{count: 1}]\n")
    with pytest.raises(ConfigError, match=r"members\.overrides\.member1\.extraNodes\[0\]\.name"):
        load_config(f)
    f.write_text("members:\n  resourceModels: {grade: 0}\n")
    with pytest.raises(ConfigError, match=r"members\.overrides\.member1\.resourceModels: expected a list"):
        load_config(f)
