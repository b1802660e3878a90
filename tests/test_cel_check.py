"""CEL is checked statically at load: every field path, function, method, operator and result type, with the
column; what validates cannot fail at run time for a missing field or function. Plus the evaluation budget."""

from __future__ import annotations

import time
from typing import Any

import celpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import InputError
from engine.model import Cluster, Job, Queue, Task
from engine.policy.cel import CelCompiler, CelRuntimeError, to_cel
from engine.policy.cel_size import MAX_CHARS
from engine.policy.cel_types import FUNCTIONS, METHODS, REFUSED, ListT, MapT, ObjT
from engine.policy.cel_vars import OBJECTS, VARIABLES, cluster_vars, job_vars, queue_vars
from engine.resources import parse_resources

WHERE = "p.yaml: spec.plugins.x.expr"
CEL = CelCompiler()


def error(text: str, variables: tuple[str, ...] = ("job",), result: str = "any") -> str:
    with pytest.raises(InputError) as info:
        CEL.compile(text, WHERE, variables, result)
    assert info.value.where == WHERE
    return info.value.message


def test_the_issue_examples_are_load_errors_with_columns() -> None:
    assert error("cluster.name == 'h100' && job.nme == 'x'", ("job", "cluster"), "bool") == \
        "\"cluster.name == 'h100' && job.nme == 'x'\": no such field or key 'nme' at column 31; did you mean 'name'?"
    message = error("true || job.name.lowerAscii() == 'x'", result="bool")
    assert message.startswith("\"true || job.name.lowerAscii() == 'x'\": no method 'lowerAscii' in this CEL "
                              "runtime (methods: contains, endsWith,")
    assert message.endswith("(at column 18)")


@pytest.mark.parametrize("text, variables, result, words", [
    ("false && job.tasks.exists(t, t.replicaz > 1)", ("job",), "bool", "'replicaz' at column 32"),
    ("has(job.nme)", ("job",), "bool", "'nme' at column 9"),
    ("job.priority == 'x'", ("job",), "bool", "cannot compare int and string"),
    ("job.submitTime > 1", ("job",), "bool", "cannot compare double and int"),
    ("job.priority + 1.5", ("job",), "number", "the operands have different types (int + double)"),
    ("job.labels['tier'] + 1", ("job",), "any", "(string + int)"),
    ("job.priority > 1 || job.name", ("job",), "bool", "each side of || must be a bool, got string"),
    ("job.name ? 1 : 2", ("job",), "int", "the condition of ? : must be a bool, got string"),
    ("!job.priority", ("job",), "bool", "! needs a bool"),
    ("job.demand[1]", ("job",), "any", "a key of map(string, int) must be a string, got int"),
    ("job.tasks['x']", ("job",), "any", "a list index must be an int, got string"),
    ("job.priority.x", ("job",), "any", "cannot select field .x from a int"),
    ("size(job.priority)", ("job",), "int", "size() does not take (int)"),
    ("job.name.startsWith(1)", ("job",), "bool", "string.startsWith() does not take (string, int)"),
    ("lowerAscii(job.name)", ("job",), "string", "no function 'lowerAscii' in this CEL runtime"),
    ("job.name.matches('a+')", ("job",), "bool", "matches() is not available in policies"),
    ("job.tasks.all(t, t.replicas)", ("job",), "bool", "the predicate of all() must be a bool, got int"),
    ("cluster.free['cpu'] > queue.weight", ("cluster",), "bool", "unknown variable(s) ['queue']"),
    ("job.priority > 1", ("job",), "int", "must return int, returned bool"),
    ("job.tasks.map(t, t.name)", ("job",), "string", "must return string, returned list(string)"),
    ("job.priority\n  + job.atempts", ("job",), "int", "'atempts' at line 2, column 9; did you mean 'attempts'?"),
    ("'x' in job.priority", ("job",), "bool", "no such overload: string in int"),
    ("1 in job.labels", ("job",), "bool", "no such overload: int in map(string, string)"),
    ("job.nme.size() > 0 || true", ("job",), "bool", "'nme' at column 5"),
])
def test_static_errors(text: str, variables: tuple[str, ...], result: str, words: str) -> None:
    message = error(text, variables, result)
    assert words in message, message


