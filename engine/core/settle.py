"""The settled rest of a cycle (a mixin of ``Engine``: same state, own idea): once no job left can change the state,
the candidate loop stops keying queues and refuses what is left, queue by queue.

In a large first cycle the fleet fills early. In ``atoll bench`` 100,000 / 1,000 / 100 the last admission is the
~5,950th examination of 100,000; the ~94,000 after it change nothing, yet the candidate loop (engine.core.turns)
keyed a queue again after each of them (``atoll_queue_order`` by candidate, heap steps, turn bounds): ~37 % of
that cycle.

After a run of examinations that changed nothing (no admission, no preemption issued, ``FleetState.changes``
unmoved), the loop asks ``_settled``: is every job left in every queue still in its heap refused in the state of
the moment, with nothing changed by its examination? A job is, when

- it backs off (``not_before``: the engine's own refusal), or
- its admit answer is shared (engine.core.admitshare: its queue is alike and it has a shared key) and is a
  refusal, and the preemption attempt that follows a capacity refusal cannot act: nobody to evict or the
  cycle's dry-run budget spent (``Preemptions.idle``), or its preempt key already found hopeless this cycle.

A nominated job, a job whose answer is not shared, or one the admit stage would let through, stops the check.
When every job passes, no examination left changes the state, so each job's refusal depends on itself and the
state only and the order of the examinations no longer matters (as ``QueueTurns._rest_quiet`` concludes for
quiet queues). Each queue is then drained in its own order, without keying a queue again: a source that keeps
no memo (most jobs with a key of their own) hands each job the answer found for it through the end of
``Engine._examine`` (``_refused``: the preemption attempt, a no-op here, and the refusal recorded); any other
goes through the loop's own ``take``, ``_examine`` and ``examined``. The same refusals, reasons, parking and
counts as the loop (``CycleResult.settled`` says how many of the examined were so).

The check is O(jobs left), a few dict lookups each, against examinations that cost ~20 times that. One that
fails stops at the first job it cannot settle; the next waits for a run of quiet examinations twice as long, and
at least half as long as the jobs the failed check looked at, so checks cost a bounded fraction of the
examinations between them. Never in the exhaustive engine: it is the reference the tests compare with.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional, cast

from engine.core.admitshare import SharedAdmits
from engine.core.nomination import Preemptions
from engine.core.sources import ListSource, WalkSource
from engine.core.state import FleetState
from engine.model import CycleResult, Job, Refusal
from engine.pipeline import Pipeline

_MISS = object()

SETTLE_AFTER = 128
"""Quiet examinations in a row before the first ``_settled`` check of a cycle."""


Plan = list[tuple["ListSource | WalkSource", Optional[list[tuple[Job, Optional[Refusal]]]]]]
"""What ``_settled`` found, per source left: for a source whose jobs are taken one by one without a known refusal
(a ListSource keeping no memo), each job with its shared admit answer (None: it backs off); else None
(its jobs go through ``take``, ``_examine`` and ``examined`` as in the loop)."""


class Settling:
    settle_after = SETTLE_AFTER         # (tests set it lower, so that the checks run on small scenarios)
    pipeline: Pipeline
    state: FleetState
    exhaustive: bool
    _sharing: bool
    _stamp: int
    _admits: SharedAdmits
    _preempt: Preemptions
    _examine: Callable[[Job, float, CycleResult], Optional[Refusal]]
    _refused: Callable[[Job, Refusal, float, CycleResult], Optional[Refusal]]

    def _settled(self, heap: list[tuple[tuple, str]], sources: dict[str, "ListSource | WalkSource"],
                 now: float) -> tuple[Optional[Plan], int]:
        """Whether every job left in the queues of ``heap`` would be refused now with nothing changed (see the
        module): the plan for ``_drain``, or None; and how many jobs the check looked at."""
        if self.exhaustive or not self._sharing:    # the reference; or no answer is shared: none would settle
            return None, 0
        admits, stamp = self._admits, self._stamp
        preempt = self.pipeline.has_preempt and not self._preempt.idle
        hopeless = self._preempt.hopeless
        looked = 0
        plan: Plan = []
        for _, name in heap:
            source = sources[name]
            pairs: Optional[list[tuple[Job, Optional[Refusal]]]] = \
                [] if isinstance(source, ListSource) and not source.keyed else None
            if not admits.alike(name):    # (so the queue exists: its jobs are not refused for want of it)
                return None, looked
            answers = admits.answers(stamp)
            for job in _left(source):
                looked += 1
                if job.not_before > now:
                    if pairs is not None:
                        pairs.append((job, None))
                    continue
                key = job.admit_key
                if key is None or job.nominated is not None:
                    return None, looked
                known = answers.get(key, _MISS)
                if known is not _MISS:
                    refusal = cast(Optional[Refusal], known)
                else:
                    try:                  # (kept in ``answers``: the state does not move here)
                        refusal = admits.admit(job, key, stamp)
                    except Exception:     # a plugin's bug: the examination contains it (engine.core.contain)
                        return None, looked
                if refusal is None or preempt and refusal.capacity and not hopeless(job):
                    return None, looked
                if pairs is not None:
                    pairs.append((job, refusal))
            plan.append((source, pairs))
        return plan, looked

    def _drain(self, heap: list[tuple[tuple, str]], plan: Plan, now: float, result: CycleResult) -> None:
        """Examine every job left, queue by queue, as the candidate loop would but without keying the queues:
        ``_settled`` found that none of these examinations changes the state."""
        for source, pairs in plan:
            if pairs is not None:
                assert isinstance(source, ListSource)
                refused = self._refused
                for job, refusal in pairs:
                    if refusal is None:
                        self._examine(job, now, result)     # it backs off
                    else:
                        refused(job, refusal, now, result)
                source.passed(len(pairs))
                result.examined += len(pairs)
                result.settled += len(pairs)
            else:
                while True:
                    taken = source.take()
                    if taken is None:
                        break
                    result.examined += 1
                    result.settled += 1
                    source.examined(taken, self._examine(taken, now, result))
            source.done = True
        heap.clear()


def _left(source: "ListSource | WalkSource") -> Iterator[Job]:
    """The jobs ``source`` has not handed out yet (a walk's: those of its groups not refused in this state)."""
    if isinstance(source, ListSource):
        jobs = source.jobs
        for at in range(source.position, len(jobs)):
            yield jobs[at]
        return
    yield from source.left()
