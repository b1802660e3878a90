"""What ``Engine.cycle`` takes a queue's jobs from: a source per queue in the candidate loop (engine.core.turns).

- ``WalkSource``: a queue's whole backlog (a full cycle), walked by verdict key (``engine.core.backlog.QueueWalk``):
  a group refused once in a state hands its refusal on to its other jobs without the pipeline.
- ``ListSource``: candidates one by one (new, changed or timed-out jobs of an incremental cycle; every job when the
  engine is exhaustive); a job whose group was refused earlier in the same state gets that refusal without the
  pipeline. It can look ahead (``position``, ``most_ahead``) for a queue's bound (``QueueTurns._bound_turn``).
- ``Parking``: the refusals a source gave, parked (engine.core.wake) when its queue is done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Hashable, Iterable, Iterator, Optional, Protocol

from engine.core.backlog import Entry, Group, QueueWalk, at_least
from engine.model import Job, Refusal
from engine.resources import Resources

if TYPE_CHECKING:
    from engine.core.scheduler import Engine


class Parking:
    """Refusals of a queue's source this cycle, parked (engine.core.wake) when the source is done: only those
    given in the state the queue ends in, so the reads are taken once per queue, not after every admission."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self.refused: dict[int, tuple[Group, Job, Optional[Refusal], int, bool]] = {}

    def note(self, group: Group, job: Job, shared: Optional[Refusal]) -> None:
        """Right after ``job`` was examined: ``shared`` is the admit stage's own refusal when it is the one the
        examination gave (``Engine._admit_refusal``; the engine's and the place stage's are other objects)."""
        engine = self.engine
        admit = shared is not None and shared is engine._admit_refusal
        self.refused[id(group)] = (group, job, shared, engine.state.changes, admit)

    def flush(self) -> None:
        engine, refused, self.refused = self.engine, self.refused, {}
        changes = engine.state.changes
        for group, job, shared, stamp, admit in refused.values():
            engine._park(group, job, shared if stamp == changes else None, admit)


class Source(Protocol):
    whole: bool                         # the queue's whole backlog (a full cycle's source)
    fresh: bool                         # nothing taken yet
    done: bool                          # its queue left the candidate loop's heap (Engine._rest_quiet)
    quiet: Hashable                     # the state in which every group of the queue holds (Engine._quiet_now)
    looked: Hashable                    # the state in which that was last asked

    @property
    def position(self) -> int:
        """How many jobs it handed out (``most_ahead`` tells up to which position it covers them)."""

    def take(self) -> Optional[Job]: ...

    def most_ahead(self, count: int) -> tuple[Resources, int]:
        """Per resource, the most demanded by the next ``count`` jobs (at least), and the ``position`` up to
        which that covers every job it hands out."""

    def examined(self, job: Job, refusal: Optional[Refusal]) -> None: ...


