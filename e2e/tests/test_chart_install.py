"""charts/atoll installed for real, in the two-release layout (docs/controller.md "Install"): the Karmada-side
objects into the fleet's Karmada API, the workloads into a member API server used as the host (a namespace
enforcing Pod Security "restricted"). Then `atoll webhook` and `atoll run` run as local processes with the exact
args of the chart's Deployments, authenticated as the chart's ServiceAccounts (TokenRequest tokens in the
kubeconfigs the chart's Secrets would hold), through the core flows; `helm upgrade` of the policy is hot-reloaded;
`helm uninstall` leaves no webhook registration behind.
"""

from __future__ import annotations

import re
import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube, KubeError
from e2e.tests.chart_support import (CHART, RELEASE, allowed, as_token, container_args, find, helm, kubeconfig_for,
                                     manifest, service_account_token, start_chart_controller, start_chart_webhook)
from e2e.tests.controller_support import (PAUSED, ControllerProcess, annotations_of, events_for, job, propagate,
                                          rb_name, wait_admitted)
from e2e.tests.support import binding, delete, is_true, unique, until
from e2e.tests.webhook_support import WebhookProcess, free_port
from engine.kube.webhook_certs import write_certs

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
              "pod-security.kubernetes.io/warn": "restricted"}


def policy(mode: str = "gate") -> str:
    text = (REPO / "policies" / "default.yaml").read_text()
    text = re.sub(r"placementMode: \w+", f"placementMode: {mode}", text.replace("initialDelay: 10s", "initialDelay: 2s"))
    assert "initialDelay: 2s" in text and f"placementMode: {mode}" in text
    return text


@dataclass
class Installed:
    ns: str                      # release namespace, the same on the Karmada API and on the host
    karmada_kc: Path
    host_kc: Path
    host: Kube                   # the member used as the host cluster
    karmada_values: list[str]
    controller_token: str
    webhook_token: str
    webhook: WebhookProcess
    controller: ControllerProcess
    workdir: Path


@pytest.fixture(scope="module")
def installed(fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    info, karmada = fleet.info, fleet.host()
    host_name = fleet.members[-1]
    host, host_kc = fleet.member(host_name), info.member_kubeconfigs[host_name]
    work = tmp_path_factory.mktemp("chart")
    ns = unique("atoll-chart")
    certs = write_certs(str(work / "certs"))        # the platform's own TLS (two releases cannot share a generated CA)
    hook_port, metrics_port = free_port(), free_port()
    (work / "policy.yaml").write_text(policy())
    common = ["--set", "webhook.tls.existingSecret=atoll-tls",
              "--set-string", f"webhook.tls.caBundle={base64.b64encode(certs.ca_pem()).decode()}",
              # where the Karmada API reaches the webhook, and the ports of this machine's processes
              "--set", f"webhook.url=https://127.0.0.1:{hook_port}/mutate", "--set", f"webhook.port={hook_port}",
              "--set", f"controller.metricsPort={metrics_port}",
              "--set", "controller.extraArgs={--metrics-host=127.0.0.1}", "--set", "webhook.extraArgs={--host=127.0.0.1}",
              "--set", "controller.kubeconfigSecret=atoll-controller-karmada",
              "--set", "webhook.kubeconfigSecret=atoll-webhook-karmada",
              "--set-file", f"policy={work / 'policy.yaml'}"]
    karmada_values = ["--set", "install.workloads=false", *common]
    helm(info.host_kubeconfig, "install", RELEASE, str(CHART), "-n", ns, "--create-namespace", *karmada_values)
    procs: list[Any] = []
    try:
        ctl_token = service_account_token(karmada, ns, f"{RELEASE}-controller")
        hook_token = service_account_token(karmada, ns, f"{RELEASE}-webhook")
        ctl_kc = kubeconfig_for(info, ctl_token, work / "controller.kubeconfig", "atoll-controller")
        hook_kc = kubeconfig_for(info, hook_token, work / "webhook.kubeconfig", "atoll-webhook")
        host.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": RESTRICTED}})
        for name, kc in (("atoll-controller-karmada", ctl_kc), ("atoll-webhook-karmada", hook_kc)):
            host.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
                        "stringData": {"kubeconfig": kc.read_text()}})
        host.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                    "metadata": {"name": "atoll-tls", "namespace": ns},
                    "stringData": {"tls.crt": Path(certs.cert).read_text(), "tls.key": Path(certs.key).read_text()}})
        helm(host_kc, "install", RELEASE, str(CHART), "-n", ns, "--set", "install.karmadaObjects=false", *common)
        docs = manifest(host_kc, RELEASE, ns)
        wh = start_chart_webhook(container_args(docs, f"{RELEASE}-webhook"), hook_kc, certs, hook_port, work)
        procs.append(wh)
        ctl = start_chart_controller(container_args(docs, f"{RELEASE}-controller"), ctl_kc, metrics_port, work)
        procs.append(ctl)
        yield Installed(ns, info.host_kubeconfig, host_kc, host, karmada_values, ctl_token, hook_token, wh, ctl, work)
    finally:
        for p in reversed(procs):
            p.stop()
        for kc in (host_kc, info.host_kubeconfig):
            try:
                helm(kc, "uninstall", RELEASE, "-n", ns, "--wait")
            except AssertionError as e:
                if "not found" not in str(e):
                    raise
        delete(host, f"/api/v1/namespaces/{ns}")
        delete(karmada, f"/api/v1/namespaces/{ns}")


