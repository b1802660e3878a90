"""One small scenario, expressed once, as a simulator scenario and as real objects on the e2e fleet
(e2e/tests/test_sim_parity.py).

The fleet is the session's: two members of two kwok nodes (32 cpu, 256Gi, 8 GPUs, 110 pods) each, Karmada's
default cpu/memory resource models on their Clusters. Every pod asks for 16 cpu and 1Gi, so a node holds two
and a member four ("slots"), and karmada-scheduler's general estimator on the default models counts slots
exactly (a node with one pod is grade 5: a 16-cpu virtual node; with none, grade 6: 32 cpu).

Why the scenario is deterministic on a real fleet (docs/simulator.md, "Parity with the e2e fleet"):
* ``fill`` jobs are submitted one at a time, each after the Cluster objects report every pod admitted so far,
  so karmada-scheduler (gate mode) never places from a status that misses an earlier job: stale between
  reports it would stack them (the simulator does the same, but when a report lands is timing).
* ``wait`` jobs are submitted together while nothing they need is free, then capacity frees one ``finish``
  at a time (the test deletes the Job; the simulator ends it by its duration), each after the fleet settled.
* Ranks are (queue priority, job priority) and never tie; no waiter outranks a running job that evicting
  would make room for, so the default policy's preemption never fires; no two members ever tie for
  karmada-scheduler except on an empty fleet (then both pick member1: Karmada sorts ties by name).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from engine.policy import load_policy_text
from engine.sim.driver import simulate
from engine.sim.scenario import load_scenario_text

REPO = Path(__file__).resolve().parents[2]
CPU = "16"
STEP = 15.0          # simulated seconds between fill submissions (> statusPeriod: a report lands in between)
FIRST_FINISH = 105.0  # finishes fall between status ticks, 30 s apart
LONG = 7200.0        # runs beyond the compared window
WINDOW = 300.0       # the simulator's admissions compared: those before this time
QUEUES = {"hi": 10, "lo": 1}          # queue -> Volcano Queue priority
NODE = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}   # e2e/harness/config.py defaults


@dataclass(frozen=True)
class Spec:
    name: str
    queue: str
    priority: int
    pods: int
    step: str                    # fill: submitted alone, in order; wait: submitted together after the fills
    finish: Optional[int] = None  # the n-th capacity release (the test deletes it); None: runs on


SCENARIO = (
    Spec("b1", "hi", 1000, 2, "fill", finish=1),
    Spec("b2", "hi", 1000, 1, "fill"),
    Spec("b3", "hi", 1000, 3, "fill", finish=0),
    Spec("b4", "hi", 1000, 2, "fill"),          # bind: 1 slot free on each member, it waits (no split gangs)
    Spec("wc", "lo", 1000, 2, "wait"),          # submitted first: FIFO would serve it first
    Spec("wa", "hi", 100, 2, "wait"),
    Spec("wb", "hi", 500, 3, "wait"),
)
FILLS = [s for s in SCENARIO if s.step == "fill"]
WAITS = [s for s in SCENARIO if s.step == "wait"]
FINISHES = sorted((s for s in SCENARIO if s.finish is not None), key=lambda s: s.finish or 0)


def policy_text(mode: str) -> str:
    """policies/default.yaml in the given placement mode, nothing else changed."""
    text = re.sub(r"placementMode: \w+", f"placementMode: {mode}", (REPO / "policies" / "default.yaml").read_text())
    assert f"placementMode: {mode}" in text
    return text


def scenario() -> dict[str, Any]:
    """The simulator's scenario: same nodes, queues, jobs; submissions and ends at times that keep the
    order of the fleet run (a status tick between any two steps)."""
    jobs = []
    wait_at = STEP * len(FILLS)
    for i, s in enumerate(SCENARIO):
        submit = STEP * i if s.step == "fill" else wait_at
        end = FIRST_FINISH + 30 * s.finish if s.finish is not None else LONG
        jobs.append({"name": s.name, "queue": s.queue, "priority": s.priority, "submitAt": submit,
                     "duration": end - submit,
                     "tasks": [{"name": "work", "replicas": s.pods, "resources": {"cpu": CPU, "memory": "1Gi"}}]})
    return {"apiVersion": "atoll.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "sim-parity"},
            "spec": {"statusPeriod": "10s", "schedulePeriod": "1s",
                     "clusters": [{"name": f"member{i}", "nodes": [{"count": 2, "allocatable": dict(NODE)}]}
                                  for i in (1, 2)],
                     "queues": [{"name": q, "priority": p} for q, p in QUEUES.items()],
                     "jobs": jobs}}


@dataclass(frozen=True)
class Outcome:
    """What one side did: admissions grouped by engine cycle (in order), each job's clusters, who waits."""

    waves: list[set[str]]
    placement: dict[str, dict[str, int]]
    pending: set[str]
    admit_time: dict[str, float] = field(default_factory=dict, compare=False)   # simulator only: first admission

    def admitted_on_submit(self) -> set[str]:
        """The fill jobs the simulator admitted before the next step was submitted (the others waited)."""
        steps = [STEP * i for i in range(1, len(FILLS) + 1)]    # the next fill's submission, then the waiters'
        return {s.name for s, nxt in zip(FILLS, steps) if self.admit_time.get(s.name, nxt) < nxt}

    def order(self) -> list[list[str]]:
        return [sorted(w) for w in self.waves]


def run_simulator(mode: str) -> Outcome:
    sc = load_scenario_text(yaml.safe_dump(scenario(), sort_keys=False), "sim-parity")
    policy = load_policy_text(policy_text(mode), f"default.yaml ({mode})")
    result = simulate(sc, policy.pipeline, "default", placement_mode=mode)
    times: dict[float, set[str]] = {}
    placement: dict[str, dict[str, int]] = {}
    pending = set()
    for key, job in result.jobs.items():
        name = key.rsplit("/", 1)[-1]
        first = job.attempts[0] if job.attempts else None
        if first is None or first.admit_time >= WINDOW:
            pending.add(name)
            continue
        assert all(a.outcome != "Preempted" for a in job.attempts), (name, job.attempts)
        times.setdefault(first.admit_time, set()).add(name)
        placement[name] = {c: sum(p.values()) for c, p in first.placement.items()}
    return Outcome([times[t] for t in sorted(times)], placement, pending,
                   {n: t for t, names in times.items() for n in names})
