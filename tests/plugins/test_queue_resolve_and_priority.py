"""queue-resolve and job-priority: where a job waits and in which order, CEL included."""

from __future__ import annotations

import pytest

from engine.policy.cel import CelCompiler
from engine.errors import InputError
from engine.model import Job, JobState
from plugins.fifo import Fifo
from plugins.job_priority import JobPriority
from plugins.queue_resolve import QueueResolve
from tests.plugins.queue_helpers import admitted, cluster, engine_with, job, queue


def test_job_keeps_its_queue_else_label_then_annotation_then_default() -> None:
    plugin = QueueResolve({}, None)
    engine = engine_with(enqueue=[plugin])
    own = job("own", q="team-a")
    labelled = job("labelled", q="", labels={"volcano.sh/queue-name": "team-b"})
    annotated = job("annotated", q="")
    annotated.annotations["atoll.dev/queue"] = "team-c"
    bare = job("bare", q="")
    for j in (own, labelled, annotated, bare):
        assert engine.submit(j) is None
    assert [own.queue, labelled.queue, annotated.queue, bare.queue] == ["team-a", "team-b", "team-c", "default"]


def test_default_queue_name_is_configurable() -> None:
    engine = engine_with(enqueue=[QueueResolve({"default": "batch"}, None)])
    bare = job("bare", q="")
    engine.submit(bare)
    assert bare.queue == "batch"


def test_cel_queue_fills_in_only_when_the_job_names_none_unless_override() -> None:
    text = "job.labels.exists(k, k == 'team') ? 'team-' + job.labels['team'] : ''"
    plain = engine_with(enqueue=[QueueResolve({"queue": text}, CelCompiler())])
    named, routed, nothing = job("named", q="mine", labels={"team": "x"}), job("routed", q="", labels={"team": "x"}), \
        job("nothing", q="")
    for j in (named, routed, nothing):
        plain.submit(j)
    assert (named.queue, routed.queue, nothing.queue) == ("mine", "team-x", "default")
    forced = engine_with(enqueue=[QueueResolve({"queue": text, "override": True}, CelCompiler())])
    named2 = job("named", q="mine", labels={"team": "x"})
    forced.submit(named2)
    assert named2.queue == "team-x"


def test_cel_runtime_error_rejects_the_job_with_the_error_and_keeps_it() -> None:
    engine = engine_with(enqueue=[QueueResolve({"queue": "job.labels['team']"}, CelCompiler(),
                                               "policy.yaml: spec.plugins.queue-resolve")])
    broken = job("broken", q="")
    refusal = engine.submit(broken)
    assert refusal is not None and refusal.plugin == "queue-resolve"
    assert "policy.yaml: spec.plugins.queue-resolve.queue" in refusal.reason
    assert broken.state is JobState.REJECTED and engine.state.jobs["broken"] is broken


def test_cel_typo_fails_at_load_naming_the_field() -> None:
    with pytest.raises(InputError) as err:
        QueueResolve({"queue": "job.lables['x']"}, CelCompiler(), "p.yaml: spec.plugins.queue-resolve")
    assert "spec.plugins.queue-resolve.queue" in str(err.value)
    with pytest.raises(InputError):
        JobPriority({"priority": "job.name"}, CelCompiler())          # string, not int


def test_unknown_queue_waits_by_default_and_is_rejected_when_configured() -> None:
    waiting = engine_with(enqueue=[QueueResolve({}, None)])
    waiting.upsert_cluster(cluster("m1"))
    waiting.submit(job("j", q="ghost"))
    assert admitted(waiting) == []
    assert waiting.state.jobs["j"].state is JobState.PENDING
    assert "does not exist" in waiting.state.jobs["j"].pending_reason
    strict = engine_with(enqueue=[QueueResolve({"rejectUnknownQueues": True}, None)])
    strict.upsert_queue(queue("real"))
    refusal = strict.submit(job("j", q="ghost"))
    assert refusal is not None and "'ghost' does not exist" in refusal.reason
    assert strict.submit(job("k", q="real")) is None


def test_priority_orders_jobs_higher_first_then_fifo() -> None:
    prio = JobPriority({}, None)
    engine = engine_with(enqueue=[prio], order=[prio, Fifo({}, None)])
    engine.upsert_cluster(cluster("m1", cpu="3"))
    engine.upsert_queue(queue("q"))
    for name, p, t in (("a", 1, 0.0), ("b", 5, 1.0), ("c", 5, 2.0), ("d", 9, 3.0)):
        engine.submit(job(name, q="q", priority=p, submit=t))
    assert admitted(engine) == ["d", "b", "c"]


def test_cel_priority_is_computed_once_per_job_version() -> None:
    prio = JobPriority({"priority": "job.priority + ('tier' in job.labels && job.labels['tier'] == 'prod' ? 100 : 0)"},
                       CelCompiler())
    calls = 0
    evaluate = prio._evaluate

    def counting(job: Job) -> int:
        nonlocal calls
        calls += 1
        return evaluate(job)

    prio._evaluate = counting  # type: ignore[method-assign]
    engine = engine_with(enqueue=[prio], order=[prio])
    engine.upsert_cluster(cluster("m1", cpu="2"))
    engine.upsert_queue(queue("q"))
    engine.submit(job("dev", q="q", priority=50, labels={"tier": "dev"}))
    engine.submit(job("prod", q="q", priority=1, labels={"tier": "prod"}))
    engine.submit(job("plain", q="q", priority=60))
    assert calls == 3                            # enqueue and job_order share one evaluation
    assert admitted(engine) == ["prod", "plain"]
    engine.state.capacity_epoch += 1
    engine.cycle(1.0)
    assert calls == 3
    assert prio.effective(engine.state.jobs["prod"]) == 101


