"""Node shapes: what a cluster's nodes look like, as Karmada's cluster resource models describe them.

Karmada reports per member, next to the summed ``resourceSummary``, how many nodes fall in each
*grade* of the cluster's resource models (``spec.resourceModels``: per grade, a ``[min, max)``
range per resource; ``status.resourceSummary.allocatableModelings``: per grade, a node count).
A node's grade is, over the model's resources, the lowest of "the highest grade whose ``min`` is
at most the node's free amount". Karmada >= v1.18 estimates replicas by turning each grade into
``count`` *virtual nodes* whose free capacity is the grade's lower edge (``min`` vector) and
placing pods on them first-fit. Atoll does the same: :class:`NodeShapes` is that list of virtual
nodes, kept as (free vector, count) buckets, so every answer here is a lower bound of what the
real nodes hold (given fresh data) -- conservative, never optimistic.

Resources the model does not grade are not constrained per node here (a GPU-only model says
nothing about cpu): callers check them against the cluster's summed free capacity, as before.
(Karmada >= v1.18 answers 0 replicas for a pod requesting an unmodelled resource, see
docs/plugins-placement.md; Atoll does not copy that regression.)

Everything is exact integers in ``engine.resources`` units (cpu in milli-cores, bytes, counts).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Iterable, Mapping, Optional, Sequence, Union, cast

from engine.resources import CPU, MEMORY, PODS

Vector = tuple[tuple[str, int], ...]
"""A resource vector as a hashable value: (resource, amount) pairs sorted by resource name."""

UNBOUNDED = 1 << 62
"""``max_replicas`` of a pod that requests none of the graded resources: no per-node limit."""

_GI = 1 << 30
DEFAULT_GRADES: tuple[dict[str, int], ...] = tuple(
    {CPU: cpu * 1000, MEMORY: mem * _GI}
    for cpu, mem in ((0, 0), (1, 4), (2, 16), (4, 32), (8, 64), (16, 128), (32, 256), (64, 512), (128, 1024)))
"""Karmada's default resource models (``SetDefaultClusterResourceModels``), applied to a Cluster on
create when it lists none: grades 0..8, the lower edges of cpu [0,1,2,4,...,128] cores and memory
[0,4,16,32,...,1024] GiB (the last grade is open-ended)."""


def vector(amounts: Mapping[str, int]) -> Vector:
    """The canonical hashable form of a resource vector (zeros dropped)."""
    return tuple(sorted((name, amount) for name, amount in amounts.items() if amount))


@dataclass(frozen=True)
class NodeShapes:
    """A cluster's nodes as virtual nodes: ``nodes`` holds (free capacity per node, number of such
    nodes) buckets in a canonical order (ascending by vector: Karmada's ascending grade order for a
    fresh model), equal vectors merged, empty buckets dropped. ``resources`` are the resources the
    model grades; the others are not constrained per node (see the module docstring). Immutable:
    ``pack``/``reserve`` return new values."""

    nodes: tuple[tuple[Vector, int], ...]
    resources: frozenset[str]
    karmada_defaults: bool = False      # the grades are Karmada's default cpu/memory models (DEFAULT_GRADES)

    @classmethod
    def from_models(cls, grades: Mapping[int, Mapping[str, int]], counts: Mapping[int, int]) -> "NodeShapes":
        """From a Cluster's resource models and its reported ``allocatableModelings``.

        ``grades``: grade number -> lower edge (``min``) per resource, parsed to exact ints
        (``spec.resourceModels[*].ranges[*].min``); ``counts``: grade number -> node count
        (``status.resourceSummary.allocatableModelings``). A grade without a count has no nodes;
        a count for a grade the models do not define is ignored (Karmada indexes grades directly).
        """
        names: set[str] = set()
        for mins in grades.values():
            names.update(mins)
        buckets = [(vector(mins), int(counts.get(grade, 0))) for grade, mins in sorted(grades.items())]
        defaults = [vector(mins) for _, mins in sorted(grades.items())] == [vector(g) for g in DEFAULT_GRADES]
        return cls.of(buckets, frozenset(names), defaults)

    @classmethod
    def of(cls, buckets: Iterable[tuple[Vector, int]], resources: frozenset[str],
           karmada_defaults: bool = False) -> "NodeShapes":
        """Canonical form: merge equal vectors, drop empty buckets, sort ascending."""
        merged: dict[Vector, int] = {}
        for vec, count in buckets:
            if count > 0:
                merged[vec] = merged.get(vec, 0) + count
        return cls(tuple(sorted(merged.items())), resources, karmada_defaults)

    @cached_property
    def counted(self) -> tuple[tuple[dict[str, int], int], ...]:
        """``nodes`` with each free vector as a dict (read only): ``max_replicas`` reads every bucket of a
        view for each pod shape asked, and a view is asked about many shapes before it changes."""
        return tuple((dict(vec), n) for vec, n in self.nodes)

    @property
    def count(self) -> int:
        """How many (virtual) nodes."""
        return sum(n for _, n in self.nodes)

    def largest(self) -> dict[str, int]:
        """Per graded resource, the most any single virtual node has free."""
        best: dict[str, int] = {}
        for vec, _ in self.nodes:
            for name, amount in vec:
                if amount > best.get(name, 0):
                    best[name] = amount
        return best

    def describe(self) -> str:
        """Short human form for explain/docs: ``4 nodes (nvidia.com/gpu=2 x4)``."""
        parts = [(" ".join(f"{k}={v}" for k, v in vec) or "nothing") + f" x{n}" for vec, n in self.nodes]
        return f"{self.count} nodes by {', '.join(sorted(self.resources)) or 'no resource'}" + \
            (f" ({'; '.join(parts)})" if parts else "")


# -- what fits ------------------------------------------------------------------------------------
PerPod = Union[Mapping[str, int], Vector]
"""A pod's request: a resource vector or its canonical pairs (``Job.pods`` holds the latter)."""


