"""A plugin that raises while one job is judged fails that job, not the cycle (engine.core.contain)."""

from __future__ import annotations

from typing import Any, ClassVar, Hashable, Optional

import pytest

from engine.core import contain
from engine.core.scheduler import Engine
from engine.hookspecs import hookimpl
from engine.core.preempt import PreemptRule
from engine.model import Cluster, Job, JobState, Queue, Refusal
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from tests.core.test_preempt import fleet, job, make, report, run
from tests.core.test_scheduler import Priority, cluster
from tests.core.test_scheduler import job as cpu_job


@pytest.fixture(autouse=True)
def contained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contain, "STRICT", False)         # tests/conftest.py makes every other test strict


class Broken(Plugin):
    """Raises for jobs labelled ``boom`` in the stage it is put in, while ``broken`` is set. It declares a verdict
    key (nothing of the job: it claims one verdict for all), so the engine walks by key, not job by job."""

    name = "t-broken"
    stages: ClassVar[tuple[str, ...]] = ("admit", "place")
    broken = True

    def _check(self, job: Job) -> None:
        if self.broken and "boom" in job.labels:
            raise KeyError(f"no field 'x' in {job.id}")

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return ()

    def verdict_reads(self, job: Job, state: Any) -> Optional[tuple[Hashable, ...]]:
        return ()


class BrokenAdmit(Broken):
    stages = ("admit",)

    @hookimpl
    def atoll_admit(self, job: Job, state: Any) -> Optional[Refusal]:
        self._check(job)
        return None


class BrokenScore(Broken):
    stages = ("place",)

    @hookimpl
    def atoll_score(self, job: Job, clusters: list[Cluster], state: Any) -> dict[str, int]:
        self._check(job)
        return {c.name: 0 for c in clusters}


def engine_with(plugin: Broken) -> Engine:
    stages: dict[str, list[Plugin]] = {"order": [Priority({}, None)]}
    for stage in plugin.stages:
        stages.setdefault(stage, []).append(plugin)
    engine = Engine(Pipeline(stages))
    for name in ("m1", "m2"):
        engine.upsert_cluster(cluster(name, "10"))
    engine.upsert_queue(Queue("q"))
    return engine


def labelled(name: str, *labels: str, priority: int = 0) -> Job:
    j = cpu_job(name, "1", priority=priority)
    j.labels = {label: "" for label in labels}
    return j


@pytest.mark.parametrize("plugin_class", [BrokenAdmit, BrokenScore])
def test_the_failing_job_waits_with_the_error_and_the_others_are_admitted(plugin_class: type[Broken]) -> None:
    plugin = plugin_class({}, None)
    engine = engine_with(plugin)
    # the same shape and queue: one verdict-key group, whose other jobs must not be handed the error
    for name, labels, priority in (("first", (), 3), ("bad", ("boom",), 2), ("last", (), 1)):
        engine.submit(labelled(name, *labels, priority=priority))
    result = engine.cycle(0.0)
    assert [a.job_id for a in result.admitted] == ["first", "last"]
    bad = engine.state.jobs["bad"]
    assert bad.state is JobState.PENDING
    assert bad.pending_reason == (f"plugin {plugin.name!r} failed while judging this job (KeyError: \"no field 'x' "
                                  f"in bad\"); it is examined again within 60 s")
    assert result.reasons == {"bad": bad.pending_reason}
    [error] = result.plugin_errors
    assert (error.job_id, error.plugin) == ("bad", plugin.name)
    assert error.traceback.startswith("Traceback") and "_check" in error.traceback
    # with nothing changed, not again before its retry time; then again, and admitted once the plugin is mended
    quiet = engine.cycle(30.0)
    assert (quiet.examined, quiet.plugin_errors, bad.state) == (0, [], JobState.PENDING)
    plugin.broken = False
    again = engine.cycle(60.0)
    assert [a.job_id for a in again.admitted] == ["bad"] and again.plugin_errors == []


def test_a_job_failing_again_keeps_its_reason_and_is_not_written_again() -> None:
    engine = engine_with(BrokenAdmit({}, None))
    engine.submit(labelled("bad", "boom"))
    assert "bad" in engine.cycle(0.0).reasons
    retried = engine.cycle(60.0)
    assert len(retried.plugin_errors) == 1 and retried.reasons == {}     # the same text: no new Event per retry


def test_strict_raises_instead() -> None:
    contain.STRICT = True           # (the fixture's monkeypatch restores it)
    engine = engine_with(BrokenAdmit({}, None))
    engine.submit(labelled("bad", "boom"))
    with pytest.raises(KeyError, match="no field 'x'"):
        engine.cycle(0.0)


class BrokenRule(Plugin):
    name = "t-broken-rule"
    stages = ("preempt",)

    @hookimpl
    def atoll_preempt_rule(self, job: Job, state: Any, now: float) -> Optional[PreemptRule]:
        raise RuntimeError("rule table missing")


def test_a_preempt_hook_that_raises_fails_the_preemptor_only_and_leaves_the_state_as_it_was() -> None:
    engine = make({}, extra=[BrokenRule({}, None)])
    fleet(engine, m1=4, m2=2)
    run(engine, job("low", 4), {"m1": 1})
    report(engine, "m1", 1.0)
    free_before = {name: dict(engine.state.free(name)) for name in ("m1", "m2")}
    engine.submit(job("high", 4, priority=1000))
    engine.submit(job("small", 2))
    result = engine.cycle(10.0)
    assert [a.job_id for a in result.admitted] == ["small"] and result.preemptions == []
    assert engine.state.jobs["low"].state is JobState.RUNNING
    high = engine.state.jobs["high"]
    assert high.state is JobState.PENDING and "plugin 't-broken-rule' failed" in high.pending_reason
    assert "RuntimeError: rule table missing" in high.pending_reason
    assert [e.plugin for e in result.plugin_errors] == ["t-broken-rule"]
    assert engine.state.free("m1") == free_before["m1"]       # no dry run left its supposed state behind


class BrokenVerdictKey(Broken):
    """Its verdict key hook raises: called after the job entered the pending index (engine.core.pending)."""

    stages = ("admit",)

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        self._check(job)
        return ()

    @hookimpl
    def atoll_admit(self, job: Job, state: Any) -> Optional[Refusal]:
        return None


def test_a_submit_a_plugin_fails_takes_nothing_in_and_can_be_made_again() -> None:
    plugin = BrokenVerdictKey({}, None)
    engine = engine_with(plugin)
    bad = labelled("bad", "boom")
    with pytest.raises(KeyError):                  # not contained: the adapter keeps the object and tries again
        engine.submit(bad)
    assert "bad" not in engine.state.jobs and engine.pending_count() == 0
    assert engine.cycle(0.0).examined == 0
    plugin.broken = False
    assert engine.submit(labelled("bad", "boom")) is None
    assert [a.job_id for a in engine.cycle(1.0).admitted] == ["bad"]
