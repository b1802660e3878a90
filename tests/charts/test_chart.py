"""charts/atoll rendered by the real helm binary: lint, key fields, schema and the policy copy."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from engine.kube.webhook import SYSTEM_NAMESPACES
from engine.kube.webhook_cli import selector_from_text

from tests.charts.chart_support import CHART, ROOT, helm, needs_helm, one, render


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
def test_deployments() -> None:
    docs = render()
    ctrl = docs[("Deployment", "rel-atoll-controller")]
    assert ctrl["spec"]["replicas"] == 2
    args = ctrl["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run" and "--leader-elect" in args
    assert "--policy-configmap=atoll-system/rel-atoll-policy" in args
    assert "--lease-name=atoll-controller" in args and "--lease-namespace=atoll-system" in args
    hook = docs[("Deployment", "rel-atoll-webhook")]["spec"]["template"]["spec"]["containers"][0]
    assert hook["args"][0] == "webhook" and "--cert=/etc/atoll/tls/tls.crt" in hook["args"]
    kubeconfig = render("karmada.kubeconfigSecret=karmada-kubeconfig")[("Deployment", "rel-atoll-controller")]
    pod = kubeconfig["spec"]["template"]["spec"]
    assert "--kubeconfig=/etc/atoll/karmada/kubeconfig" in pod["containers"][0]["args"]
    assert pod["automountServiceAccountToken"] is False, "with a Karmada kubeconfig no host token is mounted"
    assert ctrl["spec"]["template"]["spec"]["automountServiceAccountToken"] is True


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


@needs_helm
def test_the_grace_period_outlasts_a_graceful_stop() -> None:
    """SIGKILL comes terminationGracePeriodSeconds after SIGTERM: it must leave the controller its whole stop
    (writes in flight, one more second for the loop, the Lease's read and replace; docs/controller.md)."""
    from engine.kube.leadership import LEASE_RELEASE_TIMEOUT
    from engine.kube.shutdown import SHUTDOWN_TIMEOUT

    grace = render()["Deployment", "rel-atoll-controller"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    budget = SHUTDOWN_TIMEOUT + 1.0 + 2 * LEASE_RELEASE_TIMEOUT
    assert grace == 30 and grace > budget, (grace, budget)


@needs_helm
@pytest.mark.parametrize("delay, grace", [(None, 30), (0, 30), (2.5, 30), (15, 30), (15.5, 31), (40, 55)])
def test_the_webhook_s_grace_period_outlasts_its_shutdown_delay_and_stop(delay: float | None, grace: int,
                                                                         tmp_path: Path) -> None:
    """The webhook keeps answering for --shutdown-delay after SIGTERM (the Service's endpoints still send it
    reviews), then answers the requests under way for at most SHUTDOWN_TIMEOUT: the grace period covers both
    with 5 s to spare, and a longer delay raises it. (A values file: `--set` would pass 2.5 as a string.)"""
    from engine.kube.shutdown import SHUTDOWN_DELAY, SHUTDOWN_TIMEOUT

    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({} if delay is None else {"webhook": {"shutdownDelay": delay}}))
    out = helm("template", "rel", str(CHART), "-n", "atoll-system", "-f", str(values))
    assert out.returncode == 0, out.stderr
    deployment = next(d for d in yaml.safe_load_all(out.stdout)
                      if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "rel-atoll-webhook")
    spec = deployment["spec"]["template"]["spec"]
    seconds, args = spec["terminationGracePeriodSeconds"], spec["containers"][0]["args"]
    delay = SHUTDOWN_DELAY if delay is None else delay
    assert f"--shutdown-delay={delay:g}" in args
    assert seconds == grace and seconds >= delay + SHUTDOWN_TIMEOUT + 5, (delay, seconds)


@needs_helm
def test_the_webhook_s_shutdown_delay_is_a_bounded_number() -> None:
    for bad in ("-1", "301", "soon"):
        out = helm("template", "rel", str(CHART), "--set", f"webhook.shutdownDelay={bad}")
        assert out.returncode != 0 and "shutdownDelay" in out.stderr, bad
