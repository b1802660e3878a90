"""Member clusters: kube-apiserver (etcd prefix on the shared etcd), kube-scheduler,
kube-controller-manager and kwok with configured fake nodes, joined to Karmada in Push mode.

kwok gets Karmada-independent stages: kwok's own node stages (initialize, heartbeat with
lease) from the pinned kwok module, and e2e/kwok/pod-stages.yaml, which runs a bound pod and
completes it after ``atoll.dev/run-seconds`` (pods without the annotation keep running).
"""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from .build import Artifacts
from .config import FleetConfig, Member
from .host import CLUSTER_SECRET_NS, apiserver_argv, kube_controller_manager_argv
from .pki import Pki

E2E_DIR = Path(__file__).resolve().parent.parent
POD_STAGES = E2E_DIR / "kwok" / "pod-stages.yaml"
KWOK_NODE_STAGES = ("kustomize/stage/node/fast/node-initialize.yaml",
                    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")
MEMBER_KCM_CONTROLLERS = ("job,cronjob,garbagecollector,namespace,replicaset,deployment,statefulset,daemonset,"
                          "podgc,nodelifecycle,ttl-after-finished,serviceaccount,resourcequota,disruption,"
                          "endpointslice")
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def member_apiserver_argv(art: Artifacts, cfg: FleetConfig, pki: Pki, m: Member) -> list[str]:
    # ServiceAccount admission is off: kwok pods need no tokens, and a pod created before the
    # namespace's default ServiceAccount exists would otherwise be rejected (Job retries slowly).
    return apiserver_argv(art, cfg, pki, m.ports.apiserver, f"/members/{m.name}",
                          ["--disable-admission-plugins=ServiceAccount"])


def scheduler_argv(art: Artifacts, m: Member, kubeconfig: Path) -> list[str]:
    return [art.bin("kube-scheduler"), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={m.ports.scheduler}", "--leader-elect=false",
            "--kube-api-qps=200", "--kube-api-burst=400"]


def controller_manager_argv(art: Artifacts, pki: Pki, m: Member, kubeconfig: Path) -> list[str]:
    return kube_controller_manager_argv(art, kubeconfig, m.ports.controller_manager, pki, MEMBER_KCM_CONTROLLERS)


def write_kwok_config(art: Artifacts, path: Path) -> Path:
    """kwok's config file: every Stage it should run (node stages from kwok, pod stages ours)."""
    docs: list[dict[str, Any]] = []  # no KwokConfiguration document: kwok's defaults apply
    for rel in KWOK_NODE_STAGES:
        docs += [d for d in yaml.safe_load_all((art.kwok_dir / rel).read_text()) if d]
    docs += [d for d in yaml.safe_load_all(POD_STAGES.read_text()) if d]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def kwok_argv(art: Artifacts, m: Member, kubeconfig: Path, config: Path, pki: Pki) -> list[str]:
    return [art.bin("kwok"), f"--kubeconfig={kubeconfig}", f"--config={config}",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--server-address=127.0.0.1:{m.ports.kwok}", f"--node-port={m.ports.kwok}",
            "--node-ip=127.0.0.1", f"--tls-cert-file={pki.serving_crt}", f"--tls-private-key-file={pki.serving_key}",
            "--node-lease-duration-seconds=40", "--cidr=10.0.0.1/16",
            "--v=WARN"]  # INFO logs every lease renewal (one line per node every 10 s)


def nodes(m: Member) -> list[dict[str, Any]]:
    """Node objects for kwok; status (capacity = allocatable) is applied via the status subresource."""
    out = []
    for name in m.node_names():
        labels = {**m.group_of(name).labels, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": "amd64", "type": "kwok", "atoll.dev/member": m.name}
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels,
                                 "annotations": {KWOK_NODE_ANNOTATION: "fake",
                                                 "node.alpha.kubernetes.io/ttl": "0"}},
                    "spec": {}})
    return out


def node_status(m: Member, name: str) -> dict[str, Any]:
    alloc = dict(m.group_of(name).allocatable)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": alloc, "capacity": alloc,
                       "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                    "kubeletVersion": "kwok", "kubeProxyVersion": "kwok",
                                    "containerRuntimeVersion": "kwok", "kernelVersion": "",
                                    "osImage": "", "machineID": "", "systemUUID": "", "bootID": ""}}}


def join_objects(m: Member, pki: Pki) -> list[dict[str, Any]]:
    """Secret (token + caBundle) and the Push-mode Cluster object that registers ``m`` with Karmada."""
    data = {"token": base64.b64encode(pki.token().encode()).decode(),
            "caBundle": base64.b64encode(pki.ca_pem()).decode()}
    secrets = [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": n, "namespace": CLUSTER_SECRET_NS}, "data": data}
               for n in (m.name, f"{m.name}-impersonator")]
    spec: dict[str, Any] = {"syncMode": "Push", "apiEndpoint": f"https://127.0.0.1:{m.ports.apiserver}",
                        "secretRef": {"namespace": CLUSTER_SECRET_NS, "name": m.name},
                        "impersonatorSecretRef": {"namespace": CLUSTER_SECRET_NS,
                                                  "name": f"{m.name}-impersonator"}}
    if m.resource_models:       # set at create: Karmada applies its default cpu/memory models only when none
        spec["resourceModels"] = [dict(g) for g in m.resource_models]
    cluster = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
               "metadata": {"name": m.name, "labels": dict(m.cluster_labels)}, "spec": spec}
    return [*secrets, cluster]
