"""Mutating admission for Karmada bindings: pause managed workloads at CREATE.

Suspending a binding after karmada-scheduler placed it does not undo the placement, so Atoll must pause
at creation. The decision is a pure function (``review``) so it is unit-testable and cheap; the aiohttp
server around it only parses, times and answers. Anything not managed is allowed untouched — a webhook
must never be the reason propagation stops for objects Atoll does not schedule.
"""

from __future__ import annotations

import base64
import fnmatch
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Optional

PAUSED_ANNOTATION = "atoll.dev/paused-by-webhook"
BINDING_GROUP = "work.karmada.io"
BINDING_RESOURCES = frozenset({"resourcebindings", "clusterresourcebindings"})

# Karmada's and Kubernetes' own namespaces: never paused, whatever the policy says.
SYSTEM_NAMESPACES = ("karmada-system", "karmada-cluster", "kube-system", "kube-public", "kube-node-lease",
                     "karmada-es-*")

DEFAULT_KINDS = ("batch.volcano.sh/v1alpha1/Job", "batch/v1/Job", "apps/v1/Deployment")


class BadReview(ValueError):
    """The request is not an AdmissionReview v1 we can answer (HTTP 400)."""


@dataclass(frozen=True)
class ManagedSelector:
    """Which templates Atoll schedules: "group/version/Kind" strings plus namespace globs.

    ``include`` empty means every namespace. Cluster-scoped templates (ClusterResourceBinding) are matched
    by kind only, since they have no namespace to filter on.
    """

    kinds: frozenset[str] = frozenset(DEFAULT_KINDS)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    system: tuple[str, ...] = SYSTEM_NAMESPACES

    def namespace_managed(self, namespace: str) -> bool:
        if _matches(namespace, self.system) or _matches(namespace, self.exclude):
            return False
        return not self.include or _matches(namespace, self.include)

    def manages(self, api_version: str, kind: str, namespace: str, binding_namespace: str) -> bool:
        if f"{api_version}/{kind}" not in self.kinds:
            return False
        if binding_namespace and _matches(binding_namespace, self.system):
            return False
        return not namespace or self.namespace_managed(namespace)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def selector_from_policy(policy: Any) -> ManagedSelector:
    """Build a selector from ``policy.managed_workloads`` (duck-typed: the policy module owns the shape).

    Accepts an object or mapping with ``kinds`` and ``namespaces`` (``include``/``exclude``), or a plain
    list of kinds; anything missing keeps the default.
    """
    managed = getattr(policy, "managed_workloads", policy)
    if managed is None:
        return ManagedSelector()
    if isinstance(managed, (list, tuple, set, frozenset)):
        return ManagedSelector(kinds=frozenset(str(k) for k in managed))
    kinds = _get(managed, "kinds")
    namespaces = _get(managed, "namespaces")
    include = _get(namespaces, "include") if namespaces is not None else None
    exclude = _get(namespaces, "exclude") if namespaces is not None else None
    return ManagedSelector(
        kinds=frozenset(str(k) for k in kinds) if kinds else frozenset(DEFAULT_KINDS),
        include=tuple(str(n) for n in include or ()),
        exclude=tuple(str(n) for n in exclude or ()),
    )


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def escape_pointer(segment: str) -> str:
    """RFC 6901 escaping of one JSON-pointer segment."""
    return segment.replace("~", "~0").replace("/", "~1")


def pause_patch(obj: Mapping[str, Any], stamp: str) -> list[dict[str, Any]]:
    """JSONPatch that sets spec.suspension.scheduling=true and keeps every other suspension field.

    ``add /spec/suspension`` would replace the object and drop ``dispatching`` copied from the
    PropagationPolicy, so when suspension exists only the ``scheduling`` member is added.
    """
    spec = obj.get("spec")
    patch: list[dict[str, Any]] = []
    if not isinstance(spec, Mapping):
        patch.append({"op": "add", "path": "/spec", "value": {"suspension": {"scheduling": True}}})
    elif isinstance(spec.get("suspension"), Mapping):
        patch.append({"op": "add", "path": "/spec/suspension/scheduling", "value": True})
    else:
        patch.append({"op": "add", "path": "/spec/suspension", "value": {"scheduling": True}})
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("annotations"), Mapping):
        patch.append({"op": "add", "path": "/metadata/annotations/" + escape_pointer(PAUSED_ANNOTATION),
                      "value": stamp})
    elif isinstance(metadata, Mapping):
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {PAUSED_ANNOTATION: stamp}})
    return patch


def now_stamp() -> str:
    """RFC 3339 UTC with microseconds: fine enough for create -> resume latency."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Decision:
    """What was answered, for metrics and logs."""

    outcome: str                       # "paused" | "ignored" | "unmanaged"
    response: dict[str, Any] = field(default_factory=dict)


def review(body: Any, selector: ManagedSelector, clock: Callable[[], str] = now_stamp) -> Decision:
    """Answer one AdmissionReview v1. Raises BadReview for requests that are not one."""
    if not isinstance(body, Mapping):
        raise BadReview("body is not a JSON object")
    if body.get("apiVersion") != "admission.k8s.io/v1" or body.get("kind") != "AdmissionReview":
        raise BadReview(f"expected admission.k8s.io/v1 AdmissionReview, got "
                        f"{body.get('apiVersion')!r} {body.get('kind')!r}")
    request = body.get("request")
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview("request.uid is missing")
    uid = request["uid"]
    answer: dict[str, Any] = {"uid": uid, "allowed": True}
    outcome = _classify(request, selector)
    if outcome == "paused":
        patch = pause_patch(request["object"], clock())
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return Decision(outcome, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                              "response": answer})


def _classify(request: Mapping[str, Any], selector: ManagedSelector) -> str:
    resource = request.get("resource")
    if request.get("operation") != "CREATE" or not isinstance(resource, Mapping):
        return "ignored"
    for name in ("group", "resource"):          # a list is unhashable: the set lookup below raised TypeError (500)
        if resource.get(name) is not None and not isinstance(resource.get(name), str):
            raise BadReview(f"request.resource.{name} must be a string, got {type(resource.get(name)).__name__}")
    if resource.get("group") != BINDING_GROUP or resource.get("resource") not in BINDING_RESOURCES:
        return "ignored"
    if request.get("dryRun"):
        pass                           # dry runs are answered the same way; we have no side effects
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        return "ignored"
    spec = obj.get("spec")
    template = spec.get("resource") if isinstance(spec, Mapping) else None
    if not isinstance(template, Mapping):
        return "unmanaged"
    binding_ns = str(request.get("namespace") or _get(obj.get("metadata") or {}, "namespace") or "")
    if selector.manages(str(template.get("apiVersion", "")), str(template.get("kind", "")),
                        str(template.get("namespace") or ""), binding_ns):
        return "paused"
    return "unmanaged"


def review_bytes(raw: bytes, selector: ManagedSelector,
                 clock: Optional[Callable[[], str]] = None) -> Decision:
    """Parse and review; JSON errors become BadReview."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadReview(f"body is not JSON: {exc}") from None
    except RecursionError:                 # json.loads recurses: 100k-deep [[[...]]] must not become a 500
        raise BadReview("body is nested too deeply") from None
    return review(body, selector, clock or now_stamp)