def test_cel_priority_runtime_error_falls_back_to_job_priority_and_is_recorded() -> None:
    prio = JobPriority({"priority": "job.priority * 10 / (job.replicas - 2)"}, CelCompiler())
    engine = engine_with(enqueue=[prio], order=[prio])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("q"))
    engine.submit(job("single", q="q", priority=7, replicas=2))          # division by zero on a real job
    engine.submit(job("pair", q="q", priority=1, replicas=3))            # 1 * 10 / 1 = 10
    assert prio.cel_errors == 1
    assert "single" in prio.fallbacks and "ordered by job.priority 7" in prio.fallbacks["single"]
    assert engine.state.jobs["single"].sort_key == (-7,)
    assert engine.state.jobs["pair"].sort_key == (-10,)
    assert admitted(engine) == ["pair", "single"]


def test_cel_priority_is_recomputed_when_a_failed_job_is_requeued() -> None:
    from engine.hookspecs import hookimpl
    from engine.model import Failure, FailureKind, Recovery
    from engine.plugin import Plugin

    class Requeue(Plugin):
        name = "t-requeue"
        stages = ("recover",)

        @hookimpl
        def atoll_recover(self) -> Recovery:
            return Recovery(requeue=True)

    prio = JobPriority({"priority": "job.priority - job.attempts * 10"}, CelCompiler())
    engine = engine_with(enqueue=[prio], order=[prio], recover=[Requeue({}, None)])
    engine.upsert_cluster(cluster("m1", cpu="1"))
    engine.upsert_queue(queue("q"))
    engine.submit(job("flaky", q="q", priority=5))
    assert admitted(engine) == ["flaky"]
    engine.fail("flaky", Failure(FailureKind.JOB_FAILED), 1.0)
    assert engine.state.jobs["flaky"].sort_key == (5,)          # 5 - 1 * 10 = -5, negated


def test_queue_keys_are_configurable() -> None:
    engine = engine_with(enqueue=[QueueResolve({"queueKeys": ["team"]}, None)])
    tagged = job("tagged", q="", labels={"team": "t1", "volcano.sh/queue-name": "ignored"})
    engine.submit(tagged)
    assert tagged.queue == "t1"


def test_cel_results_are_shared_by_jobs_with_equal_inputs() -> None:
    prio = JobPriority({"priority": "job.priority + ('tier' in job.labels && job.labels['tier'] == 'prod' ? 100 : 0)"},
                       CelCompiler())
    engine = engine_with(enqueue=[prio], order=[prio])
    engine.upsert_queue(queue("q"))
    for i in range(40):
        engine.submit(job(f"j{i}", q="q", priority=i % 2, labels={"tier": "prod" if i % 4 < 2 else "dev"},
                          submit=float(i)))
    assert prio.expression is not None and prio.expression.evaluations == 4      # (priority, tier) pairs
    assert engine.state.jobs["j0"].sort_key == (-100,) and engine.state.jobs["j3"].sort_key == (-1,)


def test_referenced_fields_and_per_job_fallback_for_bare_job() -> None:
    from plugins._celjob import JobCel, referenced_fields

    assert referenced_fields("job.priority + size(job.labels) + ('job.kind' == '' ? 1 : 0)") == \
        frozenset({"priority", "labels"})
    assert referenced_fields("size(job) > 3") is None
    bare = JobCel(CelCompiler().compile("size(job) > 0 ? 1 : 0", "w", ("job",), "int"))
    assert bare.fields is None
    a, b = job("a"), job("b")
    assert bare.evaluate(a) == (1, "") and bare.evaluate(b) == (1, "") and bare.evaluations == 2
    assert bare.evaluate(a) == (1, "") and bare.evaluations == 2


def test_celjob_field_getters_equal_job_vars() -> None:
    from engine.policy.cel_vars import VARIABLES, job_vars
    from engine.model import Job, Task
    from plugins._celjob import FIELDS

    full = Job(id="ns/x", name="x", namespace="ns", kind="Deployment", queue="q", priority=3, priority_class="high",
               labels={"a": "1"}, annotations={"b": "2"}, submit_time=7, attempts=2,
               tasks=[Task("w", 3, 2, {"cpu": 1000, "nvidia.com/gpu": 1}), Task("ps", 1, 1, {"cpu": 500})])
    assert set(FIELDS) == set(VARIABLES["job"])
    expected = job_vars(full)
    assert {name: get(full) for name, get in FIELDS.items()} == expected


def test_cel_priority_reading_one_label_is_shared_by_jobs_whose_other_labels_differ() -> None:
    """Every batch/v1 Job carries its own controller-uid label: the default policy's priority (it reads
    job.labels['atoll.dev/tier']) is evaluated once per (priority, tier), not once per Job."""
    from engine.policy.cel import CelCompiler
    from engine.model import Job
    from plugins._celjob import JobCel

    text = "job.priority + ('atoll.dev/tier' in job.labels && job.labels['atoll.dev/tier'] == 'prod' ? 1000 : 0)"
    cel = JobCel(CelCompiler().compile(text, "priority", ("job",)))
    jobs = [Job(f"j{i}", f"j{i}", labels={"controller-uid": f"uid-{i}", **({"atoll.dev/tier": "prod"} if i % 3 == 0 else {})},
                priority=5) for i in range(30)]
    assert [cel.evaluate(j)[0] for j in jobs] == [1005 if i % 3 == 0 else 5 for i in range(30)]
    assert cel.evaluations == 2
