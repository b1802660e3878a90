"""Cluster resource models -> the engine's node view, with real-shaped Cluster objects (engine/kube/resource_models)."""

from __future__ import annotations

import copy
import logging
from typing import Callable

import pytest

from engine.core.nodefit import max_replicas
from engine.kube.controller import Controller
from engine.kube.plan import Event
from engine.kube.translate import cluster_from_obj
from engine.pipeline import Pipeline
from tests.kube import objects as o

GPU = "nvidia.com/gpu"
GPU_GRADES = o.resource_models({GPU: ["0", "1", "2", "4", "8"]})          # the reference's worked example


def test_gpu_model_gives_virtual_nodes_at_each_grades_lower_edge() -> None:
    # 4 nodes with 3 GPUs free each fall in grade 2 [2,4): Atoll sees 4 nodes with 2 GPUs (Karmada's lower bound)
    c = cluster_from_obj(o.modeled_cluster("m1", GPU_GRADES, [0, 0, 4, 0, 0]), now=1.0)
    assert c.node_shapes is not None
    assert c.node_shapes.nodes == ((((GPU, 2),), 4),)
    assert c.node_shapes.resources == frozenset({GPU})
    assert max_replicas(c.node_shapes, {GPU: 8, "cpu": 1000}) == 0       # summed totals would say 1
    assert max_replicas(c.node_shapes, {GPU: 2}) == 4
    assert max_replicas(c.node_shapes, {GPU: 1}) == 8


def test_multi_resource_grades_parse_quantities_exactly() -> None:
    models = o.resource_models({"cpu": ["0", "500m", "8"], "memory": ["0", "4Gi", "64Gi"]})
    c = cluster_from_obj(o.modeled_cluster("m1", models, [1, 2, 3]), now=0.0)
    assert c.node_shapes is not None
    assert dict(c.node_shapes.nodes) == {(): 1, (("cpu", 500), ("memory", 4 << 30)): 2,
                                         (("cpu", 8000), ("memory", 64 << 30)): 3}


def test_no_models_or_no_counts_means_totals() -> None:
    plain = o.cluster("m1")
    assert cluster_from_obj(plain, 0).node_shapes is None
    not_graded_yet = o.modeled_cluster("m1", GPU_GRADES, [])
    warnings: list[str] = []
    assert cluster_from_obj(not_graded_yet, 0, warnings).node_shapes is None
    assert warnings == []


@pytest.mark.parametrize("mutate, field, says", [
    (lambda c: c["spec"]["resourceModels"][1]["ranges"][0].update(min="two"), "spec.resourceModels[1].ranges[0].min",
     "invalid quantity 'two'"),
    (lambda c: c["spec"]["resourceModels"][2].update(grade=1), "spec.resourceModels[2].grade", "grade 1 is listed twice"),
    (lambda c: c["spec"]["resourceModels"][3]["ranges"].append({"name": "cpu", "min": "0", "max": "1"}),
     "spec.resourceModels[3].ranges", "differ from the first grade's"),
    (lambda c: c["status"]["resourceSummary"]["allocatableModelings"].append({"grade": 9, "count": 1}),
     "status.resourceSummary.allocatableModelings[5].grade", "not one of spec.resourceModels' grades [0, 1, 2, 3, 4]"),
    (lambda c: c["status"]["resourceSummary"]["allocatableModelings"][0].update(count=-1),
     "status.resourceSummary.allocatableModelings[0].count", "non-negative integer"),
    (lambda c: c["spec"].update(resourceModels={"grade": 0}), "spec.resourceModels", "expected a list of grades"),
])
def test_a_bad_model_is_one_precise_warning_and_totals(mutate: Callable[[o.Obj], None], field: str, says: str) -> None:
    obj = o.modeled_cluster("m1", copy.deepcopy(GPU_GRADES), [0, 0, 4, 0, 0])
    mutate(obj)
    warnings: list[str] = []
    c = cluster_from_obj(obj, 0, warnings)
    assert c.node_shapes is None and c.allocatable[GPU] == 32            # the cluster itself still works
    assert len(warnings) == 1 and "Cluster m1" in warnings[0] and field in warnings[0] and says in warnings[0], warnings


def test_nodes_missing_from_the_counts_fall_back_to_totals() -> None:
    # karmada-io/karmada#7757: a pod-full node listed first hides the others; the counts then sum to fewer nodes
    warnings: list[str] = []
    c = cluster_from_obj(o.modeled_cluster("m1", GPU_GRADES, [0, 0, 0, 0, 0], nodes=4), 0, warnings)
    assert c.node_shapes is None
    assert warnings and "counts 0 nodes but status.nodeSummary.totalNum is 4" in warnings[0]