def test_the_api_servers_accept_every_object_and_the_pods_pass_pod_security_restricted(
        fleet: FleetHandle, installed: Installed) -> None:
    karmada = fleet.host()
    for kc, kube in ((installed.karmada_kc, karmada), (installed.host_kc, installed.host)):
        for obj in manifest(kc, RELEASE, installed.ns):
            assert kube.get_or_none(kube.path_for(obj)) is not None, (kube.name, obj["kind"], obj["metadata"]["name"])
    # both Deployments' pods were admitted by the host's PodSecurity admission (enforce=restricted)
    pods = until("the chart's 4 pods exist on the host", lambda: (items := installed.host.get(
        f"/api/v1/namespaces/{installed.ns}/pods?labelSelector=app.kubernetes.io%2Finstance%3D{RELEASE}")["items"])
        and len(items) == 4 and items, 90, show=lambda: installed.host.get(
        f"/api/v1/namespaces/{installed.ns}/events")["items"][-5:])
    assert {p["spec"]["serviceAccountName"] for p in pods} == {f"{RELEASE}-controller", f"{RELEASE}-webhook"}
    # the same admission admits a pod with the chart's security contexts and refuses it with one field undone
    # (so the check above can fail)
    chart_pod, container = pods[0]["spec"], pods[0]["spec"]["containers"][0]
    pods_path = f"/api/v1/namespaces/{installed.ns}/pods?dryRun=All"
    installed.host.request("POST", pods_path, probe_pod(installed.ns, chart_pod, container["securityContext"]))
    with pytest.raises(KubeError) as refused:
        installed.host.request("POST", pods_path, probe_pod(installed.ns, chart_pod, dict(
            container["securityContext"], allowPrivilegeEscalation=True)))
    assert refused.value.status == 403 and "PodSecurity" in str(refused.value), refused.value


def probe_pod(ns: str, chart_pod: dict[str, Any], container_sc: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": ns},
            "spec": {"securityContext": chart_pod["securityContext"], "containers": [
                {"name": "c", "image": chart_pod["containers"][0]["image"], "securityContext": container_sc}]}}


