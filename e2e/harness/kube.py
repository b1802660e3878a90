"""A tiny synchronous Kubernetes REST client (stdlib only) for bootstrapping the fleet.

The harness must work before any Python Kubernetes client is configured and from a plain
``e2e/fleet`` shell call, so it speaks JSON over HTTPS with the static admin token. Objects are
applied with server-side apply (idempotent: ``fleet up`` can be re-run against a live fleet).
"""
from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

T = TypeVar("T")

# kind -> (plural, namespaced) for the kinds the harness applies; CRD kinds are looked up by discovery.
_KNOWN: dict[str, tuple[str, bool]] = {
    "Namespace": ("namespaces", False), "Secret": ("secrets", True), "Service": ("services", True),
    "ConfigMap": ("configmaps", True), "Node": ("nodes", False), "ServiceAccount": ("serviceaccounts", True),
    "CustomResourceDefinition": ("customresourcedefinitions", False), "APIService": ("apiservices", False),
    "MutatingWebhookConfiguration": ("mutatingwebhookconfigurations", False),
    "ValidatingWebhookConfiguration": ("validatingwebhookconfigurations", False),
    "ClusterRole": ("clusterroles", False), "ClusterRoleBinding": ("clusterrolebindings", False),
    "Cluster": ("clusters", False),
}


class KubeError(RuntimeError):
    """An API call failed; carries the HTTP status (0 for connection errors)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Kube:
    """Minimal client bound to one apiserver URL, CA and bearer token."""

    def __init__(self, server: str, ca_file: Path, token: str, name: str = "") -> None:
        self.server = server.rstrip("/")
        self.name = name or server
        self._token = token
        self._ctx = ssl.create_default_context(cafile=str(ca_file))
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=self._ctx),
                                                   urllib.request.ProxyHandler({}))

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context trusting the fleet CA (for clients other than this one, e.g. an asyncio load)."""
        return self._ctx

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                timeout: float = 15.0) -> Any:
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except (ValueError, AttributeError):
                pass
            raise KubeError(e.code, f"{self.name}: {method} {path}: HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            raise KubeError(0, f"{self.name}: {method} {path}: {e}") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 60) -> Iterator[dict[str, Any]]:
        """The events of one watch on a collection from ``resource_version``, as they arrive, until the server
        ends it after ``timeout_seconds`` (callers reopen from the last resourceVersion they saw)."""
        query = f"watch=1&allowWatchBookmarks=true&resourceVersion={resource_version}&timeoutSeconds={timeout_seconds}"
        req = urllib.request.Request(f"{self.server}{path}{'&' if '?' in path else '?'}{query}")
        req.add_header("Authorization", f"Bearer {self._token}")
        req.add_header("Accept", "application/json")
        try:
            with self._opener.open(req, timeout=timeout_seconds + 30) as resp:
                for line in resp:
                    if line.strip():
                        yield json.loads(line)
        except urllib.error.HTTPError as e:
            raise KubeError(e.code, f"{self.name}: WATCH {path}: HTTP {e.code}") from None
        except (urllib.error.URLError, OSError) as e:
            raise KubeError(0, f"{self.name}: WATCH {path}: {e}") from None

    def get(self, path: str, timeout: float = 15.0) -> Any:
        return self.request("GET", path, timeout=timeout)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def healthy(self, path: str = "/readyz") -> bool:
        try:
            return self.get(path, timeout=3.0) == "ok"
        except KubeError:
            return False

    def _resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        if kind in _KNOWN:
            return _KNOWN[kind]
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        for r in self.get(base).get("resources", []):
            if r.get("kind") == kind and "/" not in r["name"]:
                return r["name"], bool(r.get("namespaced"))
        raise KubeError(404, f"{self.name}: kind {kind} not served under {base}")

    def path_for(self, obj: dict[str, Any]) -> str:
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural, namespaced = self._resource(api_version, kind)
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        ns = obj["metadata"].get("namespace")
        prefix = f"{base}/namespaces/{ns or 'default'}" if namespaced else base
        return f"{prefix}/{plural}/{obj['metadata']['name']}"

    def apply(self, obj: dict[str, Any], manager: str = "atoll-e2e") -> Any:
        """Server-side apply with force, so re-applying the same manifest is a no-op."""
        return self.request("PATCH", self.path_for(obj) + f"?fieldManager={manager}&force=true", obj,
                            content_type="application/apply-patch+yaml")

    def apply_status(self, obj: dict[str, Any], manager: str = "atoll-e2e") -> Any:
        return self.request("PATCH", self.path_for(obj) + f"/status?fieldManager={manager}&force=true", obj,
                            content_type="application/apply-patch+yaml")


def wait_for(what: str, check: Callable[[], T | None | Literal[False]], timeout: float, hint: str = "",
             interval: float = 0.5) -> T:
    """Poll ``check`` until it returns a truthy value; raise TimeoutError naming ``what`` and ``hint``."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except (KubeError, OSError) as e:
            last_error = e
        if time.monotonic() >= deadline:
            msg = f"timed out after {timeout:.0f}s waiting for {what}"
            if last_error is not None:
                msg += f" (last error: {last_error})"
            if hint:
                msg += f"; {hint}"
            raise TimeoutError(msg)
        time.sleep(interval)
