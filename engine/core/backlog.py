"""The pending backlog grouped by verdict key, and the walk that examines a key once per state.

Every pending job sits in one *group* of its queue: the jobs whose verdict key (the engine's part --
queue, excluded clusters, tasks -- joined with each admit/place plugin's ``Plugin.verdict_key``) is
equal. By the plugins' contract, jobs of one group examined in the same FleetState get the same
verdict and the same refusal text. A job without a key (a plugin declares nothing, or it is backing
off, whose text is its own) is a group of one.

A full cycle used to examine every pending job of a queue in order. ``QueueWalk`` visits the same
jobs in the same order, but once a group's next job is refused, the group leaves the walk: each of
its later jobs would be refused with the same text while the state stays the same, and the state
only changes through an admission or a preemption issued (``Engine._stamp``). Then the walk hands the
refusal to the group's jobs it passed over (those before the walk's position) and puts the group
back at its first job after that position, which the exhaustive loop would examine in the new
state. When the queue's walk ends, every job of a still-refused group gets the refusal. So a cycle
calls the pipeline O(groups x admissions) times instead of O(backlog), and the decisions, the
order and each job's reason are exactly the exhaustive loop's (tests/core/test_pruned_exact.py).

Reasons are bookkept per group too: ``Group.reason`` is the reason every job of the group has (None
when they differ), so handing a group the text its jobs already show costs O(1), not O(jobs).
"""

from __future__ import annotations

import bisect
import heapq
from typing import Callable, Hashable, Iterable, Iterator, Mapping, Optional

from sortedcontainers import SortedList

from engine.core.wake import Signature
from engine.model import Job, Refusal
from engine.resources import Resources


Entry = tuple[tuple, int, str]          # (job order key, arrival seq, job id): the exhaustive loop's order
RangeBlock = Callable[["Group", Refusal, Entry, Optional[Entry]], None]


_SMALL = 64
"""A group's entries are a plain sorted list up to this many (``Entries``)."""