@pytest.mark.parametrize("text, variables, result", [
    ("job.priority + ('tier' in job.labels && job.labels['tier'] == 'prod' ? 1000 : 0)", ("job",), "int"),
    ("has(job.labels.tier) && job.labels.tier == 'prod'", ("job",), "bool"),
    ("job.tasks.all(t, t.replicas >= t.minAvailable) && size(job.tasks) > 0", ("job",), "bool"),
    ("job.tasks.map(t, t.resources['cpu']).exists(c, c > 1000)", ("job",), "bool"),
    ("job.tasks.filter(t, t.name.startsWith('w')).size() == 1", ("job",), "bool"),
    ("job.labels.exists(k, k.endsWith('/team'))", ("job",), "bool"),
    ("double(cluster.free['cpu']) / double(cluster.allocatable['cpu']) * 100.0", ("cluster",), "number"),
    ("cluster.free['nvidia.com/gpu'] >= job.gpus && cluster.ready", ("job", "cluster"), "bool"),
    ("job.namespace + '/' + job.name", ("job",), "string"),
    ("queue.open ? queue.priority * 10 + queue.weight : -1", ("queue",), "int"),
    ("int(job.submitTime) % 60", ("job",), "int"),
    ("string(job.priority) == job.labels['p']", ("job",), "bool"),
    ("[1, 2, 3].exists(x, x == job.priority)", ("job",), "bool"),
    ("{'a': 1}['a'] + job.priority", ("job",), "int"),
    ("type(job.priority) == int", ("job",), "bool"),
    ("dyn(job.priority) + 1", ("job",), "any"),
    ("job['name'] == 'x'", ("job",), "bool"),
])
def test_valid_expressions_pass(text: str, variables: tuple[str, ...], result: str) -> None:
    CEL.compile(text, WHERE, variables, result)


# -- every function and method the check accepts exists in the runtime ------------------------------------
SAMPLE_ARGS = {"string": "'abc'", "int": "1", "uint": "1u", "double": "1.5", "bool": "true", "bytes": "b'ab'",
               "timestamp": "timestamp('2026-01-01T00:00:00Z')", "duration": "duration('90s')", "list": "[1]",
               "map": "{'a': 1}"}


def _calls(name: str, table: dict[str, Any], method: bool) -> list[str]:
    """Every call of ``name`` with sample arguments (up to two) that the signature accepts."""
    from engine.policy.cel_types import BOOL, BYTES, DOUBLE, DURATION, INT, STRING, TIMESTAMP, UINT

    types = {"string": STRING, "int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "bytes": BYTES,
             "timestamp": TIMESTAMP, "duration": DURATION, "list": ListT(INT), "map": MapT(STRING, INT)}
    out = []
    for arity in (1, 2):
        for first in types:
            for second in (types if arity == 2 else [None]):
                args = [types[first]] + ([types[second]] if second else [])
                if table[name](args) is None:
                    continue
                texts = [SAMPLE_ARGS[first]] + ([SAMPLE_ARGS[second]] if second else [])
                if name.startswith("get") and second == "string":
                    texts[1] = "'UTC'"                                 # a time zone
                out.append(f"{texts[0]}.{name}({', '.join(texts[1:])})" if method else f"{name}({', '.join(texts)})")
    return out


@pytest.mark.parametrize("name, method", [(n, False) for n in FUNCTIONS] + [(n, True) for n in METHODS])
def test_every_accepted_call_runs_on_the_real_runtime(name: str, method: bool) -> None:
    env = celpy.Environment(runner_class=celpy.CompiledRunner)
    calls = _calls(name, FUNCTIONS if not method else METHODS, method)
    assert calls, f"{name}: no sample call accepted"
    for call in calls:
        if call.startswith(("int('", "uint('", "double('", "bool('", "duration('abc", "timestamp('abc")):
            continue                      # a conversion of a sample string that is not a number: a value error
        value = env.program(env.compile(call)).evaluate({})
        assert not isinstance(value, Exception), (call, value)


def test_refused_functions_exist_in_the_runtime_but_not_in_policies() -> None:
    for name in REFUSED:
        assert name not in FUNCTIONS and name not in METHODS


# -- typed schema -------------------------------------------------------------------------------------------
def _conforms(value: Any, cel_type: Any) -> bool:
    if isinstance(cel_type, ObjT):
        return isinstance(value, dict) and set(value) == set(cel_type.fields) and \
            all(_conforms(value[k], t) for k, t in cel_type.fields.items())
    if isinstance(cel_type, ListT):
        return isinstance(value, list) and all(_conforms(v, cel_type.elem) for v in value)
    if isinstance(cel_type, MapT):
        return isinstance(value, dict) and all(_conforms(k, cel_type.key) and _conforms(v, cel_type.value)
                                               for k, v in value.items())
    python = {"int": int, "double": float, "string": str, "bool": bool}[cel_type.name]
    return isinstance(value, python) and (python is bool or not isinstance(value, bool))


