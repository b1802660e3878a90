"""Quiet queues: a queue whose groups are all parked, and all still hold, is passed without a look at each group.

A parked group (``Group.parked``, engine.core.wake) keeps its refusal while every read of its signature has the
value it had when the group was parked, and the walk checks that when it reaches the group (``Reads.holds``).
In a saturated fleet almost every group is parked: at 100,000 pending jobs in 15,000 groups, a churn cycle
examined 15 jobs per finish but visited all 15,000 groups, and the visits were the cycle.

``QueueReads`` keeps, per queue, the reads of its parked groups with the values they were parked with, counted:
the queue's groups share most of them (its line, its usage, the fleet-level reads of a handful of shapes). When
the cycle's loop reaches a queue whose groups are all parked (``Engine._quiet_now``), it compares each distinct
read once, in the state of that moment, exactly when the walk would have compared each group's: if every one has
a single parked value, equal to its value now, every group of the queue holds now (``quiet``). Victim-search
reads (``("victims", ...)``) are stateful -- a search looked at earlier may wake for a candidate that a later
look would find gone -- so they are asked only when a group is passed (``holds``, or ``searches_hold`` for a
queue passed whole), as the walk asks them. A group counts only while each of its jobs shows its parked
refusal: a job joining it, or a reason written to it, takes it out (``remove``) until it is parked again.
The reads of a queue's own line (``("line", q)``, ``("usage", q)``) are compared per queue; its other reads (the
fleet-level reads of its shapes) form one interned set, shared by most queues, whose answer is kept per state.
How the loops use it: engine.core.turns.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Hashable, Optional

from engine.core.backlog import Group
from engine.core import preempt
from engine.core.preempt import PreemptRule
from engine.core.searchroom import Room
from engine.core.searchwake import CandidateLog, Plan, opens
from engine.core.state import FleetState
from engine.core.wake import Reads


_GROWN_MAX = 256
"""Above this many clusters grown since a queue's victim searches last held, they are asked again."""

_Searched = tuple[int, int, Optional[int], frozenset[str]]
"""When a queue's victim searches last all held: log end, ``FleetState.grown_end``, candidates removed (None when
no departure can change what one of its rooms answers, ``_departures_matter``), and the clusters its rooms look at
(``QueueReads.searches_hold``)."""

_Plans = tuple[Optional[Plan], Optional[tuple[PreemptRule, ...]], Optional[int], Optional[frozenset[str]]]
"""A queue's victim searches' plans merged, their rules, and the plan's scope keys' number and own queues
(``QueueReads._plans_of``)."""

_Split = tuple[tuple[tuple[Hashable, Hashable], ...], frozenset, bool]
"""A queue's plain reads for ``QueueReads.quiet``: its own line's pairs, the others interned, own reads line-only."""


