"""A job's history of pending reasons is bounded (``SimJob.note_reason``): the first ``REASONS_FIRST`` changes and
the latest, ``REASONS_KEPT`` in all, with a count of those left out. Kept whole it grew with wait x backlog: a
100,000-job saturated run peaked at 9.2 GB. The report's reason statistics still count what was left out."""

from __future__ import annotations

from engine.sim import driver
from engine.sim.outcome import REASONS_FIRST, REASONS_KEPT, SimJob
from engine.sim.report import _kinds, job_record
from engine.model import Task
from engine.sim.report import build_report
from engine.sim.scenario import JobSpec
from tests.sim.helpers import nodes, pipeline, scenario


def sim_job() -> SimJob:
    return SimJob(JobSpec(name="j", queue="q", submit_at=0.0, duration=1.0,
                          tasks=[Task("w", 1, 1, {"cpu": 1000})]))


def test_the_first_and_the_latest_changes_are_kept_and_the_rest_counted() -> None:
    job = sim_job()
    changes = [(float(t), f"short of cpu {t}" if t % 2 else f"no cluster {t}") for t in range(200)]
    for at, reason in changes:
        job.note_reason(at, reason)
    assert len(job.reasons) == REASONS_KEPT
    assert job.reasons == changes[:REASONS_FIRST] + changes[-(REASONS_KEPT - REASONS_FIRST):]
    assert job.reasons_dropped == 200 - REASONS_KEPT
    record = job_record(job)
    assert record["reasonsNotKept"] == 200 - REASONS_KEPT and len(record["reasons"]) == REASONS_KEPT


def test_a_kind_seen_only_among_those_left_out_is_still_counted_in_order() -> None:
    job = sim_job()
    reasons = ["waiting 1"] * REASONS_FIRST + ["only here 7"] + [f"late {i}" for i in range(REASONS_KEPT)]
    for at, reason in enumerate(reasons):
        job.note_reason(float(at), reason)
    assert all(r != "only here 7" for _, r in job.reasons)
    kinds = [kind for kind, _ in _kinds(job)]
    assert kinds.index("only here N") == REASONS_FIRST           # between the first kept and the latest
    assert dict(_kinds(job))["only here N"] == "only here 7"


TWO_JOBS = f"""
clusters: [{{name: m1, nodes: {nodes(1, cpu="4")}}}]
queues: [{{name: q, weight: 1}}]
jobs:
  - {{name: a, queue: q, submitAt: 0s, duration: 100s, tasks: [{{name: w, replicas: 1, resources: {{cpu: "4"}}}}]}}
  - {{name: b, queue: q, submitAt: 1s, duration: 10s, tasks: [{{name: w, replicas: 1, resources: {{cpu: "4"}}}}]}}
"""


def test_a_short_history_is_kept_whole() -> None:
    report = build_report(driver.simulate(scenario(TWO_JOBS), pipeline(), "plain"))
    b = next(j for j in report["jobs"] if j["name"] == "b")
    assert b["reasonsNotKept"] == 0 and b["reasons"] and b["state"] == "Succeeded"


def test_the_report_leaves_job_records_out_only_when_asked() -> None:
    result = driver.simulate(scenario(TWO_JOBS), pipeline(), "plain")
    whole, lean = build_report(result), build_report(result, jobs=False)
    assert [j["name"] for j in whole["jobs"]] == ["a", "b"] and "jobs" not in lean
    assert lean["summary"] == whole["summary"] and lean["timeline"] == whole["timeline"]
