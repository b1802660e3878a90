"""Whose turn: the cycle's loops over the queue heap (a mixin of ``Engine``: same state, own idea).

A cycle serves queues in the order of their ``atoll_queue_order`` keys, a heap re-keyed lazily. With keys that do
not read the queue's next job (``_serve_by_key``), a queue keeps its turn through refusals until one of its jobs is
admitted; with keys that do (``candidate``, progressive filling: ``_serve_by_candidate``), the queue is keyed again
after every job. Queue keys are cached per candidate shape until the next admission (``_queue_key``).

Both loops pass *quiet* queues without a look at each group (engine.core.idle): when every group of the queue is
parked and holds in the state of the moment, a queue not started yet changes nothing by its turn and is passed
whole, and the candidate loop steps through a quiet queue's groups by their heads and shapes only
(``_pass_quiet``), exactly where the job-by-job loop would stop. Once every queue left is untouched and quiet,
nothing can change any more and the candidate loop ends (``_rest_quiet``).
"""

from __future__ import annotations

import heapq
from typing import Callable, Hashable, Optional

from engine.core.backlog import Backlog, Entry, Group
from engine.core.sources import ListSource, Source, WalkSource
from engine.core.idle import QueueReads
from engine.core.nomination import Preemptions
from engine.core.settle import Settling
from engine.core.state import FleetState
from engine.model import CycleResult, Job, Refusal
from engine.pipeline import Pipeline, join_keys