def test_the_values_built_for_cel_have_the_declared_types() -> None:
    job = Job(id="ns/a", name="a", namespace="ns", priority=7, labels={"tier": "prod"}, annotations={"a": "b"},
              tasks=[Task("worker", 4, 2, parse_resources({"cpu": "2", "nvidia.com/gpu": "1"}))])
    assert _conforms(job_vars(job), OBJECTS["job"])
    assert _conforms(queue_vars(Queue("q", parent="p", capability={"cpu": 1000})), OBJECTS["queue"])
    assert _conforms(cluster_vars(Cluster("m1", labels={"a": "b"}, allocatable={"cpu": 1})), OBJECTS["cluster"])
    for variable, fields in VARIABLES.items():
        for name, doc in fields.items():
            assert doc.type is OBJECTS[variable].fields[name]


# -- soundness: whatever validates does not fail for a field, function or overload at run time --------------
LEAVES = {
    "int": ["job.priority", "job.attempts", "job.gpus", "job.demand['cpu']", "size(job.tasks)", "1", "-2",
            "job.tasks[0].replicas", "job.nme", "job.prio"],
    "double": ["job.submitTime", "1.5", "double(job.priority)"],
    "string": ["job.name", "job.labels['tier']", "job.labels.tier", "'x'", "job.kind", "job.tasks[0].name",
               "string(job.priority)"],
    "bool": ["true", "'tier' in job.labels", "has(job.labels.tier)", "job.name.startsWith('a')",
             "job.tasks.all(t, t.replicas > 0)", "job.name.lowerAscii() == 'a'"],
}
OPS = ["+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||", "in"]


def _typed() -> st.SearchStrategy[str]:
    """Mostly well-typed expressions (so many validate), with a few wrong leaves and operators mixed in."""
    def leaf(kind: str) -> st.SearchStrategy[str]:
        return st.sampled_from(LEAVES[kind])

    ints = st.deferred(lambda: leaf("int") | st.tuples(ints, st.sampled_from(["+", "-", "*", "/", "%"]), ints)
                       .map(lambda t: f"({t[0]} {t[1]} {t[2]})") | st.tuples(bools, ints, ints)
                       .map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})") | strings.map(lambda x: f"size({x})"))
    strings = st.deferred(lambda: leaf("string") | st.tuples(strings, strings).map(lambda t: f"({t[0]} + {t[1]})"))
    doubles = st.deferred(lambda: leaf("double") | ints.map(lambda x: f"double({x})")
                          | st.tuples(doubles, doubles).map(lambda t: f"({t[0]} * {t[1]})"))
    anything = ints | strings | doubles
    bools = st.deferred(lambda: leaf("bool") | st.tuples(ints, st.sampled_from(["==", "!=", "<", ">="]), ints)
                        .map(lambda t: f"({t[0]} {t[1]} {t[2]})")
                        | st.tuples(strings, strings).map(lambda t: f"({t[0]} == {t[1]})")
                        | st.tuples(bools, st.sampled_from(["&&", "||"]), bools).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
                        | bools.map(lambda x: f"!{x}") | strings.map(lambda x: f"({x} in job.labels)")
                        | st.tuples(anything, st.sampled_from(OPS), anything).map(lambda t: f"({t[0]} {t[1]} {t[2]})"))
    return ints | bools | strings | doubles


def _expressions() -> st.SearchStrategy[str]:
    return _typed()


JOBS = [job_vars(Job(id="ns/a", name="a", namespace="ns", priority=p, attempts=a, labels={"tier": "prod"},
                     tasks=[Task("w", 2, 2, {"cpu": 2000})])) for p, a in ((7, 1), (-3, 0), (0, 2))]
# Errors the static check leaves to run time, by design (docs/policy.md): values, not names or types.
VALUE_ERRORS = ("value error in a function's argument", "value error in an operand", "divide by zero", "modulus by zero", "integer overflow", "not an integer", "out of range")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_expressions())
def test_what_validates_does_not_fail_for_names_or_types_at_run_time(text: str) -> None:
    try:
        expression = CEL.compile(text, WHERE, ("job",), "any")
    except InputError:
        return
    for job in JOBS:
        activation = {"job": to_cel(job)}
        try:
            expression.evaluate_cel(activation)
        except CelRuntimeError as exc:
            message = str(exc)
            assert any(word in message for word in VALUE_ERRORS), message


def test_a_failed_operand_of_a_conditional_is_a_value_error() -> None:
    """Found by the property test above: the condition of ``?:`` divided by zero, and cel-python reported only
    'Unexpected CELEvalError ? IntType : IntType', which read like a type error."""
    expression = CEL.compile("(job.priority / job.priority == 1) ? 1 : 2", WHERE, ("job",), "int")
    plain = job_vars(Job(id="ns/b", name="b", namespace="ns", priority=0, tasks=[Task("w", 1, 1, {"cpu": 1})]))
    with pytest.raises(CelRuntimeError, match="value error in an operand"):
        expression.evaluate({"job": plain})