# -- what Engine.cycle takes jobs from, per queue ------------------------------------------------------
class WalkSource:
    """A queue's whole backlog, walked by verdict key (see engine.core.backlog.QueueWalk)."""

    whole = True                        # the queue's whole backlog (Engine._quiet_now may pass it without a walk)
    done = False                        # see Source
    quiet: Hashable = None              # the state (Engine._version) in which every group of the queue holds
    looked: Hashable = None             # the state in which that was last asked

    def __init__(self, engine: "Engine", queue: str, bound: Optional[Entry], now: float) -> None:
        self.engine = engine
        self.queue = queue
        self.bound = bound
        self.now = now
        self.current: Optional[tuple[Entry, Group]] = None
        self.parking = Parking(engine)
        self.fresh = True               # nothing taken yet
        self._walk: Optional[QueueWalk] = None

    @property
    def walk(self) -> QueueWalk:
        """Built when first needed: most queues of a saturated fleet are passed whole (Engine._quiet_now)."""
        if self._walk is None:
            self.resume([], self.engine._backlog.queues.get(self.queue, {}).values())
            assert self._walk is not None
        return self._walk

    def resume(self, passed: list[Group], rest: Iterable[Group]) -> None:
        """Build the walk as it is once the groups ``passed`` (the queue's first, by head) were each handed
        their parked refusal; ``rest``: the queue's other groups."""
        engine = self.engine
        self._walk = QueueWalk(rest, engine._stamp, engine._block_range, self.bound)
        self._walk.passed(passed)
        if passed:
            self.fresh = False

    def peek(self) -> Optional[Job]:
        """The next job ``take`` examines, or the next one of a parked group (``skip`` takes it). The jobs of
        groups refused in this state are passed over: exact for queue keys that depend on the candidate
        only through its shape (see Engine._serve_by_candidate)."""
        engine = self.engine
        if self._walk is None:          # nothing taken or refused yet: the queue's first job
            entries = engine._pending.get(self.queue)
            return engine.state.jobs[entries[0][2]] if entries else None
        top = self._walk.peek(engine._stamp)
        return None if top is None else engine.state.jobs[top[0][2]]

    @property
    def position(self) -> int:
        return 0                        # a walk's jobs have no fixed order: most_ahead covers them all

    def most_ahead(self, count: int) -> tuple[Resources, int]:
        """As ListSource's, for every job of the queue (``Backlog.most_demand``): a walk may hand them out in
        any order of their groups."""
        engine = self.engine
        return engine._backlog.most_demand(self.queue, engine.state.jobs), _EVERY

    def skip(self) -> bool:
        """Take the next job if its group is parked with reads unchanged (it gets the parked refusal)."""
        engine, walk = self.engine, self.walk
        top = walk.peek(engine._stamp)
        if top is None:
            return False
        entry, group = top
        refusal = self.parked(group, engine.state.jobs[entry[2]])
        if refusal is None:
            return False
        self.fresh = False
        walk.take(engine._stamp)
        walk.examined(entry, group, refusal)
        return True

    def take(self) -> Optional[Job]:
        engine, walk = self.engine, self.walk
        self.fresh = False
        while True:
            self.current = walk.take(engine._stamp)
            if self.current is None:
                self.parking.flush()
                return None
            entry, group = self.current
            job = engine.state.jobs[entry[2]]
            refusal = self.parked(group, job)
            if refusal is None:
                return job
            walk.examined(entry, group, refusal)     # its reads are unchanged: the same refusal, no pipeline

    def left(self) -> Iterator[Job]:
        """The jobs it may still hand out, in no particular order (engine.core.settle)."""
        engine = self.engine
        jobs = engine.state.jobs
        if self._walk is None:
            entries: Iterable[Entry] = engine._pending.get(self.queue, ())
        else:
            entries = self._walk.left(engine._stamp)
        for entry in entries:
            yield jobs[entry[2]]

    def parked(self, group: Group, job: Job) -> Optional[Refusal]:
        """The group's parked refusal when it holds now; while the queue is quiet in this state
        (Engine._quiet_now), a counted group holds without a look at its plain reads."""
        engine = self.engine
        parked = group.parked
        if group.counted is not None and parked is not None and self.quiet is not None \
                and self.quiet == engine._version() and job.nominated is None and job.not_before <= self.now \
                and engine._quiet.holds(group):
            return parked[1]
        return engine._still_parked(group, job)

    def examined(self, job: Job, refusal: Optional[Refusal]) -> None:
        assert self.current is not None
        entry, group = self.current
        shared = self.engine._shares(job, refusal, self.now)
        self.parking.note(group, job, shared)
        self.walk.examined(entry, group, shared)


