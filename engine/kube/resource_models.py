"""A Karmada Cluster's resource models -> ``NodeShapes`` (the per-node view of engine/core/nodefit.py). Pure.

Karmada describes a member's nodes in two places of the Cluster object: ``spec.resourceModels`` (grades, each a
``[min, max)`` range per resource) and ``status.resourceSummary.allocatableModelings`` (per grade, how many nodes'
free resources fall in it). Each grade becomes ``count`` virtual nodes whose free capacity is the grade's ``min``
vector, exactly as Karmada >= v1.18's estimator builds them, so what Atoll believes fits is a lower bound.

Why a bad model is a warning and not an error: the Cluster's summed totals are still good, so the cluster keeps
working on totals (``node_shapes`` None, as for a cluster without models) and the controller says precisely which
field is wrong. ``max`` is never read (Karmada ignores it when grading; the last grade is open-ended).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from engine.core.nodefit import NodeShapes
from engine.errors import InputError
from engine.resources import parse_quantity


def model_grades(models: Any, where: str) -> dict[int, dict[str, int]]:
    """grade -> min vector, with Karmada's validation rules that matter for reading it."""
    if not isinstance(models, list):
        raise InputError(f"expected a list of grades, got {type(models).__name__}", where)
    out: dict[int, dict[str, int]] = {}
    names: Optional[list[str]] = None
    fields: dict[tuple[int, str], str] = {}         # (grade, resource) -> the field of its min, for messages
    for i, model in enumerate(models):
        at = f"{where}[{i}]"
        if not isinstance(model, Mapping):
            raise InputError("grade must be a mapping", at)
        grade = model.get("grade")
        if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
            raise InputError(f"grade must be a non-negative integer, got {grade!r}", f"{at}.grade")
        if grade in out:
            raise InputError(f"grade {grade} is listed twice", f"{at}.grade")
        ranges = model.get("ranges")
        if not isinstance(ranges, list) or not ranges:
            raise InputError("ranges must be a non-empty list", f"{at}.ranges")
        mins: dict[str, int] = {}
        for j, rng in enumerate(ranges):
            rat = f"{at}.ranges[{j}]"
            if not isinstance(rng, Mapping) or not isinstance(rng.get("name"), str) or not rng.get("name"):
                raise InputError("range must be a mapping with a resource name", rat)
            name = str(rng["name"])
            if name in mins:
                # a dict keeps the last one: a later, larger min would make every node of the grade look bigger
                raise InputError(f"resource {name} is listed twice in grade {grade}", f"{rat}.name")
            mins[name] = parse_quantity(rng.get("min", 0), name, f"{rat}.min")
            fields[grade, name] = f"{rat}.min"
        if names is None:
            names = sorted(mins)
        elif sorted(mins) != names:
            raise InputError(f"grade {grade} ranges {sorted(mins)} differ from the first grade's {names} "
                             "(Karmada requires the same resources in every grade)", f"{at}.ranges")
        out[grade] = mins
    ordered = sorted(out)
    for lower, grade in zip(ordered, ordered[1:]):
        # Karmada: ranges are contiguous ([min, max) of a grade starts at the max of the grade below) and max > min,
        # so every resource's min rises from grade to grade; else a higher grade would describe smaller nodes
        for name, amount in out[grade].items():
            if amount <= out[lower][name]:
                raise InputError(f"grade {grade}'s {name} min is not above grade {lower}'s (Karmada requires "
                                 "contiguous ranges, so each grade starts where the one below ends)",
                                 fields[grade, name])
    return out


def _counts(modelings: Any, grades: Mapping[int, Mapping[str, int]], where: str) -> dict[int, int]:
    if not isinstance(modelings, list):
        raise InputError(f"expected a list of {{grade, count}}, got {type(modelings).__name__}", where)
    out: dict[int, int] = {}
    for i, item in enumerate(modelings):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise InputError("entry must be a mapping", at)
        grade, count = item.get("grade"), item.get("count", 0)
        if isinstance(grade, bool) or not isinstance(grade, int) or grade not in grades:
            raise InputError(f"grade {grade!r} is not one of spec.resourceModels' grades {sorted(grades)}",
                             f"{at}.grade")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InputError(f"count must be a non-negative integer, got {count!r}", f"{at}.count")
        out[grade] = out.get(grade, 0) + count
    return out


def node_shapes(obj: Mapping[str, Any], where: str) -> tuple[Optional[NodeShapes], Optional[str]]:
    """(shapes, warning) for one Cluster object. Shapes are None without models or without counts (Karmada
    has not graded the nodes yet, or the CustomizedClusterResourceModeling gate is off): totals apply.
    A warning (one line naming the Cluster and the field) comes with None when the model cannot be used."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    summary = (status or {}).get("resourceSummary")
    models = (spec or {}).get("resourceModels")
    modelings = summary.get("allocatableModelings") if isinstance(summary, Mapping) else None
    if not models or not modelings:
        return None, None
    try:
        grades = model_grades(models, "spec.resourceModels")
        counts = _counts(modelings, grades, "status.resourceSummary.allocatableModelings")
    except InputError as exc:
        return None, f"{where}: resource model unusable, using summed totals: {exc}"
    nodes = sum(counts.values())
    summary_nodes = (status or {}).get("nodeSummary")
    total = summary_nodes.get("totalNum") if isinstance(summary_nodes, Mapping) else None
    if isinstance(total, int) and not isinstance(total, bool) and nodes < total:
        # Karmada stops grading at the first node with no free pod slot (karmada-io/karmada#7757): the nodes
        # after it vanish from the counts. Under-counting would strand jobs for good, while an over-admission is
        # caught by the stuck-pod check, so the totals are the safer view here.
        return None, (f"{where}: status.resourceSummary.allocatableModelings counts {nodes} nodes but "
                      f"status.nodeSummary.totalNum is {total} (a pod-full node hides the nodes after it, "
                      "karmada-io/karmada#7757); using summed totals")
    return NodeShapes.from_models(grades, counts), None
