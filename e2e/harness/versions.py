"""Pinned versions of every binary the fleet runs, and the cache key derived from them.

The Go module pins live in e2e/gotools/go.mod (k8s, karmada, etcd) and e2e/crdgen/go.mod
(volcano.sh/apis, controller-gen); kwok and helm are ``go install``ed at the versions below.
The cache key hashes all of them, so changing any pin rebuilds into a fresh cache directory.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent.parent

KUBERNETES = "v1.35.3"  # matches k8s.io/* v0.35.3 in karmada v1.18.2's go.mod
KARMADA = "v1.18.2"  # latest v1.18.x the module proxy serves (v1.18.0 has no sumdb entry)
ETCD = "v3.6.7"  # go.etcd.io/etcd/server/v3, same minor as k8s 1.35's etcd client
KWOK = "v0.8.0"
HELM = "v3.22.0"
VOLCANO_APIS = "v1.13.0"  # volcano.sh/apis; volcano.sh/volcano itself is refused by the proxy
CONTROLLER_TOOLS = "v0.20.0"

GO_MODULE_BINARIES: dict[str, str] = {
    # output name -> package, built together from e2e/gotools so the build cache is shared
    "etcd": "./cmd/etcd",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "karmada-aggregated-apiserver": "github.com/karmada-io/karmada/cmd/aggregated-apiserver",
    "karmada-controller-manager": "github.com/karmada-io/karmada/cmd/controller-manager",
    "karmada-scheduler": "github.com/karmada-io/karmada/cmd/scheduler",
    "karmada-webhook": "github.com/karmada-io/karmada/cmd/webhook",
}
GO_INSTALL_BINARIES: dict[str, str] = {
    "kwok": f"sigs.k8s.io/kwok/cmd/kwok@{KWOK}",
    "helm": f"helm.sh/helm/v3/cmd/helm@{HELM}",
}
ALL_BINARIES = [*GO_MODULE_BINARIES, *GO_INSTALL_BINARIES]


def cache_key() -> str:
    """Short hash over every pin and the go.mod/go.sum files that decide what gets built."""
    h = hashlib.sha256()
    for v in (KUBERNETES, KARMADA, ETCD, KWOK, HELM, VOLCANO_APIS, CONTROLLER_TOOLS):
        h.update(v.encode())
    for name in ("gotools/go.mod", "gotools/go.sum", "gotools/cmd/etcd/main.go", "crdgen/go.mod", "crdgen/go.sum"):
        h.update((E2E_DIR / name).read_bytes())
    h.update(repr(sorted(GO_MODULE_BINARIES.items())).encode())
    h.update(repr(sorted(GO_INSTALL_BINARIES.items())).encode())
    return h.hexdigest()[:12]


def describe() -> dict[str, str]:
    """Versions as shown by ``fleet status`` and in the README."""
    return {
        "kubernetes": KUBERNETES, "karmada": KARMADA, "etcd": ETCD, "kwok": KWOK, "helm": HELM,
        "volcano.sh/apis": VOLCANO_APIS, "controller-tools": CONTROLLER_TOOLS,
    }