def test_access_reviews_as_each_service_account(fleet: FleetHandle, installed: Installed) -> None:
    """SelfSubjectAccessReview on the Karmada API as each ServiceAccount: what Atoll needs -> yes; what it must
    never do -> no."""
    ns, policy_cm = installed.ns, f"{RELEASE}-policy"
    ctl = as_token(fleet.info, installed.controller_token, "controller SA")
    hook = as_token(fleet.info, installed.webhook_token, "webhook SA")
    karmada_work, cluster = "work.karmada.io", "cluster.karmada.io"
    needs = {
        ctl: [("list", "resourcebindings", karmada_work, "", "", ""), ("watch", "resourcebindings", karmada_work, "", "", ""),
              ("patch", "resourcebindings", karmada_work, "team-a", "rb", ""),
              ("patch", "resourcebindings", karmada_work, "team-a", "rb", "status"),
              ("patch", "clusterresourcebindings", karmada_work, "", "crb", ""),
              ("patch", "clusterresourcebindings", karmada_work, "", "crb", "status"),
              ("list", "clusters", cluster, "", "", ""), ("watch", "clusters", cluster, "", "", ""),
              ("list", "works", karmada_work, "", "", ""), ("watch", "works", karmada_work, "", "", ""),
              ("list", "queues", "scheduling.volcano.sh", "", "", ""),
              ("list", "priorityclasses", "scheduling.k8s.io", "", "", ""),
              ("list", "jobs", "batch.volcano.sh", "", "", ""), ("list", "jobs", "batch", "", "", ""),
              ("watch", "deployments", "apps", "", "", ""), ("create", "events", "", "team-a", "", ""),
              ("get", "configmaps", "", ns, policy_cm, ""), ("watch", "configmaps", "", ns, policy_cm, ""),
              ("get", "leases", "coordination.k8s.io", ns, "atoll-controller", ""),
              ("update", "leases", "coordination.k8s.io", ns, "atoll-controller", "")],
        hook: [("get", "configmaps", "", ns, policy_cm, "")],
    }
    never = [("get", "secrets", "", ns, "", ""), ("list", "secrets", "", "", "", ""),
             ("delete", "resourcebindings", karmada_work, "team-a", "rb", ""),
             ("update", "resourcebindings", karmada_work, "team-a", "rb", ""),
             ("create", "resourcebindings", karmada_work, "team-a", "", ""),
             ("get", "works", karmada_work, "karmada-es-member1", "w", ""),
             ("delete", "works", karmada_work, "karmada-es-member1", "w", ""),
             ("patch", "works", karmada_work, "karmada-es-member1", "w", ""),
             ("delete", "jobs", "batch", "team-a", "j", ""), ("patch", "jobs", "batch", "team-a", "j", ""),
             ("delete", "deployments", "apps", "team-a", "d", ""), ("patch", "jobs", "batch.volcano.sh", "team-a", "j", ""),
             ("create", "clusters", cluster, "", "", ""), ("patch", "clusters", cluster, "", "member1", ""),
             ("delete", "clusters", cluster, "", "member1", ""), ("patch", "queues", "scheduling.volcano.sh", "", "q", ""),
             ("create", "pods", "", "team-a", "", ""), ("create", "pods", "", ns, "", ""),
             ("escalate", "clusterroles", "rbac.authorization.k8s.io", "", "x", ""),
             ("bind", "clusterroles", "rbac.authorization.k8s.io", "", "cluster-admin", ""),
             ("create", "rolebindings", "rbac.authorization.k8s.io", ns, "", ""),
             ("create", "clusterrolebindings", "rbac.authorization.k8s.io", "", "", ""),
             ("impersonate", "serviceaccounts", "", ns, "default", ""),
             ("create", "serviceaccounts", "", ns, "x", "token"),
             ("get", "configmaps", "", "kube-system", "", ""), ("list", "configmaps", "", ns, "", ""),
             ("get", "configmaps", "", ns, "other", ""), ("update", "configmaps", "", ns, policy_cm, ""),
             ("create", "leases", "coordination.k8s.io", ns, "", ""),
             ("update", "leases", "coordination.k8s.io", ns, "other", ""),
             ("update", "leases", "coordination.k8s.io", "kube-system", "atoll-controller", ""),
             ("delete", "mutatingwebhookconfigurations", "admissionregistration.k8s.io", "", RELEASE, ""),
             ("patch", "mutatingwebhookconfigurations", "admissionregistration.k8s.io", "", RELEASE, ""),
             ("update", "resourcebindings", karmada_work, "team-a", "rb", "status"),
             ("create", "events", "", ns, "", "")]
    answers: dict[str, list[str]] = {"denied but needed": [], "allowed but forbidden": []}
    for kube, wanted in needs.items():
        for verb, res, group, where, name, sub in wanted:
            if not allowed(kube, verb, res, group, where, name, sub):
                answers["denied but needed"].append(f"{kube.name}: {verb} {group}/{res}/{sub} {where}/{name}")
    for kube in (ctl, hook):
        for verb, res, group, where, name, sub in never:
            if (verb, res, where) == ("create", "events", ns) and kube is ctl:
                continue                      # the controller records Events in every namespace
            if allowed(kube, verb, res, group, where, name, sub):
                answers["allowed but forbidden"].append(f"{kube.name}: {verb} {group}/{res}/{sub} {where}/{name}")
    hook_extra = [("list", "resourcebindings", karmada_work, "", "", ""), ("patch", "resourcebindings", karmada_work,
                                                                           "team-a", "rb", ""),
                  ("watch", "configmaps", "", ns, policy_cm, ""), ("update", "leases", "coordination.k8s.io", ns,
                                                                   "atoll-controller", "")]
    for verb, res, group, where, name, sub in hook_extra:    # the webhook holds none of the controller's rights
        if allowed(hook, verb, res, group, where, name, sub):
            answers["allowed but forbidden"].append(f"webhook SA: {verb} {group}/{res} {where}/{name}")
    # in the host cluster the pods' ServiceAccounts hold nothing (Atoll never calls the host's API)
    for sa in (f"{RELEASE}-controller", f"{RELEASE}-webhook"):
        token = service_account_token(installed.host, ns, sa)
        on_host = Kube(installed.host.server, fleet.info.ca_file, token, f"host {sa}")
        for verb, res, group, where in [("get", "secrets", "", ns), ("list", "configmaps", "", ns),
                                        ("create", "pods", "", ns), ("get", "leases", "coordination.k8s.io", ns),
                                        ("create", "events", "", ns), ("list", "deployments", "apps", "")]:
            if allowed(on_host, verb, res, group, where):
                answers["allowed but forbidden"].append(f"{on_host.name}: {verb} {group}/{res} {where}")
    assert answers == {"denied but needed": [], "allowed but forbidden": []}


