"""The engine's data model: clusters, queues, jobs, and the decisions made about them.

These are plain mutable objects owned by the engine's state (``engine.core.state``).
Adapters build them from scenario files or Kubernetes objects; plugins read them.
Every amount is an exact integer (see ``engine.resources``).
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Optional

from engine.resources import Resources, add_into, scale

if TYPE_CHECKING:
    from engine.core.contain import PluginError
    from engine.core.nodefit import NodeShapes

Pods = tuple[tuple[tuple[tuple[str, int], ...], int], ...]
"""Pods of a job as (per-pod request as sorted (resource, amount) pairs, count) per task shape."""

Placement = dict[str, dict[str, int]]
"""cluster name -> task name -> replicas placed there."""


class JobState(str, enum.Enum):
    PENDING = "Pending"        # queued, waiting for admission (or in backoff)
    REJECTED = "Rejected"      # refused at enqueue; kept and visible, never silently dropped
    ADMITTED = "Admitted"      # admitted and placed; resources reserved until it ends
    RUNNING = "Running"        # the adapter saw it start
    EVICTING = "Evicting"      # preempted: holds its capacity until the adapter reports it gone (Engine.evicted)
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"          # gave up (recover stage decided so)

    @property
    def holds_resources(self) -> bool:
        return self in (JobState.ADMITTED, JobState.RUNNING, JobState.EVICTING)

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED)


@dataclass
class Task:
    """One pod template of a job: ``replicas`` pods, ``min_available`` of which must start together."""

    name: str
    replicas: int
    min_available: int
    resources: Resources            # per replica

    @property
    def demand(self) -> Resources:
        return scale(self.resources, self.replicas)

    @property
    def min_demand(self) -> Resources:
        return scale(self.resources, self.min_available)


@dataclass(eq=False, slots=True)
class Job:
    """A workload waiting for (or holding) fleet capacity: one ResourceBinding in Karmada."""

    id: str                         # unique key, e.g. "ns/name" (adapters choose; stable for its life)
    name: str
    namespace: str = "default"
    kind: str = "Job"
    queue: str = "default"
    priority: int = 0
    priority_class: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    submit_time: float = 0.0
    tasks: list[Task] = field(default_factory=list)
    # --- owned by the engine -------------------------------------------------
    state: JobState = JobState.PENDING
    attempts: int = 0               # admissions so far
    failures: dict[str, int] = field(default_factory=dict)   # failures so far by kind (FailureKind value)
    excluded_clusters: set[str] = field(default_factory=set)
    not_before: float = 0.0         # backoff: not admitted before this time
    pending_reason: str = ""
    placement: Optional[Placement] = None
    admitted_at: Optional[float] = None
    generation: int = 0             # bumped on every spec change: invalidates cached CEL results
    seq: int = 0                    # arrival order, the final FIFO tie-breaker
    sort_key: tuple[Any, ...] = ()
    blocked_epoch: int = -1         # capacity epoch at which it was last refused (see core.state)
    admit_key: Optional[Hashable] = None    # its admit plugins' shared key (engine.core.admitshare), at enqueue
    # --- preemption (engine.core.preempt) ---------------------------------------
    preemptions: int = 0            # times it was evicted by a preemptor (counted apart from failures)
    preempted_by: str = ""          # the job that last evicted it (it may never evict that one back)
    nominated: Optional[Placement] = None     # a preemptor's claim on capacity its victims are freeing
    nominated_at: Optional[float] = None
    victims: tuple[str, ...] = ()   # a preemptor's victims still to be gone before it is admitted
    evicted_at: Optional[float] = None        # a victim: when its eviction was decided

    # --- derived from tasks when the job is built (``__post_init__``), read from their slots like any field ---
    shape: tuple[tuple[str, int, int, tuple[tuple[str, int], ...]], ...] = field(init=False, repr=False)
    shape_key: int = field(init=False, repr=False)     # ``shape``'s number (``_SHAPE_KEYS``): a cheap dict key
    demand: Resources = field(init=False, repr=False)
    min_demand: Resources = field(init=False, repr=False)
    pods: Pods = field(init=False, repr=False)
    min_pods: Pods = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """The values derived from the tasks (``_DERIVED``), into their slots. Not lazily in a ``__getattr__``: a
        class with one gets no specialised attribute reads from CPython 3.11 (``LOAD_ATTR_SLOT`` needs the generic
        ``tp_getattro``), so every read of any field of any job went the slow way, twice the cost of a slot read;
        a cycle reads job fields a few million times (10,000-job first cycle with node shapes: -4.1 % instructions).
        So the tasks are fixed once the job is built: build a new Job for other tasks (as Engine.update_job gets)."""
        for name, derive in _DERIVED.items():
            object.__setattr__(self, name, derive(self))

    def placed_pods(self, cluster: str) -> Pods:
        """Pods this job's placement puts on ``cluster``."""
        placed = (self.placement or {}).get(cluster, {})
        tasks = self.tasks
        if len(tasks) == 1 and len(placed) == 1 and placed.get(tasks[0].name) == tasks[0].replicas:
            return self.pods        # a one-task job placed whole (each admission's booking): pods_of of the same
        by_task = {t.name: t for t in tasks}
        return pods_of((by_task[name].resources, n) for name, n in placed.items() if name in by_task)

    def placed_demand(self, cluster: str) -> Resources:
        """Resources this job's placement puts on ``cluster``."""
        out: Resources = {}
        if self.placement and cluster in self.placement:
            by_task = {t.name: t for t in self.tasks}
            for task_name, replicas in self.placement[cluster].items():
                task = by_task.get(task_name)
                if task is not None:
                    add_into(out, scale(task.resources, replicas))
        return out


