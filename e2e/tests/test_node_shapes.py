"""Node shapes on a real fleet: kwok members of 8-GPU nodes, partly used by running pods, with GPU resource models
on their Cluster objects (e2e/fleet.gpu-shapes.yaml, a fleet of its own next to the session's).

member1: node-0 has 3 GPUs free, node-1 6, plus a CPU-only node (9 GPUs free in total, no node with 7);
member2: two nodes with all 8 free. A gang of 2 pods x 4 GPUs fits member1's summed free GPUs (9) but not its
nodes; on summed totals binpack prefers member1 (15 of 16 GPUs used after it, against 8 of 16 on member2).
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from e2e import conftest
from e2e.harness.config import load_config
from e2e.harness.fleet import Fleet, FleetInfo, state_root
from e2e.harness.kube import Kube, KubeError
from e2e.tests.controller_support import (annotations_of, atoll, events_for, is_paused, job, rb_name, wait_admitted,
                                          wait_pending)
from e2e.tests.support import (binding, condition, create, delete, merge_patch, namespace, propagation_policy, unique,
                                until)
from engine.core.nodefit import allocatable_modelings
from engine.kube.resource_models import model_grades
from engine.kube.translate import pod_requests
from engine.resources import parse_resources

pytestmark = pytest.mark.e2e

E2E = Path(__file__).resolve().parents[1]
REPO = E2E.parent
SHAPES = E2E / "fleet.gpu-shapes.yaml"
OFFSET = 250          # inside the session's port block (base..base+113 for 2 members), below test_lifecycle's +500
GPU = "nvidia.com/gpu"
FILL = {"member1-node-0": "5", "member1-node-1": "2"}     # GPUs used by long-running pods, per node
FILL_NS = "atoll-shapes-fill"
CLUSTERS = "/apis/cluster.karmada.io/v1alpha1/clusters"


@pytest.fixture(scope="module")
def gpu_fleet() -> Iterator[FleetInfo]:
    """The GPU fleet: reused when already running healthy in its state dir, else started (and stopped at the end
    unless ATOLL_E2E_KEEP=1); member1's nodes are then partly filled, directly in the member."""
    base = load_config(members=2).ports.base + OFFSET
    fleet = Fleet(load_config(SHAPES, members=2, base_port=base), Path(f"{state_root()}-gpu-shapes"))
    started = not fleet.running_components()
    info = fleet.up()
    conftest.EXTRA_LOG_DIRS.append(info.log_dir)
    m1 = info.member("member1")
    namespace(m1, FILL_NS)
    for node, gpus in FILL.items():
        m1.apply(filler(node, gpus))
    try:
        yield info
    finally:
        delete(m1, f"/api/v1/namespaces/{FILL_NS}")
        conftest.EXTRA_LOG_DIRS.remove(info.log_dir)
        if started and os.environ.get("ATOLL_E2E_KEEP") != "1":
            fleet.down()


@pytest.fixture
def gns(gpu_fleet: FleetInfo) -> Iterator[str]:
    """A namespace per test, gone before the next test starts: its controller would otherwise adopt the
    previous test's resumed bindings (deleted asynchronously, slowly under load) and their GPUs."""
    name = unique("atoll-shapes")
    host = gpu_fleet.host()
    namespace(host, name)
    yield name
    delete(host, f"/api/v1/namespaces/{name}")
    until(f"namespace {name} deleted", lambda: host.get_or_none(f"/api/v1/namespaces/{name}") is None, 300)


def filler(node: str, gpus: str) -> dict[str, Any]:
    """A running pod bound straight to ``node`` (no scheduler), holding ``gpus`` GPUs until deleted."""
    req = {"cpu": "1", "memory": "1Gi", GPU: gpus}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"fill-{node}", "namespace": FILL_NS},
            "spec": {"nodeName": node, "containers": [{"name": "w", "image": "atoll.dev/e2e:noop",
                                                        "resources": {"requests": req, "limits": req}}]}}


def reported(host: Kube, cluster: str) -> list[int]:
    obj = host.get(f"{CLUSTERS}/{cluster}")
    counts = {m["grade"]: m.get("count", 0) for m in obj["status"]["resourceSummary"].get("allocatableModelings") or ()}
    return [counts.get(g, 0) for g in range(len(obj["spec"]["resourceModels"]))]


