"""Issue 9's "done when" on the shipped preemption scenarios and on variations of them, default policy."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from engine.policy import load_policy
from engine.sim.driver import simulate
from engine.sim.outcome import SimJob, SimResult
from engine.sim.report import build_report
from engine.sim.scenario import load_scenario_text

ROOT = Path(__file__).resolve().parents[2]
GRACE, MAX_PREEMPTIONS = 30.0, 3          # policies/default.yaml


def run(name: str, policy: str = "default", edit: Optional[tuple[str, str]] = None) -> SimResult:
    path = ROOT / "scenarios" / f"{name}.yaml"
    text = path.read_text()
    if edit is not None:
        assert edit[0] in text
        text = text.replace(*edit)
    loaded = load_policy(ROOT / "policies" / f"{policy}.yaml")
    return simulate(load_scenario_text(text, str(path)), loaded.pipeline, loaded.name)


def start(sim: SimJob) -> float:
    started = [a.start_time for a in sim.attempts if a.start_time is not None]
    assert started, sim.spec.name
    return started[-1]


def prompt(result: SimResult) -> float:
    """statusPeriod + grace period + a few cycles."""
    return result.scenario.status_period + GRACE + 3 * result.scenario.schedule_period + 1


def check_invariants(result: SimResult) -> None:
    assert all(j.state == "Succeeded" for j in result.jobs.values())            # every job still finishes
    assert not any(j.partial for j in result.jobs.values())                      # 0 partial gangs
    for j in result.jobs.values():
        assert sum(a.outcome == "Preempted" for a in j.attempts) <= MAX_PREEMPTIONS


@pytest.mark.parametrize("edit", [None, ("submitAt: 2m", "submitAt: 17m"),
                                  ("count: 12", "count: 30"),
                                  ("replicas: 4, minAvailable: 4, resources: {cpu: \"4\", memory: 8Gi}}\n  generators",
                                   "replicas: 2, minAvailable: 2, resources: {cpu: \"8\", memory: 8Gi}}\n  generators")])
def test_a_higher_priority_job_starts_promptly_on_a_saturated_fleet(edit: Optional[tuple[str, str]]) -> None:
    result = run("priority-preemption", edit=edit)
    urgent = result.jobs["default/urgent-fix"]
    assert start(urgent) - urgent.spec.submit_at <= prompt(result)
    check_invariants(result)
    victims = [a for j in result.jobs.values() for a in j.attempts if a.outcome == "Preempted"]
    assert len(victims) == 1 and victims[0].preempted_by == "default/urgent-fix"     # one victim, no more
    baseline = run("priority-preemption", "no-preemption", edit)
    assert start(baseline.jobs["default/urgent-fix"]) - urgent.spec.submit_at > 1800    # it waited for a sweep


@pytest.mark.parametrize("edit", [None, ("start: 30m, every: 0s", "start: 45m, every: 20s"),
                                  ("count: 4\n      namePrefix: prod", "count: 2\n      namePrefix: prod")])
def test_a_queue_below_its_guarantee_gets_it_back_and_idle_guarantees_are_lent(
        edit: Optional[tuple[str, str]]) -> None:
    result = run("reclaim", edit=edit)
    for sim in result.jobs.values():
        if sim.spec.queue == "prod":
            assert start(sim) - sim.spec.submit_at <= prompt(result), sim.spec.name
    first_prod = min(s.spec.submit_at for s in result.jobs.values() if s.spec.queue == "prod")
    busy = [s.useful for s in result.timeline if 60 < s.time < first_prod]
    assert busy and min(busy) >= 0.9                        # >= 90 % while prod is idle and batch has a backlog
    check_invariants(result)
    baseline = run("reclaim", "no-preemption", edit)
    assert max(s.useful for s in baseline.timeline if 60 < s.time < first_prod) <= 0.51
    assert build_report(result)["summary"]["makespan"] < build_report(baseline)["summary"]["makespan"]


def test_report_counts_preemptions_and_work_lost() -> None:
    summary = build_report(run("priority-preemption"))["summary"]["preemption"]
    assert summary["preemptions"] == 1 and summary["jobsEvicted"] == 1 and summary["mostPerJob"] == 1
    assert summary["workLost"]["cpu"] > 0 and summary["gpuHoursLost"] == 0