def pairs(per_pod: PerPod) -> Iterable[tuple[str, int]]:
    """(resource, amount) pairs of a pod's request, whichever form it comes in."""
    # a dict check, not typing.Mapping's (an ABC check costs ~1 us on this hot path)
    return per_pod.items() if isinstance(per_pod, dict) else cast(Vector, per_pod)


def _graded(per_pod: PerPod, resources: frozenset[str]) -> Vector:
    if isinstance(per_pod, tuple):
        return _graded_vector(per_pod, resources)
    return tuple(sorted((k, v) for k, v in pairs(per_pod) if v > 0 and k in resources))


def _graded_vector(per_pod: Vector, resources: frozenset[str]) -> Vector:
    """The graded part of a canonical request, kept per model's resources and request. Two dict lookups, not an
    ``lru_cache`` keyed by both: that builds and hashes an argument tuple per call, hashing the request again (a
    frozenset keeps its hash; a tuple does not), and ``max_replicas`` asks it per replica count taken."""
    known = _GRADED.get(resources)
    if known is None:
        if len(_GRADED) >= 64:
            _GRADED.clear()
        known = _GRADED[resources] = {}
    graded = known.get(per_pod)
    if graded is None:
        if len(known) >= 8192:
            known.clear()
        graded = known[per_pod] = tuple((k, v) for k, v in per_pod if v > 0 and k in resources)  # already sorted
    return graded


_GRADED: dict[frozenset[str], dict[object, Vector]] = {}     # by resources, then by request (a Vector)


@lru_cache(maxsize=8192)
def _as_dict(free: Vector) -> dict[str, int]:
    return dict(free)


# ``_as_dict``: a vector's dict form, shared (read only): ``_per_node`` runs per bucket per fit check.


def _per_node(free: Vector, request: Vector) -> int:
    """How many pods of ``request`` (graded part, non-empty) one node with ``free`` holds."""
    have = _as_dict(free)
    best = UNBOUNDED
    for name, amount in request:
        n = have.get(name, 0) // amount
        if n < best:
            best = n
            if not best:
                return 0
    return best


def max_replicas(shapes: NodeShapes, per_pod: PerPod, per_node_cap: int = UNBOUNDED) -> int:
    """How many pods of shape ``per_pod`` the virtual nodes hold: the sum over nodes of what each
    holds (first-fit of identical pods fills node by node, so order does not matter), at most
    ``per_node_cap`` per node (Karmada gives its virtual nodes ``pods: 110``). ``UNBOUNDED`` when the
    pod requests none of the graded resources."""
    known = _GRADED.get(shapes.resources) if isinstance(per_pod, tuple) else None
    request = known.get(per_pod) if known is not None else None     # ``_graded``'s kept answer, inlined
    if request is None:
        request = _graded(per_pod, shapes.resources)
    if not request:
        return UNBOUNDED
    total = 0
    for have, n in shapes.counted:      # n * min(per_node_cap, _per_node(vec, request)), inlined
        each = per_node_cap
        for name, amount in request:
            k = have.get(name, 0) // amount
            if k < each:
                each = k
                if not k:
                    break
        total += n * each
    return total


def _sub(free: Vector, request: Vector, times: int) -> Vector:
    take = dict(request)
    return tuple((name, amount - take.get(name, 0) * times) for name, amount in free
                 if amount - take.get(name, 0) * times)


