"""The variables a policy's CEL expressions can read, built from the engine's model.

This module *is* the reference for CEL users (docs/policy.md is generated from
``VARIABLES``): every field listed here exists on every object. Amounts are exact
integers: ``cpu`` in milli-cores (``"2"`` is 2000), ``memory`` in bytes, GPUs and pods
as counts; a resource the object does not have reads as absent (use
``'nvidia.com/gpu' in job.demand`` or ``job.gpus``).

Values are built once per object generation by the plugin that evaluates an
expression (see ``CelCache``), never per comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, Hashable, Mapping, Sequence, TypeVar

from celpy import celtypes

from engine.policy.cel import to_cel
from engine.policy.cel_types import BOOL, DOUBLE, INT, STRING, CelType, ListT, MapT, ObjT
from engine.model import Cluster, Job, Queue
from engine.resources import GPU

if TYPE_CHECKING:
    from engine.core.state import FleetState

class Field(str):
    """A field's documentation (the text docs/policy.md shows) carrying its CEL type for the static check."""

    type: CelType

    def __new__(cls, cel_type: CelType, doc: str) -> "Field":
        made = super().__new__(cls, doc)
        made.type = cel_type
        return made


LABELS = MapT(STRING, STRING)
AMOUNTS = MapT(STRING, INT)
TASK = ObjT("task", {"name": STRING, "replicas": INT, "minAvailable": INT, "resources": AMOUNTS})

VARIABLES: dict[str, dict[str, Field]] = {
    "job": {
        "name": Field(STRING, "string: the workload's name"),
        "namespace": Field(STRING, "string"),
        "kind": Field(STRING, "string: Job, Deployment, Volcano Job (batch.volcano.sh) ..."),
        "queue": Field(STRING, "string: the queue it waits in"),
        "priority": Field(INT, "int: priority value (PriorityClass value or the scenario's priority)"),
        "priorityClassName": Field(STRING, "string ('' when none)"),
        "labels": Field(LABELS, "map(string, string)"),
        "annotations": Field(LABELS, "map(string, string)"),
        "submitTime": Field(DOUBLE, "double: seconds (scenario time, or Unix time in a real fleet)"),
        "attempts": Field(INT, "int: admissions so far (0 before the first)"),
        "replicas": Field(INT, "int: pods of all tasks"),
        "minAvailable": Field(INT, "int: pods that must start together (sum of the tasks' minAvailable)"),
        "demand": Field(AMOUNTS, "map(string, int): all replicas of all tasks"),
        "minDemand": Field(AMOUNTS, "map(string, int): minAvailable of every task"),
        "gpus": Field(INT, "int: nvidia.com/gpu of the whole demand"),
        "tasks": Field(ListT(TASK), "list of {name: string, replicas: int, minAvailable: int, "
                                    "resources: map(string, int) per replica}"),
    },
    "queue": {
        "name": Field(STRING, "string"),
        "parent": Field(STRING, "string ('' for a root queue)"),
        "weight": Field(INT, "int"),
        "priority": Field(INT, "int"),
        "open": Field(BOOL, "bool: false when the queue is Closed"),
        "labels": Field(LABELS, "map(string, string)"),
        "capability": Field(AMOUNTS, "map(string, int): maximum; a resource not listed is unlimited"),
        "guarantee": Field(AMOUNTS, "map(string, int): minimum protected for this queue"),
        "allocated": Field(AMOUNTS, "map(string, int): what its admitted, unfinished jobs hold"),
    },
    "cluster": {
        "name": Field(STRING, "string"),
        "labels": Field(LABELS, "map(string, string)"),
        "ready": Field(BOOL, "bool"),
        "allocatable": Field(AMOUNTS, "map(string, int)"),
        "allocated": Field(AMOUNTS, "map(string, int): as Karmada last reported"),
        "free": Field(AMOUNTS, "map(string, int): allocatable - allocated - allocating - Atoll's in-flight "
                               "admissions"),
    },
}

OBJECTS: dict[str, ObjT] = {name: ObjT(name, {f: doc.type for f, doc in fields.items()})
                            for name, fields in VARIABLES.items()}
"""The typed objects the static check (``engine.policy.cel_check``) resolves field paths against."""


def job_vars(job: Job) -> dict[str, Any]:
    return {
        "name": job.name, "namespace": job.namespace, "kind": job.kind, "queue": job.queue,
        "priority": job.priority, "priorityClassName": job.priority_class,
        "labels": dict(job.labels), "annotations": dict(job.annotations),
        "submitTime": float(job.submit_time), "attempts": job.attempts,
        "replicas": sum(t.replicas for t in job.tasks),
        "minAvailable": sum(t.min_available for t in job.tasks),
        "demand": dict(job.demand), "minDemand": dict(job.min_demand), "gpus": job.demand.get(GPU, 0),
        "tasks": [{"name": t.name, "replicas": t.replicas, "minAvailable": t.min_available,
                   "resources": dict(t.resources)} for t in job.tasks],
    }