def test_controller_warns_once_per_reason_and_never_crashes(caplog: pytest.LogCaptureFixture) -> None:
    ctl = Controller(Pipeline({}))
    bad = o.modeled_cluster("m1", copy.deepcopy(GPU_GRADES), [0, 0, 4, 0, 0])
    bad["spec"]["resourceModels"][0]["ranges"] = "gpu"
    with caplog.at_level(logging.WARNING, "atoll.controller"):
        for _ in range(3):                       # the runner re-dates reports (runner._redate_reports): say it once
            ctl.on_cluster("MODIFIED", bad, bad, 0.0)
    assert ctl.engine.state.clusters["m1"].node_shapes is None
    assert ctl.engine.state.clusters["m1"].allocatable[GPU] == 32
    assert len([r for r in caplog.records if "resource model unusable" in r.getMessage()]) == 1
    out = ctl.step(1.0)
    warned = [i for i in out if isinstance(i, Event) and i.reason == "ResourceModelIgnored"]
    assert len(warned) == 1 and warned[0].involved["kind"] == "Cluster" and warned[0].type == "Warning"
    assert "spec.resourceModels[0].ranges" in warned[0].message
    good = o.modeled_cluster("m1", GPU_GRADES, [0, 0, 4, 0, 0])
    ctl.on_cluster("MODIFIED", good, bad, 2.0)
    assert ctl.engine.state.clusters["m1"].node_shapes is not None
    ctl.on_cluster("MODIFIED", bad, good, 3.0)                 # broken again: said again
    assert len([i for i in ctl.step(4.0) if isinstance(i, Event) and i.reason == "ResourceModelIgnored"]) == 1


CPU_MEM = o.resource_models({"cpu": ["0", "4", "8"], "memory": ["0", "16Gi", "32Gi"]})


@pytest.mark.parametrize("mutate, field, says", [
    # a dict kept the last range: grade 1 became 100-cpu nodes, an over-optimistic view
    (lambda m: m[1]["ranges"].append({"name": "cpu", "min": "100", "max": "200"}),
     "spec.resourceModels[1].ranges[2].name", "resource cpu is listed twice in grade 1"),
    # grade 2 starting below grade 1: Karmada's ranges are contiguous, so mins rise
    (lambda m: m[2]["ranges"][0].update(min="2"), "spec.resourceModels[2].ranges[0].min",
     "grade 2's cpu min is not above grade 1's"),
    (lambda m: m[2]["ranges"][1].update(min="16Gi"), "spec.resourceModels[2].ranges[1].min",
     "grade 2's memory min is not above grade 1's"),
    (lambda m: m[0]["ranges"][0].update(min="4"), "spec.resourceModels[1].ranges[0].min",
     "grade 1's cpu min is not above grade 0's"),
])
def test_a_duplicate_resource_or_mins_that_do_not_rise_are_a_bad_model(mutate: Callable[[list[o.Obj]], None],
                                                                       field: str, says: str) -> None:
    models = copy.deepcopy(CPU_MEM)
    mutate(models)
    warnings: list[str] = []
    c = cluster_from_obj(o.modeled_cluster("m1", models, [1, 2, 3]), 0, warnings)
    assert c.node_shapes is None and c.allocatable["cpu"] == 64000
    assert len(warnings) == 1 and warnings[0].startswith("Cluster m1: resource model unusable, using summed totals: ")
    assert f"{field}: {says}" in warnings[0], warnings


def test_grades_listed_out_of_order_are_read_by_grade_number() -> None:
    models = list(reversed(copy.deepcopy(CPU_MEM)))
    warnings: list[str] = []
    c = cluster_from_obj(o.modeled_cluster("m1", models, [1, 2, 3]), 0, warnings)
    assert warnings == [] and c.node_shapes is not None
    assert dict(c.node_shapes.nodes) == {(): 1, (("cpu", 4000), ("memory", 16 << 30)): 2,
                                         (("cpu", 8000), ("memory", 32 << 30)): 3}


def test_a_cluster_with_no_nodes_is_a_zero_node_view_without_a_warning() -> None:
    # Karmada's status controller reports every grade with count 0 and totalNum 0 for a member without nodes
    # (getAllocatableModelings): legitimate, nothing fits there. A pod-full first node (totalNum > 0) is warned above.
    obj = o.modeled_cluster("m1", copy.deepcopy(CPU_MEM), [0, 0, 0])
    obj["status"]["resourceSummary"]["allocatable"] = {}
    warnings: list[str] = []
    c = cluster_from_obj(obj, 0, warnings)
    assert warnings == [] and c.node_shapes is not None and c.node_shapes.count == 0