def _order(demands: Iterable[tuple[PerPod, int]], resources: frozenset[str]) -> list[tuple[Vector, int]]:
    """Graded part of each demand, equal shapes merged, largest pods first (descending canonical vector
    order: for one resource, by amount); demands with nothing graded drop out (no per-node limit)."""
    merged: dict[Vector, int] = {}
    for per_pod, count in demands:
        request = _graded(per_pod, resources)
        if request and count > 0:
            merged[request] = merged.get(request, 0) + count
    return sorted(merged.items(), reverse=True)


def pack(shapes: NodeShapes, demands: Sequence[tuple[PerPod, int]]) -> Optional[NodeShapes]:
    """Place ``count`` pods of each ``per_pod`` shape on the virtual nodes, first-fit over the nodes
    in their order (smallest first, as Karmada's simulator walks its ascending grades), largest pods
    first. Returns the nodes left, or None when some pod does not fit (a gang then does not fit)."""
    buckets = list(shapes.nodes)
    for request, count in _order(demands, shapes.resources):
        buckets, left = _fill(buckets, request, count, range(len(buckets)))
        if left:
            return None
        buckets = list(NodeShapes.of(buckets, shapes.resources, shapes.karmada_defaults).nodes)
    return NodeShapes.of(buckets, shapes.resources, shapes.karmada_defaults)


def fits(shapes: NodeShapes, demands: Sequence[tuple[PerPod, int]]) -> bool:
    """``pack(shapes, demands) is not None``, without building what is left when there is one pod shape."""
    if len(demands) == 1:
        per_pod, count = demands[0]
        request = _graded(per_pod, shapes.resources)
        if not request or count <= 0:
            return True
        fit = 0
        for vec, n in shapes.nodes:
            fit += n * _per_node(vec, request)
            if fit >= count:
                return True
        return False
    return pack(shapes, demands) is not None


def reserve(shapes: NodeShapes, demands: Sequence[tuple[PerPod, int]]) -> NodeShapes:
    """Book pods Atoll placed but the last report does not show yet (in-flight). Where the member
    scheduler put them is unknown, so they go on the *largest* nodes first: that keeps the view from
    claiming a whole free node the pods may in fact be using. The pods of one call fill the largest
    node before the next (as a bin-packing member would; a spreading one may leave less on the
    largest node: a heuristic, see docs/node-shapes.md, Limits). A pod that fits no virtual node
    (the lower grade edges underestimate) takes the largest node left whole. Never fails."""
    if len(demands) == 1:
        one = _reserve_one(shapes, demands[0])
        if one is not None:
            return one
    buckets = list(shapes.nodes)
    order = _order(demands, shapes.resources)
    for i, (request, count) in enumerate(order):
        buckets, left = _fill(buckets, request, count, range(len(buckets) - 1, -1, -1))
        if not left and i == len(order) - 1:
            break                               # canonical order is needed only by what follows: `of` below
        buckets = list(NodeShapes.of(buckets, shapes.resources, shapes.karmada_defaults).nodes)
        while left and buckets:
            vec, n = buckets.pop()              # canonical order: the last bucket is the largest
            gone = min(n, left)
            left -= gone
            if n > gone:
                buckets.append((vec, n - gone))
    return NodeShapes.of(buckets, shapes.resources, shapes.karmada_defaults)


def _reserve_one(shapes: NodeShapes, demand: tuple[PerPod, int]) -> Optional[NodeShapes]:
    """``reserve`` of one pod shape when every pod finds a node (None otherwise: ``reserve``'s own loop takes
    whole nodes for the rest): the same first fit from the largest node down, without the general path's
    ordering and copies (one booking per admission on a cluster with node shapes: the common call)."""
    per_pod, count = demand
    request = _graded(per_pod, shapes.resources)
    if not request or count <= 0:
        return shapes
    nodes = shapes.nodes
    out: list[tuple[Vector, int]] = []
    i = len(nodes)
    while count and i:
        i -= 1
        parts, count = _split(*nodes[i], request, count)
        out.extend(parts)
    if count:
        return None
    return NodeShapes.of((*nodes[:i], *out), shapes.resources, shapes.karmada_defaults)


def _fill(buckets: list[tuple[Vector, int]], request: Vector, count: int,
          order: Iterable[int]) -> tuple[list[tuple[Vector, int]], int]:
    """First-fit ``count`` identical pods over ``buckets`` visited in ``order``: every node of a
    bucket takes as many as it holds, until none are left. Returns the new buckets and the pods
    that did not fit."""
    out = list(buckets)
    for i in order:
        if not count:
            break
        parts, count = _split(*out[i], request, count)
        out[i] = parts[0]           # indexes stay stable for the caller's order: further parts go
        out.extend(parts[1:])       # to the end (not visited again for this shape; re-sorted by `of`)
    return out, count