def _shape(job: Job) -> tuple[tuple[str, int, int, tuple[tuple[str, int], ...]], ...]:
    """Every task as (name, replicas, minAvailable, per-replica resources in their order): a hashable image of
    everything ``tasks``, ``demand`` and ``min_demand`` say, for plugins' ``verdict_key``. Equal shapes are one
    shared tuple (``_SHAPES``): a backlog has a few hundred shapes, and a cycle hashes a job's shape in several
    dicts (verdict keys, queue keys, plugins' per-shape caches); a shared tuple stays in the CPU cache where
    100,000 copies would not."""
    shape = tuple((t.name, t.replicas, t.min_available, tuple(t.resources.items())) for t in job.tasks)
    known = _SHAPES.get(shape)
    if known is None:
        if len(_SHAPES) >= 65536:
            _SHAPES.clear()
            _SHAPE_KEYS.clear()
            for values in _BY_SHAPE.values():
                values.clear()
        known = _SHAPES[shape] = shape
        _SHAPE_KEYS[shape] = next(_NUMBERS)
    return known


def _shape_key(job: Job) -> int:
    """``job.shape``'s number: equal shapes, one number, and a number is never given to another shape (numbers are
    not reused when the interned shapes are dropped: an equal shape interned again gets a new one). So a per-shape
    cache may be keyed by it instead of the shape: hashing a shape hashes every nested tuple again (CPython keeps no
    tuple's hash), and a large first cycle looks its shape up in several per-shape caches per examined job."""
    return _SHAPE_KEYS[job.shape]


def _by_shape(name: str, compute: Callable[[Job], Any]) -> Callable[[Job], Any]:
    """A derived value that depends on the job's tasks only, shared by every job of one shape (``_BY_SHAPE``)."""
    values = _BY_SHAPE[name] = {}

    def derive(job: Job) -> Any:
        shape = job.shape
        value = values.get(shape)
        if value is None:
            value = values[shape] = compute(job)
        return value
    return derive


def _demand(job: Job) -> Resources:
    """All replicas of all tasks: what the job holds once admitted."""
    total: Resources = {}
    for task in job.tasks:
        add_into(total, task.demand)
    return total


def _min_demand(job: Job) -> Resources:
    """minAvailable of every task: the smallest gang that can start."""
    total: Resources = {}
    for task in job.tasks:
        add_into(total, task.min_demand)
    return total


_BY_SHAPE: dict[str, dict[Hashable, Any]] = {}
_DERIVED: dict[str, Callable[[Job], Any]] = {
    "shape": _shape,
    "shape_key": _shape_key,
    "demand": _by_shape("demand", _demand),
    "min_demand": _by_shape("min_demand", _min_demand),
    # all replicas as (per-pod request, count): what must fit on nodes, not just in totals
    "pods": _by_shape("pods", lambda job: pods_of((t.resources, t.replicas) for t in job.tasks)),
    # the gang minimum as (per-pod request, count) (engine.core.nodefit packs it on nodes)
    "min_pods": _by_shape("min_pods", lambda job: pods_of((t.resources, t.min_available) for t in job.tasks)),
}
"""A job's values derived from its tasks, computed when it is built (``Job.__post_init__``, in this order: the others
read ``shape``). A changed job arrives as a new Job object (Engine.update_job), so tasks never change under them. The dicts and tuples of equal shapes are one
shared object, read-only: a cycle reads the demand of ~100,000 jobs, and a few hundred shared ones stay in the CPU
cache (with ``__slots__``: 100,000 pending jobs 710 -> 554 MiB, and a faster first cycle)."""