class ListSource:
    """Candidates one by one (new, changed or timed-out jobs; every job when exhaustive). A job whose
    group was refused earlier in the same state gets that refusal without calling the pipeline.
    ``peek`` shows the next job without taking it (the queue's ``candidate`` for its order key) and
    ``skip`` takes it only when its refusal is known that way, so a caller re-keying the queue after
    every job sees each one, exactly the jobs and in the order ``take`` alone would go through."""

    whole = False                       # True: the queue's whole backlog (Engine._sources, full cycles)
    fresh = True                        # nothing taken yet
    done = False                        # see Source
    quiet: Hashable = None              # as WalkSource's
    looked: Hashable = None

    def __init__(self, engine: "Engine", jobs: list[Job], now: float, memo: bool = True) -> None:
        self.engine = engine
        self.jobs = jobs
        self.at = 0                              # how many of ``jobs`` were handed out or peeked
        self.now = now
        self.keyed = engine._keyed and memo
        self.group: Optional[Group] = None       # the group of the job last taken (shared ones only)
        self.parking = Parking(engine)
        self._ahead: Optional[Job] = None        # the next job, once peeked
        self._peeked = False
        self._checked: Optional[Job] = None      # peeked, and skip found no known refusal for it

    def peek(self) -> Optional[Job]:
        if not self._peeked:
            self._ahead, self._peeked = self._pull(), True
        return self._ahead

    def _next(self) -> Optional[Job]:
        if self._peeked:
            self._peeked = False
            return self._ahead
        at = self.at                             # _pull, inlined: once per job taken
        if at < len(self.jobs):
            self.at = at + 1
            return self.jobs[at]
        return None

    def _pull(self) -> Optional[Job]:
        at = self.at
        if at < len(self.jobs):
            self.at = at + 1
            return self.jobs[at]
        return None

    @property
    def position(self) -> int:
        """How many jobs were handed out (taken, or skipped with a known refusal): the next one's index."""
        return self.at - 1 if self._peeked and self._ahead is not None else self.at

    def most_ahead(self, count: int) -> tuple[Resources, int]:
        """Per resource, the most that the next ``count`` jobs demand, and the position up to which that covers
        the jobs handed out (Engine._bound_turn)."""
        start = self.position
        most: Resources = {}
        last = None
        for job in self.jobs[start:start + count]:
            demand = job.demand
            if demand is not last:        # jobs of one shape share their demand (Job._by_shape)
                at_least(most, demand)
                last = demand
        return most, start + count

    def _known(self, job: Job) -> Optional[Refusal]:
        """The refusal ``job`` gets without the pipeline (its group's, in this state), else None; sets ``group``."""
        engine = self.engine
        group = engine._backlog._group_of.get(job.id)
        if group is not None and group.shared and job.not_before <= self.now:
            known = engine._memo.get(group.key)
            if known is not None and known[0] == engine._stamp:
                return known[1]
            parked = engine._still_parked(group, job)
            if parked is not None:
                return parked
            self.group = group
        else:
            self.group = None
        return None

    def skip(self) -> bool:
        """Take the next job if its refusal is known without the pipeline (it gets it); False otherwise."""
        if not self.keyed:
            return False
        job = self.peek()
        if job is None or job is self._checked:
            return False
        refusal = self._known(job)
        if refusal is None:
            self._checked = job
            return False
        self.fresh = False
        self._next()
        self.engine._block(job, refusal, self.engine._result)
        return True

    def take(self) -> Optional[Job]:
        self.fresh = False
        if not self.keyed:
            return self._next()
        while True:
            checked = self._checked if self._peeked else None
            job = self._next()
            if job is None:
                self.parking.flush()
                return None
            if job is checked:                   # skip just found nothing known: group is set
                self._checked = None
                return job
            refusal = self._known(job)
            if refusal is None:
                return job
            self.engine._block(job, refusal, self.engine._result)

    def passed(self, count: int) -> None:
        """The next ``count`` jobs were examined without ``take`` (engine.core.settle, a source keeping no memo)."""
        self.at = self.position + count
        self._peeked, self._ahead, self._checked = False, None, None
        self.fresh = False

    def examined(self, job: Job, refusal: Optional[Refusal]) -> None:
        group = self.group
        if group is not None and refusal is not None and refusal.retry_at is None:
            self.engine._memo[group.key] = (self.engine._stamp, refusal)
        if group is not None:
            self.parking.note(group, job, self.engine._shares(job, refusal, self.now))


_EVERY = 1 << 62
"""A position no source reaches."""