def _split(vec: Vector, n: int, request: Vector, count: int) -> tuple[list[tuple[Vector, int]], int]:
    """A bucket of ``n`` nodes with ``vec`` free taking up to ``count`` pods of ``request``, node by node, each
    node as many as it holds: the buckets it becomes (itself when no node holds one) and the pods left."""
    each = _per_node(vec, request)
    if not each:
        return [(vec, n)], count
    parts: list[tuple[Vector, int]] = []
    full = min(n, count // each)
    if full:
        parts.append((_sub(vec, request, each), full))
        count -= full * each
    rest = n - full
    if rest and count:                          # one node takes the remainder
        parts.append((_sub(vec, request, count), 1))
        count = 0
        rest -= 1
    if rest:
        parts.append((vec, rest))
    return parts, count


# -- how Karmada computes allocatableModelings ----------------------------------------------------
def more_room(new: NodeShapes, old: Optional[NodeShapes]) -> bool:
    """Whether some pod could fit ``new`` that did not fit ``old``: for some graded resource and
    amount, more nodes now have at least that much free (or the model changed). Used to move the
    capacity epoch when a report shows a node freed though the cluster's totals did not grow."""
    if old is None or old.resources != new.resources:
        return True
    if new == old:
        return False
    for name in new.resources:
        for vec, _ in new.nodes:
            t = dict(vec).get(name, 0)
            if t and _at_least(new, name, t) > _at_least(old, name, t):
                return True
    return False


def _at_least(shapes: NodeShapes, name: str, amount: int) -> int:
    return sum(n for vec, n in shapes.nodes if dict(vec).get(name, 0) >= amount)


def grade_of(free: Mapping[str, int], grades: Sequence[Mapping[str, int]]) -> int:
    """Index of the grade a node with ``free`` falls in: per graded resource, the highest grade whose
    ``min`` is at most the free amount (a resource the node lacks counts as 0); the node's grade is
    the lowest of those. ``max`` is ignored; the last grade is open-ended (``getIndex``)."""
    names: set[str] = set()
    for mins in grades:
        names.update(mins)
    best = len(grades) - 1
    for name in names:
        have = free.get(name, 0)
        g = 0
        for i, mins in enumerate(grades):
            if mins.get(name, 0) <= have:
                g = i
            else:
                break                           # grades ascend (Karmada validates contiguous ranges)
        if g < best:
            best = g
    return best


def allocatable_modelings(grades: Sequence[Mapping[str, int]],
                          nodes: Iterable[tuple[Mapping[str, int], Iterable[Mapping[str, int]]]]) -> list[int]:
    """Node count per grade (zeros included), as Karmada's cluster status controller computes
    ``allocatableModelings`` (``getAllocatableModelings``): per node, free = allocatable minus the
    requests of its bound, non-terminal pods (``nodes`` yields (allocatable, those pods' requests));
    no node is filtered out (NotReady, cordoned, tainted all count).

    A node whose ``pods`` allocatable is set and fully used is skipped. Karmada v1.18/v1.19 hits a
    ``break`` there instead and drops every node listed after it (karmada-io/karmada#7757, fix in
    PR #7761); Atoll does not reproduce that bug: its result equals Karmada's whenever no node is
    pod-full, and equals the fixed Karmada's always."""
    frees = []
    for allocatable, pods in nodes:
        free = dict(allocatable)
        used_pods = 0
        for request in pods:
            used_pods += 1
            for name, amount in request.items():
                if name != PODS:
                    free[name] = free.get(name, 0) - amount
        if PODS in allocatable:
            free[PODS] = allocatable[PODS] - used_pods
            if free[PODS] <= 0:
                continue
        frees.append(free)
    return count_grades(grades, frees)


def count_grades(grades: Sequence[Mapping[str, int]], frees: Iterable[Mapping[str, int]]) -> list[int]:
    """Node count per grade for nodes with these free vectors (pod-full nodes already left out)."""
    counts = [0] * len(grades)
    for free in frees:
        counts[grade_of(free, grades)] += 1
    return counts


def shapes_of(grades: Sequence[Mapping[str, int]], counts: Sequence[int]) -> NodeShapes:
    """NodeShapes from grades in grade order and their counts (the simulator's report)."""
    return NodeShapes.from_models(dict(enumerate(grades)), dict(enumerate(counts)))
