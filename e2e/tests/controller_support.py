"""Run `atoll webhook` + `atoll run` against the real fleet, and build the workloads the controller tests use."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from e2e.harness.fleet import FleetInfo
from e2e.harness.kube import Kube, KubeError
from e2e.tests.support import RUN_SECONDS, binding, delete, propagation_policy, unique, until
from e2e.tests.webhook_support import (WebhookProcess, child_env, free_port, registered, start_webhook, terminate,
                                       wait_serving)

REPO = Path(__file__).resolve().parents[2]
POLICY_NS = "atoll-system"
PAUSED = "atoll.dev/paused-by-webhook"


@dataclass
class ControllerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    argv: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, as when a node dies mid-stream."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        terminate(self.proc)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    def explain(self, key: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/explain?job={key}", timeout=5) as r:
            return str(r.read().decode())

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def start_controller(info: FleetInfo, workdir: Path, policy_ref: str, extra: Optional[list[str]] = None,
                     name: str = "controller") -> ControllerProcess:
    port = free_port()
    log = workdir / f"{name}.log"
    argv = [sys.executable, "-m", "engine.cli", "run", "--kubeconfig", str(info.host_kubeconfig),
            "--policy-configmap", policy_ref, "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
            *(extra or [])]
    out = open(log, "ab")
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=str(REPO), env=child_env(workdir))
    ctl = ControllerProcess(proc, port, log, argv)
    wait_serving("atoll run", f"http://127.0.0.1:{port}/readyz", proc, ctl.stop, log, 60)
    return ctl


def policy_configmap(name: str, text: str, ns: str = POLICY_NS) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"policy.yaml": text}}


@contextlib.contextmanager
def atoll(info: FleetInfo, workdir: Path, policy_text: str, extra: Optional[list[str]] = None
          ) -> Iterator[tuple[WebhookProcess, ControllerProcess, str]]:
    """Webhook registered + controller running with a fresh policy ConfigMap; all removed afterwards."""
    kube = info.host()
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POLICY_NS}})
    cm = unique("policy")
    kube.apply(policy_configmap(cm, policy_text))
    wh = start_webhook(workdir)
    ctl: Optional[ControllerProcess] = None
    try:
        with contextlib.contextmanager(registered)(kube, wh):
            ctl = start_controller(info, workdir, f"{POLICY_NS}/{cm}", extra)
            yield wh, ctl, cm
    finally:
        if ctl is not None:
            ctl.stop()
        wh.stop()
        delete(kube, f"/api/v1/namespaces/{POLICY_NS}/configmaps/{cm}")


def job(name: str, ns: str, cpu: str, pods: int = 1, run_seconds: Optional[int] = None,
        labels: Optional[dict[str, str]] = None, priority_class: str = "", gpu: Optional[str] = None) -> dict[str, Any]:
    """A batch/v1 Job of ``pods`` parallel pods; kwok completes them after ``run_seconds`` (never if None)."""
    requests = {"cpu": cpu, "memory": "1Gi"}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
    pod_meta: dict[str, Any] = {"annotations": {RUN_SECONDS: str(run_seconds)}} if run_seconds else {}
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "work", "image": "atoll.dev/e2e:noop", "resources": {"requests": requests, "limits": requests}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "template": {"metadata": pod_meta, "spec": spec}}}


def vcjob(name: str, ns: str, queue: str, tasks: list[tuple[str, int, str]], min_available: Optional[int] = None,
          gpu: Optional[str] = None) -> dict[str, Any]:
    """A Volcano Job (members have no Volcano controller: it propagates but runs no pods)."""
    def template(cpu: str) -> dict[str, Any]:
        req = {"cpu": cpu, "memory": "1Gi", **({"nvidia.com/gpu": gpu} if gpu else {})}
        return {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "w", "image": "atoll.dev/e2e:noop", "resources": {"requests": req, "limits": req}}]}}
    spec: dict[str, Any] = {"queue": queue, "schedulerName": "volcano",
                            "tasks": [{"name": n, "replicas": r, "template": template(cpu)} for n, r, cpu in tasks]}
    if min_available is not None:
        spec["minAvailable"] = min_available
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def propagate(kube: Kube, obj: dict[str, Any], clusters: list[str], scheduler: Optional[str] = None) -> None:
    """A PropagationPolicy sending the workload, undivided where it fits, to ``clusters``; ``scheduler``: its
    bindings' ``schedulerName`` (``atoll``: placed by Atoll in bind mode, ignored by karmada-scheduler)."""
    m = obj["metadata"]
    pp = propagation_policy(m["name"], m["namespace"], [
        {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": m["name"]}], {
        "clusterAffinity": {"clusterNames": clusters},
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}})
    if scheduler:
        pp["spec"]["schedulerName"] = scheduler
    kube.apply(pp)


def rb_name(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['name']}-{obj['kind'].lower()}"


def annotations_of(rb: Optional[dict[str, Any]]) -> dict[str, str]:
    return dict(((rb or {}).get("metadata") or {}).get("annotations") or {})


def is_paused(rb: Optional[dict[str, Any]]) -> bool:
    return bool((((rb or {}).get("spec") or {}).get("suspension") or {}).get("scheduling"))


def admitted(kube: Kube, obj: dict[str, Any]) -> Optional[dict[str, Any]]:
    rb = binding(kube, obj["metadata"]["namespace"], rb_name(obj))
    if rb is not None and not is_paused(rb) and "atoll.dev/admitted-at" in annotations_of(rb):
        return rb
    return None


def wait_admitted(kube: Kube, obj: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    ns = obj["metadata"]["namespace"]
    return until(f"binding {ns}/{rb_name(obj)} admitted (resumed by atoll)", lambda: admitted(kube, obj), timeout,
                 show=lambda: binding(kube, ns, rb_name(obj)))



def fill_then_queue_a_third(kube: Kube, ns: str, m1: str, m2: str) -> tuple[dict[str, Any], dict[str, Any],
                                                                             dict[str, Any]]:
    """2 pods x 30 cpu fill a member's two 32-cpu nodes: ``first`` (ends after 20 s) on m1 and ``second`` (600 s)
    on m2 are admitted, then ``third`` (either member) is submitted and has to wait until ``first`` ends."""
    first = job("first", ns, cpu="30", pods=2, run_seconds=20)
    second = job("second", ns, cpu="30", pods=2, run_seconds=600)
    third = job("third", ns, cpu="30", pods=2, run_seconds=5)
    for obj, where in ((first, m1), (second, m2)):
        kube.apply(obj)
        propagate(kube, obj, [where])
        wait_admitted(kube, obj)
    kube.apply(third)
    propagate(kube, third, [m1, m2])
    return first, second, third

def wait_pending(kube: Kube, obj: dict[str, Any], contains: str = "", timeout: float = 60) -> dict[str, Any]:
    ns = obj["metadata"]["namespace"]

    def check() -> Optional[dict[str, Any]]:
        rb = binding(kube, ns, rb_name(obj))
        reason = annotations_of(rb).get("atoll.dev/pending-reason", "")
        return rb if rb is not None and is_paused(rb) and reason and contains in reason else None
    return until(f"binding {ns}/{rb_name(obj)} pending with reason containing {contains!r}", check, timeout,
                 show=lambda: binding(kube, ns, rb_name(obj)))


def events_for(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    try:
        items = kube.get(f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3D{name}")["items"]
    except KubeError:
        return []
    return list(items)