@dataclass(eq=False)
class Cluster:
    """A member cluster as Karmada reports it (Cluster.status.resourceSummary)."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    ready: bool = True
    allocatable: Resources = field(default_factory=dict)
    allocated: Resources = field(default_factory=dict)
    allocating: Resources = field(default_factory=dict)
    status_time: float = 0.0        # when this summary was observed
    generation: int = 0
    node_shapes: Optional[NodeShapes] = None   # nodes by resource-model grade (None: no models, totals only)


_SHAPES: dict[tuple[tuple[str, int, int, tuple[tuple[str, int], ...]], ...],
              tuple[tuple[str, int, int, tuple[tuple[str, int], ...]], ...]] = {}
"""Job shapes interned (``Job.shape``): equal values, one object. Bounded; a value works the same either way."""
_SHAPE_KEYS: dict[tuple[tuple[str, int, int, tuple[tuple[str, int], ...]], ...], int] = {}
"""The interned shapes' numbers (``Job.shape_key``), dropped with them."""
_NUMBERS = itertools.count()


def pods_of(parts: Any) -> Pods:
    """(per-pod request, count) pairs in canonical form: zero amounts and counts dropped, equal shapes merged,
    sorted (what ``Job.pods``/``min_pods`` hold, and what ``FleetState.fits_tasks`` memoises by)."""
    merged: dict[tuple[tuple[str, int], ...], int] = {}
    for resources, count in parts:
        if count > 0:
            key = tuple(sorted((k, v) for k, v in resources.items() if v))
            merged[key] = merged.get(key, 0) + count
    return tuple(sorted(merged.items()))


@dataclass(eq=False)
class Queue:
    """A queue with Volcano's Queue semantics, so Volcano queues map 1:1."""

    name: str
    parent: Optional[str] = None
    weight: int = 1
    priority: int = 0
    open: bool = True
    capability: Optional[Resources] = None   # max; resources not listed are unlimited
    guarantee: Resources = field(default_factory=dict)   # min, protected from other queues
    deserved: Optional[Resources] = None
    labels: dict[str, str] = field(default_factory=dict)
    reclaimable: bool = True        # Volcano spec.reclaimable: false = other queues never reclaim from it
    # --- owned by the engine -------------------------------------------------
    allocated: Resources = field(default_factory=dict)   # demand of its admitted, unfinished jobs
    generation: int = 0


@dataclass(frozen=True)
class Refusal:
    """Why a plugin said no. ``reason`` is shown to users verbatim (events, explain).

    ``capacity`` is True when more free capacity (fleet, cluster, others' unused guarantees)
    could make the job fit: only such refusals start a preemption (quota and policy
    refusals never do).

    ``retry_at`` marks a time-dependent refusal: the job is re-examined then even if
    no capacity was freed. Without it, the engine re-examines the job only after
    something that could make it fit changes (capacity freed, queue edited, policy).
    """

    reason: str
    plugin: str = ""
    retry_at: Optional[float] = None
    capacity: bool = False          # more free capacity could make it fit: only these refusals may preempt


class FailureKind(str, enum.Enum):
    JOB_FAILED = "JobFailed"              # the workload failed in its member
    CLUSTER_LOST = "ClusterLost"          # its cluster became NotReady or was removed
    UNSCHEDULABLE = "Unschedulable"       # resumed, but could not be placed / started
    DEADLINE = "DeadlineExceeded"         # not all started within its deadline


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    cluster: Optional[str] = None
    message: str = ""


@dataclass(frozen=True)
class Recovery:
    """What the recover stage decided: requeue (after a delay, avoiding clusters) or give up."""

    requeue: bool
    delay: float = 0.0
    exclude_clusters: frozenset[str] = frozenset()
    reason: str = ""


@dataclass(frozen=True)
class Admission:
    job_id: str
    queue: str
    placement: Placement
    at: float


@dataclass(frozen=True)
class Preemption:
    """Evict ``victims`` (whole jobs, every cluster they run on) so that ``preemptor`` can start.

    The adapter carries it out (pods terminated after ``grace_period`` seconds) and calls
    ``Engine.evicted`` for each victim once its workload is gone from every member."""

    preemptor: str
    victims: tuple[str, ...]
    reason: str                     # e.g. "priority", "reclaim"
    at: float
    grace_period: float = 0.0
    plugin: str = ""


@dataclass
class CycleResult:
    """Decisions of one scheduling cycle, for the adapter to carry out."""

    admitted: list[Admission] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)    # job id -> new pending reason (changes only)
    examined: int = 0                                         # jobs the cycle looked at (O(changes) check)
    quiet: int = 0          # queue turns passed without a look at each group: all held (engine.core.idle)
    settled: int = 0        # of ``examined``, those of the cycle's settled rest: no queue keyed (engine.core.settle)
    full: bool = False                                        # whether the whole backlog was re-examined
    preemptions: list[Preemption] = field(default_factory=list)
    plugin_errors: list["PluginError"] = field(default_factory=list)   # contained per job (engine.core.contain)