def queue_vars(queue: Queue) -> dict[str, Any]:
    return {
        "name": queue.name, "parent": queue.parent or "", "weight": queue.weight, "priority": queue.priority,
        "open": queue.open, "labels": dict(queue.labels), "capability": dict(queue.capability or {}),
        "guarantee": dict(queue.guarantee), "allocated": dict(queue.allocated),
    }


def cluster_vars(cluster: Cluster, state: "FleetState | None" = None) -> dict[str, Any]:
    free = state.free(cluster.name) if state is not None and cluster.name in state.clusters else {}
    return {
        "name": cluster.name, "labels": dict(cluster.labels), "ready": cluster.ready,
        "allocatable": dict(cluster.allocatable), "allocated": dict(cluster.allocated), "free": dict(free),
    }


# -- samples for load-time checks ------------------------------------------------------------
class _AnyKeyMap(celtypes.MapType):
    """A sample map that answers every key, so ``job.labels['tier']`` checks at load time while a
    misspelt *field* (``job.lables``) still fails: the objects themselves are ordinary maps."""

    def __init__(self, default: Any) -> None:
        super().__init__({})
        self._default = default

    def __getitem__(self, key: Any) -> Any:
        if super().__contains__(key):
            return super().__getitem__(key)
        return self._default

    def __contains__(self, key: Any) -> bool:
        return True


_STRING_MAPS = {"labels", "annotations"}
_RESOURCE_MAPS = {"demand", "minDemand", "capability", "guarantee", "allocated", "allocatable", "free",
                  "resources"}


@dataclass(frozen=True)
class _Variant:
    """Values of one sample object. Two variants: an expression passes the load-time check if it
    works on either, so ``int(job.labels['n'])`` or ``x / job.minDemand['cpu']`` are not refused
    for a sample value, while a misspelt field or a wrong result type fails on both."""

    integer: int
    double: float
    boolean: bool
    string: str
    label: str
    amount: int
    tasks: int


_VARIANTS = (_Variant(1, 1.0, True, "sample", "", 0, 1), _Variant(2, 2.0, False, "sample-2", "1", 1000, 4))


def _sample(fields: Mapping[str, str], variant: _Variant) -> celtypes.MapType:
    values: dict[str, Any] = {}
    for name, doc in fields.items():
        kind = doc.split(":")[0].split(" ")[0]
        if name in _STRING_MAPS:
            values[name] = _AnyKeyMap(celtypes.StringType(variant.label))
        elif name in _RESOURCE_MAPS:
            values[name] = _AnyKeyMap(celtypes.IntType(variant.amount))
        elif name == "tasks":
            tasks = []
            for index in range(variant.tasks):
                task = to_cel({"name": f"task-{index}", "replicas": variant.integer, "minAvailable": variant.integer})
                task[celtypes.StringType("resources")] = _AnyKeyMap(celtypes.IntType(variant.amount))
                tasks.append(task)
            values[name] = celtypes.ListType(tasks)
        elif kind == "int":
            values[name] = celtypes.IntType(variant.integer)
        elif kind == "double":
            values[name] = celtypes.DoubleType(variant.double)
        elif kind == "bool":
            values[name] = celtypes.BoolType(variant.boolean)
        else:
            values[name] = celtypes.StringType(variant.string)
    return celtypes.MapType({celtypes.StringType(k): v for k, v in values.items()})


def sample_activations(variables: Sequence[str]) -> list[dict[str, Any]]:
    """Sample activations for the load-time dry run (see ``_Variant``)."""
    return [{name: _sample(VARIABLES[name], variant) for name in variables} for variant in _VARIANTS]


K = TypeVar("K", bound=Hashable)


_MISSING: Any = object()


class CelCache(Generic[K]):
    """Results of one expression keyed by what its inputs were built from (e.g. ``(job.id,
    job.generation)``), so re-examining an unchanged job costs a dict lookup, not an evaluation."""

    def __init__(self, limit: int = 200_000) -> None:
        self._values: dict[K, Any] = {}
        self._limit = limit

    def get(self, key: K, compute: Callable[[], Any]) -> Any:
        value = self._values.get(key, _MISSING)      # no KeyError: a new job's first asks all miss
        if value is not _MISSING:
            return value
        if len(self._values) >= self._limit:
            self._values.clear()          # stale generations pile up otherwise; recomputing is cheap enough
        value = self._values[key] = compute()
        return value
