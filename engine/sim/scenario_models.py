"""A scenario cluster's ``resourceModels`` (Karmada's resource-model grades): checked and normalised as Karmada
does, so a scenario the simulator accepts is one Karmada would accept, and its grades mean what they mean there
(each grade's lower edges become the cluster's virtual nodes, ``engine.core.nodefit``)."""

from __future__ import annotations

from typing import Any, Optional

from engine.errors import InputError
from engine.resources import Resources, parse_quantity


def parse_models(raw: list[dict[str, Any]], where: str) -> list[Resources]:
    """Karmada ``spec.resourceModels`` -> each grade's lower edges (``min``), in grade order, checked as
    Karmada's ``ValidateClusterResourceModels`` does (distinct grades, the same resources in every
    grade, ``max > min``, contiguous ranges) and normalised as its mutation does (first ``min`` 0,
    last ``max`` open). ``[]`` -> ``[]``: no models."""
    ordered = sorted(enumerate(raw), key=lambda item: item[1]["grade"])
    grades: list[Resources] = []
    names: Optional[list[str]] = None
    seen: set[int] = set()
    previous_max: dict[str, int] = {}
    for position, (i, model) in enumerate(ordered):
        here = f"{where}[{i}]"
        if model["grade"] in seen:
            raise InputError(f"grade {model['grade']} is declared twice", f"{here}.grade")
        seen.add(model["grade"])
        mins: Resources = {}
        for k, r in enumerate(model["ranges"]):
            name = r["name"]
            if name in mins:
                raise InputError(f"resource {name!r} has two ranges in one grade", f"{here}.ranges[{k}].name")
            low = parse_quantity(r["min"], name, f"{here}.ranges[{k}].min")   # checked in every grade
            low = 0 if position == 0 else low                                    # Karmada: the first starts at 0
            mins[name] = low
            if position and name in previous_max and previous_max[name] != low:
                raise InputError(f"{name}: ranges must be contiguous (this grade's min is not the previous "
                                 f"grade's max)", f"{here}.ranges[{k}].min")
            if "max" in r:
                high = parse_quantity(r["max"], name, f"{here}.ranges[{k}].max")
                if high <= parse_quantity(r["min"], name, f"{here}.ranges[{k}].min"):
                    raise InputError(f"{name}: max must be greater than min", f"{here}.ranges[{k}].max")
                previous_max[name] = high
            else:
                previous_max.pop(name, None)
        if names is None:
            names = sorted(mins)
        elif sorted(mins) != names:
            raise InputError(f"every grade must list the same resources ({', '.join(names)})", f"{here}.ranges")
        if grades and any(mins[n] <= grades[-1][n] for n in mins):
            raise InputError("each grade's min must be above the previous grade's", f"{here}.ranges")
        grades.append(mins)
    return grades