def computed(host: Kube, member: Kube, cluster: str) -> list[int]:
    """allocatableModelings as engine/core/nodefit computes them from the member's nodes and bound pods."""
    grades = model_grades(host.get(f"{CLUSTERS}/{cluster}")["spec"]["resourceModels"], cluster)
    pods = [p for p in member.get("/api/v1/pods")["items"]
            if p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded", "Failed")]
    nodes = [(parse_resources(n["status"]["allocatable"]),
              [pod_requests(p["spec"], p["metadata"]["name"]) for p in pods if p["spec"]["nodeName"] == n["metadata"]["name"]])
             for n in member.get("/api/v1/nodes")["items"]]
    return allocatable_modelings([grades[g] for g in sorted(grades)], nodes)


def wait_reported(info: FleetInfo, cluster: str, expect: list[int]) -> None:
    host = info.host()
    until(f"Cluster {cluster} allocatableModelings {expect}", lambda: reported(host, cluster) == expect, 60,
          show=lambda: reported(host, cluster))


FILLED = [1, 0, 0, 1, 0, 0, 1, 0, 0]      # member1: cpu-only node grade 0, node-0 (3 GPUs free) 3, node-1 (6) 6
WHOLE = [0, 0, 0, 0, 0, 0, 0, 0, 2]       # member2: two 8-GPU nodes free


def test_karmada_allocatable_modelings_equal_nodefit(gpu_fleet: FleetInfo) -> None:
    host, m1, m2 = gpu_fleet.host(), gpu_fleet.member("member1"), gpu_fleet.member("member2")
    assert computed(host, m1, "member1") == FILLED          # the fill is bound (nodeName): nodefit sees it at once
    assert computed(host, m2, "member2") == WHOLE
    until("Karmada's allocatableModelings of member1 equal nodefit's",
          lambda: reported(host, "member1") == computed(host, m1, "member1"), 60,
          show=lambda: {"karmada": reported(host, "member1"), "nodefit": computed(host, m1, "member1")})
    assert reported(host, "member2") == computed(host, m2, "member2") == WHOLE


def policy(mode: str) -> str:
    text = re.sub(r"placementMode: \w+", f"placementMode: {mode}", (REPO / "policies" / "default.yaml").read_text())
    text = text.replace("initialDelay: 10s", "initialDelay: 1s")
    assert f"placementMode: {mode}" in text and "initialDelay: 1s" in text
    return text


def submit(host: Kube, ns: str, obj: dict[str, Any], bind: bool) -> None:
    host.apply(obj)
    m = obj["metadata"]
    pp = propagation_policy(m["name"], ns, [{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": m["name"]}],
                            {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                             "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                   "replicaDivisionPreference": "Aggregated"}})
    if bind:
        pp["spec"]["schedulerName"] = "atoll"
    host.apply(pp)


def placed(host: Kube, obj: dict[str, Any]) -> Optional[list[tuple[str, int]]]:
    rb = binding(host, obj["metadata"]["namespace"], rb_name(obj))
    clusters = ((rb or {}).get("spec") or {}).get("clusters") or []
    return sorted((c["name"], c["replicas"]) for c in clusters) or None


def running_pods(member: Kube, ns: str, name: str) -> list[str]:
    items = member.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=batch.kubernetes.io%2Fjob-name%3D{name}")["items"]
    return [p["spec"].get("nodeName", "") for p in items if p["status"].get("phase") in ("Running", "Succeeded")]


@pytest.mark.parametrize("mode", ["bind", "gate"])
def test_gang_that_fits_summed_gpus_but_no_node_goes_where_whole_nodes_are(gpu_fleet: FleetInfo, gns: str,
                                                                             tmp_path: Path, mode: str) -> None:
    """bind: Atoll's node view places it; gate: karmada-scheduler's estimator reads the same GPU model (Divided,
    Aggregated) and places it alike. With summed totals, binpack would pick the fuller member1, where it sticks."""
    host = gpu_fleet.host()
    wait_reported(gpu_fleet, "member1", FILLED)
    wait_reported(gpu_fleet, "member2", WHOLE)             # earlier tests' pods are gone
    with atoll(gpu_fleet, tmp_path, policy(mode)) as (_, ctl, _cm):
        gang = job("gang", gns, cpu="1", pods=2, run_seconds=3, gpu="4")
        submit(host, gns, gang, bind=mode == "bind")
        wait_admitted(host, gang)
        assert until(f"{mode} mode: binding placed", lambda: placed(host, gang), 60,
                     show=lambda: binding(host, gns, rb_name(gang))) == [("member2", 2)]
        m2 = gpu_fleet.member("member2")
        until("both pods ran on member2", lambda: len(running_pods(m2, gns, "gang")) == 2,
              60, show=lambda: m2.get(f"/api/v1/namespaces/{gns}/pods"))
        assert ctl.alive()


def test_stuck_pod_is_detected_and_recovered_elsewhere(gpu_fleet: FleetInfo, gns: str, tmp_path: Path) -> None:
    """A pod no node of its member can host (its nodeSelector matches only member2's nodes; Atoll does not read
    selectors, so binpack picks the fuller member1): the member's scheduler marks it Unschedulable, the
    controller sees it through Karmada's cluster proxy within --stuck-after, the recover stage requeues the job
    avoiding member1, and it runs on member2."""
    host = gpu_fleet.host()
    wait_reported(gpu_fleet, "member1", FILLED)
    wait_reported(gpu_fleet, "member2", WHOLE)
    with atoll(gpu_fleet, tmp_path, policy("bind"), ["--stuck-after", "3"]) as (_, ctl, _cm):
        picky = job("picky", gns, cpu="1", pods=1, run_seconds=3, gpu="1")
        picky["spec"]["template"]["spec"]["nodeSelector"] = {"atoll.dev/pool": "b"}
        submit(host, gns, picky, bind=True)
        first = wait_admitted(host, picky)
        assert [c["name"] for c in first["spec"]["clusters"]] == ["member1"], first["spec"]
        requeued = until("a Requeued Event for the stuck pod",
                         lambda: [e for e in events_for(host, gns, rb_name(picky)) if e["reason"] == "Requeued"],
                         60, show=ctl.log_tail)
        message = requeued[0]["message"]
        assert "Unschedulable: pod" in message and "unschedulable in member1" in message, message
        assert "didn't match Pod's node affinity/selector" in message and "avoiding member1" in message, message
        until("re-placed on member2", lambda: placed(host, picky) == [("member2", 1)], 60,
              show=lambda: binding(host, gns, rb_name(picky)))
        m1, m2 = gpu_fleet.member("member1"), gpu_fleet.member("member2")
        until("the pod ran on member2", lambda: len(running_pods(m2, gns, "picky")) == 1, 60,
              show=lambda: m2.get(f"/api/v1/namespaces/{gns}/pods"))
        until("member1's copy withdrawn", lambda: not m1.get(f"/api/v1/namespaces/{gns}/pods")["items"], 60,
              show=lambda: m1.get(f"/api/v1/namespaces/{gns}/pods"))
        assert ctl.alive()


def test_gang_larger_than_any_node_waits_with_a_reason(gpu_fleet: FleetInfo, gns: str, tmp_path: Path) -> None:
    """9 GPUs in one pod: member2's summed free GPUs (16) would take it, none of its 8-GPU nodes can. Atoll keeps
    the binding paused, saying why, instead of resuming it into a member where it would sit Pending."""
    host = gpu_fleet.host()
    wait_reported(gpu_fleet, "member2", WHOLE)
    with atoll(gpu_fleet, tmp_path, policy("gate")) as (_, ctl, _cm):
        big = job("big", gns, cpu="1", pods=1, gpu="9")
        submit(host, gns, big, bind=False)
        rb = wait_pending(host, big, "nodes can hold them")
        assert "nvidia.com/gpu=9" in annotations_of(rb)["atoll.dev/pending-reason"]
        assert "node shapes: from resource models" in ctl.explain(f"{gns}/{rb_name(big)}")
        assert is_paused(binding(host, gns, rb_name(big))) and ctl.alive()


@pytest.mark.parametrize("keep", [[GPU], ["cpu", "memory"]], ids=["gpu-only", "cpu-memory"])
def test_karmada_estimates_zero_for_a_requested_resource_missing_from_the_model(gpu_fleet: FleetInfo, gns: str,
                                                                               keep: list[str]) -> None:
    """Why the fleet's models grade cpu, memory and GPUs (docs/controller.md): with a model lacking a resource the
    pod requests -- GPU-only, or cpu/memory only like Karmada's default models every Cluster gets on create --
    karmada-scheduler v1.18 answers 0 available replicas (its virtual nodes have none of it), so a Divided workload
    is Unschedulable there. Plain Karmada, no Atoll involved."""
    host = gpu_fleet.host()
    path = f"{CLUSTERS}/member2"
    full = host.get(path)["spec"]["resourceModels"]
    partial = [{"grade": g["grade"], "ranges": [r for r in g["ranges"] if r["name"] in keep]} for g in full]
    merge_patch(host, path, {"spec": {"resourceModels": partial}})
    try:
        until(f"member2 graded by {keep} only",
              lambda: [r["name"] for r in host.get(path)["spec"]["resourceModels"][0]["ranges"]] == keep, 30)
        one = job("one", gns, cpu="1", pods=1, gpu="1")
        host.apply(one)
        host.apply(propagation_policy("one", gns, [{"apiVersion": "batch/v1", "kind": "Job", "name": "one"}], {
            "clusterAffinity": {"clusterNames": ["member2"]},
            "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}))
        cond = until("karmada-scheduler's verdict", lambda: condition(binding(host, gns, rb_name(one)), "Scheduled"),
                     60, show=lambda: binding(host, gns, rb_name(one)))
        assert cond["status"] == "False" and "available replicas 0" in cond["message"], cond
    finally:
        merge_patch(host, path, {"spec": {"resourceModels": full}})


def test_stuck_pod_is_detected_in_gate_mode_too(gpu_fleet: FleetInfo, gns: str, tmp_path: Path) -> None:
    """Gate mode: karmada-scheduler placed it (its PropagationPolicy allows member1 only; karmada-scheduler does not
    read node selectors either); the stuck pod is seen the same way and the job is requeued, paused again."""
    host = gpu_fleet.host()
    with atoll(gpu_fleet, tmp_path, policy("gate"), ["--stuck-after", "3"]) as (_, ctl, _cm):
        picky = job("picky", gns, cpu="1", pods=1, gpu="1")
        picky["spec"]["template"]["spec"]["nodeSelector"] = {"atoll.dev/pool": "b"}
        host.apply(picky)
        host.apply(propagation_policy("picky", gns, [{"apiVersion": "batch/v1", "kind": "Job", "name": "picky"}], {
            "clusterAffinity": {"clusterNames": ["member1"]},
            "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}))
        wait_admitted(host, picky)
        requeued = until("a Requeued Event for the stuck pod",
                         lambda: [e for e in events_for(host, gns, rb_name(picky)) if e["reason"] == "Requeued"],
                         60, show=ctl.log_tail)
        assert "unschedulable in member1" in requeued[0]["message"], requeued[0]["message"]
        assert ctl.alive()


def test_member_pod_watch_needs_get_on_clusters_proxy_and_pods_in_the_member(gpu_fleet: FleetInfo, gns: str) -> None:
    """The chart's rule (charts/atoll: `get` on clusters/proxy) is enough to list and watch a member's pods through
    Karmada's proxy, which impersonates the caller there: the member must grant it list/watch on pods."""
    host, m1 = gpu_fleet.host(), gpu_fleet.member("member1")
    sa, user = "probe", f"system:serviceaccount:{gns}:probe"
    host.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": gns}})
    rbac = "rbac.authorization.k8s.io/v1"
    grants = [(host, {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": gns}, "rules": [
                  {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters/proxy"], "verbs": ["get"]}]}),
              (m1, {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": gns}, "rules": [
                  {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]})]
    try:
        for kube, role in grants:
            kube.apply(role)
            kube.apply({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": gns},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": gns},
                        "subjects": [{"kind": "User", "name": user}]})
        token = create(host, f"/api/v1/namespaces/{gns}/serviceaccounts/{sa}/token",
                       {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})["status"]["token"]
        probe = Kube(gpu_fleet.host_server, gpu_fleet.ca_file, token, "probe")
        pods = "/api/v1/pods?fieldSelector=spec.nodeName%3D"
        listed = until("RBAC in effect", lambda: probe.get_or_none(f"{CLUSTERS}/member1/proxy{pods}"), 30)
        assert listed["kind"] == "PodList"
        seen = list(probe.watch(f"{CLUSTERS}/member1/proxy{pods}", listed["metadata"]["resourceVersion"], 1))
        assert all(e["type"] == "BOOKMARK" for e in seen), seen     # a watch opens and ends after 1 s, no ERROR
        with pytest.raises(KubeError, match="HTTP 403") as denied:
            probe.get(f"{CLUSTERS}/member2/proxy{pods}")        # member2 grants nothing
        assert "cannot list resource \"pods\"" in str(denied.value)
    finally:
        for kube, _ in grants:
            delete(kube, f"/apis/{rbac}/clusterrolebindings/{gns}")
            delete(kube, f"/apis/{rbac}/clusterroles/{gns}")
