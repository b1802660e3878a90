"""Faults that come in through Atoll's inputs: its policy ConfigMap deleted and recreated, the webhook's serving
certificate rotated on disk under load, and hostile objects from the API. Each: what the operator sees (Events),
and that everything else keeps flowing.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
import socket
import ssl
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube, KubeError
from e2e.tests.controller_support import (POLICY_NS, ControllerProcess, annotations_of, atoll, events_for, job, policy_configmap,
                                          rb_name, wait_admitted, wait_pending)
from e2e.tests.fault_support import AdmissionWatch, Stream, binding_body, make_jobs
from e2e.tests.support import delete, rb_path, until
from e2e.tests.webhook_support import MWC_NAME, WebhookProcess, registered, start_webhook
from engine.kube.webhook_certs import write_certs

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
MWC = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{MWC_NAME}"


def default_policy() -> str:
    return (REPO / "policies" / "default.yaml").read_text()


def cm_events(host: Kube, cm: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in events_for(host, POLICY_NS, cm) if e["reason"] == reason]


def test_policy_configmap_deleted_and_recreated(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    text = default_policy()
    with atoll(fleet.info, tmp_path, text) as (_, ctl, cm):
        delete(host, f"/api/v1/namespaces/{POLICY_NS}/configmaps/{cm}")
        (ev,) = until("a PolicyDeleted Warning on the ConfigMap", lambda: cm_events(host, cm, "PolicyDeleted"), 30)
        assert ev["type"] == "Warning" and "keeps running" in ev["message"], ev
        j = job("while-deleted", ns, cpu="1", pods=1, run_seconds=5)   # scheduled by the running policy
        host.apply(j)
        jobs = make_jobs(host, ns, 1, prefix="w")
        for name, uid in jobs.items():
            host.request("POST", rb_path(ns), binding_body(name, uid, ns, fleet.members))
        until("admitted under the running policy", lambda: all(
            "atoll.dev/admitted-at" in annotations_of(host.get_or_none(rb_path(ns, f"{n}-job"))) for n in jobs), 60)
        host.apply(policy_configmap(cm, text))
        loaded = until("a PolicyLoaded Event saying it was recreated", lambda: [
            e for e in cm_events(host, cm, "PolicyLoaded") if "recreated" in e["message"]], 30)
        assert "unchanged" in loaded[0]["message"], loaded
        assert ctl.alive(), ctl.log_tail()
        assert "policy ConfigMap" in ctl.log.read_text() and "deleted" in ctl.log.read_text()


def served_certificate(port: int) -> bytes:
    """The DER certificate the webhook presents on a new TLS handshake."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def pem_to_der(path: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(Path(path).read_text())