class QueueReads:
    """Per queue: read -> parked value -> how many of its parked groups saw it; and how many groups count."""

    def __init__(self, state: FleetState, reads: Reads, log: Optional[CandidateLog] = None,
                 removed: Callable[[], int] = lambda: 0) -> None:
        self.state = state
        self.reads = reads
        self.log = log                  # the victim candidates logged (engine.core.searchwake)
        self.removed = removed          # how many candidates ever left the index (RunningIndex.removed)
        # queue -> read -> value -> groups: the plain reads, and the victim searches' (``("victims", ...)``,
        # stateful: looked at after every plain read holds, so never where the walk would not have looked)
        self._plain: dict[str, dict[Hashable, dict[Hashable, int]]] = {}
        self._searches: dict[str, dict[Hashable, dict[Hashable, int]]] = {}
        self.count: dict[str, int] = {}
        # queue -> its plain reads split for ``quiet``: (its own line's (read, value) pairs, the other reads'
        # pairs as one interned frozenset, whether the own reads all read the queue line only, ``_LINE_READS``),
        # None when a read has several parked values; dropped on a change
        self._split: dict[str, Optional[_Split]] = {}
        self._interned: dict[frozenset, frozenset] = {}
        # the shared part's answer, per interned frozenset, in the state ``_held_in``: most queues share it
        # (the same few shapes' fleet-level reads), so it is compared once per state, not once per queue
        self._held: dict[frozenset, bool] = {}
        self._held_in: Hashable = None
        # queue whose own reads read the line only -> the (queue edits, line stamp) at which they last held: the
        # same stamp, the same values (dropped with ``_split``)
        self._own_held: dict[str, tuple[int, int]] = {}
        # queue -> when its victim searches last all held (``_Searched``); and its searches' plans merged, with
        # their rules, one per scope (``searches_hold``; both dropped with ``_split``)
        self._searched: dict[str, _Searched] = {}
        self._plans: dict[str, _Plans] = {}
        # each merged plan's scope keys, numbered (``CandidateLog.untouched``: equal keys, one number; a number
        # is never given to other keys, even once the table was dropped)
        self._scopes: dict[tuple, int] = {}
        self._numbers = itertools.count()

    def add(self, group: Group) -> None:
        """Count a parked group whose jobs all show its parked refusal (else leave it to the walk)."""
        parked = group.parked
        if group.counted is not None or parked is None or not group.shared:
            return
        text = parked[1].reason
        if group.reason != text:
            # None: its jobs' reasons were set range by range (Engine._block_range); see, once per parking,
            # whether they all show it by now
            jobs = self.state.jobs
            if group.reason is not None or any(jobs[e[2]].pending_reason != text for e in group.entries):
                return
            group.reason = text
        group.counted = parked[0]
        group.searches = tuple(pair for pair in parked[0] if _searching(pair[0]))
        queue = group.queue
        self._drop_split(queue)
        plain, searches = self._plain.setdefault(queue, {}), self._searches.setdefault(queue, {})
        for read, value in parked[0]:
            of = searches if _searching(read) else plain
            values = of.get(read)
            if values is None:
                of[read] = {value: 1}
            else:
                values[value] = values.get(value, 0) + 1
        self.count[queue] = self.count.get(queue, 0) + 1

    def remove(self, group: Group) -> None:
        signature = group.counted
        if signature is None:
            return
        group.counted = None
        queue = group.queue
        self._drop_split(queue)
        left = self.count[queue] - 1
        if not left:
            del self.count[queue], self._plain[queue], self._searches[queue]
            return
        self.count[queue] = left
        plain, searches = self._plain[queue], self._searches[queue]
        for read, value in signature:
            of = searches if _searching(read) else plain
            values = of[read]
            n = values[value] - 1
            if n:
                values[value] = n
            else:
                del values[value]
                if not values:
                    del of[read]

    def clear(self) -> None:
        self._plain.clear()
        self._searches.clear()
        self.count.clear()
        self._split.clear()
        self._interned.clear()
        self._held.clear()
        self._own_held.clear()
        self._searched.clear()
        self._plans.clear()

    def _drop_split(self, queue: str) -> None:
        self._split.pop(queue, None)
        self._own_held.pop(queue, None)
        self._searched.pop(queue, None)
        self._plans.pop(queue, None)

    def quiet(self, queue: str, groups: int, version: Hashable = None) -> bool:
        """Whether all ``groups`` groups of ``queue`` are counted and their plain reads hold now. Their victim
        searches (stateful: a search looked at earlier can wake for a candidate that a later look would find
        gone) are asked when each group is passed, as the walk would: ``searches_hold``, ``holds``. ``version``:
        the state's, if at hand (``Reads.seen`` once current)."""
        if not groups or self.count.get(queue, 0) != groups:
            return False
        if queue in self._split:
            split = self._split[queue]
        else:
            split = self._split[queue] = self._split_reads(queue)
        if split is None:
            return False                    # groups parked with different values of a read: one differs now
        own, shared, by_line = split
        state = self.state
        if own:
            # own line reads are functions of the queue edits and the line's usage stamp: unchanged since they
            # last held, they hold (``by_line``); else compare them, and remember when they held
            stamp = (state.queue_edits, state.line_stamp(queue)) if by_line else None
            if stamp is None or self._own_held.get(queue) != stamp:
                if not self._all_hold(own):
                    return False
                if stamp is not None:
                    self._own_held[queue] = stamp
        if version is None or version != self.reads.seen:
            self.reads.current()            # the version of this state (own reads may not have asked)
            version = self.reads.seen
        if version != self._held_in:
            self._held_in = version
            self._held.clear()
        held = self._held.get(shared)
        if held is None:
            held = self._held[shared] = self._all_hold(shared)
        return held

    def _split_reads(self, queue: str) -> Optional[_Split]:
        """The queue's plain reads as (read, value) pairs: those of its own line apart, the others interned."""
        own: list[tuple[Hashable, Hashable]] = []
        shared: list[tuple[Hashable, Hashable]] = []
        for read, values in self._plain[queue].items():
            if len(values) != 1:
                return None
            pair = (read, next(iter(values)))
            (own if _own(read, queue) else shared).append(pair)
        if len(self._interned) > 4096:
            self._interned.clear()
            self._split.clear()
            self._held.clear()
            self._own_held.clear()
        key = frozenset(shared)
        return tuple(own), self._interned.setdefault(key, key), all(_line_read(read) for read, _ in own)

    def searches_hold(self, queue: str) -> bool:
        """Every counted group's victim search still holds (for a queue passed whole, now).

        Once they all held, they hold again without being asked while (``_still``) no candidate was logged since
        that one of their rules opens now (``CandidateLog.maybe`` of their plans merged, then ``opens``; a position
        whose job left since is gone) and, for a queue with rooms (engine.core.searchroom), no change may have
        raised free capacity or excess on a cluster where their candidates free something (``FleetState.grown``: a
        booking that only takes does not) and, if a departure can change what a room answers
        (``_departures_matter``), none left the index. A watch would then meet no new position it opens, and a
        room would absorb none, count as many, and find each cluster it looks at as short as when it last
        looked (free and excess the same or lower, amount by amount). Skipped asks change nothing later answers
        depend on: a watch or room asked again later starts from where it last looked, and what lies between
        was of no concern to it."""
        searches = self._searches[queue]
        if not searches:
            return True
        at = self._searched.get(queue)
        if at is not None and self._still(queue, at):
            return True
        if not self._same(searches):
            return False
        log = self.log
        if log is not None:
            removed = self.removed() if _departures_matter(searches) else None
            self._searched[queue] = (log.end, self.state.grown_end, removed, _freeing(searches))
        return True

    def _still(self, queue: str, at: _Searched) -> bool:
        """Nothing happened since ``at`` that one of the queue's victim searches could wake for (see
        ``searches_hold``)."""
        end, grown, removed, clusters = at
        log = self.log
        assert log is not None
        plans = self._plans.get(queue)
        if plans is None:
            plans = self._plans[queue] = self._plans_of(queue)
        planned, rules, scopes, owns = plans
        if clusters:
            since = self.state.grown_since(grown, _GROWN_MAX)
            if since is None or not clusters.isdisjoint(since):
                return False
        if removed is not None and self.removed() != removed:
            return False
        if log.end == end:
            return True
        if end < log.base:
            return False
        if rules is None:
            if log.concerns(planned, end):
                return False
        elif planned is None or not log.untouched(planned, end, scopes, owns):
            # the positions the plans may open, asked of the rules as a watch or room would
            entries, base = log.entries, log.base
            for position in log.maybe(planned, end):
                queue_of, rank, preemptions, _ = entries[position - base]
                for rule in rules:
                    if opens(rule, queue_of, rank, preemptions):
                        return False
        # None of the positions since concerns them, and none will (a position gone stays gone; a queue a rule
        # opens only later rises above its guarantee first, which is logged; an edited queue unparks its groups):
        # the log is taken as read up to here, so the next ask looks only at what is logged after
        self._searched[queue] = (log.end, grown, removed, clusters)
        return True

    def _plans_of(self, queue: str) -> "_Plans":
        """The queue's victim searches' plans merged and their rules (``_merged``), with the number of the plan's
        scope keys and the union of its rules' own queues (``CandidateLog.untouched``)."""
        planned, rules = _merged(self._searches[queue])
        if planned is None:
            return planned, rules, None, None
        scopes = tuple(entry[0] for entry in planned)
        number = self._scopes.get(scopes)
        if number is None:
            if len(self._scopes) > 4096:
                self._scopes.clear()
            number = self._scopes[scopes] = next(self._numbers)
        return planned, rules, number, frozenset().union(*(entry[2] for entry in planned))

    def holds(self, group: Group) -> bool:
        """A counted group's victim searches still hold (its plain reads do: its queue is quiet)."""
        return self._all_hold(group.searches)

    def _all_hold(self, pairs: Any) -> bool:
        """Every (read, value) pair has that value now (values cached per state, engine.core.wake)."""
        value, known = self.reads.value, self.reads.current()
        for read, seen in pairs:
            if (known[read] if read in known else value(read)) != seen:
                return False
        return True

    def _same(self, of: dict[Hashable, dict[Hashable, int]]) -> bool:
        value, known = self.reads.value, self.reads.current()
        for read, values in of.items():
            if len(values) != 1:
                return False                # groups parked with different values: at most one holds now
            for seen in values:
                if (known[read] if read in known else value(read)) != seen:
                    return False
        return True


