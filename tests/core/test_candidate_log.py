"""engine.core.searchwake.CandidateLog.maybe: the positions a watch or room must look at. For rules with shared
scopes it reads each logged entry once per scope (plus the rules' own queues); it must never leave out an entry
one of the rules opens, however the rules that first read the log for a scope differ in their own queues."""

from __future__ import annotations

from typing import Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.preempt import ANY, PreemptRule
from engine.core.searchwake import CandidateLog, opens, plan

NAMES = [f"q{i}" for i in range(6)]
BOUNDS = st.sampled_from([None, ANY, 0, 1, 2])


@st.composite
def rules(draw: st.DrawFn, shared: dict[int, dict[str, Optional[float]]]) -> PreemptRule:
    scope = draw(st.sampled_from(sorted(shared)))
    own = frozenset(draw(st.lists(st.sampled_from(NAMES), max_size=2)))
    mine = {name: draw(BOUNDS) for name in own}
    bounds = {name: mine[name] if name in own else shared[scope][name] for name in NAMES}
    return PreemptRule("r", "plugin", bounds.get, max_preemptions=draw(st.sampled_from([None, 1, 3])),
                       scope=(scope, own, tuple(sorted(mine.items()))), shared_scope=scope, own_queues=own)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_maybe_leaves_out_no_entry_a_rule_opens(data: st.DataObject) -> None:
    shared = {k: {name: data.draw(BOUNDS) for name in NAMES} for k in range(data.draw(st.integers(1, 3)))}
    log = CandidateLog(lambda job_id: True)
    for _ in range(data.draw(st.integers(1, 8))):
        for _ in range(data.draw(st.integers(0, 6))):
            usage = data.draw(st.integers(0, 5)) == 0          # a queue above its guarantee: rank -inf
            log.add(data.draw(st.sampled_from(NAMES)), -ANY if usage else data.draw(st.integers(0, 2)),
                    data.draw(st.integers(0, 3)), None if usage else f"j{len(log.entries)}")
        asking = data.draw(st.lists(rules(shared), min_size=1, max_size=3))
        since = data.draw(st.integers(0, log.end))
        got = list(log.maybe(plan(asking), since))
        assert got == sorted(set(got)) and all(since <= p < log.end for p in got)
        for position in range(since, log.end):
            queue, rank, preemptions, _ = log.entries[position - log.base]
            if any(opens(rule, queue, rank, preemptions) for rule in asking):
                assert position in got, (position, log.entries[position - log.base])


def test_maybe_reads_an_entry_once_per_shared_scope() -> None:
    """1,000 watches of one shared scope, each with its own queue, 50 new entries: the rules are asked about
    each entry once for the scope (and once more per watch only for entries of its own queue)."""
    asked: list[str] = []

    def bound(name: str) -> Optional[float]:
        asked.append(name)
        return None
    log = CandidateLog(lambda job_id: True)
    for i in range(50):
        log.add(f"q{i % 7}", 0, 0, f"j{i}")
    watches = [PreemptRule("r", "p", bound, scope=i, shared_scope="s", own_queues=frozenset((f"own{i}",)))
               for i in range(1000)]
    assert all(not list(log.maybe(plan([rule]), 0)) for rule in watches)
    assert len(asked) == 50
