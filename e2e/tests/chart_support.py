"""charts/atoll on the real fleet: helm releases, ServiceAccount credentials from the TokenRequest API, access
reviews, and `atoll run` / `atoll webhook` started with the exact args the chart's Deployments pass."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from e2e.harness import build
from e2e.harness.fleet import FleetInfo
from e2e.harness.kube import Kube
from e2e.tests.controller_support import ControllerProcess
from e2e.tests.webhook_support import WebhookProcess, child_env, wait_serving
from engine.kube.webhook_certs import CertFiles

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "atoll"
RELEASE = "atoll"                      # fullname "atoll" (the release name contains the chart name)


def helm_binary() -> str:
    return build.require().bin("helm")


def helm(kubeconfig: Path, *args: str, timeout: float = 180) -> str:
    """Run helm against one API server; a failure raises with helm's own output."""
    argv = [helm_binary(), "--kubeconfig", str(kubeconfig), *args]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(argv[1:])} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out.stdout


def manifest(kubeconfig: Path, release: str, namespace: str) -> list[dict[str, Any]]:
    """Every object of an installed release, as helm rendered it against the cluster."""
    text = helm(kubeconfig, "get", "manifest", release, "-n", namespace)
    return [d for d in yaml.safe_load_all(text) if d]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert found, f"{kind} {name} not in the release: {[(d['kind'], d['metadata']['name']) for d in docs]}"
    return found[0]


def container_args(docs: list[dict[str, Any]], deployment: str) -> list[str]:
    (container,) = find(docs, "Deployment", deployment)["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


# -- credentials ------------------------------------------------------------------------------------------
def service_account_token(kube: Kube, namespace: str, name: str, seconds: int = 3600) -> str:
    """A bound token for the ServiceAccount from the TokenRequest API (what `kubectl create token` does)."""
    review = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                           "spec": {"expirationSeconds": seconds}})
    return str(review["status"]["token"])


def kubeconfig_for(info: FleetInfo, token: str, path: Path, user: str) -> Path:
    """A kubeconfig for the Karmada API authenticating with ``token`` (the content of the chart's
    karmada.kubeconfigSecret / <component>.kubeconfigSecret)."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "karmada",
           "clusters": [{"name": "karmada", "cluster": {
               "server": info.host_server,
               "certificate-authority-data": base64.b64encode(info.ca_file.read_bytes()).decode()}}],
           "users": [{"name": user, "user": {"token": token}}],
           "contexts": [{"name": "karmada", "context": {"cluster": "karmada", "user": user}}]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def as_token(info: FleetInfo, token: str, name: str) -> Kube:
    return Kube(info.host_server, info.ca_file, token, name)


def allowed(kube: Kube, verb: str, resource: str, group: str = "", namespace: str = "", name: str = "",
            subresource: str = "") -> bool:
    """SelfSubjectAccessReview: may the caller do this? (the API server's authorizer answers)."""
    attrs = {k: v for k, v in {"verb": verb, "resource": resource, "group": group, "namespace": namespace,
                               "name": name, "subresource": subresource}.items() if v}
    review = kube.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                          {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                           "spec": {"resourceAttributes": attrs}})
    return bool(review["status"].get("allowed"))


# -- the chart's processes, run locally ---------------------------------------------------------------------
def local_args(args: list[str], files: dict[str, str]) -> list[str]:
    """The Deployment's args with only in-pod file paths replaced by local files (``files``: pod path -> local
    path); everything else exactly as the chart renders it."""
    out = []
    for a in args:
        flag, eq, value = a.partition("=")
        out.append(f"{flag}={files[value]}" if eq and value in files else a)
    return out


def start_chart_webhook(args: list[str], kubeconfig: Path, certs: CertFiles, port: int, workdir: Path
                        ) -> WebhookProcess:
    argv = [sys.executable, "-m", "engine.cli", *local_args(args, {
        "/etc/atoll/tls/tls.crt": certs.cert, "/etc/atoll/tls/tls.key": certs.key,
        "/etc/atoll/karmada/kubeconfig": str(kubeconfig)})]
    log = workdir / "chart-webhook.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=str(REPO), env=child_env(workdir))
    wh = WebhookProcess(proc, port, certs, log)
    wait_serving("atoll webhook (chart args)", f"https://127.0.0.1:{port}/readyz", proc, wh.stop, log, 30,
                 ssl.create_default_context(cafile=certs.ca))
    return wh


def start_chart_controller(args: list[str], kubeconfig: Path, port: int, workdir: Path) -> ControllerProcess:
    argv = [sys.executable, "-m", "engine.cli",
            *local_args(args, {"/etc/atoll/karmada/kubeconfig": str(kubeconfig)})]
    log = workdir / "chart-controller.log"
    out = open(log, "ab")
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=str(REPO), env=child_env(workdir))
    ctl = ControllerProcess(proc, port, log, argv)
    wait_serving("atoll run (chart args)", f"http://127.0.0.1:{port}/readyz", proc, ctl.stop, log, 90)
    return ctl