_LINE_READS = frozenset(("line", "usage", "allocated"))
"""Reads of a queue line whose values change only with ``FleetState.queue_edits`` and ``line_stamp`` (engine.core.wake)."""


def _line_read(read: Any) -> bool:
    return bool(read[0] in _LINE_READS)


def _own(read: Any, queue: str) -> bool:
    """A read of the queue's own line (``("line", queue)``, ``("usage", queue)``, ...)."""
    return len(read) > 1 and read[1] == queue


def _merged(searches: dict[Any, Any]) -> tuple[Optional[Plan], Optional[tuple[PreemptRule, ...]]]:
    """The plans of a queue's victim-search reads merged (None when one has none: it may look at every
    candidate), and their rules, one per scope (rules of one plugin with equal scopes open the same queues to the
    same ranks in every state, ``PreemptRule.scope``; None when a watch does not know its rules)."""
    merged: dict[Hashable, Any] = {}
    rules: Optional[dict[Hashable, PreemptRule]] = {}
    planned = True
    for read in searches:
        search = read[1]
        if search.plan is None:
            planned = False
        elif planned:
            for entry in search.plan:
                merged.setdefault((entry[0], entry[2]), entry)
        known = [seen.rule for seen in search.rules] if isinstance(search, Room) else search.rules
        if known is None:
            rules = None
        elif rules is not None:
            for rule in known:
                key = (rule.plugin, rule.scope, rule.max_preemptions, rule.reads_usage) \
                    if rule.scope is not None else id(rule)
                rules.setdefault(key, rule)
    return (tuple(merged.values()) if planned else None), (tuple(rules.values()) if rules is not None else None)


def _departures_matter(searches: dict[Any, Any]) -> bool:
    """Whether a candidate leaving the index can make one of these rooms wake (engine.core.searchroom): one that
    counts its candidates (not kept to one cluster: how many it chose decides), or one whose rule chose more than
    ``FLEET_WIDE_MAX`` (fewer left, the excess counts from then on). Otherwise a departure only takes from what a
    room's candidates free: it can but find each cluster shorter. (A count only falls: a rule at or below the
    bound stays there.)"""
    return any(isinstance(read[1], Room) and
               (not read[1].one_cluster or any(seen.met > preempt.FLEET_WIDE_MAX for seen in read[1].rules))
               for read in searches)


def _freeing(searches: dict[Any, Any]) -> frozenset[str]:
    """The clusters where the candidates of a queue's rooms free something: the only ones they look at."""
    return frozenset(cluster for read in searches if isinstance(read[1], Room)
                     for seen in read[1].rules for cluster in seen.freed)


def _searching(read: Any) -> bool:
    """A victim search's read (``("victims", watch or room)``, engine.core.searchwake)."""
    return bool(read[0] == "victims")
