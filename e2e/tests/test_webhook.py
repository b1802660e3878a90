"""The webhook on the real karmada-apiserver: bindings of managed workloads are created paused."""

from __future__ import annotations

import contextlib
import functools
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from e2e.conftest import FleetHandle as FleetInfo
from e2e.harness.kube import Kube, wait_for
from e2e.tests.support import delete, works_for
from e2e.tests.webhook_support import WebhookProcess, registered, start_webhook
from engine.kube.webhook import PAUSED_ANNOTATION

pytestmark = pytest.mark.e2e
NS = "atoll-wh-e2e"


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[WebhookProcess]:
    wh = start_webhook(tmp_path)
    yield wh
    wh.stop()


def deployment(name: str, ns: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox",
                                                           "resources": {"requests": {"cpu": "100m"}}}]}}}}


def configmap(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"k": "v"}}


def propagation(name: str, ns: str, kind: str, api_version: str, dispatching: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceSelectors": [{"apiVersion": api_version, "kind": kind, "name": name}],
                            "placement": {"clusterAffinity": {}}}
    if dispatching:
        spec["suspension"] = {"dispatching": True}
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def binding(kube: Kube, ns: str, name: str) -> Any:
    return kube.get_or_none(f"/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings/{name}")


@contextlib.contextmanager
def created(kube: Kube, *objs: dict[str, Any]) -> Iterator[None]:
    for o in objs:
        kube.apply(o)
    try:
        yield
    finally:
        for o in reversed(objs):
            delete(kube, kube.path_for(o))


@pytest.fixture
def namespace(fleet: FleetInfo) -> Iterator[str]:
    kube = fleet.host()
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    yield NS


def test_managed_binding_created_paused_and_unmanaged_scheduled(fleet: FleetInfo, webhook: WebhookProcess,
                                                              namespace: str) -> None:
    kube = fleet.host()
    with contextlib.contextmanager(registered)(kube, webhook), created(
            kube, deployment("web", namespace), propagation("web", namespace, "Deployment", "apps/v1", True),
            configmap("cfg", namespace), propagation("cfg", namespace, "ConfigMap", "v1")):
        rb = wait_for("ResourceBinding web-deployment", lambda: binding(kube, namespace, "web-deployment"), 60)
        assert rb["spec"]["suspension"]["scheduling"] is True
        assert rb["spec"]["suspension"]["dispatching"] is True, "dispatching from the policy was dropped"
        assert PAUSED_ANNOTATION in rb["metadata"]["annotations"]
        # the unmanaged ConfigMap binding is scheduled normally: proves karmada-scheduler runs meanwhile
        cm = wait_for("ConfigMap binding scheduled",
                      lambda: (b := binding(kube, namespace, "cfg-configmap")) and b["spec"].get("clusters") and b,
                      90)
        assert not (cm["spec"].get("suspension") or {}).get("scheduling")
        rb = binding(kube, namespace, "web-deployment")
        assert not rb["spec"].get("clusters"), f"paused binding was scheduled: {rb['spec'].get('clusters')}"
        assert "schedulerObservedGeneration" not in (rb.get("status") or {})
        # make the detector rewrite the binding (template replicas 1 -> 3); suspension.scheduling must survive
        kube.request("PATCH", f"/apis/apps/v1/namespaces/{namespace}/deployments/web", {"spec": {"replicas": 3}},
                     content_type="application/merge-patch+json")
        rb = wait_for("detector copied replicas 3 into the paused binding",
                      lambda: (b := binding(kube, namespace, "web-deployment")) and b["spec"].get("replicas") == 3
                      and b, 60)
        assert rb["spec"]["suspension"]["scheduling"] is True and not rb["spec"].get("clusters")


def test_system_namespace_never_paused(fleet: FleetInfo, webhook: WebhookProcess) -> None:
    # Karmada's detector never builds bindings in karmada-system (names.IsReservedNamespace) nor in kube-*
    # (--skipped-propagating-namespaces default), so a system-namespace binding can only come from another
    # controller: create one directly, for a managed kind, and check Atoll leaves it alone.
    kube = fleet.host()
    ns = "karmada-system"
    name = "atoll-sys-" + uuid.uuid4().hex[:6]
    dep = kube.apply(deployment(name, ns))
    rb = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
          "metadata": {"name": f"{name}-deployment", "namespace": ns,
                       "labels": {"binding.karmada.io/managed-by": "atoll-e2e"},
                       "finalizers": ["karmada.io/binding-controller"]},  # Works go with the binding
          "spec": {"schedulerName": "default-scheduler", "replicas": 1,
                   "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": name,
                                "uid": dep["metadata"]["uid"]},
                   "placement": {"clusterAffinity": {"clusterNames": fleet.members}}}}
    rb_path = f"/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings"
    with contextlib.contextmanager(registered)(kube, webhook):
        try:
            created_rb = kube.request("POST", rb_path, rb)
            assert not (created_rb["spec"].get("suspension") or {}).get("scheduling")
            assert PAUSED_ANNOTATION not in (created_rb["metadata"].get("annotations") or {})
            rb_now = wait_for("karmada-system binding scheduled",
                              lambda: (b := binding(kube, ns, f"{name}-deployment")) and b["spec"].get("clusters") and b,
                              90)
            # Delete it only once Karmada's controllers have seen every Work it made: the binding controller deletes
            # a binding's Works as listed from its informer cache, so a Work created a moment before the deletion
            # can be missing there and is left behind for good (seen in CI: the member2 Work kept failing to apply,
            # the namespace karmada-system not being propagated). The status controller shares that cache and
            # aggregates one entry per Work it lists, applied or not.
            targets = {c["name"] for c in rb_now["spec"]["clusters"]}
            wait_for("every Work of the binding seen by Karmada (status.aggregatedStatus)",
                     lambda: targets <= {s.get("clusterName") for s in (((binding(kube, ns, f"{name}-deployment") or {})
                                                                         .get("status") or {}).get("aggregatedStatus")
                                                                        or [])}, 60)
        finally:
            delete(kube, f"{rb_path}/{name}-deployment")
            delete(kube, f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")
    for cluster in fleet.members:  # the binding's finalizer made Karmada delete its Works first
        wait_for(f"Works of {ns}/{name} removed from karmada-es-{cluster}",
                 functools.partial(no_works, kube, cluster, ns, name), 60)


def no_works(kube: Kube, cluster: str, ns: str, name: str) -> bool:
    return not works_for(kube, cluster, "Deployment", ns, name)


def test_webhook_down_with_ignore_never_blocks(fleet: FleetInfo, webhook: WebhookProcess, namespace: str) -> None:
    kube = fleet.host()
    with contextlib.contextmanager(registered)(kube, webhook):
        webhook.stop()
        with created(kube, deployment("down", namespace),
                     propagation("down", namespace, "Deployment", "apps/v1")):
            rb = wait_for("binding created while the webhook is down",
                          lambda: binding(kube, namespace, "down-deployment"), 60)
            assert not (rb["spec"].get("suspension") or {}).get("scheduling")
