"""Parked victim searches: a preemptor key whose victim search found no eligible candidate sleeps until
something that search read changes.

``engine.core.wake`` parks refused verdict keys, but a capacity refusal under a preempt stage also says
"and no victim could be found", which depends on the running jobs. This module makes that part a read
too (``("victims", watch)``): ``Preemptions.attempt`` skips a search whose parked one still holds, and the
capacity refusal itself is parked in the walk with that read among its own (``Preemptions.wake_reads``).
A search is *hopeless* when it met no candidate it could take (``VictimSearch.hopeless``). Its
outcome then depends only on:

- the rules the preempt plugins return and what their protections read (``Plugin.verdict_reads`` of the
  preempt-stage plugins: e.g. the preemptor's queue line, its usage, the queues' own fields);
- the candidates: which running jobs sit, with which rank, in the queues a rule opens, and why each one
  was passed over. The engine's own reasons (evicting, the preemptor's own evictor, ``max_preemptions``)
  do not change while a job stays indexed; a plugin's (``allows``, ``atoll_protect``) are covered by its
  declared reads.

Whether evictions under way free enough for the job (``FleetState.freeing``) is read only by a dry run, and a
hopeless search runs none (it chose no victim), so it is not among them.

So a hopeless search stays hopeless until a declared read changes or a job *becomes* a candidate
(``CandidateLog``: every ``RunningIndex`` entry, when it is indexed and again when it settles) of a
queue and rank one of its rules would look at (``victim_queues(queue) > rank``, asked in the state of the
moment). Jobs leaving the index cannot make a hopeless search succeed. Searches whose outcome read more
are never parked (``VictimSearch.volatile``): one that ran a dry run (evictions under way), one cut short
by ``max_candidates``, one that passed a candidate over to keep a guarantee (ancestors' usage), one that
met a ``min_runtime`` protection (it looks again when that ends), one stopped by the cycle's dry-run
budget. ``ParkedSearch.holds`` is exact by construction; tests/core/test_searchwake.py checks that a
parked search wakes whenever a new search would differ, and tests/core/test_pruned_exact.py compares
the whole engine with ``Engine(exhaustive=True)``, which never parks a search.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Callable, Hashable, Iterable, Optional

from engine.core.preempt import PreemptRule
from engine.core.running import ANY

if TYPE_CHECKING:
    from engine.core.searchroom import Room
    from engine.core.wake import Signature

_TRIM = 1 << 16
_USAGE = -ANY
"""The rank of the log's entry for a queue whose usage rose above its guarantee (``Preemptions.usage_changed``)."""


