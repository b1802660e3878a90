"""``backlog.Entries`` (a group's entries: a plain list while small, a SortedList past ``_SMALL``) answers every
call the engine makes exactly as a SortedList of the same entries does, across the switch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from engine.core import backlog
from engine.core.backlog import Entries

ENTRY = st.builds(lambda p, s: ((p,), s, f"ns/j{s}"), st.integers(0, 3), st.integers(0, 200))
OPS = st.lists(st.tuples(st.sampled_from(("add", "add", "discard")), ENTRY), max_size=3 * backlog._SMALL)


@settings(max_examples=150, deadline=None)
@given(OPS, ENTRY, ENTRY)
def test_entries_answer_as_a_sorted_list(ops: list, since: tuple, upto: tuple) -> None:
    entries, reference = Entries(), SortedList()
    for op, entry in ops:
        if op == "add":
            if entry in reference:
                continue                 # the backlog never adds an entry twice
            entries.add(entry)
            reference.add(entry)
        else:
            entries.discard(entry)
            reference.discard(entry)
        assert len(entries) == len(reference) and bool(entries) == bool(reference)
        assert list(entries) == list(reference)
        if reference:
            assert entries[0] == reference[0] and entries[-1] == reference[-1]
    for probe in (since, upto):
        assert entries.bisect_right(probe) == reference.bisect_right(probe)
    assert list(entries.irange(since, upto)) == list(reference.irange(since, upto))
    assert list(entries.irange(since, None)) == list(reference.irange(since, None))
    assert list(entries.irange(None, upto)) == list(reference.irange(None, upto))


def test_entries_become_a_sorted_list_past_small() -> None:
    entries = Entries()
    for seq in range(backlog._SMALL + 1, 0, -1):          # each insertion at the front: the costly case for a list
        entries.add(((0,), seq, f"ns/j{seq}"))
        assert isinstance(entries._items, list) == (len(entries) <= backlog._SMALL)
    assert [e[1] for e in entries] == list(range(1, backlog._SMALL + 2))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("add", "add", "remove")), st.integers(0, 40), st.integers(0, 2)),
                max_size=120))
def test_a_groups_size_is_its_entries_count(ops: list) -> None:
    """``Group.size`` (read by ``Engine._block`` instead of the cold entries) is ``len(entries)`` after any
    sequence of jobs joining and leaving groups, shared groups and groups of one alike."""
    from engine.core.backlog import Backlog
    from engine.model import Job, Task

    books, jobs = Backlog(), {}
    for op, n, key in ops:
        job_id = f"ns/j{n}"
        if op == "add" and job_id not in books:
            job = jobs[job_id] = Job(id=job_id, name=f"j{n}", namespace="ns", queue="q", submit_time=float(n),
                                     tasks=[Task("w", 1, 1, {"cpu": 1000})])
            job.sort_key, job.seq = (n % 3,), n
            books.add(job, None if key == 0 else key)       # None: a group of its own
        elif op == "remove" and job_id in jobs:
            books.remove(jobs.pop(job_id))
        for groups in books.queues.values():
            for group in groups.values():
                assert group.size == len(group.entries) > 0
    assert sum(g.size for groups in books.queues.values() for g in groups.values()) == len(jobs)
