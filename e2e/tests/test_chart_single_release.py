"""charts/atoll as one release into one API server (the single-release layout, here a member's kube-apiserver in a
namespace enforcing Pod Security "restricted"): the API server accepts every object of the default render, the
generated webhook TLS is created once and reused by `helm upgrade` (helm `lookup`: no drift, no caBundle/Secret
race), and `helm uninstall` removes the webhook registration.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.conftest import FleetHandle
from e2e.tests.chart_support import CHART, RELEASE, find, helm, manifest
from e2e.tests.support import delete, unique, until

pytestmark = pytest.mark.e2e

MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}


def test_single_release_tls_is_generated_once_and_reused_on_upgrade(fleet: FleetHandle, tmp_path: Path) -> None:
    member = fleet.members[0]
    kube, kc = fleet.member(member), fleet.info.member_kubeconfigs[member]
    ns = unique("atoll-chart-one")
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": RESTRICTED}})
    secret_path = f"/api/v1/namespaces/{ns}/secrets/{RELEASE}-webhook-tls"
    try:
        helm(kc, "install", RELEASE, str(CHART), "-n", ns)
        for obj in manifest(kc, RELEASE, ns):
            assert kube.get_or_none(kube.path_for(obj)) is not None, (obj["kind"], obj["metadata"]["name"])
        first = kube.get(secret_path)["data"]
        ca_bundle = kube.get(f"{MWC}/{RELEASE}")["webhooks"][0]["clientConfig"]["caBundle"]
        assert ca_bundle == first["ca.crt"]
        until("the chart's 4 pods admitted under restricted", lambda: len(kube.get(
            f"/api/v1/namespaces/{ns}/pods?labelSelector=app.kubernetes.io%2Finstance%3D{RELEASE}")["items"]) == 4, 90,
            show=lambda: kube.get(f"/api/v1/namespaces/{ns}/events")["items"][-5:])

        (tmp_path / "policy.yaml").write_text((CHART / "files" / "policy.yaml").read_text().replace(
            "initialDelay: 10s", "initialDelay: 20s"))
        helm(kc, "upgrade", RELEASE, str(CHART), "-n", ns, "--set", "controller.replicas=1",
             "--set-file", f"policy={tmp_path / 'policy.yaml'}")
        docs = manifest(kc, RELEASE, ns)
        assert "initialDelay: 20s" in find(docs, "ConfigMap", f"{RELEASE}-policy")["data"]["policy.yaml"]
        assert kube.get(secret_path)["data"] == first, "upgrade regenerated the webhook TLS"
        assert kube.get(f"{MWC}/{RELEASE}")["webhooks"][0]["clientConfig"]["caBundle"] == ca_bundle
        assert find(docs, "Secret", f"{RELEASE}-webhook-tls")["data"] == first

        # the names the cert must cover changed (webhook.url): then, and only then, a new cert
        helm(kc, "upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values",
             "--set", "webhook.url=https://atoll.example.org/mutate")
        second = kube.get(secret_path)["data"]
        assert second["tls.crt"] != first["tls.crt"]
        assert kube.get(f"{MWC}/{RELEASE}")["webhooks"][0]["clientConfig"]["caBundle"] == second["ca.crt"]

        helm(kc, "uninstall", RELEASE, "-n", ns, "--wait")
        assert kube.get_or_none(f"{MWC}/{RELEASE}") is None
        assert kube.get(f"{MWC}?labelSelector=app.kubernetes.io%2Finstance%3D{RELEASE}")["items"] == []
    finally:
        try:
            helm(kc, "uninstall", RELEASE, "-n", ns, "--wait")
        except AssertionError as e:
            if "not found" not in str(e):
                raise
        delete(kube, f"/api/v1/namespaces/{ns}")
