"""Evaluate a CEL expression over ``job`` once per distinct *input*, not once per job.

cel-python costs ~100-350 us per evaluation and ~400 us to convert a whole job to CEL
values, which at 100k jobs is most of a minute. The expression usually reads a couple of
fields (``job.priority``, ``job.labels``), so a result is cached under the values of
exactly the ``job.<field>`` it reads: every job with the same priority and labels shares
one evaluation, and only those fields are converted. An expression that uses ``job``
other than as ``job.<field>`` (or a field ``engine.policy.cel_vars`` does not define) falls back
to one evaluation per job version, keyed on (id, generation, attempts, queue).
``engine.policy.cel_vars.job_vars`` stays the one definition of the fields' values.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Hashable, Optional

from engine.policy.cel import CelExpression, CelRuntimeError, to_cel
from engine.policy.cel_vars import VARIABLES, CelCache, job_vars
from engine.model import Job
from engine.resources import GPU

FIELDS: dict[str, Callable[[Job], Any]] = {
    "name": lambda j: j.name,
    "namespace": lambda j: j.namespace,
    "kind": lambda j: j.kind,
    "queue": lambda j: j.queue,
    "priority": lambda j: j.priority,
    "priorityClassName": lambda j: j.priority_class,
    "labels": lambda j: dict(j.labels),
    "annotations": lambda j: dict(j.annotations),
    "submitTime": lambda j: float(j.submit_time),
    "attempts": lambda j: j.attempts,
    "replicas": lambda j: sum(t.replicas for t in j.tasks),
    "minAvailable": lambda j: sum(t.min_available for t in j.tasks),
    "demand": lambda j: dict(j.demand),
    "minDemand": lambda j: dict(j.min_demand),
    "gpus": lambda j: j.demand.get(GPU, 0),
    "tasks": lambda j: [{"name": t.name, "replicas": t.replicas, "minAvailable": t.min_available,
                         "resources": dict(t.resources)} for t in j.tasks],
}
"""One field of ``engine.policy.cel_vars.job_vars`` each, so an expression pays only for what it reads
(a test keeps them equal to ``job_vars``)."""

_STRING = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")


def referenced_fields(text: str, variable: str = "job") -> Optional[frozenset[str]]:
    """The fields ``text`` reads as ``variable.<field>``; None when it uses ``variable`` otherwise."""
    code = _STRING.sub("''", text)
    fields = set(re.findall(rf"(?<![\w.]){variable}\s*\.\s*([A-Za-z_]\w*)", code))
    bare = re.search(rf"(?<![\w.]){variable}\b(?!\s*\.)", code)
    return None if bare else frozenset(fields)


MAP_FIELDS = ("labels", "annotations")
_SIMPLE = re.compile(r"'[^'\\]*'|\"[^\"\\]*\"")


def map_keys_read(text: str, field: str, variable: str = "job") -> Optional[frozenset[str]]:
    """The keys ``text`` reads from the map ``variable.field`` when every use of it is ``variable.field['k']`` or
    ``'k' in variable.field`` with a plain string literal ``k``; None when it is used any other way (``size``,
    ``.k``, a computed key, a comprehension...): then the whole map counts.

    Why: Kubernetes labels every batch/v1 Job with its own ``controller-uid``, so keying a result on the whole
    ``job.labels`` map made every Job a cache miss (one CEL evaluation per Job and expression) though the default
    policy's expressions read one or two label keys."""
    literals: list[str] = []

    def hold(m: re.Match[str]) -> str:
        literals.append(m.group(0))
        return f"'#{len(literals) - 1}#'"

    code = _STRING.sub(hold, text)
    target = rf"(?<![\w.]){variable}\s*\.\s*{field}\b"
    uses = len(re.findall(target, code))
    indexed = re.findall(target + r"\s*\[\s*'#(\d+)#'\s*\]", code)
    tested = re.findall(r"(?<![\w'])'#(\d+)#'\s+in\s+" + target[len(r"(?<![\w.])"):] + r"(?!\s*[.\[])", code)
    if len(indexed) + len(tested) != uses:
        return None
    keys = set()
    for i in indexed + tested:
        literal = literals[int(i)]
        if not _SIMPLE.fullmatch(literal):
            return None                      # escapes: leave the whole map in the key
        keys.add(literal[1:-1])
    return frozenset(keys)


def map_key_getter(field: str, keys: frozenset[str]) -> Callable[[Job], Hashable]:
    """A key part for ``job.<field>`` that holds only ``keys`` (a missing key is None: label values are strings)."""
    getter = FIELDS[field]
    ordered = tuple(sorted(keys))

    def part(job: Job) -> Hashable:
        values = getter(job)
        return tuple((k, values.get(k)) for k in ordered)
    return part


def freeze(value: Any) -> Hashable:
    """A hashable, order-independent image of a plain value (dicts, lists, scalars)."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


class JobCel:
    """One compiled ``job`` expression and its results, keyed on what it reads. With ``share`` (an object
    living as long as one policy, e.g. its CelCompiler) results are shared by every JobCel of that policy
    with the same expression text (job-priority's and priority-preemption's ``priority``): a result is a
    function of its inputs only, so it is computed once for both."""

    def __init__(self, expression: CelExpression, share: Any = None) -> None:
        self.expression = expression
        fields = referenced_fields(expression.text)
        known = set(VARIABLES["job"]) & set(FIELDS)
        self.fields: Optional[tuple[str, ...]] = tuple(sorted(fields)) \
            if fields is not None and fields <= known else None
        # labels / annotations read only through literal keys: the key holds those keys' values, not the map
        self._parts: dict[str, Callable[[Job], Hashable]] = {}
        for name in self.fields or ():
            if name in MAP_FIELDS and (keys := map_keys_read(expression.text, name)) is not None:
                self._parts[name] = map_key_getter(name, keys)
        self._results: CelCache[Hashable] = CelCache()
        if share is not None:
            shared: dict[tuple[str, Optional[tuple[str, ...]]], CelCache[Hashable]] = \
                share.__dict__.setdefault("_atoll_job_cel_results", {})
            self._results = shared.setdefault((expression.text, self.fields), self._results)
        self.evaluations = 0            # real CEL evaluations so far (tests and benchmarks read it)

    def evaluate(self, job: Job) -> tuple[Any, str]:
        """(value, '') or (None, error message); cached per distinct input."""
        if self.fields is None:
            key: Hashable = ("job", job.id, job.generation, job.attempts, job.queue)
            activation = job_vars(job)
        else:
            activation = {name: FIELDS[name](job) for name in self.fields}
            key = tuple(self._parts[name](job) if name in self._parts else freeze(activation[name])
                        for name in self.fields)
        result: tuple[Any, str] = self._results.get(key, lambda: self._run(activation))
        return result

    def _run(self, activation: dict[str, Any]) -> tuple[Any, str]:
        self.evaluations += 1
        try:
            return self.expression.evaluate_cel({"job": to_cel(activation)}), ""
        except CelRuntimeError as exc:
            return None, str(exc)
