"""Fleet configuration (members, kwok nodes, ports) from a small YAML file plus CLI/env overrides.

Every listening port is derived from one base port so a whole fleet moves with one setting
and never touches a default port (8080, 10257, 10259, 6443, 2379 ...). See ``Ports``.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_BASE_PORT = 31400
DEFAULT_NODE = {
    "count": 2,
    "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"},
    "labels": {"atoll.dev/pool": "default"},
}
MAX_MEMBERS = 30
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


class ConfigError(ValueError):
    """The fleet YAML or an override is invalid; the message names the field."""


@dataclass(frozen=True)
class NodeGroup:
    """``count`` kwok nodes that share allocatable and labels, named ``<member>-<name>-<i>``."""

    count: int
    allocatable: dict[str, str]
    labels: dict[str, str]
    name: str = "node"


@dataclass(frozen=True)
class MemberPorts:
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int


@dataclass(frozen=True)
class Member:
    """One member cluster: its name is also the Karmada Cluster name."""

    name: str
    index: int
    nodes: NodeGroup
    cluster_labels: dict[str, str]
    ports: MemberPorts
    extra_nodes: tuple[NodeGroup, ...] = ()          # more node shapes in the same member
    resource_models: tuple[dict[str, Any], ...] = ()  # the Cluster's spec.resourceModels (empty: Karmada's defaults)

    def node_groups(self) -> tuple[NodeGroup, ...]:
        return (self.nodes, *self.extra_nodes)

    def node_names(self) -> list[str]:
        return [f"{self.name}-{g.name}-{i}" for g in self.node_groups() for i in range(g.count)]

    def group_of(self, node: str) -> NodeGroup:
        for g in self.node_groups():
            if node.startswith(f"{self.name}-{g.name}-") and node.rsplit("-", 1)[-1].isdigit():
                return g
        raise KeyError(node)


@dataclass(frozen=True)
class Ports:
    """Host control-plane ports (base + offset); members use base + 100 + 10 * (index - 1)."""

    base: int

    @property
    def etcd(self) -> int: return self.base
    @property
    def etcd_peer(self) -> int: return self.base + 1
    @property
    def etcd_metrics(self) -> int: return self.base + 2
    @property
    def apiserver(self) -> int: return self.base + 10
    @property
    def aggregated_apiserver(self) -> int: return self.base + 11
    @property
    def webhook(self) -> int: return self.base + 12
    @property
    def webhook_health(self) -> int: return self.base + 13
    @property
    def webhook_metrics(self) -> int: return self.base + 14
    @property
    def controller_manager_metrics(self) -> int: return self.base + 15
    @property
    def controller_manager_health(self) -> int: return self.base + 16
    @property
    def scheduler_metrics(self) -> int: return self.base + 17
    @property
    def scheduler_health(self) -> int: return self.base + 18
    @property
    def kube_controller_manager(self) -> int: return self.base + 19

    def member(self, index: int) -> MemberPorts:
        p = self.base + 100 + 10 * (index - 1)
        return MemberPorts(apiserver=p, controller_manager=p + 1, scheduler=p + 2, kwok=p + 3)

    def table(self, members: list[Member]) -> list[tuple[str, int]]:
        """(what, port) rows for ``fleet status`` and the README."""
        rows = [("etcd client", self.etcd), ("etcd peer", self.etcd_peer), ("etcd metrics", self.etcd_metrics),
                ("karmada-apiserver", self.apiserver), ("karmada-aggregated-apiserver", self.aggregated_apiserver),
                ("karmada-webhook", self.webhook), ("karmada-webhook healthz", self.webhook_health),
                ("karmada-webhook metrics", self.webhook_metrics),
                ("karmada-controller-manager metrics", self.controller_manager_metrics),
                ("karmada-controller-manager healthz", self.controller_manager_health),
                ("karmada-scheduler metrics", self.scheduler_metrics),
                ("karmada-scheduler healthz", self.scheduler_health),
                ("host kube-controller-manager", self.kube_controller_manager)]
        for m in members:
            rows += [(f"{m.name} kube-apiserver", m.ports.apiserver),
                     (f"{m.name} kube-controller-manager", m.ports.controller_manager),
                     (f"{m.name} kube-scheduler", m.ports.scheduler), (f"{m.name} kwok", m.ports.kwok)]
        return rows


@dataclass(frozen=True)
class FleetConfig:
    """Everything ``fleet up`` needs to know besides the binaries."""

    ports: Ports
    members: list[Member]
    cluster_status_update_frequency: str = "10s"
    karmada_feature_gates: str = ""
    raw: dict[str, Any] = field(default_factory=dict)


def _node_group(raw: Any, where: str, base: dict[str, Any]) -> NodeGroup:
    merged = copy.deepcopy(base)
    if raw is not None:
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
        unknown = set(raw) - {"count", "allocatable", "labels"}
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)} (allowed: count, allocatable, labels)")
        for key in ("allocatable", "labels"):
            if key in raw:
                if not isinstance(raw[key], dict):
                    raise ConfigError(f"{where}.{key}: expected a mapping")
                merged[key] = {**merged[key], **raw[key]}
        if "count" in raw:
            merged["count"] = raw["count"]
    count = merged["count"]
    if not isinstance(count, int) or count < 0:
        raise ConfigError(f"{where}.count: expected a non-negative integer, got {count!r}")
    alloc = {str(k): str(v) for k, v in merged["allocatable"].items() if v is not None}
    labels = {str(k): str(v) for k, v in merged["labels"].items() if v is not None}
    return NodeGroup(count=count, allocatable=alloc, labels=labels)


def _extra_nodes(raw: Any, where: str, base: dict[str, Any]) -> tuple[NodeGroup, ...]:
    """``extraNodes``: a list of node groups, each merged over the member's ``nodes`` and named by ``name``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: expected a list of node groups with a name")
    out = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].isidentifier():
            raise ConfigError(f"{at}.name: expected a name of letters, digits and _ (it names the nodes)")
        group = _node_group({k: v for k, v in item.items() if k != "name"}, at, base)
        out.append(NodeGroup(group.count, group.allocatable, group.labels, item["name"]))
    names = [g.name for g in out]
    if len(set(names)) != len(names) or "node" in names:
        raise ConfigError(f"{where}: group names must be unique and not 'node' (the main group), got {names}")
    return tuple(out)