class QueueTurns(Settling):
    pipeline: Pipeline
    state: FleetState
    _backlog: Backlog
    _quiet: QueueReads
    _preempt: Preemptions
    _stamp: int
    exhaustive: bool
    _key_kept: bool = False         # the last key asked was cached (``_queue_key``): no bound is tried after it
    _bound_candidate: Optional[Job] = None      # ``_bound_turn``'s candidate (one Job, not one built per bound)
    _queue_keys: dict[str, dict[Hashable, tuple[Hashable, tuple]]]
    _examine: Callable[[Job, float, CycleResult], Optional[Refusal]]

    def _serve_by_key(self, sources: dict[str, Source], now: float, result: CycleResult) -> None:
        """The cycle's loop when queue keys do not read the queue's next job."""
        heap: list[tuple[tuple, str]] = [(self._queue_key(name), name) for name in sources]
        heapq.heapify(heap)
        while heap:
            key, name = heap[0]
            fresh = self._queue_key(name)
            if fresh != key:                      # usage changed since pushed: re-queue lazily
                heapq.heapreplace(heap, (fresh, name))
                continue
            # A refusal changes no queue's key, so this queue stays first: keep taking its jobs until
            # one is admitted (then its key, and maybe the order, change) or it has none left.
            stamp = self._stamp
            source = sources[name]
            if source.fresh and self._quiet_now(name, source) and self._quiet.searches_hold(name):
                # every job would be refused as it already shows: nothing to do
                heapq.heappop(heap)
                result.quiet += 1
                continue
            while True:
                job = source.take()
                if job is None:
                    heapq.heappop(heap)
                    break
                result.examined += 1
                source.examined(job, self._examine(job, now, result))
                if self._stamp != stamp:
                    heapq.heapreplace(heap, (self._queue_key(name), name))
                    break

    def _serve_by_candidate(self, sources: dict[str, "ListSource | WalkSource"], now: float,
                            result: CycleResult) -> None:
        """The cycle's loop when a queue's key depends on its next job (``atoll_queue_order``'s
        ``candidate``): after every job taken from a queue, refused or not, the queue is keyed again
        with its new next job, so the queue with the smallest key *after* its next job is served
        (progressive filling).

        Exact with the pruning: a parked job (its refusal known from its unchanged reads) is still
        taken on its own (``skip``) after its queue was keyed by it. Jobs of a group refused earlier in
        the same state (no admission since) are passed over without keying the queue by each: the key
        depends on the candidate only through its shape, the same for the whole group, and the group's
        first refusal in this state was taken with that key below every other queue's. A queue's
        stored key only changes when its turn ends, and then it is above the key of the queue served
        next, so every other queue's key stays above the group's: the exhaustive engine, keying by
        each of those jobs, would keep serving the queue through them too."""
        heap: list[tuple[tuple, str]] = [(self._queue_key(name, sources[name].peek()), name) for name in sources]
        heapq.heapify(heap)
        rest: list = [None, None]                 # _rest_quiet's memo: (state version, a queue that was not quiet)
        state = self.state
        bounded = self.pipeline.queue_keys_bounded and not self.exhaustive      # the reference keys by every job
        # (queue, stamp, changes) in which the queue keeps its turn without being keyed, for its jobs before ``until``
        # (``_bound_turn``); ``ahead``: how many jobs the next bound looks at, ``again``: no try before that position.
        # Three locals rather than a tuple: compared once or twice per examined job, a tuple was built each time
        through_name: Optional[str] = None
        through_stamp = through_changes = -1
        until = again = 0
        ahead = _AHEAD
        calm, settle_at = 0, self.settle_after  # (_settled says no at once where nothing can settle)
        while heap:
            key, name = heap[0]
            source = sources[name]
            if through_name != name or through_stamp != self._stamp or through_changes != state.changes \
                    or source.position >= until:
                fresh = self._queue_key(name, source.peek())
                if fresh != key:                  # usage or next job changed since pushed: re-queue lazily
                    if (len(heap) > 1 and heap[1][0] < fresh) or (len(heap) > 2 and heap[2][0] < fresh):
                        heapq.heapreplace(heap, (fresh, name))
                        continue
                    heap[0] = (fresh, name)       # still below both children: first, without a heap step
            # every group parked and holding now (engine.core.idle); _quiet_now's first no, checked here first: once
            # per examined job, and a full first cycle's queues mostly have no group counted
            if source.whole and (source.quiet is not None or self._quiet.count.get(name)) \
                    and self._quiet_now(name, source):
                if self._rest_quiet(heap, sources, rest):
                    result.quiet += len(heap)     # each would pass its refusals and change nothing: done
                    heap.clear()
                    break
                if source.fresh and self._served_through(name, heap) and self._quiet.searches_hold(name):
                    heapq.heappop(heap)           # passed whole, as the loop below would, job by job
                    source.done = True
                    result.quiet += 1
                    continue
                if isinstance(source, WalkSource):
                    result.quiet += 1
                    self._pass_quiet(name, source, heap)
                    continue
            if source.skip():                     # a refusal known without the pipeline: next job
                continue
            job = source.take()
            if job is None:
                heapq.heappop(heap)
                source.done = True
                continue
            result.examined += 1
            stamp, changes = self._stamp, state.changes
            source.examined(job, self._examine(job, now, result))
            if stamp != self._stamp or changes != state.changes:
                calm = 0
                continue
            calm += 1                             # refused, nothing changed
            if calm >= settle_at:                 # perhaps nothing left can change anything (engine.core.settle)
                plan, looked = self._settled(heap, sources, now)
                if plan is not None:
                    self._drain(heap, plan, now, result)
                    break
                calm, settle_at = 0, max(2 * settle_at, looked // 2)
                continue
            if bounded:
                position = source.position
                if through_name != name or through_stamp != stamp or through_changes != changes:
                    through_name, through_stamp, through_changes = name, stamp, changes     # a new turn, or a new state
                    until, again, ahead = 0, 0, _AHEAD
                if position >= until and position >= again and not self._key_kept:
                    covered = self._bound_turn(name, source, heap, ahead)
                    if covered is not None:
                        until, ahead = covered, 2 * ahead
                    else:
                        again, ahead = position + ahead, max(_AHEAD, ahead // 2)

    def _bound_turn(self, name: str, source: Source, heap: list[tuple[tuple, str]], ahead: int) -> Optional[int]:
        """Whether the queue at the top of the candidate loop's heap keeps its turn, in the state of the moment,
        through its next ``ahead`` jobs (``Source.most_ahead``; a walk: all its jobs): its key by a candidate
        demanding, per resource, the most any of them demands is below both children's keys. Every order plugin
        that reads the candidate declares ``Plugin.keys_rise_with_demand``, so the key by each of those jobs is at
        most that bound, and the loop, keying the queue by each next job, would find it below the children and
        serve the queue again: it need not key it by them. Returns the ``position`` up to which that holds, or
        None. The bound takes the top's place in the heap: below both children, the heap stays a heap, and the
        loop's next look at the queue's own key compares that with the children as before."""
        if len(heap) == 1:
            return _EVERY
        queue = self.state.queues.get(name)
        if queue is None:
            return None
        most = self._bound_candidate            # a candidate that is only a demand, re-aimed at each bound
        if most is None:
            most = self._bound_candidate = Job(id="", name="", queue=name)
        most.queue = name
        most.demand, until = source.most_ahead(ahead)
        bound = (0, join_keys(self.pipeline.queue_order_positional(queue, self.state, most)), name)
        if heap[1][0] < bound or (len(heap) > 2 and heap[2][0] < bound):
            return None
        heap[0] = (bound, name)
        return until

    def _rest_quiet(self, heap: list[tuple[tuple, str]], sources: dict[str, "ListSource | WalkSource"],
                    memo: list) -> bool:
        """Whether every queue left in the candidate loop's heap is untouched and quiet now, its victim searches
        holding: then none would admit or preempt, so the state stays as it is, each would pass the refusals its
        jobs already show (as a queue passed whole does), and in what order no longer matters. ``memo``: the
        state version and a queue found not so: while that queue is in the heap, it stays not so if it was touched
        (a touched queue stays touched) or if the state did not change, so the heap is not scanned again."""
        version = self._version()
        blocker = memo[1]
        if blocker is not None and not sources[blocker].done and (memo[0] == version or not sources[blocker].fresh):
            return False                  # still in the heap, and a queue once touched stays touched
        memo[0] = version
        for _, name in heap:
            source = sources[name]
            if not (source.fresh and (source.quiet == version or self._quiet_now(name, source, version))
                    and self._quiet.searches_hold(name)):
                memo[1] = name
                return False
        return True

    def _version(self) -> tuple[int, int]:
        """What parked reads are cached on: the state's changes and the victim candidates logged."""
        return self.state.changes, self._preempt.log_end()

    def _quiet_now(self, name: str, source: Source, version: Optional[tuple[int, int]] = None) -> bool:
        """Whether every group of the queue is parked and holds now (engine.core.idle), asked at most once per
        state for a source of the queue's whole backlog. A quiet queue's parked groups hand on their refusal
        without a look at their reads while the state stays the same (``WalkSource.skip``); a fresh one,
        passed whole, changes nothing: each job would get the refusal it already shows. ``version``: the
        state's (``_version``), if at hand."""
        if not source.whole:
            return False
        if source.quiet is None and not self._quiet.count.get(name):
            return False                  # no group of the queue counted: quiet() says no, in any state
        if version is None:
            version = self._version()
        if source.quiet == version:
            return True
        if source.looked == version:
            return False
        source.looked = version
        if self._quiet.quiet(name, len(self._backlog.queues.get(name, ())), version):
            source.quiet = version
            return True
        return False

    def _served_through(self, name: str, heap: list[tuple[tuple, str]]) -> bool:
        """An idle queue at the top of the candidate loop's heap: whether the loop would serve it to its end.
        It would while its key by each next job stays below both children's keys (nothing else changes while
        it passes refusals), and its key depends on the job only through its shape: so when the key by every
        shape among its groups is below them."""
        if len(heap) == 1:
            return True
        bound = heap[1][0] if len(heap) == 2 else min(heap[1][0], heap[2][0])
        cache = self._key_cache(name)
        keys, valid = cache
        edits = self._backlog.shape_edits
        most = keys.get(_MOST)
        if most is not None and most[0] == valid and most[1][0] == edits:
            # the same keys by the same shapes: their most, kept with them (cleared with them) since last asked
            self._key_kept = True           # as the keys asked one by one would all have been
            return bool(most[1][1] < bound)
        jobs = self.state.jobs
        highest: Optional[tuple] = None
        for shape, groups in self._backlog.shapes.get(name, {}).items():
            cached = keys.get(shape)
            key = cached[1] if cached is not None and cached[0] == valid else \
                self._queue_key(name, jobs[_head(next(iter(groups)))[2]], cache)
            if key >= bound:
                return False
            if highest is None or key > highest:
                highest = key
        if highest is not None:
            keys[_MOST] = (valid, (edits, highest))
        return True

    def _pass_quiet(self, name: str, source: WalkSource, heap: list[tuple[tuple, str]]) -> None:
        """The candidate loop's steps through a quiet queue at the top of its heap, without their checks: it
        keys the queue by each next group's shape and hands each group its parked refusal (all hold in this
        state) until the key rises above a child's, or the queue ends. A queue not started yet is gone
        through by its groups' heads in order, without building its walk's heap unless it stops midway."""
        jobs = self.state.jobs
        bound = None if len(heap) == 1 else heap[1][0] if len(heap) == 2 else min(heap[1][0], heap[2][0])
        key = heap[0][0]
        keys: dict[Hashable, tuple] = {}          # by shape: nothing changes while it passes refusals
        cache = self._key_cache(name)

        def step(group: Group, job: Job) -> Optional[bool]:
            """True: pass the group; False: its key ends the queue's turn; None: it does not hold (or was not
            counted): the loop's own checks look at it."""
            nonlocal key
            fresh = keys.get(group.shape)
            if fresh is None:
                fresh = keys[group.shape] = self._queue_key(name, job, cache)
            if fresh != key:
                if bound is not None and bound < fresh:
                    heapq.heapreplace(heap, (fresh, name))
                    return False
                key = fresh
                heap[0] = (fresh, name)
            if source.parked(group, job) is None:
                source.quiet = None               # leave it to the loop's own checks (from this group on)
                return None
            return True

        if source.fresh and source._walk is None:
            groups = sorted(self._backlog.queues.get(name, {}).values(), key=_head)
            limit = source.bound
            for i, group in enumerate(groups):
                assert group.head is not None
                if limit is not None and group.head > limit:
                    break                         # behind the policy's lookback: the walk ends before it
                if not step(group, jobs[group.head[2]]):
                    source.resume(groups[:i], groups[i:])
                    return
            heapq.heappop(heap)                   # the queue is done: every job shows its group's refusal
            source.done = True
            return
        walk, stamp = source.walk, self._stamp
        while True:
            top = walk.peek(stamp)
            if top is None:
                source.take()                     # the queue is done (its walk closes, its parking flushes)
                heapq.heappop(heap)
                source.done = True
                return
            entry, group = top
            if not step(group, jobs[entry[2]]):
                return
            assert group.parked is not None       # step found it holding
            source.fresh = False
            walk.take(stamp)
            walk.examined(entry, group, group.parked[1])

    def _key_cache(self, name: str) -> tuple[dict[Hashable, tuple[Hashable, tuple]], Hashable]:
        """The queue's cached keys (by candidate shape) and what a cached key must have been computed in to be
        current: the engine's stamp (until the next admission or cycle), or, when every order plugin keys queues
        by their line alone (``Plugin.keys_queues_by_line``), the line's usage, the queues and the fleet's
        allocatable, across cycles. Unchanged while nothing is admitted or preempted."""
        keys = self._queue_keys.get(name)
        if keys is None:
            keys = self._queue_keys[name] = {}
        if self.pipeline.queue_keys_by_line and not self.exhaustive:     # the reference engine asks anew
            state = self.state
            state.fleet_allocatable           # recomputed if a cluster changed: allocatable_edits is current
            return keys, (state.queue_edits, state.allocatable_edits, state.line_stamp(name))
        return keys, self._stamp

    def _queue_key(self, name: str, candidate: Optional[Job] = None,
                   cache: Optional[tuple[dict[Hashable, tuple[Hashable, tuple]], Hashable]] = None) -> tuple:
        """The queue's order key by ``candidate`` (its shape); ``cache``: ``_key_cache(name)`` if at hand."""
        shape = None if candidate is None else candidate.shape_key
        keys, valid = cache if cache is not None else self._key_cache(name)
        cached = keys.get(shape)
        if cached is not None and cached[0] == valid:
            self._key_kept = True
            return cached[1]
        self._key_kept = False
        state = self.state
        queue = state.queues.get(name)
        key = join_keys(self.pipeline.queue_order_positional(queue, state, candidate)) if queue else ()
        key = (0 if queue else 1, key, name)    # unknown queues last; name breaks ties deterministically
        keys[shape] = (valid, key)
        return key


_AHEAD = 8
"""How many jobs a queue's first bound looks ahead (``_bound_turn``; doubled while bounds hold)."""
_EVERY = 1 << 62
_MOST = ("most",)
"""Where a queue's key cache keeps the highest of its keys by its job shapes (``_served_through``): no shape key
(a job's ``shape_key``) is this tuple."""


def _head(group: Group) -> Entry:
    assert group.head is not None
    return group.head
