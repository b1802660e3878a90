"""Parked keys: a refused verdict key stays refused until something it read changes.

A refusal depends on the job's verdict key and on FleetState. The key part is handled by
``engine.core.backlog`` (a key refused once in a state refuses all its jobs). This module handles the
state part across cycles: every admit/place plugin declares with ``Plugin.verdict_reads`` which facts of
the state its verdict and refusal text read for a job, from a small vocabulary:

- ``("fleet", need)``: the first resource of ``need`` (in its order) short of the fleet's free capacity,
  or None;
- ``("max", need)``: whether ``need`` fits the most free in one cluster (per resource);
- ``("each", need)``: the ready clusters where ``need`` fits whole (the FitIndex set);
- ``("allocated", queue)``: the usage of the queue and its ancestors;
- ``("queues",)``: any queue added, edited or removed (e.g. a preempt rule reading other queues' fields);
- ``("freeing", need)``: whether evictions under way free enough for ``need`` on some cluster;
- ``("victims", watch)``: a parked victim search still finds no candidate (``engine.core.searchwake``);
- ``("call", function, argument)``: ``function(state, argument)``, a plugin's own read (a bound method:
  hashable, and its value must say everything the verdict reads through it);

and the engine adds what it reads itself for every job: ``("line", queue)`` (the queue and its ancestors:
existence, state, limits), ``("usage", queue)`` (their usage of the resources they limit) and
``("ready",)`` (the ready clusters, their labels, the fleet's allocatable, and whether any cluster reports
node shapes). A key refused with a shareable refusal is *parked* with the values of its reads
(its signature). While the values are equal the plugins' contract says the verdict and text are equal
too, so the walk hands the parked refusal on without calling the pipeline; a finish on one cluster
changes the reads of the few keys it could help, and only those are examined again. The values are
taken at the moment the walk reaches the key, so admissions earlier in the same cycle are seen exactly
as the job-by-job loop sees them (tests/core/test_pruned_exact.py).

A refusal that could start a preemption is parked only while its victim search is parked too, with that
search's reads besides its own (``Engine._park`` asks ``Preemptions.wake_reads``; engine.core.searchwake,
engine.core.searchroom); one whose search ran a dry run is examined again at every capacity change.
Node-shape-aware verdicts, nominated jobs, and keys a plugin declares nothing for are never parked.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Optional

from engine.core.state import FleetState
from engine.model import Job, Refusal
from engine.resources import fits

Signature = tuple[tuple[Hashable, Hashable], ...]       # (read, value) pairs
_UNKNOWN = object()                                      # no value cached for a read yet


class Reads:
    """Values of reads in the current state, cached until ``version()`` changes."""

    def __init__(self, state: FleetState, version: Callable[[], Hashable]) -> None:
        self.state = state
        self._version = version
        self._seen: Hashable = None
        self._values: dict[Hashable, Hashable] = {}
        # signatures found holding in this version (by id, kept alive here so that no id is reused meanwhile): a
        # group's signature is often asked again for its next job in the same state (22 % of the asks in the
        # 10,000-job churn simulation), and each ask hashes every read again (nested tuples cache no hash)
        self._held: dict[int, Signature] = {}
        self._ready: tuple[Any, Hashable] = (None, None)     # (ready list it was computed from, value)

    def value(self, read: Hashable) -> Hashable:
        version = self._version()
        if version != self._seen:
            self._seen = version
            self._values.clear()
            self._held.clear()
        values = self._values
        if read in values:
            return values[read]
        value = values[read] = self._compute(read)
        return value

    def current(self) -> dict[Hashable, Hashable]:
        """The values cached in the current state (read -> value; ``value`` fills in the others); ``seen`` is
        that state's version."""
        version = self._version()
        if version != self._seen:
            self._seen = version
            self._values.clear()
            self._held.clear()
        return self._values

    @property
    def seen(self) -> Hashable:
        """The version of the state the cached values are for (as of the last ``value``/``current``/``holds``)."""
        return self._seen

    def signature(self, reads: tuple[Hashable, ...]) -> Signature:
        """(read, value) of each distinct read (plugins often declare the same one: each is checked once), all in
        the state of the moment (its version asked once, not once per read: a cycle that parks 15,000 keys asks
        ~120,000 values)."""
        values, compute = self.current(), self._compute
        pairs = []
        for read in dict.fromkeys(reads):
            value = values.get(read, _UNKNOWN)
            if value is _UNKNOWN:
                value = values[read] = compute(read)
            pairs.append((read, value))
        return tuple(pairs)

    def holds(self, signature: Signature) -> bool:
        """Every read still has the value it had when the signature was taken."""
        version = self._version()
        if version != self._seen:
            self._seen = version
            self._values.clear()
            self._held.clear()
        held = self._held
        if held.get(id(signature)) is signature:
            return True                          # asked in this version already: values are cached per version
        get = self._values.get
        for read, seen in signature:
            value = get(read, _UNKNOWN)          # one hash of the read (nested tuples: not cached by Python)
            if value is _UNKNOWN:
                value = self.value(read)
            if value != seen:
                return False
        held[id(signature)] = signature
        return True

    def _compute(self, read: Any) -> Hashable:
        state = self.state
        kind = read[0]
        if kind == "each":
            need = dict(read[1])
            return frozenset(c.name for c in state.clusters_fitting(need, state.ready_clusters()))
        if kind == "max":
            return fits(dict(read[1]), state.max_free)
        if kind == "fleet":
            free = state.fleet_free
            return next((name for name, amount in read[1] if amount > free.get(name, 0)), None)
        if kind == "victims":           # a parked victim search (engine.core.searchwake): still hopeless
            return bool(read[1].holds())
        if kind == "freeing":           # evictions under way free enough for ``need`` somewhere
            return state.freeing(dict(read[1]))
        if kind == "queues":            # any queue added, edited or removed
            return state.queue_edits
        if kind == "call":              # a plugin's own read: ("call", function(state, argument), argument)
            return read[1](state, read[2])
        if kind in ("line", "usage", "allocated"):
            queue = state.queues.get(read[1])
            if queue is None:
                return None
            line = [queue, *state.ancestors(queue.name)] if queue.parent else [queue]
            if kind == "line":
                return tuple((q.name, q.open, q.parent, _items(q.capability), _items(q.deserved),
                              _items(q.guarantee)) for q in line)
            if kind == "allocated":
                return tuple(_items(q.allocated) for q in line)
            # usage of the resources the line limits (capability, deserved): a finish in a queue without
            # limits changes nobody's verdict through its usage
            return tuple(tuple((r, q.allocated.get(r, 0)) for r in sorted({*(q.capability or ()), *(q.deserved or ())}))
                         for q in line)
        if kind == "ready":
            ready = state.ready_clusters()
            if self._ready[0] is not ready:     # (a node-shape report rebuilds the list: _invalidate)
                # whether node shapes count: a refusal parked on totals is judged again once they do. The clusters
                # as a frozenset (names are unique: the same facts as the list in name order), which hashes once:
                # every parked group's signature holds this value, and counting it (engine.core.idle) hashed a
                # tuple of 100 clusters' labels each time (4.6 us; 10 % of the cycle that parks 15,000 keys)
                self._ready = (ready, (frozenset((c.name, _items(c.labels)) for c in ready),
                                       _items(state.fleet_allocatable), state.any_node_shapes))
            return self._ready[1]
        raise ValueError(f"unknown verdict read {read!r}")