def test_pause_admit_resume_with_events_and_the_lease(fleet: FleetHandle, installed: Installed, ns: str) -> None:
    karmada = fleet.host()
    j = job("via-chart", ns, cpu="1", pods=2, run_seconds=5)
    karmada.apply(j)
    propagate(karmada, j, fleet.members)
    rb = wait_admitted(karmada, j)                       # paused by the webhook SA, resumed by the controller SA
    assert PAUSED in annotations_of(rb) and annotations_of(rb)["atoll.dev/queue"] == "default"
    until("karmada-scheduler placed it", lambda: (b := binding(karmada, ns, rb_name(j))) and is_true(
        b, "Scheduled") and b, 60, show=lambda: binding(karmada, ns, rb_name(j)))
    until("Admitted Event recorded by the controller SA",
          lambda: [e for e in events_for(karmada, ns, rb_name(j)) if e["reason"] == "Admitted"], 30)
    lease = karmada.get(f"/apis/coordination.k8s.io/v1/namespaces/{installed.ns}/leases/atoll-controller")
    assert lease["spec"].get("holderIdentity") and lease["spec"].get("renewTime"), lease
    assert "atoll_leader 1.0" in installed.controller.metrics()
    assert "Forbidden" not in installed.controller.log.read_text() + installed.webhook.log.read_text()