def _resource_models(raw: Any, where: str) -> tuple[dict[str, Any], ...]:
    """A Cluster's ``spec.resourceModels`` as Karmada takes it (its aggregated apiserver validates the rest)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(g, dict) for g in raw):
        raise ConfigError(f"{where}: expected a list of {{grade, ranges}} mappings (Karmada's spec.resourceModels)")
    return tuple(copy.deepcopy(raw))


def _env_int(name: str) -> int:
    """An integer environment variable (0 when unset); a bad value names the variable."""
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else 0
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r}: expected an integer") from None


def ephemeral_ports(source: Path = EPHEMERAL_RANGE_FILE) -> range:
    """The ports the kernel hands to outgoing connections: a listener there can find its port taken at random
    (a test's client socket took the etcd port of a second fleet in CI), so fleets must stay outside it."""
    try:
        low, high = (int(v) for v in source.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999                          # Linux's default
    return range(low, high + 1)


def check_outside_ephemeral(ports: list[int], ephemeral: range) -> None:
    """Refuse a port block that overlaps the ephemeral range, naming both and the highest safe base."""
    clash = [p for p in ports if p in ephemeral]
    if clash:
        span = max(ports) - min(ports)
        raise ConfigError(
            f"basePort: ports {min(ports)}-{max(ports)} overlap the kernel's ephemeral port range "
            f"{ephemeral.start}-{ephemeral.stop - 1} (net.ipv4.ip_local_port_range), where outgoing connections "
            f"take ports at random and a fleet fails to start now and then; choose a base port between 1025 and "
            f"{ephemeral.start - 1 - span} (e.g. ATOLL_E2E_BASE_PORT=29400)")


def load_config(path: Path | None = None, members: int | None = None, nodes: int | None = None,
                base_port: int | None = None) -> FleetConfig:
    """Read the YAML (``ATOLL_E2E_CONFIG`` if no path) and apply overrides (flags, then env)."""
    if path is None and os.environ.get("ATOLL_E2E_CONFIG"):
        path = Path(os.environ["ATOLL_E2E_CONFIG"])
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"cannot read fleet config {path}: {e}") from e
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
    mraw = raw.get("members", {}) or {}
    if not isinstance(mraw, dict):
        raise ConfigError("members: expected a mapping with count/prefix/nodes/overrides")
    if members is None and os.environ.get("ATOLL_E2E_MEMBERS"):
        members = _env_int("ATOLL_E2E_MEMBERS")
    count = members if members is not None else mraw.get("count", 2)
    if not isinstance(count, int) or not 1 <= count <= MAX_MEMBERS:
        raise ConfigError(f"members.count: expected 1..{MAX_MEMBERS}, got {count!r}")
    prefix = str(mraw.get("prefix", "member"))
    base_nodes = _node_group(mraw.get("nodes"), "members.nodes", DEFAULT_NODE)
    if nodes is not None:
        base_nodes = NodeGroup(nodes, base_nodes.allocatable, base_nodes.labels)
    base_dict = {"count": base_nodes.count, "allocatable": base_nodes.allocatable, "labels": base_nodes.labels}
    overrides = mraw.get("overrides", {}) or {}
    port = base_port or _env_int("ATOLL_E2E_BASE_PORT") or int(raw.get("basePort", DEFAULT_BASE_PORT))
    if not 1024 < port < 65000 - 100 - 10 * MAX_MEMBERS:
        raise ConfigError(f"basePort: {port} leaves no room for the fleet's ports")
    ports = Ports(port)
    out: list[Member] = []
    for i in range(1, count + 1):
        name = f"{prefix}{i}"
        ov = overrides.get(name, {}) or {}
        unknown = set(ov) - {"nodes", "clusterLabels", "extraNodes", "resourceModels"}
        if unknown:
            raise ConfigError(f"members.overrides.{name}: unknown keys {sorted(unknown)}")
        group = _node_group(ov.get("nodes"), f"members.overrides.{name}.nodes", base_dict)
        labels = {"atoll.dev/member": name, **{str(k): str(v) for k, v in (ov.get("clusterLabels") or {}).items()}}
        group_dict = {"count": group.count, "allocatable": group.allocatable, "labels": group.labels}
        extra = _extra_nodes(ov.get("extraNodes", mraw.get("extraNodes")), f"members.overrides.{name}.extraNodes",
                             group_dict)
        models = _resource_models(ov.get("resourceModels", mraw.get("resourceModels")),
                                  f"members.overrides.{name}.resourceModels")
        out.append(Member(name=name, index=i, nodes=group, cluster_labels=labels, ports=ports.member(i),
                          extra_nodes=extra, resource_models=models))
    for name in overrides:
        if name not in {m.name for m in out}:
            raise ConfigError(f"members.overrides.{name}: no such member (members are {[m.name for m in out]})")
    return FleetConfig(ports=ports, members=out,
                       cluster_status_update_frequency=str(raw.get("clusterStatusUpdateFrequency", "10s")),
                       karmada_feature_gates=str(raw.get("karmadaFeatureGates", "")), raw=raw)
