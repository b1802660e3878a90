"""Admission decisions and the JSONPatch they produce (pure; no server)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from hypothesis import given, strategies as st

from engine.kube.webhook import (PAUSED_ANNOTATION, BadReview, ManagedSelector, escape_pointer, review,
                                 review_bytes, selector_from_policy)
from engine.kube.webhook_bench import sample_review

STAMP = "2026-01-01T00:00:00.000000Z"


def apply_add(doc: Any, patch: list[dict[str, Any]]) -> Any:
    """Minimal RFC 6902 'add' for objects, enough to check our patches the way the apiserver applies them."""
    doc = copy.deepcopy(doc)
    for op in patch:
        assert op["op"] == "add"
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = doc
        for p in parts[:-1]:
            target = target[p]          # KeyError = invalid patch (parent must exist)
        target[parts[-1]] = op["value"]
    return doc


def decide(body: dict[str, Any], selector: ManagedSelector = ManagedSelector()) -> tuple[str, Any]:
    d = review(body, selector, clock=lambda: STAMP)
    resp = d.response["response"]
    assert d.response["apiVersion"] == "admission.k8s.io/v1" and d.response["kind"] == "AdmissionReview"
    assert resp["uid"] == body["request"]["uid"] and resp["allowed"] is True
    patched = None
    if "patch" in resp:
        assert resp["patchType"] == "JSONPatch"
        patched = apply_add(body["request"]["object"], json.loads(base64.b64decode(resp["patch"])))
    return d.outcome, patched


def test_managed_binding_is_paused_and_dispatching_kept() -> None:
    body = sample_review(1)
    outcome, obj = decide(body)
    assert outcome == "paused"
    assert obj["spec"]["suspension"] == {"dispatching": False, "scheduling": True}
    assert obj["metadata"]["annotations"] == {PAUSED_ANNOTATION: STAMP}
    assert obj["spec"]["placement"] == body["request"]["object"]["spec"]["placement"]


def test_no_suspension_and_existing_annotations() -> None:
    body = sample_review(2)
    obj = body["request"]["object"]
    del obj["spec"]["suspension"]
    obj["metadata"]["annotations"] = {"keep": "me"}
    outcome, patched = decide(body)
    assert outcome == "paused"
    assert patched["spec"]["suspension"] == {"scheduling": True}
    assert patched["metadata"]["annotations"] == {"keep": "me", PAUSED_ANNOTATION: STAMP}


def test_null_suspension_is_replaced() -> None:
    body = sample_review(3)
    body["request"]["object"]["spec"]["suspension"] = None
    assert decide(body)[1]["spec"]["suspension"] == {"scheduling": True}


def test_cluster_resource_binding_of_managed_kind() -> None:
    body = sample_review(4)
    req = body["request"]
    req["namespace"] = ""
    req["resource"]["resource"] = "clusterresourcebindings"
    req["object"]["metadata"].pop("namespace")
    req["object"]["spec"]["resource"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}
    assert decide(body)[0] == "paused"


@pytest.mark.parametrize("mutate, outcome", [
    (lambda r: r["object"]["spec"]["resource"].update(kind="ConfigMap", apiVersion="v1"), "unmanaged"),
    (lambda r: r["object"]["spec"]["resource"].update(apiVersion="batch.volcano.sh/v1beta1"), "unmanaged"),
    (lambda r: r.update(operation="UPDATE"), "ignored"),
    (lambda r: r["resource"].update(resource="works"), "ignored"),
    (lambda r: r.update(namespace="karmada-system"), "unmanaged"),
    (lambda r: r.update(namespace="karmada-es-member1"), "unmanaged"),
    (lambda r: r["object"]["spec"]["resource"].update(namespace="kube-system"), "unmanaged"),
    (lambda r: r["object"]["spec"].pop("resource"), "unmanaged"),
])
def test_not_paused(mutate: Any, outcome: str) -> None:
    body = sample_review(5)
    mutate(body["request"])
    got, patched = decide(body)
    assert (got, patched) == (outcome, None)


def test_batch_job_managed_by_default() -> None:
    body = sample_review(6)
    body["request"]["object"]["spec"]["resource"]["apiVersion"] = "batch/v1"
    assert decide(body)[0] == "paused"


def test_namespace_include_exclude_from_policy() -> None:
    sel = selector_from_policy({"kinds": ["batch.volcano.sh/v1alpha1/Job"],
                                "namespaces": {"include": ["team-*"], "exclude": ["team-b"]}})
    body = sample_review(7)
    assert decide(body, sel)[0] == "paused"
    body["request"]["object"]["spec"]["resource"]["namespace"] = "team-b"
    assert decide(body, sel)[0] == "unmanaged"
    body["request"]["object"]["spec"]["resource"]["namespace"] = "other"
    assert decide(body, sel)[0] == "unmanaged"


def test_selector_from_policy_object_and_list() -> None:
    class Managed:
        kinds = ["apps/v1/Deployment"]
        namespaces = None

    class Policy:
        managed_workloads = Managed()

    assert selector_from_policy(Policy()).kinds == frozenset({"apps/v1/Deployment"})
    assert selector_from_policy(["batch/v1/Job"]).kinds == frozenset({"batch/v1/Job"})
    assert selector_from_policy(None) == ManagedSelector()


@pytest.mark.parametrize("raw, msg", [
    (b"not json", "not JSON"),
    (b"[]", "not a JSON object"),
    (b'{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}', "expected admission.k8s.io/v1"),
    (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}', "uid"),
])
def test_bad_reviews(raw: bytes, msg: str) -> None:
    with pytest.raises(BadReview, match=msg):
        review_bytes(raw, ManagedSelector())


@pytest.mark.parametrize("field, value", [("resource", ["resourcebindings"]), ("resource", {"a": 1}),
                                          ("group", ["work.karmada.io"])])
def test_a_review_naming_its_resource_with_a_list_or_map_is_a_bad_review(field: str, value: Any) -> None:
    """``request.resource.resource: []`` was looked up in a frozenset: TypeError "unhashable type: 'list'", which the
    server answered with a 500 and a logged traceback instead of a 400 naming the field."""
    body = sample_review(1)
    body["request"]["resource"][field] = value
    with pytest.raises(BadReview) as info:
        review_bytes(json.dumps(body).encode(), ManagedSelector())
    assert str(info.value) == f"request.resource.{field} must be a string, got {type(value).__name__}"


@given(st.text(min_size=1, max_size=20))
def test_pointer_escape_roundtrip(s: str) -> None:
    esc = escape_pointer(s)
    assert "/" not in esc
    assert esc.replace("~1", "/").replace("~0", "~") == s
    assert escape_pointer("atoll.dev/paused-by-webhook") == "atoll.dev~1paused-by-webhook"