class CandidateLog:
    """(queue, rank, times preempted, job id) of every job as it becomes a victim candidate; (queue, -inf,
    0, None) when a queue's usage rose above its guarantee, which may open its older jobs to a rule."""

    def __init__(self, candidate: Callable[[str], bool], version: Callable[[], int] = lambda: -1) -> None:
        self.entries: list[tuple[str, float, int, Optional[str]]] = []
        self.base = 0                   # absolute position of entries[0]
        self.candidate = candidate      # whether a job id is a candidate now (RunningIndex.candidate)
        self.version = version          # grows whenever a candidate comes or goes (RunningIndex.version)
        # positions whose job is no candidate any more: gone for good (a job indexed again is a new entry). Marked
        # as the job leaves the index (``left``), so that ``maybe`` and ``concerns`` leave them out: a victim chosen
        # in the cycle it was logged in concerned no search asked after (bench churn: half the positions rooms were
        # given, and the only news of 1,761 in 21,654 quiet queues' searches, idle.QueueReads._still)
        self.gone: set[int] = set()
        self._at: dict[str, int] = {}   # job id -> the position it was last logged at
        # positions found still a candidate, and at which version: every watch reading the log asks the same
        self._alive: dict[int, int] = {}
        # per shared scope (``PreemptRule.shared_scope``): how far the log was read for it, and the positions
        # that may open its rules (see ``maybe``); and per queue, the positions logged for it
        self._hits: dict[Hashable, list] = {}
        self._by_queue: dict[str, list[int]] = {}
        # per shared scope, the last position that may open it, in the log as it ends at ``_last_at`` (``untouched``)
        self._last: dict[Hashable, int] = {}
        self._last_of: dict[int, int] = {}      # by a plan's scope keys' number (``untouched``)
        self._last_at = -1

    def still(self, position: int, job_id: str) -> bool:
        """The job logged at ``position`` is still a candidate (asked once per version of the candidates)."""
        if position in self.gone:
            return False
        version = self.version()
        if version >= 0 and self._alive.get(position) == version:
            return True
        if self.candidate(job_id):
            self._alive[position] = version
            return True
        self.gone.add(position)
        self._alive.pop(position, None)
        return False

    def add(self, queue: str, rank: float, preemptions: int = 0, job_id: Optional[str] = None) -> None:
        if len(self.entries) >= _TRIM:  # watches older than this wake (see Watch.holds)
            self.base += len(self.entries)
            self.entries = []
            self.gone.clear()
            self._alive.clear()
            self._hits.clear()
            self._by_queue.clear()
            self._at.clear()
            self._last.clear()
            self._last_of.clear()
            self._last_at = -1
        positions = self._by_queue.get(queue)
        if positions is None:
            positions = self._by_queue[queue] = []
        position = self.base + len(self.entries)
        positions.append(position)
        self.entries.append((queue, rank, preemptions, job_id))
        if job_id is not None:
            self._at[job_id] = position

    def left(self, job_id: str) -> None:
        """``job_id`` is no candidate any more (``RunningIndex.discard``): the position it was last logged at is
        gone. Its earlier positions were marked when it left before (each indexing is logged anew, after it left)."""
        position = self._at.pop(job_id, None)
        if position is not None:
            self.gone.add(position)
            self._alive.pop(position, None)

    def maybe(self, planned: Optional["Plan"], since: int) -> Iterable[int]:
        """The positions from ``since`` on (at least ``base``) whose entry one of the planned rules may open, in
        order, but those gone (their job left the index since: no search meets it through them): every position
        when ``planned`` is None (a rule without a shared scope, or no rules known).
        Otherwise, per rule, the positions whose entry opens its shared scope, or whose queue was own to the
        rule that read the entry for that scope (both asked once per scope, when first needed), and the
        positions of the rule's own queues. The caller asks ``opens`` of each: a position left out opens none
        of the rules.

        Asking once per scope is asking earlier than a watch would: a queue a scope did not open then but does
        now rose above its guarantee since (logged: ``Preemptions.usage_changed``) or was edited (the
        ``("queues",)`` read of the parked search); a queue it opened then but not now is asked again."""
        end = self.end
        if since >= end:
            return ()
        gone = self.gone
        if planned is None:
            return (position for position in range(since, end) if position not in gone)
        found: Optional[set[int]] = None
        by_queue = self._by_queue
        for key, rule, own in planned:
            hits = self._scanned(key, rule, own, end)
            if hits and hits[-1] >= since:
                if found is None:
                    found = set()
                found.update(hits[bisect_left(hits, since):])
            for queue in own:
                positions = by_queue.get(queue)
                if positions and positions[-1] >= since:
                    if found is None:
                        found = set()
                    found.update(positions[bisect_left(positions, since):])
        if found is None:
            return ()
        live = [position for position in found if position not in gone]
        return sorted(live) if len(live) > 1 else live

    def untouched(self, planned: "Plan", since: int, scopes: Optional[int] = None,
                  owns: Optional[frozenset[str]] = None) -> bool:
        """No position from ``since`` on may open one of the planned rules: ``maybe(planned, since)`` finds none,
        gone or not. Asked of ~1,000 quiet queues per churn cycle whose marks the log passed by a position or two
        (engine.core.idle), so while the log ends where it did, the last position found for each shared scope is
        kept, and with ``scopes`` (a number for the plan's scope keys, the same for equal keys and never for
        others: ``idle.QueueReads``) and ``owns`` (its rules' own queues) the last of those scopes too: a queue
        then pays one lookup, a comparison and a look at its own queues' last positions."""
        end = self.end
        if since >= end:
            return True
        if self._last_at != end:
            self._last.clear()
            self._last_of.clear()
            self._last_at = end
        if scopes is not None and owns is not None:
            at = self._last_of.get(scopes)
            if at is None:
                at = self._last_of[scopes] = max((self._last_hit(key, rule, own, end) for key, rule, own in planned),
                                                    default=-1)
            return at < since and not self._logged_since(owns, since)
        return all(self._last_hit(key, rule, own, end) < since and not self._logged_since(own, since)
                   for key, rule, own in planned)

    def _logged_since(self, queues: frozenset[str], since: int) -> bool:
        """A position was logged for one of ``queues`` from ``since`` on."""
        by_queue = self._by_queue
        for queue in queues:
            positions = by_queue.get(queue)
            if positions and positions[-1] >= since:
                return True
        return False

    def _last_hit(self, key: Hashable, rule: PreemptRule, own: frozenset[str], end: int) -> int:
        """The last position that may open the shared scope ``key`` (-1: none), the log read up to ``end``."""
        at = self._last.get(key)
        if at is None:
            hits = self._scanned(key, rule, own, end)
            at = self._last[key] = hits[-1] if hits else -1
        return at

    def concerns(self, planned: Optional["Plan"], since: int) -> bool:
        """Whether ``maybe(planned, since)`` gives any position, without building them (a quiet queue's victim
        searches are asked this at every cycle: ``engine.core.idle``)."""
        end = self.end
        if since >= end:
            return False
        gone = self.gone
        if planned is None:
            return any(position not in gone for position in range(since, end))
        by_queue = self._by_queue
        for key, rule, own in planned:
            if _live_since(self._scanned(key, rule, own, end), since, gone):
                return True
            for queue in own:
                if _live_since(by_queue.get(queue), since, gone):
                    return True
        return False

    def _scanned(self, key: Hashable, rule: PreemptRule, own: frozenset[str], end: int) -> list[int]:
        """The positions whose entry opens the shared scope ``key`` (or whose queue is ``own`` to the rule that
        read it first), the log read up to ``end`` for it."""
        known = self._hits.get(key)
        if known is None:
            known = self._hits[key] = [self.base, []]
        upto, hits = known
        if upto < end:
            entries, base = self.entries, self.base
            for i in range(upto - base, len(entries)):
                queue, rank, preemptions, _ = entries[i]
                if queue in own or opens(rule, queue, rank, preemptions):
                    hits.append(base + i)
            known[0] = end
        return hits

    @property
    def end(self) -> int:
        return self.base + len(self.entries)


