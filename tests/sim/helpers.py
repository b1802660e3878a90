"""Tiny test pipelines and scenario builders for the simulator tests (real plugins are tested elsewhere)."""

from __future__ import annotations

from typing import Optional

from engine.hookspecs import hookimpl
from engine.model import Cluster, Failure, Job, Placement, Recovery
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from engine.sim.scenario import Scenario, load_scenario_text


class PlaceAnywhere(Plugin):
    """Admit-all: every job goes to the first candidate cluster whatever its capacity (no gang gate)."""

    name = "t-place-anywhere"
    stages = ("place",)

    @hookimpl
    def atoll_place(self, job: Job, clusters: list[Cluster]) -> Optional[Placement]:
        return {clusters[0].name: {t.name: t.replicas for t in job.tasks}}


class RequeueElsewhere(Plugin):
    name = "t-requeue"
    stages = ("recover",)

    @hookimpl
    def atoll_recover(self, job: Job, failure: Failure) -> Recovery:
        avoid = frozenset({failure.cluster}) if failure.cluster else frozenset()
        return Recovery(requeue=True, delay=5, exclude_clusters=avoid, reason="requeued by test")


def pipeline(*plugins: Plugin) -> Pipeline:
    stages: dict[str, list[Plugin]] = {}
    for p in plugins:
        for stage in p.stages:
            stages.setdefault(stage, []).append(p)
    return Pipeline(stages)


def scenario(body: str, *, member: str = "volcano", seed: int = 1, status: str = "10s",
             source: str = "test.yaml") -> Scenario:
    """A scenario from the YAML of ``spec`` minus the header fields."""
    indented = "\n".join("  " + line for line in body.strip("\n").splitlines())
    text = (f"apiVersion: atoll.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: t}}\nspec:\n"
            f"  seed: {seed}\n  statusPeriod: {status}\n  memberScheduler: {member}\n{indented}\n")
    return load_scenario_text(text, source)


def nodes(count: int, cpu: str = "10", memory: str = "10Gi") -> str:
    return f'[{{count: {count}, allocatable: {{cpu: "{cpu}", memory: {memory}, pods: "110"}}}}]'