def replace_file(src: str, dst: str) -> None:
    """Atomic replace, as the kubelet swaps a mounted Secret (a rename over the old file)."""
    tmp = dst + ".new"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def test_webhook_certificate_rotated_on_disk_without_restart(fleet: FleetHandle, host: Kube, ns: str,
                                                             tmp_path: Path) -> None:
    """failurePolicy Fail: a single failed admission would fail its POST. Bindings are created all through a
    rotation to a certificate from a new CA (the caBundle carries both CAs meanwhile, as cert-manager's CA
    rotation does); the webhook serves the new certificate without a restart and pauses every binding."""
    wh: WebhookProcess = start_webhook(tmp_path)
    fresh = write_certs(str(tmp_path / "rotated"))
    bodies = {f"c{i:03d}-job": binding_body(f"c{i:03d}", f"uid-{i}", ns, fleet.members) for i in range(150)}
    for body in bodies.values():
        body["metadata"].pop("finalizers")         # no template, never scheduled: nothing to withdraw
    try:
        with contextlib.contextmanager(registered)(host, wh, "Fail"):
            old_der = served_certificate(wh.port)
            stream = Stream(host, rb_path(ns), bodies, rate=20, outage=0)
            until("a third of the stream sent", lambda: stream.progress() >= 50, 60)
            bundle = wh.certs.ca_pem() + fresh.ca_pem()
            mwc = host.get(MWC)
            mwc["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(bundle).decode()
            host.request("PUT", MWC, mwc)
            replace_file(fresh.cert, wh.certs.cert)
            replace_file(fresh.key, wh.certs.key)
            new_der = pem_to_der(fresh.cert)
            until("the webhook serves the rotated certificate", lambda: served_certificate(wh.port) == new_der, 30)
            assert new_der != old_der
            at_rotation = stream.progress()
            stream.wait(60)
            assert wh.proc.poll() is None, "the webhook restarted"
        watch = AdmissionWatch(host, ns)
        until("every binding seen", lambda: set(bodies) <= set(watch.last), 30)
        assert watch.not_paused_at_create() == [], "an admission failed open"
        watch.stop()
        log = wh.log.read_text()
        assert "TLS certificate reloaded" in log, log[-2000:]
        print(f"\nrotated after {at_rotation} of {len(bodies)} bindings; new cert sha256 "
              f"{hashlib.sha256(new_der).hexdigest()[:16]}")
    finally:
        wh.stop()


def vcjob_with(name: str, ns: str, cpu: Any = "10m", tasks: int = 1, annotations: Optional[dict[str, str]] = None
               ) -> dict[str, Any]:
    """A Volcano Job whose tasks are as small as the CRD allows (10,000 of them must stay under etcd's 1.5 MiB)."""
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"queue": "default", "schedulerName": "volcano", "minAvailable": 1,
                     "tasks": [{"name": f"t{i}", "replicas": 1, "template": {"spec": {"containers": [
                         {"name": "w", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}}
                               for i in range(tasks)]}}


def vc_binding(obj: dict[str, Any], members: list[str]) -> dict[str, Any]:
    m = obj["metadata"]
    body = binding_body(m["name"], m["uid"], m["namespace"], members)
    body["metadata"]["name"] = rb_name(obj)
    body["spec"]["resource"].update(apiVersion=obj["apiVersion"], kind="Job")
    body["metadata"].pop("finalizers")
    return body


def warnings_on(host: Kube, ns: str, rb: str) -> Callable[[], list[dict[str, Any]]]:
    return lambda: [e for e in events_for(host, ns, rb) if e["type"] == "Warning"]


def state_of(host: Kube, ns: str, rb: str, ctl: ControllerProcess) -> Callable[[], Any]:
    return lambda: (annotations_of(host.get_or_none(rb_path(ns, rb))), [
        (e["type"], e["reason"], e["message"][:200]) for e in events_for(host, ns, rb)], ctl.log_tail(5))


def try_create(host: Kube, obj: dict[str, Any]) -> Optional[dict[str, Any]]:
    """POST; None when the API server itself refuses the object (422/400: it never reaches Atoll)."""
    try:
        created: dict[str, Any] = host.request("POST", host.path_for(obj).rsplit("/", 1)[0], obj, timeout=60)
        return created
    except KubeError as e:
        if e.status in (400, 413, 422):
            print(f"\nAPI server refused {obj['metadata']['name']}: {str(e)[:200]}")
            return None
        raise


def test_hostile_objects_get_a_warning_and_everything_else_flows(fleet: FleetHandle, host: Kube, ns: str,
                                                                 tmp_path: Path) -> None:
    hostile = {
        "huge-cpu": vcjob_with("huge-cpu", ns, cpu="1e30"),
        "negative-cpu": vcjob_with("negative-cpu", ns, cpu="-1"),
        "words-cpu": vcjob_with("words-cpu", ns, cpu="lots"),
        "many-tasks": vcjob_with("many-tasks", ns, tasks=10_000),
        "big-annotation": vcjob_with("big-annotation", ns, annotations={"atoll.dev/notes": "x" * 100 * 1024}),
    }
    big_label = vcjob_with("big-label", ns)
    big_label["metadata"]["labels"] = {"atoll.dev/notes": "x" * 100 * 1024}
    with atoll(fleet.info, tmp_path, default_policy()) as (_, ctl, _cm):
        assert try_create(host, big_label) is None, "a 100 KiB label value was accepted by the API server"
        created = {name: made for name, spec in hostile.items() if (made := try_create(host, spec)) is not None}
        wide = job("wide", ns, cpu="10m", pods=10_000)              # a batch Job of 10,000 parallel pods
        created["wide"] = host.apply(wide)
        for obj in created.values():
            host.request("POST", rb_path(ns), vc_binding(obj, fleet.members))
        good = make_jobs(host, ns, 20, prefix="g")
        watch = AdmissionWatch(host, ns)
        for name, uid in good.items():
            host.request("POST", rb_path(ns), binding_body(name, uid, ns, fleet.members))
        watch.wait_all_admitted({f"{n}-job" for n in good}, 120)
        warned = {}
        for name, obj in created.items():
            if name == "big-annotation":
                continue
            warned[name] = until(f"a Warning Event on {rb_name(obj)}", warnings_on(host, ns, rb_name(obj)), 60,
                                 show=state_of(host, ns, rb_name(obj), ctl))
            wait_pending(host, obj, timeout=10)
        if "big-annotation" in created:                # harmless, only big: scheduled like any other
            wait_admitted(host, created["big-annotation"], 60)
        for name, evs in warned.items():
            print(f"{name}: {evs[0]['reason']}: {evs[0]['message'][:160]}")
        assert ctl.alive(), ctl.log_tail()
        assert "Traceback" not in ctl.log.read_text(), ctl.log_tail(60)
        watch.stop()



