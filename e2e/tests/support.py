"""Small helpers shared by the e2e tests: object builders, paths, patches and condition waits.

Every wait is a poll on an observable condition with a deadline (``wait_for``); a timeout
names what was awaited and the last value seen, so a red test explains itself.
"""
from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from e2e.harness.kube import Kube, KubeError, wait_for

T = TypeVar("T")

RB_API = "/apis/work.karmada.io/v1alpha2"
WORK_API = "/apis/work.karmada.io/v1alpha1"
POLICY_API = "policy.karmada.io/v1alpha1"
RUN_SECONDS = "atoll.dev/run-seconds"


def unique(prefix: str) -> str:
    """A fresh name, so a reused fleet never meets leftovers of an earlier run."""
    return f"{prefix}-{secrets.token_hex(3)}"


def others_gone(host: Kube, own: str, timeout: float = 300.0) -> None:
    """Wait until every other test's namespace (``atoll-<module>-<hex>``, deleted at its test's end) and every
    binding outside ``own`` are gone.

    For tests that change the whole fleet (a member deleted): a binding still being deleted lists its members,
    and Karmada removes a Cluster only once no binding lists it. A binding can outlive its namespace (seen in
    CI: the namespace went while Karmada's finalizer was still on it); then no API call on it is possible
    (NamespaceLifecycle: "namespace not found") and it would stay for ever. Such a binding is released the
    way an operator would: its namespace is created again, the binding touched so Karmada's binding
    controller finishes it now, and the namespace deleted once it is gone."""
    pattern = re.compile(r"^atoll-[a-z0-9-]+-[0-9a-f]{6}$")
    recreated: set[str] = set()

    def left() -> list[str]:
        spaces = {item["metadata"]["name"] for item in host.get("/api/v1/namespaces")["items"]}
        rbs = host.get(f"{RB_API}/resourcebindings")["items"]
        for rb in rbs:
            ns, name = rb["metadata"]["namespace"], rb["metadata"]["name"]
            if ns not in spaces and rb["metadata"].get("deletionTimestamp"):
                namespace(host, ns)
                spaces.add(ns)
                recreated.add(ns)
                merge_patch(host, f"{RB_API}/namespaces/{ns}/resourcebindings/{name}",
                            {"metadata": {"annotations": {"atoll.dev/e2e-release": "1"}}})
        for ns in sorted(recreated - {rb["metadata"]["namespace"] for rb in rbs}):
            delete(host, f"/api/v1/namespaces/{ns}")     # its stranded bindings are gone now
            recreated.discard(ns)
        return sorted({n for n in spaces if pattern.match(n) and n != own}
                      | {f"binding {rb['metadata']['namespace']}/{rb['metadata']['name']}" for rb in rbs
                         if rb["metadata"]["namespace"] != own})

    until("other tests' namespaces and bindings gone", lambda: not left(), timeout, show=left)


def until(what: str, check: Callable[[], T | None | Literal[False]], timeout: float = 90.0, show: Callable[[], Any] | None = None) -> T:
    """``wait_for`` that, on timeout, also reports the current state (``show()``)."""
    try:
        return wait_for(what, check, timeout)
    except TimeoutError as e:
        if show is None:
            raise
        try:
            state = show()
        except KubeError as err:
            state = f"<cannot read: {err}>"
        raise TimeoutError(f"{e}\ncurrent state: {state}") from None


def namespace(kube: Kube, name: str) -> None:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def delete(kube: Kube, path: str) -> None:
    try:
        kube.request("DELETE", path)
    except KubeError as e:
        if e.status != 404:
            raise


def merge_patch(kube: Kube, path: str, body: dict[str, Any]) -> Any:
    return kube.request("PATCH", path, body, content_type="application/merge-patch+json")


def create(kube: Kube, path: str, obj: dict[str, Any]) -> Any:
    """Plain POST (not apply): the object must not exist yet."""
    return kube.request("POST", path, obj)


def rb_path(ns: str, name: str = "") -> str:
    return f"{RB_API}/namespaces/{ns}/resourcebindings" + (f"/{name}" if name else "")


def binding(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    rb: dict[str, Any] | None = kube.get_or_none(rb_path(ns, name))
    return rb


def scheduled(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    """The binding once karmada-scheduler has set Scheduled=True, else None."""
    rb = binding(kube, ns, name)
    return rb if is_true(rb, "Scheduled") else None


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def is_true(obj: dict[str, Any] | None, ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def works_for(kube: Kube, cluster: str, kind: str, ns: str, name: str) -> list[dict[str, Any]]:
    """Works in the cluster's execution namespace whose manifest is the given resource template."""
    found = []
    for w in kube.get(f"{WORK_API}/namespaces/karmada-es-{cluster}/works").get("items", []):
        for m in (w.get("spec", {}).get("workload", {}) or {}).get("manifests", []) or []:
            meta = m.get("metadata", {})
            if m.get("kind") == kind and meta.get("name") == name and meta.get("namespace", "") == ns:
                found.append(w)
    return found


def propagation_policy(name: str, ns: str, selectors: list[dict[str, str]], placement: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "PropagationPolicy", "metadata": {"name": name, "namespace": ns},
            "spec": {"resourceSelectors": selectors, "placement": placement}}


def cluster_propagation_policy(name: str, selectors: list[dict[str, str]], placement: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": POLICY_API, "kind": "ClusterPropagationPolicy", "metadata": {"name": name},
            "spec": {"resourceSelectors": selectors, "placement": placement}}


def batch_job(name: str, ns: str, parallelism: int, completions: int, run_seconds: int,
              requests: dict[str, str]) -> dict[str, Any]:
    """A batch/v1 Job whose pods kwok runs for ``run_seconds`` and then completes."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"parallelism": parallelism, "completions": completions, "backoffLimit": 0,
                     "template": {"metadata": {"annotations": {RUN_SECONDS: str(run_seconds)}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "work", "image": "atoll.dev/e2e:noop",
                                                           "resources": {"requests": requests,
                                                                         "limits": requests}}]}}}}
