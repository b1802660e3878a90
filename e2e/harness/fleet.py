"""Bring the whole fleet up, report its status and take it down.

``up`` is ordered so every step waits (with a deadline) on the thing the next step needs:
etcd -> karmada-apiserver -> CRDs -> karmada-webhook -> webhook configurations ->
aggregated apiserver + APIService -> controllers/scheduler -> members (apiserver, CRDs,
nodes, kwok, scheduler, controller-manager) -> join (Secret + Cluster) -> Clusters Ready.
A failed wait names the component and its log file and prints the log's tail.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import build, host, member
from .config import FleetConfig, check_outside_ephemeral, ephemeral_ports
from .kube import Kube, KubeError, wait_for
from .pki import Pki, ensure_pki
from .procs import Supervisor, port_in_use, rss_kib, tail

STARTUP_TIMEOUT = float(os.environ.get("ATOLL_E2E_STARTUP_TIMEOUT", "120"))


class FleetError(RuntimeError):
    """The fleet could not be brought up or is unhealthy; the message says which component."""


def state_root() -> Path:
    return Path(os.environ.get("ATOLL_E2E_STATE", "/tmp/atoll-e2e"))


@dataclass(frozen=True)
class FleetInfo:
    """What a running fleet offers to tests and people: kubeconfigs and where things are."""

    state_dir: Path
    host_kubeconfig: Path
    member_kubeconfigs: dict[str, Path]
    host_server: str
    member_servers: dict[str, str]
    ca_file: Path
    token: str
    log_dir: Path
    member_nodes: dict[str, dict[str, Any]]  # name -> {count, allocatable, labels} it was started with
    base_port: int

    @classmethod
    def load(cls, state_dir: Path | None = None) -> FleetInfo:
        d = state_dir or state_root()
        raw = json.loads((d / "fleet.json").read_text())
        return cls(state_dir=d, host_kubeconfig=Path(raw["host_kubeconfig"]),
                   member_kubeconfigs={k: Path(v) for k, v in raw["member_kubeconfigs"].items()},
                   host_server=raw["host_server"], member_servers=raw["member_servers"],
                   ca_file=Path(raw["ca_file"]), token=Pki(d / "pki").token(), log_dir=d / "logs",
                   member_nodes=raw.get("member_nodes", {}),
                   base_port=int(raw.get("base_port") or raw["ports"]["etcd client"]))

    def host(self) -> Kube:
        return Kube(self.host_server, self.ca_file, self.token, "karmada-apiserver")

    def member(self, name: str) -> Kube:
        return Kube(self.member_servers[name], self.ca_file, self.token, f"{name} kube-apiserver")


def write_kubeconfig(path: Path, name: str, server: str, pki: Pki) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": name,
           "clusters": [{"name": name, "cluster": {
               "server": server, "certificate-authority-data": base64.b64encode(pki.ca_pem()).decode()}}],
           "users": [{"name": "atoll-e2e-admin", "user": {"token": pki.token()}}],
           "contexts": [{"name": name, "context": {"cluster": name, "user": "atoll-e2e-admin"}}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


class Fleet:
    """Orchestrates one fleet in one state directory."""

    def __init__(self, cfg: FleetConfig, state_dir: Path | None = None) -> None:
        self.cfg = cfg
        self.state = state_dir or state_root()
        self.sup = Supervisor(self.state)

    # ---- helpers -------------------------------------------------------------------------------
    def _wait(self, component: str, what: str, check: Any, timeout: float = STARTUP_TIMEOUT) -> Any:
        def guarded() -> Any:
            for name in self.sup.recorded():
                self.sup.check_alive(name)
            return check()
        try:
            return wait_for(what, guarded, timeout, hint=f"component {component}, log {self.sup.log_path(component)}")
        except RuntimeError as e:  # another component died: its own log tail is in the message
            raise FleetError(f"while waiting for {what}: {e}") from None
        except TimeoutError as e:
            log = self.sup.log_path(component)
            raise FleetError(f"{e}\n--- tail of {log} ---\n{tail(log, 30)}") from None

    def _start(self, name: str, argv: list[str]) -> None:
        print(f"[fleet up] start {name}", flush=True)
        self.sup.start(name, argv)

    def _apply_all(self, kube: Kube, objs: list[dict[str, Any]], component: str) -> None:
        def go() -> bool:
            for o in objs:
                kube.apply(o)
            return True
        self._wait(component, f"{kube.name} to accept {len(objs)} objects", go, timeout=60)

    # ---- lifecycle -----------------------------------------------------------------------------
    def running_components(self) -> list[str]:
        return [n for n in self.sup.recorded() if self.sup.alive(n)]

    def up(self) -> FleetInfo:
        """Start a fresh fleet (wiping old state); if one is already healthy here, reuse it."""
        if self.running_components():
            problems = self.status_problems()
            if not problems:
                print(f"[fleet up] fleet in {self.state} is already running and healthy", flush=True)
                return FleetInfo.load(self.state)
            raise FleetError(f"a fleet is partly running in {self.state} ({'; '.join(problems)}); "
                             "run `e2e/fleet down` first")
        check_outside_ephemeral([port for _, port in self.cfg.ports.table(self.cfg.members)], ephemeral_ports())
        art = build.require()
        busy = [f"{what} :{port}" for what, port in self.cfg.ports.table(self.cfg.members) if port_in_use(port)]
        if busy:
            raise FleetError(f"ports already in use on 127.0.0.1: {', '.join(busy)}; another fleet or program "
                             "holds them (stop it, or set ATOLL_E2E_BASE_PORT / basePort)")
        t0 = time.monotonic()
        for sub in ("etcd", "logs", "pids", "kubeconfig", "webhook-certs", "kwok"):
            shutil.rmtree(self.state / sub, ignore_errors=True)
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "logs").mkdir()
        pki = ensure_pki(self.state / "pki")
        try:
            info = self._up(art, pki)
        except BaseException:
            print("[fleet up] failed; stopping what was started (logs kept in "
                  f"{self.state / 'logs'})", flush=True)
            try:
                self.sup.stop_all()
            except RuntimeError as e:  # report, but keep the original failure as the error
                print(f"[fleet up] {e}; run `e2e/fleet down` again", flush=True)
            raise
        print(f"[fleet up] ready in {time.monotonic() - t0:.0f}s; `e2e/fleet env` prints KUBECONFIG lines",
              flush=True)
        return info

    def _up(self, art: build.Artifacts, pki: Pki) -> FleetInfo:
        cfg, p = self.cfg, self.cfg.ports
        kc_dir = self.state / "kubeconfig"
        host_server = f"https://127.0.0.1:{p.apiserver}"
        host_kc = write_kubeconfig(kc_dir / "karmada-apiserver.yaml", "karmada-apiserver", host_server, pki)
        member_kcs = {m.name: write_kubeconfig(kc_dir / f"{m.name}.yaml", m.name,
                                               f"https://127.0.0.1:{m.ports.apiserver}", pki) for m in cfg.members}
        info_raw = {"host_kubeconfig": str(host_kc), "member_kubeconfigs": {k: str(v) for k, v in member_kcs.items()},
                    "host_server": host_server,
                    "member_servers": {m.name: f"https://127.0.0.1:{m.ports.apiserver}" for m in cfg.members},
                    "ca_file": str(pki.ca_crt), "webhook_url": f"https://127.0.0.1:{p.webhook}",
                    "ports": dict(cfg.ports.table(cfg.members)), "base_port": cfg.ports.base,
                    "members": [m.name for m in cfg.members],
                    "member_nodes": {m.name: {"count": m.nodes.count, "allocatable": m.nodes.allocatable,
                                              "labels": m.nodes.labels, "names": m.node_names()}
                                     for m in cfg.members}}
        (self.state / "fleet.json").write_text(json.dumps(info_raw, indent=2) + "\n")
        info = FleetInfo.load(self.state)

        self._start("etcd", host.etcd_argv(art, cfg, self.state / "etcd"))
        self._start("karmada-apiserver", host.karmada_apiserver_argv(art, cfg, pki))
        for m in cfg.members:  # member apiservers start in parallel with the host bootstrap
            self._start(f"{m.name}-kube-apiserver", member.member_apiserver_argv(art, cfg, pki, m))
        hk = info.host()
        self._wait("karmada-apiserver", "karmada-apiserver /readyz", lambda: hk.healthy())
        webhook_url = f"https://127.0.0.1:{p.webhook}"
        crds = host.karmada_crds(art, pki, webhook_url) + host.volcano_crds(art)
        self._apply_all(hk, host.namespaces() + crds, "karmada-apiserver")
        self._wait("karmada-apiserver", "Karmada and Volcano CRDs Established",
                   lambda: all(_crd_established(hk, c["metadata"]["name"]) for c in crds))
        cert_dir = self.state / "webhook-certs"
        cert_dir.mkdir(exist_ok=True)
        shutil.copy(pki.serving_crt, cert_dir / "tls.crt")
        shutil.copy(pki.serving_key, cert_dir / "tls.key")
        self._start("karmada-webhook", host.webhook_argv(art, cfg, host_kc, cert_dir))
        self._start("karmada-aggregated-apiserver", host.aggregated_apiserver_argv(art, cfg, pki, host_kc))
        self._start("kube-controller-manager", host.kube_controller_manager_argv(
            art, host_kc, p.kube_controller_manager, pki, host.HOST_KCM_CONTROLLERS))
        self._wait("karmada-webhook", "karmada-webhook serving on 127.0.0.1",
                   lambda: _https_up(hk, webhook_url, pki))
        self._apply_all(hk, host.webhook_configurations(art, pki, webhook_url), "karmada-webhook")
        self._apply_all(hk, host.aggregated_apiservice(cfg, pki), "karmada-aggregated-apiserver")
        self._wait("karmada-aggregated-apiserver", "APIService v1alpha1.cluster.karmada.io Available",
                   lambda: _condition(hk.get("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.cluster.karmada.io"),
                                      "Available"))
        self._start("karmada-controller-manager", host.controller_manager_argv(art, cfg, host_kc))
        self._start("karmada-scheduler", host.scheduler_argv(art, cfg, host_kc))

        kwok_cfg = member.write_kwok_config(art, self.state / "kwok" / "kwok.yaml") if cfg.members else None
        for m in cfg.members:
            mk = info.member(m.name)
            comp = f"{m.name}-kube-apiserver"
            self._wait(comp, f"{m.name} kube-apiserver /readyz", lambda mk=mk: mk.healthy())
            self._apply_all(mk, host.volcano_crds(art), comp)
            for node in member.nodes(m):
                self._apply_all(mk, [node], comp)
                self._wait(comp, f"status of node {node['metadata']['name']}",
                           lambda mk=mk, n=node["metadata"]["name"]: mk.apply_status(member.node_status(m, n)))
            assert kwok_cfg is not None
            self._start(f"{m.name}-kwok", member.kwok_argv(art, m, member_kcs[m.name], kwok_cfg, pki))
            self._start(f"{m.name}-kube-scheduler", member.scheduler_argv(art, m, member_kcs[m.name]))
            self._start(f"{m.name}-kube-controller-manager",
                        member.controller_manager_argv(art, pki, m, member_kcs[m.name]))
        for m in cfg.members:
            mk = info.member(m.name)
            self._wait(f"{m.name}-kwok", f"{m.name}: {len(m.node_names())} kwok nodes Ready",
                       lambda mk=mk, m=m: _nodes_ready(mk, m.node_names()))
        # karmada-controller-manager registers only a liveness check (cmd/controller-manager/app:
        # LivenessEndpointName /healthz, no AddReadyzCheck), so controller-runtime serves no /readyz.
        self._wait("karmada-controller-manager", "karmada-controller-manager /healthz",
                   lambda: _http_ok(f"http://127.0.0.1:{p.controller_manager_health}/healthz"))
        self._wait("karmada-scheduler", "karmada-scheduler /healthz",
                   lambda: _http_ok(f"http://127.0.0.1:{p.scheduler_health}/healthz"))
        for m in cfg.members:
            self._apply_all(hk, member.join_objects(m, pki), "karmada-aggregated-apiserver")
        for m in cfg.members:
            self._wait("karmada-controller-manager", f"Cluster {m.name} Ready with resourceSummary",
                       lambda m=m: _cluster_ready(hk, m.name))
        return info

    def down(self) -> list[str]:
        """Stop every component; returns only when all of them are gone (else FleetError)."""
        try:
            return self.sup.stop_all()
        except RuntimeError as e:
            raise FleetError(str(e)) from None

    def status_problems(self) -> list[str]:
        """Empty when every recorded component runs and the host and member apiservers are ready."""
        problems = [f"{n} not running (log {self.sup.log_path(n)})" for n in self.sup.recorded()
                    if not self.sup.alive(n)]
        if not self.sup.recorded():
            return ["no fleet recorded"]
        try:
            info = FleetInfo.load(self.state)
        except (OSError, ValueError, KeyError) as e:
            return problems + [f"cannot read {self.state / 'fleet.json'}: {e}"]
        if not info.host().healthy():
            problems.append("karmada-apiserver /readyz not ok")
            return problems
        try:
            for name in info.member_servers:
                if not _cluster_ready(info.host(), name):
                    problems.append(f"Cluster {name} not Ready")
        except KubeError as e:
            problems.append(str(e))
        return problems

    def status_lines(self) -> list[str]:
        lines = []
        total = 0
        for n in self.sup.recorded():
            proc = self.sup.get(n)
            rss = rss_kib(proc.pid) if proc else 0
            total += rss
            lines.append(f"  {n:40s} {'pid ' + str(proc.pid) if proc else 'NOT RUNNING':12s} "
                         f"rss {rss / 1024:7.0f} MiB  log {self.sup.log_path(n)}")
        lines.append(f"  total rss {total / 1024:.0f} MiB")
        return lines


def _condition(obj: dict[str, Any] | None, ctype: str) -> bool:
    for c in (obj or {}).get("status", {}).get("conditions", []) or []:
        if c.get("type") == ctype:
            return c.get("status") == "True"
    return False


def _crd_established(k: Kube, name: str) -> bool:
    return _condition(k.get_or_none(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
                      "Established")


def _nodes_ready(k: Kube, names: list[str]) -> bool:
    return all(_condition(k.get_or_none(f"/api/v1/nodes/{n}"), "Ready") for n in names)


def _cluster_ready(k: Kube, name: str) -> bool:
    c = k.get_or_none(f"/apis/cluster.karmada.io/v1alpha1/clusters/{name}")
    return _condition(c, "Ready") and bool((c or {}).get("status", {}).get("resourceSummary", {}).get("allocatable"))


def _http_ok(url: str) -> bool:
    import urllib.request
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _https_up(k: Kube, url: str, pki: Pki) -> bool:
    """True once a TLS server answers at url with a cert from our CA (any HTTP status)."""
    probe = Kube(url, pki.ca_crt, pki.token(), url)
    try:
        probe.get("/readyz", timeout=2)
    except KubeError as e:
        return e.status != 0
    return True
