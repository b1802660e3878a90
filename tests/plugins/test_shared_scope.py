"""The preempt plugins keep the promise of ``PreemptRule.shared_scope``: two rules of one plugin with equal
shared scopes open every queue outside both rules' ``own_queues`` alike, in any state (queue trees, priorities,
guarantees, usage, reclaimable). Victim searches share what they learn of those queues on that promise
(engine.core.running.Standing.base, engine.core.searchwake.CandidateLog.maybe)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.preempt import PreemptRule
from engine.core.state import FleetState
from engine.model import Job, Queue, Task
from engine.resources import CPU
from plugins.priority_preemption import PriorityPreemption
from plugins.reclaim import Reclaim

NAMES = [f"q{i}" for i in range(7)]


@st.composite
def states(draw: st.DrawFn) -> FleetState:
    state = FleetState()
    for i, name in enumerate(NAMES):
        parent = draw(st.sampled_from([""] + NAMES[:i]))          # a forest: parents come first
        guarantee = {CPU: draw(st.integers(1, 4)) * 1000} if draw(st.booleans()) else {}
        queue = Queue(name=name, parent=parent, priority=draw(st.sampled_from((0, 5, 10))), guarantee=guarantee,
                      reclaimable=draw(st.booleans()))
        state.upsert_queue(queue)
        state.queues[name].allocated = {CPU: draw(st.integers(0, 6)) * 1000}
    return state


def _rules(state: FleetState, plugins: list[Any], queue: str, priority: int, cpu: int) -> list[PreemptRule]:
    job = Job(id=f"ns/{queue}-{priority}-{cpu}", name="j", queue=queue, priority=priority,
              tasks=[Task("t", 1, 1, {CPU: cpu})])
    out = []
    for plugin in plugins:
        rule = plugin.atoll_preempt_rule(job=job, state=state, now=0.0)
        if rule is not None:
            out.append(rule)
    return out


@settings(max_examples=300, deadline=None)
@given(states(), st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 3), st.sampled_from((1000, 3000))),
                          min_size=2, max_size=8), st.sampled_from(("none", "queuePriority", "queueThenJob")),
       st.sampled_from(("any", "lower")))
def test_rules_of_equal_shared_scopes_open_the_other_queues_alike(state: FleetState, jobs: list[tuple],
                                                                  across: str, victims: str) -> None:
    plugins = [PriorityPreemption({"acrossQueues": across}, None), Reclaim({"victimPriority": victims}, None)]
    rules = [rule for spec in jobs for rule in _rules(state, plugins, *spec)]
    shared = [rule for rule in rules if rule.shared_scope is not None]
    assert shared or not rules
    for one in shared:
        for other in shared:
            if (one.plugin, one.shared_scope) != (other.plugin, other.shared_scope):
                continue
            for name in [*NAMES, "gone"]:
                if name not in one.own_queues and name not in other.own_queues:
                    assert one.victim_queues(name) == other.victim_queues(name), (name, one.scope, other.scope)


@settings(max_examples=200, deadline=None)
@given(states(), st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 3), st.sampled_from(NAMES),
                                    st.sampled_from((0, 5, 10))), min_size=1, max_size=12),
       st.sampled_from(("none", "queuePriority", "queueThenJob")))
def test_a_kept_priority_rule_answers_as_a_fresh_one(state: FleetState, steps: list[tuple], across: str) -> None:
    """priority-preemption keeps its rule per scope (built once for the 15,000 searches of a saturated start): a
    rule it hands out again answers as one built anew in the state of the moment, queue priorities edited between
    the asks (its own queue's moves it to another scope; the others it reads live)."""
    kept = PriorityPreemption({"acrossQueues": across}, None)
    for queue, priority, edited, level in steps:
        state.queues[edited].priority = level
        rule = _rules(state, [kept], queue, priority, 1000)
        fresh = _rules(state, [PriorityPreemption({"acrossQueues": across}, None)], queue, priority, 1000)
        assert [(r.scope, r.shared_scope, r.own_queues) for r in rule] == \
               [(r.scope, r.shared_scope, r.own_queues) for r in fresh]
        for one, other in zip(rule, fresh):
            assert [one.victim_queues(name) for name in NAMES] == [other.victim_queues(name) for name in NAMES]
    other_state = FleetState()
    for queue in state.queues.values():
        other_state.upsert_queue(queue)
    (job_queue, priority, _, _) = steps[0]
    # a state of its own (another queues dict): its rules read that one
    assert all(a is not b for a, b in zip(_rules(other_state, [kept], job_queue, priority, 1000),
                                          _rules(state, [kept], job_queue, priority, 1000)))


@settings(max_examples=200, deadline=None)
@given(states(), st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 3), st.sampled_from((1000, 3000))),
                          min_size=1, max_size=6), st.sampled_from(("none", "queuePriority", "queueThenJob")),
       st.lists(st.integers(0, 6), min_size=len(NAMES), max_size=len(NAMES)))
def test_a_rule_that_reads_no_usage_opens_the_same_queues_whatever_the_usage(
        state: FleetState, jobs: list[tuple], across: str, usage: list[int]) -> None:
    """``PreemptRule.reads_usage=False`` (priority-preemption): which queues the rule opens, and to which rank, does
    not move when queues' usage moves above or below their guarantees; its parked searches sleep through a queue
    rising above its guarantee on that promise (engine.core.searchwake.opens). Reclaim's rules read usage."""
    plugins = [PriorityPreemption({"acrossQueues": across}, None), Reclaim({}, None)]
    rules = [rule for spec in jobs for rule in _rules(state, plugins, *spec)]
    assert all(rule.reads_usage == (rule.plugin != "priority-preemption") for rule in rules)
    blind = [rule for rule in rules if not rule.reads_usage]
    before = [[rule.victim_queues(name) for name in NAMES] for rule in blind]
    for name, cpu in zip(NAMES, usage):
        state.queues[name].allocated = {CPU: cpu * 1000}
    assert [[rule.victim_queues(name) for name in NAMES] for rule in blind] == before
