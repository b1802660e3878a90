"""``--compare``: the same summary numbers side by side, which one is best, and how each compares to the first.

Plain data (no rich, no HTML), so the terminal table and the HTML report show the same cells.
Ranking rules, so the table cannot mislead:
* an undefined value (``None``) is shown as undefined and never ranked best;
* makespan and its ratio are ranked only among runs where every job completed: a run that failed or
  stranded jobs finished "early" only because it left work undone;
* a row is ranked only when at least two runs have a rankable value and they differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

Getter = Callable[[dict[str, Any]], Any]


class Metric:
    def __init__(self, label: str, get: Getter, better: Optional[str] = None, complete_only: bool = False,
                 percent: bool = False) -> None:
        self.label = label
        self.percent = percent                # a fraction, shown as a percentage
        self.get = get
        self.better = better                  # "lower", "higher" or None (not ranked)
        self.complete_only = complete_only


def _worst_queue(s: dict[str, Any]) -> Any:
    from engine.sim.report import worst_deviation
    return worst_deviation(s)


BASE_METRICS: list[Metric] = [
    Metric("all jobs completed", lambda s: "yes" if s["outcome"]["complete"] else
           "NO: " + ", ".join(s["outcome"]["problems"])),
    Metric("jobs succeeded", lambda s: s["jobs"]["Succeeded"], "higher"),
    Metric("jobs failed", lambda s: s["jobs"]["Failed"], "lower"),
    Metric("jobs never ran", lambda s: s["jobs"]["Pending"], "lower"),
    Metric("makespan (s)", lambda s: s["makespan"], "lower", complete_only=True),
    Metric("makespan / lower bound", lambda s: s["makespanRatio"], "lower", complete_only=True),
    Metric("partial gangs", lambda s: s["partialGangs"], "lower"),
    Metric("stalled attempts", lambda s: s["stalled"]["attempts"], "lower"),
    Metric("stalled > 2 status periods", lambda s: s["stalled"]["beyondTwoStatusPeriods"], "lower"),
    Metric("stalled time (s)", lambda s: s["stalled"]["seconds"], "lower"),
    Metric("preemptions", lambda s: s["preemption"]["preemptions"]),
    Metric("jobs evicted", lambda s: s["preemption"]["jobsEvicted"]),
    Metric("cpu work lost (core-s)", lambda s: round(s["preemption"]["workLost"].get("cpu", 0.0) / 1000, 1), "lower"),
    Metric("GPU-hours lost", lambda s: s["preemption"]["gpuHoursLost"], "lower"),
    Metric("attempts", lambda s: s["attempts"]["total"]),
    Metric("wait p50 (s)", lambda s: s["wait"]["p50"], "lower"),
    Metric("wait p95 (s)", lambda s: s["wait"]["p95"], "lower"),
]
TAIL_METRICS: list[Metric] = [
    Metric("worst queue off target", _worst_queue, "lower", percent=True),
    Metric("wall time (s)", lambda s: s["simulation"]["wallSeconds"]),
]


def _utilisation(kind: str, name: str) -> Getter:
    return lambda s: s["utilisation"][kind].get(name)


def metrics(summaries: list[dict[str, Any]]) -> list[Metric]:
    """Base rows, then held and useful utilisation of every resource any run's fleet has (GPUs too)."""
    resources: list[str] = []
    for s in summaries:
        for name in s["utilisation"]["held"]:
            if name not in resources:
                resources.append(name)
    per_resource = []
    for name in sorted(resources, key=lambda n: (n not in ("cpu", "memory"), n)):
        per_resource.append(Metric(f"{name} held", _utilisation("held", name), percent=True))
        per_resource.append(Metric(f"{name} useful", _utilisation("useful", name), "higher", percent=True))
    return BASE_METRICS + per_resource + TAIL_METRICS


def column_names(reports: list[dict[str, Any]]) -> list[str]:
    """Policy names; when two runs share a name, the policy file's name (then its path) tells them apart."""
    names = [str(r["policy"]) for r in reports]
    modes = {r.get("placementMode") for r in reports}
    if len(set(names)) == len(names):
        return names if len(modes) < 2 else [f"{n} ({r.get('placementMode')})" for n, r in zip(names, reports)]
    files = [str(r.get("policyFile") or r["policy"]) for r in reports]
    stems = [Path(f).name for f in files]
    if len(set(stems)) == len(stems):
        return [f"{n} ({stem})" if n != Path(stem).stem else stem for n, stem in zip(names, stems)]
    return [f"{n} ({f})" for n, f in zip(names, files)] if len(set(files)) == len(files) else \
        [f"{n} #{i + 1}" for i, n in enumerate(names)]


def rank(values: list[Any], better: Optional[str], eligible: list[bool]) -> list[bool]:
    """Which cells are best: defined numbers only, among eligible runs, and only when they differ."""
    if better is None:
        return [False] * len(values)
    candidates = [v for v, ok in zip(values, eligible) if ok and isinstance(v, (int, float))]
    if len(candidates) < 2 or len(set(candidates)) == 1:
        return [False] * len(values)
    best = min(candidates) if better == "lower" else max(candidates)
    return [ok and isinstance(v, (int, float)) and v == best for v, ok in zip(values, eligible)]


def compare_rows(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per metric: label, and per run its value, ratio to the first run, best flag and note."""
    summaries = [r["summary"] for r in reports]
    complete = [bool(s["outcome"]["complete"]) for s in summaries]
    rows = []
    for metric in metrics(summaries):
        values = [metric.get(s) for s in summaries]
        eligible = complete if metric.complete_only else [True] * len(values)
        best = rank(values, metric.better, eligible)
        cells = []
        for i, v in enumerate(values):
            ratio = None
            first = values[0]
            if i > 0 and isinstance(v, (int, float)) and isinstance(first, (int, float)) and first:
                ratio = v / first
            note = "incomplete run" if metric.complete_only and not complete[i] and v is not None else ""
            cells.append({"value": v, "ratio": ratio, "best": best[i], "note": note})
        rows.append({"label": metric.label, "better": metric.better, "percent": metric.percent, "cells": cells})
    return rows
