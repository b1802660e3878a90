"""Stalls (admitted jobs waiting in a member): engine/sim/node_oracle.py, the measurement behind docs/node-shapes.md
"What the engine could have known", and the simulator's stuck-pod check (spec.stuckAfter)."""

from __future__ import annotations

import importlib
from types import ModuleType

from engine.sim.driver import Simulation
from engine.sim.report import build_report
from tests.sim.helpers import pipeline, scenario


# Two 4-cpu nodes; a and b take 3 cpu on each for 100 s; c's 2-cpu pod fits the summed 2 cpu free but no node.
FRAGMENTED = """
resourceModels: []
clusters: [{name: m1, nodes: [{count: 2, allocatable: {cpu: "4", pods: "110"}}]}]
jobs:
  - {name: a, duration: 100s, tasks: [{name: w, replicas: 1, resources: {cpu: "3"}}]}
  - {name: b, duration: 100s, tasks: [{name: w, replicas: 1, resources: {cpu: "3"}}]}
  - {name: c, submitAt: 1s, duration: 10s, tasks: [{name: w, replicas: 1, resources: {cpu: "2"}}]}
"""


def tool() -> ModuleType:
    return importlib.import_module("engine.sim.node_oracle")


def test_totals_stall_the_job_the_oracle_keeps_it_in_the_engine() -> None:
    plain = build_report(Simulation(scenario(FRAGMENTED), pipeline(), "plain").run())["summary"]["stalled"]
    assert plain["attempts"] == 1 and plain["beyondTwoStatusPeriods"] == 1     # c waited 100 s in m1
    sim = Simulation(scenario(FRAGMENTED), pipeline(), "plain")
    tool().oracle(sim)
    result = sim.run()
    assert build_report(result)["summary"]["stalled"]["attempts"] == 0
    c = result.jobs["default/c"].attempts[0]
    assert c.admit_time == c.start_time == 100.0 and result.jobs["default/c"].state == "Succeeded"


def test_why_names_the_stall_no_node_fitted() -> None:
    counts = tool().why(Simulation(scenario(FRAGMENTED), pipeline(), "plain"))
    # a node with 4 cpu and no memory is grade 0 of Karmada's default models: they would refuse even a and b
    assert counts == {"a": {"started fit-nodes default-models-no": 1},
                      "b": {"started fit-nodes default-models-no": 1},
                      "c": {"stalled>2p no-node default-models-no": 1}}


def test_stuck_after_fails_an_attempt_whose_pods_stay_unbound_as_the_controller_does() -> None:
    """``spec.stuckAfter`` plays the controller's ``--stuck-after``: c's pod is unbound 5 s after it was created,
    so c fails Unschedulable on m1 at t=6 (without it, c waits in m1 until t=100: the first test)."""
    result = Simulation(scenario("stuckAfter: 5s\n" + FRAGMENTED), pipeline(), "plain").run()
    c = result.jobs["default/c"].attempts[0]
    assert (c.outcome, c.end_time, c.start_time) == ("Unschedulable", 6.0, None)
    assert "Unschedulable in m1 for 5s" in c.message
    a = result.jobs["default/a"].attempts[0]
    assert a.outcome == "Succeeded" and len(result.jobs["default/a"].attempts) == 1   # bound at once: never stuck
