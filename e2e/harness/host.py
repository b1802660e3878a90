"""The Karmada host control plane: command lines and bootstrap objects.

Flags follow Karmada's own manifests (artifacts/deploy/*.yaml of the pinned module), with
every address on 127.0.0.1 and every port explicit. Differences from a real install, all
because there is no in-cluster networking here:
- webhooks (admission and CRD conversion) are registered by URL https://127.0.0.1:<port>;
- the aggregated apiserver's APIService points at an ExternalName Service ``127.0.0.1``;
- components authenticate with the static admin token instead of per-component certs;
- no leader election (single replicas, faster start).
"""
from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import yaml

from .build import Artifacts
from .config import FleetConfig
from .pki import Pki

KARMADA_SYSTEM = "karmada-system"
CLUSTER_SECRET_NS = "karmada-cluster"
ETCD_PREFIX_HOST = "/karmada"


def etcd_argv(art: Artifacts, cfg: FleetConfig, data_dir: Path) -> list[str]:
    p = cfg.ports
    return [art.bin("etcd"), "--name=atoll-e2e", f"--data-dir={data_dir}",
            f"--listen-client-urls=http://127.0.0.1:{p.etcd}", f"--advertise-client-urls=http://127.0.0.1:{p.etcd}",
            f"--listen-peer-urls=http://127.0.0.1:{p.etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{p.etcd_peer}",
            f"--initial-cluster=atoll-e2e=http://127.0.0.1:{p.etcd_peer}",
            f"--listen-metrics-urls=http://127.0.0.1:{p.etcd_metrics}",
            "--unsafe-no-fsync=true",  # throwaway test data; fsync dominates latency on shared disks
            "--quota-backend-bytes=4294967296", "--auto-compaction-retention=5m", "--log-level=warn"]


