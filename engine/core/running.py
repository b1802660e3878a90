"""The running jobs a victim search may take, and the order it meets them in.

``RunningIndex`` keeps every admitted job that may be a victim, per queue and fleet-wide, in victim order:
(rank, -admitted_at, -seq, id): lowest rank, then most recently admitted, then the later arrival.
``victim_order`` yields a rule's candidates in that order, queues above their guarantee first: exactly
the merge of one stream per queue the rule opens (``PreemptRule.victim_queues``), without building
those streams when it need not.

Why not just merge. A search meets at most ``max_candidates`` candidates, and usually far fewer. The
per-queue merge asks every queue with candidates for its bound and opens a stream on each opened queue
before the first candidate comes out: with 1,000 queues, 1,000 plugin calls and up to 1,000 streams per
search, whatever it then looks at (the saturated 100,000-job cycle: 512 searches, ~4.5 ms each, meeting
a handful of candidates each). So ``victim_order`` goes in three steps, each cheap where the last is not:

1. **Lazy walk.** Read the fleet-wide order, asking a queue for its bound (cached for the walk) only when
   one of its candidates comes up, and skip what the rule does not open. Cheap when the rule opens most
   queues: the saturated searches end here.
2. After ``LAZY_SKIPS`` skips, **ask every queue**. A rule opening at most ``STREAMS_MAX`` queues (one
   taking only from the preemptor's queue, or from a few lower-priority ones) gets their streams merged
   from where the walk stands: what the plain merge cost, plus 64 skips.
3. Otherwise **walk on with every bound known**: a pass ends at the first candidate ranked at or above
   every bound of that pass (the order is by rank first), and after ``SKIPS_PER_STREAM`` skips per opened
   queue the streams take over after all.

Every step yields the candidates in the same order (ids are unique: the order is total);
tests/core/test_running.py checks it against the plain merge for random indexes and rules, wherever the
steps change.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from sortedcontainers import SortedList

from engine.model import Job, Queue
from engine.resources import Resources

if TYPE_CHECKING:
    from engine.core.searchwake import CandidateLog

ANY = math.inf
"""A rank bound that lets every job of a queue be a victim."""

Entry = tuple[float, float, int, str]           # (rank, -admitted_at, -seq, job id)
Placed = tuple[float, float, int, str, str]     # an Entry and the job's queue: the fleet-wide order

LAZY_SKIPS = 64
"""The walk asks queues for their bounds one by one until it has skipped this many candidates."""
STREAMS_MAX = 8
"""Then every queue is asked; a rule opening at most this many gets their streams merged."""
SKIPS_PER_STREAM = 8
"""One more stream costs about as much as this many skipped candidates (see the module doc)."""
_LEFT_KEPT = 1 << 16
"""``RunningIndex.left`` keeps at most this many departures (then starts again)."""


class RunningIndex:
    """Jobs holding capacity that may be victims, per queue and fleet-wide, in victim order (``Entry``).

    Jobs admitted during a cycle are kept aside until the next one (``settle``): a job is never
    admitted and evicted in the same cycle."""

    def __init__(self) -> None:
        self._by_queue: dict[str, SortedList] = {}
        self._all = SortedList()              # every settled entry and its queue (Placed), all queues
        self._entries: dict[str, tuple[str, Entry]] = {}
        self._fresh: list[tuple[str, Entry, int]] = []    # (queue, entry, preemptions)
        self._busy: set[str] = set()          # queues with at least one settled entry
        self.removed = 0                      # candidates that left _by_queue, ever (engine.core.searchroom)
        # the last candidates to leave, with what each held when it left (None: never asked, so no room counted it),
        # the first at absolute position ``left_base`` (positions count as ``removed`` does): rooms take back
        # what they counted of each (engine.core.searchroom)
        self.left: list[tuple[str, Optional[dict[str, Resources]]]] = []
        self.left_base = 0
        self.version = 0                      # grows whenever a candidate comes or goes (Standing caches key on it)
        self._placed: dict[str, dict[str, Resources]] = {}     # job id -> cluster -> its placed demand
        self.log: Optional[CandidateLog] = None     # every candidate as it becomes one (engine.core.searchwake)

    def add(self, job: Job, rank: int, fresh: bool = True) -> None:
        self.discard(job.id)
        entry = (rank, -(job.admitted_at or 0.0), -job.seq, job.id)
        if self.log is not None and not fresh:
            self.log.add(job.queue, rank, job.preemptions, job.id)
        if fresh:
            self._fresh.append((job.queue, entry, job.preemptions))
        else:
            self._insert(job.queue, entry)
        self._entries[job.id] = (job.queue, entry)

    def _insert(self, queue: str, entry: Entry) -> None:
        entries = self._by_queue.get(queue)
        if entries is None:
            entries = self._by_queue[queue] = SortedList()
        if not entries:
            self._busy.add(queue)
        self.version += 1
        entries.add(entry)
        self._all.add((*entry, queue))

    def placed(self, job: Job) -> dict[str, Resources]:
        """What ``job`` holds on each cluster of its placement (computed once while indexed)."""
        known = self._placed.get(job.id)
        if known is None:
            known = {c: job.placed_demand(c) for c in job.placement or {}}
            if job.id in self._entries:
                self._placed[job.id] = known
        return known

    def discard(self, job_id: str) -> None:
        placed = self._placed.pop(job_id, None)
        known = self._entries.pop(job_id, None)
        if known is not None:
            queue, entry = known
            entries = self._by_queue.get(queue)
            if entries is not None and entry in entries:      # a fresh entry is dropped by settle()
                entries.remove(entry)
                self.version += 1
                self._all.remove((*entry, queue))
                if not entries:
                    self._busy.discard(queue)
                self.removed += 1
                if self.log is not None:
                    self.log.left(job_id)       # its log position concerns no search any more
                left = self.left
                if len(left) >= _LEFT_KEPT:      # rooms that did not look since wake
                    self.left_base += len(left)
                    left = self.left = []
                left.append((job_id, placed))

    def settle(self) -> None:
        """A new cycle: this cycle's admissions become candidates."""
        for queue, entry, preemptions in self._fresh:
            if self._entries.get(entry[3]) == (queue, entry):
                self._insert(queue, entry)
                if self.log is not None:
                    self.log.add(queue, entry[0], preemptions, entry[3])
        self._fresh.clear()

    def candidate(self, job_id: str) -> bool:
        """``job_id`` is a candidate now (indexed and settled)."""
        known = self._entries.get(job_id)
        if known is None:
            return False
        entries = self._by_queue.get(known[0])
        return entries is not None and known[1] in entries

    def rank(self, job_id: str) -> Optional[float]:
        known = self._entries.get(job_id)
        return known[1][0] if known is not None else None

    def queues(self) -> set[str]:
        """The queues holding candidates (kept as entries come and go). Do not mutate."""
        return self._busy

    def least_rank(self, queue: str) -> float:
        """The lowest rank among the queue's candidates (``ANY`` when it has none)."""
        entries = self._by_queue.get(queue)
        return entries[0][0] if entries else ANY

    def ordered(self, queue: str, below: float, after: Optional[tuple] = None) -> Optional[Iterator[Entry]]:
        """The queue's candidates of rank < ``below`` (after ``after``, when given) in victim order; None
        when it has none below ``below``."""
        entries = self._by_queue.get(queue)
        if not entries or entries[0][0] >= below:
            return None
        if after is not None:
            return entries.irange(minimum=after, maximum=(below,), inclusive=(False, False))
        if below == ANY:
            return iter(entries)
        return entries.irange(maximum=(below,), inclusive=(True, False))

    def walk(self, after: Optional[Placed] = None) -> Iterator[Placed]:
        """Every candidate (after ``after``, when given), all queues, in victim order, with its queue."""
        if after is None:
            return iter(self._all)
        return self._all.irange(minimum=after, inclusive=(False, True))

    def __len__(self) -> int:
        return len(self._all)


