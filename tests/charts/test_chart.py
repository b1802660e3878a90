"""charts/atoll rendered by the real helm binary: lint, key fields, schema and the policy copy."""

from __future__ import annotations

import base64
import glob
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.kube.webhook import SYSTEM_NAMESPACES
from engine.kube.webhook_cli import selector_from_text

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "atoll"


def find_helm() -> str | None:
    """$ATOLL_HELM, then PATH, then the e2e build cache (e2e/fleet build puts helm in <cache>/<key>/bin)."""
    if os.environ.get("ATOLL_HELM"):
        return os.environ["ATOLL_HELM"]
    if shutil.which("helm"):
        return shutil.which("helm")
    cache = os.environ.get("ATOLL_E2E_CACHE", str(Path.home() / ".cache" / "atoll-e2e"))
    found = sorted(glob.glob(os.path.join(cache, "*", "bin", "helm")), key=os.path.getmtime)
    return found[-1] if found else None


HELM = find_helm()
# `make test` builds helm before the unit tests; in CI a missing helm fails these tests instead of skipping them
needs_helm = pytest.mark.skipif(HELM is None and os.environ.get("CI") != "true",
                                reason="helm not built yet: run `e2e/fleet build` or set ATOLL_HELM")


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None, "helm not found: `make test` builds it (e2e/fleet build), or set ATOLL_HELM"
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=60)


def render(*sets: str) -> dict[tuple[str, str], dict[str, Any]]:
    argv = ["template", "rel", str(CHART), "-n", "atoll-system"]
    for s in sets:
        argv += ["--set", s]
    out = helm(*argv)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def one(docs: dict[tuple[str, str], dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for (k, _), d in docs.items() if k == kind]
    assert len(found) == 1, f"{kind}: {len(found)}"
    return found[0]


@needs_helm
def test_lint_strict() -> None:
    out = helm("lint", "--strict", str(CHART))
    assert out.returncode == 0, out.stdout + out.stderr


@needs_helm
def test_webhook_registration() -> None:
    docs = render()
    mwc = one(docs, "MutatingWebhookConfiguration")
    (hook,) = mwc["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
    (rule,) = hook["rules"]
    assert rule["apiGroups"] == ["work.karmada.io"] and rule["operations"] == ["CREATE"]
    assert set(rule["resources"]) == {"resourcebindings", "clusterresourcebindings"}
    (ns_rule, _) = hook["namespaceSelector"]["matchExpressions"]
    assert ns_rule["key"] == "kubernetes.io/metadata.name" and ns_rule["operator"] == "NotIn"
    assert {n for n in SYSTEM_NAMESPACES if "*" not in n} <= set(ns_rule["values"])
    assert hook["clientConfig"]["url"] == "https://rel-atoll-webhook.atoll-system.svc:443/mutate"
    secret = one(docs, "Secret")
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    assert b"BEGIN CERTIFICATE" in base64.b64decode(hook["clientConfig"]["caBundle"])
    assert render("webhook.failurePolicy=Fail")[("MutatingWebhookConfiguration", "rel-atoll")][
        "webhooks"][0]["failurePolicy"] == "Fail"


@needs_helm
def test_deployments_and_rbac() -> None:
    docs = render()
    ctrl = docs[("Deployment", "rel-atoll-controller")]
    assert ctrl["spec"]["replicas"] == 2
    args = ctrl["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run" and "--leader-elect" in args
    assert "--policy-configmap=atoll-system/rel-atoll-policy" in args
    hook = docs[("Deployment", "rel-atoll-webhook")]["spec"]["template"]["spec"]["containers"][0]
    assert hook["args"][0] == "webhook" and "--cert=/etc/atoll/tls/tls.crt" in hook["args"]
    rules = {(g, r): set(rule["verbs"]) for rule in one(docs, "ClusterRole")["rules"]
             for g in rule["apiGroups"] for r in rule["resources"]}
    assert {"list", "watch", "patch"} <= rules[("work.karmada.io", "resourcebindings")]
    assert {"patch", "update"} <= rules[("work.karmada.io", "clusterresourcebindings/status")]
    assert {"list", "watch"} <= rules[("cluster.karmada.io", "clusters")]
    assert {"list", "watch"} <= rules[("scheduling.volcano.sh", "queues")]
    assert {"list", "watch"} <= rules[("scheduling.k8s.io", "priorityclasses")]
    assert {"list", "watch"} <= rules[("batch.volcano.sh", "jobs")]
    assert "create" in rules[("", "events")]
    assert {"create", "update"} <= rules[("coordination.k8s.io", "leases")]
    assert {"list", "watch"} <= rules[("", "configmaps")]
    kubeconfig = render("karmada.kubeconfigSecret=karmada-kubeconfig")[("Deployment", "rel-atoll-controller")]
    assert "--kubeconfig=/etc/atoll/karmada/kubeconfig" in kubeconfig["spec"]["template"]["spec"]["containers"][0]["args"]


@needs_helm
def test_policy_configmap_is_the_chart_copy_and_parses() -> None:
    cm = one(render(), "ConfigMap")
    text = cm["data"]["policy.yaml"]
    assert text.strip() == (CHART / "files" / "policy.yaml").read_text().strip()
    kinds = selector_from_text(text, "chart policy").kinds
    assert {"batch.volcano.sh/v1alpha1/Job", "batch/v1/Job", "apps/v1/Deployment"} <= kinds


@needs_helm
@pytest.mark.parametrize("sets, message", [
    (["webhook.failurePolicy=Maybe"], "failurePolicy"),
    (["install.workloads=false"], "two-release install"),
    (["webhook.tls.existingSecret=mine"], "needs webhook.tls.caBundle"),
    (["controller.replicas=-1"], "replicas"),
])
def test_rejected_values(sets: list[str], message: str) -> None:
    argv = ["template", "rel", str(CHART)]
    for s in sets:
        argv += ["--set", s]
    out = helm(*argv)
    assert out.returncode != 0 and message in out.stderr


@needs_helm
def test_cert_manager_mode() -> None:
    docs = render("webhook.tls.certManager.enabled=true")
    assert ("Certificate", "rel-atoll-webhook") in docs and ("Secret", "rel-atoll-webhook-tls") not in docs
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "atoll-system/rel-atoll-webhook"


def test_chart_policy_equals_repo_default() -> None:
    default = ROOT / "policies" / "default.yaml"
    assert (CHART / "files" / "policy.yaml").read_bytes() == default.read_bytes(), \
        "charts/atoll/files/policy.yaml differs from policies/default.yaml: run charts/atoll/sync-policy.sh"