def _live_since(positions: Optional[list[int]], since: int, gone: set[int]) -> bool:
    """Some of the sorted ``positions`` from ``since`` on is not gone (looked at from the last: new ones are few)."""
    if not positions:
        return False
    for i in range(len(positions) - 1, -1, -1):
        position = positions[i]
        if position < since:
            return False
        if position not in gone:
            return True
    return False


Plan = tuple[tuple[Hashable, PreemptRule, frozenset[str]], ...]
"""Per rule: its shared scope's key in the log, the rule, its own queues (``CandidateLog.maybe``)."""


def plan(rules: Optional[list[PreemptRule]]) -> Optional[Plan]:
    """What ``CandidateLog.maybe`` needs of ``rules``: None when a rule has no shared scope (or none are known)."""
    if rules is None or any(rule.shared_scope is None for rule in rules):
        return None
    return tuple(((rule.plugin, rule.shared_scope, rule.max_preemptions), rule, rule.own_queues) for rule in rules)


class Watch:
    """What a hopeless search waits for: a candidate one of its rules (None: any rule) would look at, from
    log position ``seen`` on. Searches whose rules have equal scopes (``PreemptRule.scope``) share one."""

    __slots__ = ("log", "rules", "seen", "awake", "plan")

    def __init__(self, log: CandidateLog, rules: Optional[list[PreemptRule]], seen: int) -> None:
        self.log = log
        self.rules = rules
        self.seen = seen
        self.awake = False
        self.plan = plan(rules)

    def holds(self) -> bool:
        """No job that one of its rules would look at became a candidate since it was parked and still is
        one (a job that left again, e.g. evicted by an earlier preemptor, changed nothing: jobs leaving
        cannot make a hopeless search succeed)."""
        if self.awake:
            return False
        log = self.log
        if self.seen < log.base:
            self.awake = True
            return False
        rules, still, entries, base = self.rules, log.still, log.entries, log.base
        for position in log.maybe(self.plan, self.seen):
            queue, rank, preemptions, job_id = entries[position - base]
            if job_id is not None and not still(position, job_id):
                continue
            if rules is None or any(opens(rule, queue, rank, preemptions) for rule in rules):
                self.awake = True
                return False
        self.seen = log.end
        return True


class ParkedSearch:
    """A parked search: its watch and the signature of its wake reads (engine.core.wake: the preempt
    plugins' declared reads and evictions under way); for one that met candidates, the room it lacked."""

    __slots__ = ("watch", "reads", "room")

    def __init__(self, watch: Watch, reads: "Signature", room: Optional["Room"] = None) -> None:
        self.watch = watch
        self.reads = reads
        self.room = room        # a search that met candidates: the room it lacked (engine.core.searchroom)

    def holds(self) -> bool:
        # a room follows the candidate log itself (engine.core.searchroom.Room.holds)
        return self.room.holds() if self.room is not None else self.watch.holds()


def opens(rule: PreemptRule, queue: str, rank: float, preemptions: int) -> bool:
    """A job of ``queue`` and ``rank``, preempted ``preemptions`` times, is a candidate ``rule`` may take
    (the engine's protection by count is the only one known without the job: it cannot change while the
    job stays indexed)."""
    if rule.max_preemptions is not None and preemptions >= rule.max_preemptions:
        return False
    if rank == _USAGE and not rule.reads_usage:
        return False                # a queue rose above its guarantee: nothing new to a rule reading no usage
    bound = rule.victim_queues(queue)
    return bound is not None and rank < bound


def scopes(rules: list[PreemptRule]) -> Optional[Hashable]:
    """What makes ``rules`` open the same queues to the same ranks as other rules in every state (their
    plugins' ``scope``s and the engine's count protection), None when a rule declares no scope."""
    if any(rule.scope is None for rule in rules):
        return None
    return tuple((rule.plugin, rule.scope, rule.max_preemptions) for rule in rules)