def above_guarantee(queue: Queue) -> bool:
    """Uses more than its guarantee of some resource (with no guarantee: uses anything)."""
    guarantee = queue.guarantee
    return any(amount > guarantee.get(name, 0) for name, amount in queue.allocated.items())



CLOSED = (-1, 0.0)


class Standing(dict[str, tuple[int, float]]):
    """Per queue, what one rule makes of it: (pass, bound), pass 0 (above its guarantee, or none) or 1, CLOSED
    when the rule does not open it or it has no candidate below the bound. It is a function of the rule's scope
    (``PreemptRule.scope``: equal scopes open the same queues to the same ranks in every state), the queues and
    their usage, and the index: searches of equal scopes in one state share one (``Preemptions``).
    ``complete``: every queue holding candidates is in it.

    ``base``: the Standing shared, in the same state, by every rule of the plugin's equal ``shared_scope``
    (``PreemptRule``): they make the same of every queue outside their ``own`` queues, so what one learns of
    such a queue the others take from it, and completing a Standing copies the base's entries instead of
    asking the rule for each queue. A base holds no answer about a queue that was own to every rule that asked."""

    complete = False

    def __init__(self, base: Optional["Standing"] = None, own: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.base = base
        self.own = own
        self.opened: dict[int, dict[str, tuple[int, float]]] = {}     # per pass, once complete


def victim_order(index: RunningIndex, victim_queues: Callable[[str], Optional[float]], queues: dict[str, Queue],
                 lazy_skips: int = LAZY_SKIPS, streams_max: int = STREAMS_MAX,
                 skips_per_stream: int = SKIPS_PER_STREAM, standing: Optional[Standing] = None) -> Iterator[str]:
    """The ids of the candidates of the queues ``victim_queues`` opens, below each one's bound, in victim
    order with the queues above their guarantee (or without one) first: the merge of the per-queue
    streams, see the module doc. The caller must not change the index or the queues' usage between two
    candidates (a dry run restores both). ``standing``: what an earlier walk of an equal rule in the same
    state learnt (filled in further), and through its base what rules of an equal shared scope learnt. The
    other keyword arguments tune when it changes ways (tests)."""
    if standing is None:
        standing = Standing()
    base, own = standing.base, standing.own

    def ask(name: str) -> tuple[int, float]:
        bound = victim_queues(name)
        if bound is None or index.least_rank(name) >= bound:
            return CLOSED
        queue = queues.get(name)
        return (0 if queue is not None and (not queue.guarantee or above_guarantee(queue)) else 1, bound)

    def stand(name: str) -> tuple[int, float]:
        known = standing.get(name)
        if known is None:
            if base is not None and name not in own:
                known = base.get(name)
                if known is None:
                    known = base[name] = ask(name)
            else:
                known = ask(name)
            standing[name] = known
        return known

    def complete() -> None:
        busy = index.queues()
        if base is None:
            for name in busy:
                stand(name)
        else:
            for name in busy.difference(base):
                if name not in own:
                    base[name] = ask(name)
            base.complete = True        # every queue holding candidates but the own ones of a rule
            mine = {name: standing[name] for name in own if name in standing}
            standing.update(base)       # right for every queue but the own ones, put back below
            for name in own:
                known = mine.get(name)
                if known is None:
                    standing.pop(name, None)
                    if name in busy:
                        known = ask(name)
                if known is not None:
                    standing[name] = known
        standing.complete = True

    def rest(current: int, last: Optional[Placed]) -> Iterator[str]:
        opened = standing.opened.get(current)
        if opened is None:
            opened = standing.opened[current] = {name: known for name, known in standing.items()
                                                 if known[0] >= current}
        if len(opened) <= streams_max:
            return _merged(index, opened, current, last)
        return _informed(index, opened, current, last, skips_per_stream * len(opened))

    if base is not None and base.complete and not standing.complete:
        complete()                      # cheap: copied from the base
    if standing.complete:
        yield from rest(0, None)        # every queue's standing known: no lazy walk
        return
    skipped = 0
    later = False                       # a queue below its guarantee was met: a second pass is due
    for current in (0, 1):
        if current == 1 and not later:
            return
        for entry in index.walk():
            first, bound = stand(entry[4])
            if first == current and entry[0] < bound:
                yield entry[3]
                continue
            later = later or first == 1
            skipped += 1
            if skipped > lazy_skips:
                if not standing.complete:
                    complete()
                yield from rest(current, entry)
                return


def _informed(index: RunningIndex, opened: dict[str, tuple[int, float]], current: int,
              last: Optional[Placed], budget: int) -> Iterator[str]:
    """The walk once every queue's standing is known: a pass ends at the first candidate ranked at or above
    every bound of that pass (the order is by rank first), and once it has skipped ``budget`` more
    candidates the rest comes from the streams."""
    tops = [-ANY, -ANY]
    for first, bound in opened.values():
        tops[first] = max(tops[first], bound)
    skipped = 0
    after: Optional[Placed] = last
    for now in (current, current + 1):
        if now > 1:
            return
        top, start, after = tops[now], after, None
        if top == -ANY:
            continue                    # no queue opened in this pass
        for entry in index.walk(start):
            rank = entry[0]
            if rank >= top:
                break
            known = opened.get(entry[4])
            if known is not None and known[0] == now and rank < known[1]:
                yield entry[3]
                continue
            skipped += 1
            if skipped > budget:
                yield from _merged(index, opened, now, entry)
                return


def _merged(index: RunningIndex, opened: dict[str, tuple[int, float]], current: int,
            last: Optional[Placed]) -> Iterator[str]:
    """What a walk in pass ``current`` would yield after ``last`` (from the start when None), and in the
    passes after it, from one stream per opened queue."""
    streams: list[Iterator[tuple]] = []
    for name, (first, bound) in opened.items():
        if first < current:
            continue                    # done in an earlier pass
        entries = index.ordered(name, bound, last if first == current else None)
        if entries is not None:
            streams.append(_prefixed(first, entries))
    for merged in heapq.merge(*streams):
        yield merged[-1]


def _prefixed(first: int, entries: Iterator[Entry]) -> Iterator[tuple]:
    for entry in entries:
        yield (first, *entry)