def _items(mapping: Optional[dict[str, Any]]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(mapping.items())) if mapping else ()


def engine_reads(job: Job) -> tuple[Hashable, ...]:
    """What the engine itself reads for every job: its queue line, and what it reads to place it
    (``placing_reads``)."""
    return (("line", job.queue), ("usage", job.queue)) + placing_reads(job)


def admitting_reads(job: Job) -> tuple[Hashable, ...]:
    """What the engine itself reads for a job the admit stage refused: its queue line, and the ready clusters
    (their labels, the fleet's allocatable, whether node shapes count), as for every job; not what placing
    reads, since placement never ran (``Plugin.admit_reads``)."""
    return ("line", job.queue), ("usage", job.queue), ("ready",)


def placing_reads(job: Job) -> tuple[Hashable, ...]:
    """What the engine reads to place a job: the ready clusters, and (default placement, when no place plugin
    decides) where the whole job and its minimum fit."""
    demand, minimum = tuple(job.demand.items()), tuple(job.min_demand.items())
    return (("ready",), ("max", demand), ("each", demand), ("each", minimum))


def parkable(job: Job, refusal: Refusal, state: FleetState) -> bool:
    """Whether a shared refusal may be parked across state changes (see the module doc; a capacity refusal
    under a preempt stage needs its parked victim search's reads besides, ``Engine._park``)."""
    return refusal.retry_at is None and job.nominated is None and not state.any_node_shapes