@pytest.mark.parametrize("text, with_tier, without", [
    ("!has(job.labels.tier)", False, True),
    ("!('tier' in job.labels && has(job.labels.tier))", False, True),
    ("!('tier' in job.labels && (has(job.labels.tier) && has(job.labels.tier)))", False, True),
    ("has(job.labels.tier) ? !has(job.labels.gpu) : false", True, False),
])
def test_has_is_a_cel_bool_for_every_operator(text: str, with_tier: bool, without: bool) -> None:
    """Found by the property test above: cel-python's compiled runner made has() a Python bool, so ``!`` and
    ``&&`` on it failed with "no such overload" on every job (engine.policy.cel._fix_transpiled)."""
    expression = CEL.compile(text, WHERE, ("job",), "bool")
    tiered, plain = JOBS[0], job_vars(Job(id="ns/b", name="b", namespace="ns", tasks=[Task("w", 1, 1, {"cpu": 1})]))
    assert expression.evaluate({"job": tiered}) is with_tier
    assert expression.evaluate({"job": plain}) is without



@pytest.mark.parametrize("text", [
    "job.priority + ((job.priority == (job.priority + job.priority)) ? job.priority : (job.priority / job.attempts))",
    "1 + (job.attempts > 0 ? 1 : 10 / job.attempts)",
    "job.priority * (job.attempts == 0 ? job.priority / job.attempts : 1) > 0",
])
def test_an_error_in_the_chosen_branch_is_the_result(text: str) -> None:
    """Found by the property test above: cel-python's compiled ``c ? x : y`` handed the chosen branch's error on
    as a value, and the next operator reported a type error ("no such overload: the operands have different
    types") for what was a division by zero."""
    expression = CEL.compile(text, WHERE, ("job",), "any")
    never_ran = job_vars(Job(id="ns/b", name="b", namespace="ns", priority=3, attempts=0,
                             tasks=[Task("w", 1, 1, {"cpu": 1})]))
    with pytest.raises(CelRuntimeError, match="divide by zero"):
        expression.evaluate({"job": never_ran})
    ran_twice = job_vars(Job(id="ns/c", name="c", namespace="ns", priority=4, attempts=2,
                             tasks=[Task("w", 1, 1, {"cpu": 1})]))
    expression.evaluate({"job": ran_twice})       # the other branch, or no error: a value


@pytest.mark.parametrize("text, value", [
    ("job.priority > 0 || (job.attempts > 0 ? true : 1 / job.attempts == 1)", True),
    ("(job.attempts > 0 ? true : 1 / job.attempts == 1) || job.priority > 0", True),
    ("job.priority < 0 && (job.attempts > 0 ? true : 1 / job.attempts == 1)", False),
])
def test_or_and_still_absorb_an_error_of_a_conditional(text: str, value: bool) -> None:
    """CEL's ``true || error`` is true and ``false && error`` false, also when the error comes from ``c ? x : y``."""
    expression = CEL.compile(text, WHERE, ("job",), "bool")
    never_ran = job_vars(Job(id="ns/b", name="b", namespace="ns", priority=3, attempts=0,
                             tasks=[Task("w", 1, 1, {"cpu": 1})]))
    assert expression.evaluate({"job": never_ran}) is value

# -- the evaluation budget ---------------------------------------------------------------------------------
def test_expression_size_is_bounded_at_load() -> None:
    assert "at most 2,000" in error("1 + " * (MAX_CHARS // 4 + 1) + "1", result="int")
    assert "brackets nested 40 deep" in error("(" * 40 + "1" + ")" * 40, result="int")
    assert "deeper than 300 syntax levels" in error("-" * 1500 + "1", result="int")
    message = error("job.tasks.exists(t, t.resources.exists(r, job.tasks.exists(u, true)))", result="bool")
    assert "comprehensions nested deeper than 2 (the evaluation budget)" in message


def test_a_slow_evaluation_is_stopped_by_the_cpu_budget() -> None:
    expression = CEL.compile("job.tasks.all(t, job.tasks.all(u, t.name + u.name != 'x' && "
                             "t.replicas + u.replicas > 0))", WHERE, ("job",), "bool")
    job = to_cel(job_vars(Job(id="ns/a", name="a", namespace="ns",
                              tasks=[Task(f"t{i}", 1, 1, {"cpu": 1}) for i in range(3000)])))
    start = time.process_time()
    with pytest.raises(CelRuntimeError, match=r"used more than 50 ms of CPU in one evaluation"):
        expression.evaluate_cel({"job": job})
    # 9 million inner evaluations would take minutes; the budget stops it (bound generous for a shared machine)
    assert time.process_time() - start < 5
    small = to_cel(job_vars(Job(id="ns/b", name="b", namespace="ns", tasks=[Task("w", 1, 1, {"cpu": 1})])))
    assert expression.evaluate_cel({"job": small}) is True          # the same expression on a normal job