def apiserver_argv(art: Artifacts, cfg: FleetConfig, pki: Pki, port: int, etcd_prefix: str,
                   extra: list[str] | None = None) -> list[str]:
    """kube-apiserver flags shared by karmada-apiserver and the member apiservers."""
    return [art.bin("kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{cfg.ports.etcd}",
            f"--etcd-prefix={etcd_prefix}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={port}", "--endpoint-reconciler-type=none",
            f"--tls-cert-file={pki.serving_crt}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_crt}", f"--token-auth-file={pki.token_file}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            "--service-cluster-ip-range=10.96.0.0/12", "--profiling=false",
            # front-proxy (aggregation) settings: the host needs them for karmada-aggregated-apiserver; on
            # members they fill kube-system/extension-apiserver-authentication, without which kube-scheduler
            # and kube-controller-manager log "missing content for CA bundle" errors every few seconds
            f"--proxy-client-cert-file={pki.client_crt}", f"--proxy-client-key-file={pki.client_key}",
            f"--requestheader-client-ca-file={pki.ca_crt}", "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User", *(extra or [])]


def karmada_apiserver_argv(art: Artifacts, cfg: FleetConfig, pki: Pki) -> list[str]:
    return apiserver_argv(art, cfg, pki, cfg.ports.apiserver, ETCD_PREFIX_HOST, [
        "--disable-admission-plugins=StorageObjectInUseProtection,ServiceAccount"])


def _gates(cfg: FleetConfig) -> list[str]:
    return [f"--feature-gates={cfg.karmada_feature_gates}"] if cfg.karmada_feature_gates else []


def aggregated_apiserver_argv(art: Artifacts, cfg: FleetConfig, pki: Pki, kubeconfig: Path) -> list[str]:
    return [art.bin("karmada-aggregated-apiserver"), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            f"--etcd-servers=http://127.0.0.1:{cfg.ports.etcd}", f"--etcd-prefix={ETCD_PREFIX_HOST}",
            f"--tls-cert-file={pki.serving_crt}", f"--tls-private-key-file={pki.serving_key}",
            "--bind-address=127.0.0.1", f"--secure-port={cfg.ports.aggregated_apiserver}",
            "--audit-log-path=-", "--audit-log-maxage=0", "--audit-log-maxbackup=0", *_gates(cfg)]


def webhook_argv(art: Artifacts, cfg: FleetConfig, kubeconfig: Path, cert_dir: Path) -> list[str]:
    p = cfg.ports
    return [art.bin("karmada-webhook"), f"--kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
            f"--secure-port={p.webhook}", f"--cert-dir={cert_dir}",
            f"--metrics-bind-address=127.0.0.1:{p.webhook_metrics}",
            f"--health-probe-bind-address=127.0.0.1:{p.webhook_health}", *_gates(cfg)]


def controller_manager_argv(art: Artifacts, cfg: FleetConfig, kubeconfig: Path) -> list[str]:
    p = cfg.ports
    return [art.bin("karmada-controller-manager"), f"--kubeconfig={kubeconfig}",
            f"--cluster-status-update-frequency={cfg.cluster_status_update_frequency}",
            f"--metrics-bind-address=127.0.0.1:{p.controller_manager_metrics}",
            f"--health-probe-bind-address=127.0.0.1:{p.controller_manager_health}",
            "--leader-elect=false", *_gates(cfg)]


def scheduler_argv(art: Artifacts, cfg: FleetConfig, kubeconfig: Path) -> list[str]:
    p = cfg.ports
    return [art.bin("karmada-scheduler"), f"--kubeconfig={kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{p.scheduler_metrics}",
            f"--health-probe-bind-address=127.0.0.1:{p.scheduler_health}",
            "--enable-scheduler-estimator=false", "--leader-elect=false", *_gates(cfg)]


def kube_controller_manager_argv(art: Artifacts, kubeconfig: Path, port: int, pki: Pki,
                                 controllers: str) -> list[str]:
    """kube-controller-manager for the host (namespace, GC, ...) and for members (job, pods ...)."""
    return [art.bin("kube-controller-manager"), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", f"--controllers={controllers}",
            "--leader-elect=false", f"--root-ca-file={pki.ca_crt}",
            f"--service-account-private-key-file={pki.sa_key}", "--use-service-account-credentials=false",
            "--kube-api-qps=200", "--kube-api-burst=400"]


HOST_KCM_CONTROLLERS = ("namespace,garbagecollector,serviceaccount-token,ttl-after-finished,"
                        "clusterrole-aggregation")


def _read_yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def karmada_crds(art: Artifacts, pki: Pki, webhook_url: str) -> list[dict[str, Any]]:
    """Karmada's CRDs as its kustomization lists them, with the conversion patches pointed at us."""
    base = art.karmada_dir / "charts" / "karmada" / "_crds"
    kust = yaml.safe_load((base / "kustomization.yaml").read_text())
    crds = {}
    for res in kust.get("resources", []):
        for doc in _read_yaml_docs(base / res):
            crds[doc["metadata"]["name"]] = doc
    ca_b64 = base64.b64encode(pki.ca_pem()).decode()
    for patch in kust.get("patches", []):
        doc = yaml.safe_load((base / patch["path"]).read_text())
        target = crds[doc["metadata"]["name"]]
        conv = copy.deepcopy(doc["spec"]["conversion"])
        conv["webhook"]["clientConfig"] = {"url": f"{webhook_url}/convert", "caBundle": ca_b64}
        target["spec"]["conversion"] = conv
    return list(crds.values())


def volcano_crds(art: Artifacts) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for f in sorted(art.volcano_crd_dir.glob("*.yaml")):
        docs += _read_yaml_docs(f)
    return docs


def webhook_configurations(art: Artifacts, pki: Pki, webhook_url: str) -> list[dict[str, Any]]:
    """Karmada's Mutating/ValidatingWebhookConfiguration with URLs on 127.0.0.1 and our CA."""
    text = (art.karmada_dir / "artifacts" / "deploy" / "webhook-configuration.yaml").read_text()
    text = text.replace("https://karmada-webhook.karmada-system.svc:443", webhook_url)
    text = text.replace("{{caBundle}}", base64.b64encode(pki.ca_pem()).decode())
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:
        for wh in d.get("webhooks", []):
            url = wh.get("clientConfig", {}).get("url", "")
            if not url.startswith(webhook_url):
                raise ValueError(f"unexpected webhook URL {url!r} in Karmada's webhook-configuration.yaml")
    return docs


def aggregated_apiservice(cfg: FleetConfig, pki: Pki) -> list[dict[str, Any]]:
    """APIService for cluster.karmada.io through an ExternalName Service resolving to 127.0.0.1."""
    svc = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "karmada-aggregated-apiserver", "namespace": KARMADA_SYSTEM},
           "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}
    api = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
           "metadata": {"name": "v1alpha1.cluster.karmada.io", "labels": {"app": "karmada-aggregated-apiserver"}},
           "spec": {"caBundle": base64.b64encode(pki.ca_pem()).decode(), "group": "cluster.karmada.io",
                    "groupPriorityMinimum": 2000, "version": "v1alpha1", "versionPriority": 10,
                    "service": {"name": "karmada-aggregated-apiserver", "namespace": KARMADA_SYSTEM,
                                "port": cfg.ports.aggregated_apiserver}}}
    return [svc, api]


def namespaces() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
            for n in (KARMADA_SYSTEM, CLUSTER_SECRET_NS)]
