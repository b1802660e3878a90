"""The HTTP layer: status codes, health, metrics, policy reload keeping the old policy on error."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from engine.errors import InputError
from engine.kube.webhook import ManagedSelector
from engine.kube.webhook_bench import sample_review
from engine.kube.webhook_cli import selector_from_file
from engine.kube.webhook_server import WebhookServer


async def client_for(server: WebhookServer) -> TestClient[Any, Any]:
    client: TestClient[Any, Any] = TestClient(TestServer(server.app()))
    await client.start_server()
    return client


async def test_mutate_health_metrics() -> None:
    client = await client_for(WebhookServer(ManagedSelector()))
    try:
        r = await client.post("/mutate", data=json.dumps(sample_review(1)))
        assert r.status == 200
        assert (await r.json())["response"]["patchType"] == "JSONPatch"
        r = await client.post("/mutate", data=b"{")
        assert r.status == 400 and "not JSON" in (await r.json())["error"]
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/readyz")).status == 200
        text = await (await client.get("/metrics")).text()
        assert "atoll_webhook_request_duration_seconds_bucket" in text
        assert 'atoll_webhook_decisions_total{outcome="paused"}' in text
    finally:
        await client.close()


def managing(kind: str) -> str:
    return ("apiVersion: atoll.dev/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: t}\n"
            f"spec:\n  pipeline: {{}}\n  managedWorkloads:\n    kinds: [{kind}]\n")


def test_policy_reload_keeps_previous_on_error(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(managing("apps/v1/Deployment"))
    server = WebhookServer(selector_from_file(str(path)), lambda: selector_from_file(str(path)), (str(path),))
    assert server.selector.kinds == frozenset({"apps/v1/Deployment"})
    path.write_text("spec: [unclosed\n")
    os.utime(path, ns=(1, 1))
    assert server.reload_policy() is False
    assert server.selector.kinds == frozenset({"apps/v1/Deployment"})
    path.write_text(managing("batch/v1/Job"))
    os.utime(path, ns=(2, 2))
    assert server.reload_policy() is True
    assert server.selector.kinds == frozenset({"batch/v1/Job"})


def test_missing_policy_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read policy"):
        selector_from_file(str(tmp_path / "nope.yaml"))


async def test_a_review_above_aiohttps_1_mib_default_gets_a_normal_answer() -> None:
    # a legal binding above 1 MiB got 413 and, with failurePolicy Ignore, was created unpaused (past the queue)
    from engine.kube.webhook_server import MAX_REVIEW_BYTES
    client = await client_for(WebhookServer(ManagedSelector()))
    try:
        review = sample_review(1)
        claim = {"nodeClaim": {"nodeSelector": {"k": "v" * 1_400_000}}}   # legal: under etcd's 1.5 MiB
        review["request"]["object"]["spec"]["replicaRequirements"] = claim
        body = json.dumps(review)
        assert 1 << 20 < len(body) < MAX_REVIEW_BYTES
        r = await client.post("/mutate", data=body)
        assert r.status == 200
        answer = (await r.json())["response"]
        assert answer["uid"] == review["request"]["uid"] and answer["patchType"] == "JSONPatch"
        r = await client.post("/mutate", data=b" " * (MAX_REVIEW_BYTES + 1))      # still bounded
        assert r.status == 413
    finally:
        await client.close()
