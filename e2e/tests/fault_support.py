"""Tools for the fault-injection tests: a job stream that survives an API outage, a watch that proves every job
was admitted exactly once, and the faults themselves (restart a fleet component, compact etcd).

"Admitted exactly once" is read from the bindings, not from the controller (whose counters die with it): the
watch records every distinct ``atoll.dev/admitted-at`` stamp each binding ever carried. Atoll writes that stamp
in the same merge patch that resumes (gate) or places (bind) the binding, so a second admission shows up as a
second stamp, whichever controller process made it.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube, KubeError
from e2e.harness.procs import Proc, Supervisor
from e2e.tests.controller_support import PAUSED, ControllerProcess, job
from e2e.tests.support import RB_API, until
from engine.kube.translate import cluster_from_obj

ADMITTED = "atoll.dev/admitted-at"


def make_jobs(host: Kube, ns: str, count: int, prefix: str = "f", cpu: str = "10m") -> dict[str, str]:
    """``count`` one-pod batch Jobs (no PropagationPolicy: the test POSTs their bindings); name -> uid."""
    made = {}
    for i in range(count):
        obj = host.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs",
                           job(f"{prefix}{i:04d}", ns, cpu=cpu, pods=1, run_seconds=5))
        made[obj["metadata"]["name"]] = obj["metadata"]["uid"]
    return made


def binding_body(name: str, uid: str, ns: str, members: list[str], scheduler: str = "default-scheduler"
                 ) -> dict[str, Any]:
    """A ResourceBinding shaped like the detector's (see test_controller_throughput.binding_for)."""
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-job", "namespace": ns,
                         "labels": {"binding.karmada.io/managed-by": "atoll-e2e"},
                         "finalizers": ["karmada.io/binding-controller"]},
            "spec": {"schedulerName": scheduler,
                     "resource": {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": ns, "uid": uid},
                     "replicas": 1, "placement": {"clusterAffinity": {"clusterNames": members}, "replicaScheduling": {
                         "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}}}


class Stream:
    """POST bodies at ``rate`` from a background thread. The load generator rides out an API outage like any
    client: a POST that fails for lack of a server is sent again (409 AlreadyExists then means the first one
    landed). Anything else is an error, reported by ``wait``."""

    def __init__(self, kube: Kube, path: str, bodies: dict[str, dict[str, Any]], rate: float, clients: int = 8,
                 outage: float = 120.0) -> None:
        self.kube, self.path, self.bodies, self.rate = kube, path, bodies, rate
        self.clients, self.outage = clients, outage
        self.created: dict[str, float] = {}
        self.retried = 0
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name="stream", daemon=True)
        self._thread.start()

    def _send(self, name: str, body: dict[str, Any]) -> None:
        deadline = time.monotonic() + self.outage
        while True:
            try:
                self.kube.request("POST", self.path, body)
            except KubeError as e:
                if e.status == 409:
                    pass                        # an earlier attempt landed before the connection broke
                elif (e.status == 0 or e.status >= 500 or e.status == 429) and time.monotonic() < deadline:
                    self.retried += 1
                    time.sleep(0.5)
                    continue
                else:
                    raise
            self.created[name] = time.monotonic()
            return

    def _run(self) -> None:
        try:
            start = time.monotonic()
            with ThreadPoolExecutor(self.clients) as pool:
                futures = []
                for i, (name, body) in enumerate(self.bodies.items()):
                    delay = start + i / self.rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    futures.append(pool.submit(self._send, name, body))
                for f in futures:
                    f.result()
        except BaseException as e:          # reported in the test's thread by wait()
            self.error = e

    def progress(self) -> int:
        return len(self.created)

    def wait(self, timeout: float) -> None:
        self._thread.join(timeout)
        if self.error is not None:
            raise RuntimeError(f"the job stream failed: {self.error}") from self.error
        if self._thread.is_alive():
            raise TimeoutError(f"the job stream did not finish in {timeout:.0f}s ({self.progress()} sent)")


class AdmissionWatch:
    """Every binding of a namespace as it changes, from a watch that reconnects across API outages (410 Gone
    -> relist): per binding, each distinct admitted-at stamp ever seen, whether the webhook paused it at
    CREATE, and its latest state."""

    def __init__(self, kube: Kube, ns: str) -> None:
        self.kube = kube
        self.path = f"{RB_API}/namespaces/{ns}/resourcebindings"
        self.stamps: dict[str, list[str]] = {}
        self.last: dict[str, dict[str, Any]] = {}
        self.reconnects = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._rv = self._list()
        self._thread = threading.Thread(target=self._run, name=f"admissions {ns}", daemon=True)
        self._thread.start()

    def _record(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        stamp = ((obj["metadata"].get("annotations") or {}).get(ADMITTED))
        with self.lock:
            self.last[name] = obj
            seen = self.stamps.setdefault(name, [])
            if stamp and stamp not in seen:
                seen.append(stamp)

    def _list(self) -> str:
        body = self.kube.get(self.path)
        items = body.get("items") or ()
        with self.lock:                                  # what is not listed any more was deleted meanwhile
            self.last = {}
        for obj in items:
            self._record(obj)
        return str(body["metadata"]["resourceVersion"])

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self.kube.watch(self.path, self._rv, timeout_seconds=30):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise KubeError(int(obj.get("code") or 0), str(obj.get("message")))
                    self._rv = str(obj["metadata"]["resourceVersion"])
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._record(obj)
                    elif event.get("type") == "DELETED":
                        with self.lock:
                            self.last.pop(obj["metadata"]["name"], None)
                    if self._stop.is_set():
                        return
            except KubeError:
                self.reconnects += 1
                time.sleep(0.5)
                try:
                    self._rv = self._list()          # 410 Gone or a broken connection: relist, then watch again
                except KubeError:
                    pass

    def stop(self) -> None:
        self._stop.set()

    def admitted(self) -> set[str]:
        """Bindings resumed and carrying an admission stamp now."""
        with self.lock:
            return {n for n, o in self.last.items() if ADMITTED in (o["metadata"].get("annotations") or {})
                    and not ((o.get("spec") or {}).get("suspension") or {}).get("scheduling")}

    def admitted_twice(self) -> dict[str, list[str]]:
        with self.lock:
            return {n: list(s) for n, s in self.stamps.items() if len(s) > 1}

    def not_paused_at_create(self) -> list[str]:
        with self.lock:
            return sorted(n for n, o in self.last.items() if PAUSED not in (o["metadata"].get("annotations") or {}))

    def wait_all_admitted(self, names: set[str], timeout: float) -> None:
        until(f"all {len(names)} bindings admitted", lambda: names <= self.admitted(), timeout,
              show=lambda: f"{len(names & self.admitted())} of {len(names)} admitted; missing e.g. "
                           f"{sorted(names - self.admitted())[:5]}")

    def check_exactly_once(self, names: set[str]) -> None:
        """Every one of ``names`` admitted, paused at CREATE, none admitted twice, none still paused."""
        assert self.admitted_twice() == {}, f"admitted more than once: {self.admitted_twice()}"
        with self.lock:
            missing = sorted(names - set(self.last))
        assert missing == [], f"bindings lost: {missing[:10]}"
        assert sorted(names - self.admitted()) == []
        assert self.not_paused_at_create() == []


def supervisor(fleet: FleetHandle) -> Supervisor:
    return Supervisor(fleet.info.state_dir)


def restart(fleet: FleetHandle, component: str) -> Proc:
    """Stop a fleet component (SIGTERM to its process group) and start it again with the same flags."""
    return supervisor(fleet).restart(component)


def wait_host_ready(fleet: FleetHandle, timeout: float = 120) -> None:
    until("karmada-apiserver /readyz", lambda: fleet.host().healthy(), timeout)


def etcd_url(fleet: FleetHandle) -> str:
    port = json.loads((fleet.info.state_dir / "fleet.json").read_text())["ports"]["etcd client"]
    return f"http://127.0.0.1:{port}"


def _etcd(fleet: FleetHandle, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(etcd_url(fleet) + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=30) as r:
        out: dict[str, Any] = json.loads(r.read())
        return out


def etcd_compact(fleet: FleetHandle) -> int:
    """Compact the fleet's etcd at its current revision (etcd's gRPC gateway, /v3/kv/compaction): every older
    resourceVersion is gone for good. Returns the revision."""
    head = _etcd(fleet, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
    revision = int(head["header"]["revision"])
    _etcd(fleet, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


def books(ctl: ControllerProcess) -> dict[str, Any]:
    """The controller's /debug/accounting: the engine's clusters, reservations, holding jobs and queue usage."""
    with urllib.request.urlopen(f"http://127.0.0.1:{ctl.port}/debug/accounting", timeout=5) as r:
        out: dict[str, Any] = json.loads(r.read())
        return out


def accounting_problems(ctl: ControllerProcess, host: Kube, namespaces: list[str]) -> list[str]:
    """Where the engine's books differ from the API's truth; empty when they agree. Truth: the Clusters Karmada
    reports (their resourceSummary, read through the engine's own translation) and, in ``namespaces``, the
    bindings that are resumed (their workloads here never finish), which must be exactly the jobs holding
    resources. No reservation may be left in flight once the clusters have reported since (at most Karmada's
    10 s status period + REPORT_SLACK after the job's start, engine/kube/runner.py)."""
    b = books(ctl)
    problems = []
    api = {c["metadata"]["name"]: c for c in host.get("/apis/cluster.karmada.io/v1alpha1/clusters")["items"]}
    if sorted(api) != sorted(b["clusters"]):
        problems.append(f"clusters: engine {sorted(b['clusters'])} vs API {sorted(api)}")
    for name, obj in api.items():
        mine = b["clusters"].get(name)
        if mine is None:
            continue
        truth = cluster_from_obj(obj, 0.0)
        for field in ("allocatable", "allocated", "allocating"):
            if mine[field] != dict(getattr(truth, field)):
                problems.append(f"{name}.{field}: engine {mine[field]} vs API {dict(getattr(truth, field))}")
        if mine["ready"] != truth.ready:
            problems.append(f"{name}.ready: engine {mine['ready']} vs API {truth.ready}")
        if mine["reserved_for"]:
            problems.append(f"{name}: reservations still in flight for {mine['reserved_for'][:5]}")
    resumed = set()
    for ns in namespaces:
        for rb in host.get(f"{RB_API}/namespaces/{ns}/resourcebindings")["items"]:
            if not ((rb.get("spec") or {}).get("suspension") or {}).get("scheduling"):
                resumed.add(f"{ns}/{rb['metadata']['name']}")
    holding = {k for k in b["holding"] if k.split("/", 1)[0] in namespaces}
    if holding != resumed:
        problems.append(f"holding jobs: engine-only {sorted(holding - resumed)[:5]}, "
                        f"API-only {sorted(resumed - holding)[:5]}")
    usage: dict[str, dict[str, int]] = {}
    for job in b["holding"].values():
        q = usage.setdefault(job["queue"], {})
        for k, v in job["demand"].items():
            q[k] = q.get(k, 0) + v
    for q, allocated in b["queues"].items():
        if {k: v for k, v in allocated.items() if v} != {k: v for k, v in usage.get(q, {}).items() if v}:
            problems.append(f"queue {q}: allocated {allocated} vs the sum of its holding jobs {usage.get(q)}")
    return problems


def wait_books_match_truth(ctl: ControllerProcess, host: Kube, namespaces: list[str], timeout: float = 90) -> None:
    until("the engine's books equal the API's truth", lambda: not accounting_problems(ctl, host, namespaces),
          timeout, show=lambda: accounting_problems(ctl, host, namespaces))
