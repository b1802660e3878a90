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
from typing import Any, Callable, Hashable, Mapping, Optional

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


_MAPS: dict[str, Callable[[Job], Mapping[str, str]]] = {"labels": lambda j: j.labels,
                                                       "annotations": lambda j: j.annotations}
"""The maps of ``MAP_FIELDS`` as the job holds them, read in place by a key (``FIELDS`` copies them for CEL)."""

_SCALARS = frozenset({"name", "namespace", "kind", "queue", "priority", "priorityClassName", "submitTime",
                      "attempts", "replicas", "minAvailable", "gpus"})
"""Fields of ``FIELDS`` whose value is a string or a number: hashable as they are (``freeze`` would return them)."""


def map_key_getter(field: str, keys: frozenset[str]) -> Callable[[Job], Hashable]:
    """A key part for ``job.<field>`` that holds only ``keys`` (a missing key is None: label values are strings)."""
    raw = _MAPS[field]
    ordered = tuple(sorted(keys))
    if len(ordered) == 1:
        only = ordered[0]

        def one(job: Job) -> Hashable:
            return ((only, raw(job).get(only)),)
        return one

    def part(job: Job) -> Hashable:
        values = raw(job)
        return tuple([(k, values.get(k)) for k in ordered])
    return part


def key_getter(text: str, field: str) -> Callable[[Job], Hashable]:
    """The part of ``job.<field>`` in the key of a result of the expression ``text``: the map keys it reads when
    that is all it reads of the map (``map_keys_read``), else the field's value made hashable (``freeze``)."""
    keys = map_keys_read(text, field) if field in MAP_FIELDS else None
    if keys is not None:
        return map_key_getter(field, keys)
    getter = FIELDS[field]
    if field in _SCALARS:
        return getter
    return lambda job: freeze(getter(job))


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
        # the key: what the expression reads of each field (of labels / annotations, maybe a few keys only);
        # the values CEL sees are built only when a key is new
        self._key_parts = [key_getter(expression.text, name) for name in self.fields or ()]
        self._results: CelCache[Hashable] = CelCache()
        if share is not None:
            shared: dict[tuple[str, Optional[tuple[str, ...]]], CelCache[Hashable]] = \
                share.__dict__.setdefault("_atoll_job_cel_results", {})
            self._results = shared.setdefault((expression.text, self.fields), self._results)
        self.evaluations = 0            # real CEL evaluations so far (tests and benchmarks read it)

    def evaluate(self, job: Job) -> tuple[Any, str]:
        """(value, '') or (None, error message); cached per distinct input."""
        fields = self.fields
        if fields is None:
            result: tuple[Any, str] = self._results.get(("job", job.id, job.generation, job.attempts, job.queue),
                                                        lambda: self._run(job_vars(job)))
            return result
        key = tuple([part(job) for part in self._key_parts])
        result = self._results.get(key, lambda: self._run({name: FIELDS[name](job) for name in fields}))
        return result

    def _run(self, activation: dict[str, Any]) -> tuple[Any, str]:
        self.evaluations += 1
        try:
            return self.expression.evaluate_cel({"job": to_cel(activation)}), ""
        except CelRuntimeError as exc:
            return None, str(exc)