def test_recovery_requeues_a_job_that_failed_in_its_member(fleet: FleetHandle, installed: Installed, ns: str) -> None:
    karmada = fleet.host()
    j = job("fails", ns, cpu="1", pods=1)
    j["spec"]["activeDeadlineSeconds"] = 1
    karmada.apply(j)
    propagate(karmada, j, fleet.members)
    wait_admitted(karmada, j)
    until("Requeued after JobFailed (pause patch + Warning Event as the controller SA)",
          lambda: [e for e in events_for(karmada, ns, rb_name(j))
                   if e["reason"] == "Requeued" and "JobFailed" in e["message"]], 90,
          show=lambda: binding(karmada, ns, rb_name(j)))
    assert installed.controller.alive()


def test_helm_upgrade_of_the_policy_is_hot_reloaded(fleet: FleetHandle, installed: Installed, ns: str) -> None:
    """A changed `policy` value (gate -> bind mode) reaches the running controller through the ConfigMap watch
    (no restart): PolicyLoaded Event, then a binding for scheduler `atoll` gets spec.clusters + Scheduled
    written by the controller SA (bind mode's status patch)."""
    karmada = fleet.host()
    (installed.workdir / "bind.yaml").write_text(policy("bind"))
    generation = metric(installed.controller, "atoll_policy_generation")
    pid = installed.controller.proc.pid
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{installed.ns}/leases/atoll-controller"
    holder = karmada.get(lease_path)["spec"]["holderIdentity"]
    helm(installed.karmada_kc, "upgrade", RELEASE, str(CHART), "-n", installed.ns, *installed.karmada_values,
         "--set-file", f"policy={installed.workdir / 'bind.yaml'}")
    until("PolicyLoaded Event on the policy ConfigMap",
          lambda: [e for e in events_for(karmada, installed.ns, f"{RELEASE}-policy") if e["reason"] == "PolicyLoaded"
                   and e["metadata"]["creationTimestamp"]], 30)
    until("policy generation advanced", lambda: metric(installed.controller, "atoll_policy_generation") > generation, 30)
    j = job("bound", ns, cpu="1", pods=2, run_seconds=5)
    karmada.apply(j)
    propagate(karmada, j, fleet.members, scheduler="atoll")
    rb = wait_admitted(karmada, j)
    assert sum(c["replicas"] for c in rb["spec"]["clusters"]) == 2, rb["spec"]
    until("Scheduled=True written by the controller SA", lambda: (b := binding(karmada, ns, rb_name(j))) and is_true(
        b, "Scheduled") and b, 30, show=lambda: binding(karmada, ns, rb_name(j)))
    assert installed.controller.proc.pid == pid and installed.controller.alive()
    # the upgrade left the chart-created Lease's spec to its holder (helm patches only what the chart renders)
    lease = karmada.get(lease_path)["spec"]
    assert lease["holderIdentity"] == holder and "atoll_leader 1.0" in installed.controller.metrics(), lease


def test_uninstall_leaves_no_webhook_registration(fleet: FleetHandle, installed: Installed) -> None:
    karmada = fleet.host()
    assert karmada.get_or_none(f"{MWC}/{RELEASE}") is not None
    helm(installed.karmada_kc, "uninstall", RELEASE, "-n", installed.ns, "--wait")
    left = [m["metadata"]["name"] for m in karmada.get(f"{MWC}?labelSelector=app.kubernetes.io%2Finstance%3D{RELEASE}")[
        "items"]]
    assert left == [] and karmada.get_or_none(f"{MWC}/{RELEASE}") is None
    for path in (f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{RELEASE}-controller",
                 f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{RELEASE}-controller"):
        assert karmada.get_or_none(path) is None, path


def metric(ctl: ControllerProcess, name: str) -> float:
    for line in ctl.metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")
