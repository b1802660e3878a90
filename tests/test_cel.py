"""CEL helpers: load-time checks with precise messages, lenient samples, readable runtime errors."""

from __future__ import annotations

import logging

import pytest

from engine.policy.cel import CelCompiler, CelRuntimeError, from_cel, to_cel
from engine.policy.cel_vars import VARIABLES, CelCache, cluster_vars, job_vars, queue_vars
from engine.errors import InputError
from engine.model import Cluster, Job, Queue, Task
from engine.resources import parse_resources

WHERE = "p.yaml: spec.plugins.x.expr"


@pytest.fixture(scope="module")
def cel() -> CelCompiler:
    return CelCompiler()


def compile_error(cel: CelCompiler, text: str, result: str = "int", variables: tuple[str, ...] = ("job",)) -> str:
    with pytest.raises(InputError) as info:
        cel.compile(text, WHERE, variables, result)
    assert info.value.where == WHERE
    return info.value.message


def sample_job() -> Job:
    return Job(id="ns/a", name="a", namespace="ns", priority=7, labels={"tier": "prod"},
               tasks=[Task("worker", 4, 2, parse_resources({"cpu": "2", "nvidia.com/gpu": "1"}))])


def test_syntax_error_has_column(cel: CelCompiler) -> None:
    message = compile_error(cel, "job.priority )")
    assert message.startswith("CEL syntax error at column 14 in 'job.priority )'")
    assert compile_error(cel, "job.priority +\n  2 +").startswith("CEL syntax error at line 2, column 5")


def test_unknown_field_fails_at_load_with_suggestion(cel: CelCompiler) -> None:
    message = compile_error(cel, "job.prority + 1")
    assert message.startswith("'job.prority + 1': no such field or key 'prority' at column 5; "
                              "did you mean 'priority'?")
    message = compile_error(cel, "job.lables['tier'] == 'x'", "bool")      # misspelt map field, not a key
    assert "no such field or key 'lables' at column 5; did you mean 'labels'?" in message
    message = compile_error(cel, "job.priority +\n  job.atempts")
    assert "no such field or key 'atempts' at line 2, column 7; did you mean 'attempts'?" in message
    message = compile_error(cel, "job.zzz", "any")
    assert "; fields: annotations, attempts," in message                  # no close match: list them


def test_unknown_variable(cel: CelCompiler) -> None:
    assert compile_error(cel, "queue.weight") == \
        "CEL expression 'queue.weight' uses unknown variable(s) ['queue'] (first at column 1); available here: ['job']"
    assert "(first at column 16)" in compile_error(cel, "job.priority + cluster.free['cpu']")
    cel.compile("queue.weight * 2 + job.priority", WHERE, ("job", "queue"), "int")
    cel.compile("job.tasks.all(t, t.replicas > 0) && 'x' in job.labels", WHERE, ("job",), "bool")


def test_free_variables_ignore_fields_strings_macros_and_spacing(cel: CelCompiler) -> None:
    cel.compile("job . priority + job.\n  attempts", WHERE, ("job",), "int")
    cel.compile("has(job.labels.tier) && job.tasks.exists(t, t.replicas > 1) && 'queue.x y' in job.labels",
                WHERE, ("job",), "bool")
    assert "unknown variable(s) ['t']" in compile_error(cel, "job.tasks.exists(x, t.replicas > 1)", "bool")


def test_wrong_result_type(cel: CelCompiler) -> None:
    assert compile_error(cel, "job.priority > 1").startswith("'job.priority > 1' must return int, returned bool")
    assert compile_error(cel, "job.name", "number").startswith("'job.name' must return number, returned string")
    cel.compile("job.submitTime * 2.0", WHERE, ("job",), "number")


def test_string_concatenation_is_a_string(cel: CelCompiler) -> None:
    expr = cel.compile("job.namespace + '-' + job.name", WHERE, ("job",), "string")   # celpy returns a bare str
    assert expr.evaluate({"job": job_vars(sample_job())}) == "ns-a"


def test_int_double_mix_is_explained(cel: CelCompiler) -> None:
    message = compile_error(cel, "job.priority + 1.5", "number")
    assert "no such overload: the operands have different types" in message and "double(x)" in message


def test_comparison_of_different_types_is_explained(cel: CelCompiler) -> None:
    message = compile_error(cel, "job.demand['cpu'] > 1.5", "bool")
    assert message.startswith("\"job.demand['cpu'] > 1.5\": no such overload: cannot compare int and double "
                              "(CEL never converts types implicitly")