class Entries:
    """A group's entries in order, with the few ``SortedList`` calls the engine makes on them. Nearly every group
    holds one job (the 100,000 pending jobs of ``atoll bench`` make 99,726 groups, 99,453 of one job): a plain
    sorted list is a few dozen bytes where a SortedList of one entry is ~500 across five objects, and a cycle
    reads each group once. Past ``_SMALL`` entries it becomes a SortedList, whose insertions stay O(log n) where
    a list's are O(n). Measured: 100,000 submits 7.3 -> 6.4 s CPU, peak RSS 528 -> 498 MiB."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: "list[Entry] | SortedList" = []

    def add(self, entry: Entry) -> None:
        items = self._items
        if not isinstance(items, list):
            items.add(entry)
            return
        if not items or items[-1] < entry:
            items.append(entry)
        else:
            bisect.insort(items, entry)
        if len(items) > _SMALL:
            self._items = SortedList(items)

    def discard(self, entry: Entry) -> None:
        items = self._items
        if not isinstance(items, list):
            items.discard(entry)
            return
        i = bisect.bisect_left(items, entry)
        if i < len(items) and items[i] == entry:
            del items[i]

    def bisect_right(self, entry: Entry) -> int:
        items = self._items
        if isinstance(items, list):
            return bisect.bisect_right(items, entry)
        return int(items.bisect_right(entry))

    def irange(self, since: Optional[Entry] = None, upto: Optional[Entry] = None) -> Iterator[Entry]:
        """The entries from ``since`` to ``upto``, both included (None: from the first, to the last)."""
        items = self._items
        if not isinstance(items, list):
            return iter(items.irange(since, upto))
        start = 0 if since is None else bisect.bisect_left(items, since)
        end = len(items) if upto is None else bisect.bisect_right(items, upto)
        return iter(items[start:end])

    def __getitem__(self, index: int) -> Entry:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._items)


class Group:
    """The pending jobs of one queue with one verdict key, in order."""

    __slots__ = ("queue", "key", "shared", "shape", "entries", "size", "head", "reason", "parked", "counted",
                 "searches")

    def __init__(self, queue: str, key: Hashable, shared: bool, shape: Hashable) -> None:
        self.queue = queue
        self.key = key
        self.shared = shared             # False: a group of one job, whose refusals are never handed on
        self.shape = shape               # its jobs' Job.shape (the verdict key includes it)
        self.entries = Entries()
        self.size = 0                    # len(entries), read where the entries are not (Engine._block)
        self.head: Optional[Entry] = None      # entries[0], kept (a SortedList index is slow)
        self.reason: Optional[str] = ""  # the pending reason all its jobs have; None when they differ
        self.parked: Optional[tuple[Signature, Refusal]] = None   # refused while these reads had these values
        self.counted: Optional[Signature] = None   # its signature, while counted in engine.core.idle's QueueReads
        self.searches: Signature = ()               # the victim searches' part of it


class Backlog:
    """queue -> verdict key -> Group, and job id -> Group; per queue, its groups by job shape."""

    def __init__(self) -> None:
        self.queues: dict[str, dict[Hashable, Group]] = {}
        self.shapes: dict[str, dict[Hashable, dict[Group, None]]] = {}
        self._group_of: dict[str, Group] = {}
        self.changed: Callable[[Group], None] = lambda group: None  # a group's jobs changed (engine.core.idle)
        self._most: dict[str, Resources] = {}       # queue -> most_demand, while known (see there)
        self.shape_edits = 0            # grows whenever a queue gains or loses a job shape (QueueTurns._served_through)

    def add(self, job: Job, key: Optional[Hashable]) -> None:
        shared = key is not None
        gkey: Hashable = key if shared else ("job", job.id)
        groups = self.queues.setdefault(job.queue, {})
        group = groups.get(gkey)
        if group is None:
            group = groups[gkey] = Group(job.queue, gkey, shared, job.shape)
            group.reason = job.pending_reason
            by_shape = self.shapes.setdefault(job.queue, {})
            if job.shape not in by_shape:
                by_shape[job.shape] = {}
                self.shape_edits += 1
            by_shape[job.shape][group] = None
            most = self._most.get(job.queue)
            if most is not None:
                at_least(most, job.demand)
        else:
            self.changed(group)
            if group.reason != job.pending_reason:
                group.reason = None
        entry = (job.sort_key, job.seq, job.id)
        group.entries.add(entry)
        group.size = len(group.entries)
        if group.head is None or entry < group.head:
            group.head = entry
        self._group_of[job.id] = group

    def remove(self, job: Job) -> None:
        group = self._group_of.pop(job.id, None)
        if group is None:
            return
        entry = (job.sort_key, job.seq, job.id)
        group.entries.discard(entry)
        group.size = len(group.entries)
        if entry == group.head:
            group.head = group.entries[0] if group.entries else None
        if not group.entries:
            self.changed(group)
            groups = self.queues.get(group.queue)
            if groups is not None and groups.get(group.key) is group:
                del groups[group.key]
                by_shape = self.shapes[group.queue]
                del by_shape[group.shape][group]
                if not by_shape[group.shape]:
                    del by_shape[group.shape]
                    self.shape_edits += 1
                    self._most.pop(group.queue, None)      # its shape may have been the most: found again
                if not groups:
                    del self.queues[group.queue]
                    del self.shapes[group.queue]

    def group(self, job_id: str) -> Optional[Group]:
        return self._group_of.get(job_id)

    def most_demand(self, queue: str, jobs: Mapping[str, Job]) -> Resources:
        """Per resource, the most any pending job of ``queue`` demands (``Job.demand``): the demand of no job of
        the queue exceeds it in any resource. Found over the queue's job shapes when first asked, then kept
        while no shape leaves the queue (a shape joining raises it). Do not mutate."""
        most = self._most.get(queue)
        if most is None:
            most = self._most[queue] = {}
            for groups in self.shapes.get(queue, {}).values():
                group = next(iter(groups))
                assert group.head is not None
                at_least(most, jobs[group.head[2]].demand)
        return most

    def clear(self) -> None:
        self.queues.clear()
        self.shapes.clear()
        self._group_of.clear()
        self._most.clear()

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._group_of


class QueueWalk:
    """One queue's pending jobs in the exhaustive order, skipping groups refused in the current state."""

    def __init__(self, groups: Iterable[Group], version: int, block_range: RangeBlock,
                 bound: Optional[Entry] = None) -> None:
        self._heap: list[tuple[Entry, Group]] = [(g.head, g) for g in groups if g.head is not None]
        heapq.heapify(self._heap)
        self._version = version
        self._block_range = block_range
        self._refused: list[tuple[Group, Entry, Refusal]] = []
        self._last: Optional[Entry] = None
        self._bound = bound              # the last job the walk may reach (policy lookback); None: all

    def passed(self, groups: list[Group]) -> None:
        """The walk as it is after ``take`` and ``examined`` with its parked refusal for the head of each of
        ``groups``, in order: the groups of the queue before those of this walk (Engine._pass_quiet)."""
        for group in groups:
            assert group.parked is not None and group.head is not None
            self._refused.append((group, group.head, group.parked[1]))
        if groups:
            self._last = groups[-1].head

    def peek(self, version: int) -> Optional[tuple[Entry, Group]]:
        """What ``take`` returns next, without taking it (None: the queue is done). The jobs of refused
        groups before it count as passed (``_reopen`` hands them the refusal): a caller keying the queue
        by its next job peeks only while the queue is being served (Engine._serve_by_candidate)."""
        if version != self._version:
            self._reopen(version)
        if not self._heap or (self._bound is not None and self._heap[0][0] > self._bound):
            self.close()                                     # every job left was passed: the queue is done
            return None
        top = self._heap[0]
        if self._refused and (self._last is None or top[0] > self._last):
            self._last = (top[0][0], top[0][1], "")        # just before the top: no entry sorts between
        return top

    def left(self, version: int) -> Iterator[Entry]:
        """The entries ``take`` may still hand out in state ``version``, in no particular order, without taking
        or reopening anything (engine.core.settle): every group's from its next one on, and when the state moved
        since, the refused groups' from the walk's position on too (``_reopen`` brings them back)."""
        for entry, group in self._heap:
            yield from group.entries.irange(entry)
        if version != self._version:
            for group, _, _ in self._refused:
                yield from group.entries.irange(self._last)

    def take(self, version: int) -> Optional[tuple[Entry, Group]]:
        """The next job to examine (its entry and group), or None when the queue is done."""
        if version != self._version:
            self._reopen(version)
        if not self._heap or (self._bound is not None and self._heap[0][0] > self._bound):
            self.close()
            return None
        entry, group = heapq.heappop(self._heap)
        self._last = entry
        return entry, group

    def examined(self, entry: Entry, group: Group, shared_refusal: Optional[Refusal]) -> None:
        """After the job at ``entry`` was examined: ``shared_refusal`` is its refusal when every later job
        of its group gets the same in the same state (the group leaves the walk until the state changes)."""
        if shared_refusal is not None:
            self._refused.append((group, entry, shared_refusal))
        else:
            self._push_after(group, entry)

    def _push_after(self, group: Group, entry: Entry) -> None:
        entries = group.entries
        index = entries.bisect_right(entry)
        if index < len(entries):
            heapq.heappush(self._heap, (entries[index], group))

    def _reopen(self, version: int) -> None:
        """The state changed: refused groups got their refusal up to the walk's position, and come back
        at their first job after it."""
        self._version = version
        refused, self._refused = self._refused, []
        last = self._last
        for group, since, refusal in refused:
            assert last is not None
            self._block_range(group, refusal, since, last)
            self._push_after(group, last)

    def close(self) -> None:
        """The queue is done: every job of a still-refused group from where it was refused on shares it."""
        refused, self._refused = self._refused, []
        for group, since, refusal in refused:
            self._block_range(group, refusal, since, self._bound)


def at_least(most: Resources, demand: Resources) -> None:
    """Raise ``most`` to ``demand`` resource by resource."""
    for name, amount in demand.items():
        if amount > most.get(name, 0):
            most[name] = amount