def test_runtime_messages_show_values_not_cel_types(cel: CelCompiler) -> None:
    expr = cel.compile("int(job.labels['n'])", WHERE, ("job",), "int")
    with pytest.raises(CelRuntimeError, match=r": not an integer: 'x7'$"):
        expr.evaluate({"job": {"labels": {"n": "x7"}}})
    expr = cel.compile("job.priority * 9223372036854775807", WHERE, ("job",), "int")
    with pytest.raises(CelRuntimeError, match=r": integer overflow$"):
        expr.evaluate({"job": {"priority": 2}})
    expr = cel.compile("job.priority / job.attempts", WHERE, ("job",), "int")
    with pytest.raises(CelRuntimeError, match=r": divide by zero"):
        expr.evaluate({"job": {"priority": 2, "attempts": 0}})


def test_empty_expression(cel: CelCompiler) -> None:
    assert compile_error(cel, "  ") == "CEL expression must be a non-empty string"


def test_samples_are_lenient_for_label_and_resource_keys_and_values(cel: CelCompiler) -> None:
    cel.compile("job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0)", WHERE, ("job",), "int")
    cel.compile("int(job.labels['rank'])", WHERE, ("job",), "int")           # "" fails, "1" passes
    cel.compile("job.demand['cpu'] / job.minDemand['cpu']", WHERE, ("job",), "int")   # 0 / 0 fails, 1000/1000 ok
    cel.compile("cluster.free['nvidia.com/gpu'] >= 8 && cluster.labels['zone'] != ''", WHERE, ("cluster",), "bool")
    cel.compile("job.tasks[0].resources['cpu'] * 2", WHERE, ("job",), "int")
    cel.compile("size(job.tasks) > 1 ? job.tasks[1].replicas : 0", WHERE, ("job",), "int")
    cel.compile("job.tasks[2].replicas", WHERE, ("job",), "int")             # fine for a 4-task sample


def test_evaluate_on_real_objects(cel: CelCompiler) -> None:
    expr = cel.compile("job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0) + job.gpus", WHERE, ("job",), "int")
    assert expr.evaluate({"job": job_vars(sample_job())}) == 1011
    expr = cel.compile("job.demand['cpu']", WHERE, ("job",), "int")
    assert expr.evaluate({"job": job_vars(sample_job())}) == 8000              # exact milli-cores


def test_runtime_error_is_readable_and_silent(cel: CelCompiler, caplog: pytest.LogCaptureFixture,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    expr = cel.compile("int(job.labels['rank'])", WHERE, ("job",), "int")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(CelRuntimeError) as info:
        expr.evaluate({"job": job_vars(sample_job())})
    assert str(info.value) == f"{WHERE}: \"int(job.labels['rank'])\": no such field or key 'rank'"
    assert not [r for r in caplog.records if r.name.startswith("celpy") and r.levelno >= logging.WARNING]
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_runtime_wrong_type_is_caught(cel: CelCompiler) -> None:
    expr = cel.compile("job.labels['tier'] == 'prod' ? 1 : 2", WHERE, ("job",), "int")
    assert expr.evaluate({"job": {"labels": {"tier": "prod"}}}) == 1
    expr = cel.compile("job.labels['n'] == '1' ? 1 : 'x'", WHERE, ("job",), "any")
    assert expr.evaluate({"job": {"labels": {"n": "2"}}}) == "x"


def test_conversions_keep_bools_and_exact_ints() -> None:
    value = from_cel(to_cel({"a": True, "b": 3, "c": [1.5, "s"]}))
    assert value == {"a": True, "b": 3, "c": [1.5, "s"]}
    assert type(value["a"]) is bool and type(value["b"]) is int


def test_vars_builders_produce_exactly_the_documented_fields() -> None:
    job = sample_job()
    assert set(job_vars(job)) == set(VARIABLES["job"])
    assert set(queue_vars(Queue("q", capability={"cpu": 1000}))) == set(VARIABLES["queue"])
    assert set(cluster_vars(Cluster("m1"))) == set(VARIABLES["cluster"])
    assert job_vars(job)["minAvailable"] == 2 and job_vars(job)["minDemand"] == {"cpu": 4000, "nvidia.com/gpu": 2}


def test_cel_cache_computes_once_per_key_and_bounds_memory() -> None:
    calls: list[int] = []
    cache: CelCache[tuple[str, int]] = CelCache(limit=2)

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert cache.get(("a", 0), compute) == 1
    assert cache.get(("a", 0), compute) == 1
    assert cache.get(("a", 1), compute) == 2                  # new generation: recomputed
    assert cache.get(("b", 0), compute) == 3                  # over the limit: cleared, still correct
    assert cache.get(("a", 0), compute) == 4
