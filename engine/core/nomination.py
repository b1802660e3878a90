"""The engine's side of preemption: possible victims, preemptors' nominations, evictions under way.

``Engine`` owns one ``Preemptions``. It keeps the ``RunningIndex`` of possible victims (only
when the policy has a preempt stage), runs a ``VictimSearch`` for a job refused for lack of
capacity (``attempt``), marks the victims ``Evicting`` and books the preemptor's nomination in
FleetState with a deadline; the preemptor then waits (``waiting``) until its victims are gone
and is examined with its own booking lifted (``lift`` / ``settle``). Pure and synchronous.
"""

from __future__ import annotations

from typing import Callable, Hashable, Optional

from engine.core.preempt import ANY, PreemptRule, above_guarantee, RunningIndex, VictimSearch, booked
from engine.core.running import Standing
from engine.core.searchroom import Room
from engine.core.searchwake import CandidateLog, ParkedSearch, Watch, scopes
from engine.core.state import FleetState
from engine.core.wake import Reads
from engine.model import Job, JobState, Placement, Preemption, Queue, Refusal
from engine.resources import Resources
from engine.pipeline import Pipeline

DRY_RUNS_PER_CYCLE = 512
"""Preemption dry runs one cycle may spend; refused jobs left without one look again at the next capacity
change (the evictions issued this cycle make one)."""

_COMING_MAX = 65536
"""``Preemptions._coming`` keeps at most this many keys (then starts again: a hint, not a verdict)."""

STANDINGS_MAX = 1024
"""Rule scopes whose Standing is kept for the current state (bounds memory; engine.core.running)."""

Booking = tuple[dict[str, Resources], dict[str, Resources]]


class Preemptions:
    def __init__(self, state: FleetState, pipeline: Pipeline, reads: Optional[Reads] = None) -> None:
        self.state = state
        self.pipeline = pipeline
        self.running = RunningIndex()                  # possible victims (only with a preempt stage)
        # hopeless searches parked across cycles by preempt key (engine.core.searchwake), their wake reads
        # taken with ``reads`` (engine.core.wake); None: never parked (the exhaustive reference engine)
        self.park = reads is not None
        self._reads = reads
        self._log = CandidateLog(self._candidate, lambda: self.running.version)
        self._parked: dict[Hashable, ParkedSearch] = {}
        self._watches: dict[Hashable, Watch] = {}     # rules' scopes -> their shared watch
        if self.park:
            self.running.log = self._log
        self.deadline: dict[str, float] = {}           # nominee -> when its booking is given up
        self.awaiting: set[str] = set()                # nominees whose victims are all gone
        self._dry_runs = [DRY_RUNS_PER_CYCLE]
        # keys (see _key) of jobs that found no eligible victim at all this cycle, so that a job with the same key
        # returns at once (never in the exhaustive reference engine, which runs every search). Within a cycle no job
        # becomes a candidate and queue usage only rises (admissions), but rising usage can open candidates: a queue
        # rising above its guarantee opens its older jobs to reclaim (``index``), a victim queue's line rising
        # clears a guarantee floor, fair share weighs victim queues' usage; and a candidate leaving (evicted) lets a
        # search cut short by max_candidates reach further. So a search that read no more than the
        # candidates and its declared reads (the searches that park; the reads admissions move, reclaim's own
        # queue usage, only take rules away as they rise) holds for the rest of the cycle until some queue rises
        # above its guarantee (``usage_changed``); any other (a guarantee floor, the max_candidates cut: volatile;
        # a plugin declaring no reads, e.g. reclaim's fair share) only while no job is admitted and no candidate
        # leaves (tests/core/test_hopeless_in_cycle.py)
        self._hopeless: set[Hashable] = set()
        self._hopeless_here: set[Hashable] = set()
        self._admissions = 0                                # jobs indexed fresh (admitted), ever
        self._here_at: tuple[int, int] = (-1, -1)           # (_admissions, running.version) _hopeless_here is for
        # keys whose last search ended "fits in what evictions under way free": their next search asks that first
        # (VictimSearch's expect_coming), without walking the candidates to its first dry run again
        self._coming: set[Hashable] = set()
        self._keys: dict[str, tuple[Job, int, int, str, Optional[Hashable]]] = {}    # per job version
        # what rules of equal scopes make of each queue, shared by the searches of one state (engine.core.running)
        self._standings: dict[Hashable, Standing] = {}
        self._standings_at: tuple[int, int] = (-1, -1)     # (state.changes, running.version) they hold for

    def set_pipeline(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.running = RunningIndex()
        self._keys.clear()
        self._coming.clear()
        self._standings.clear()
        self._standings_at = (-1, -1)
        self._parked.clear()
        self._watches.clear()
        if self.park:
            self.running.log = self._log

    def cycle_start(self, dirty: set[str]) -> None:
        """This cycle's admissions become candidates; nominees whose victims are gone look again (their
        capacity shows with a status report, which need not move the capacity epoch)."""
        self.running.settle()
        self._dry_runs = [DRY_RUNS_PER_CYCLE]
        self._hopeless.clear()
        self._hopeless_here.clear()
        dirty.update(self.awaiting)

    # -- victims ---------------------------------------------------------------------------------
    def index(self, job: Job, fresh: bool) -> None:
        if self.pipeline.has_preempt:
            rank = self.pipeline.victim_rank(job=job, state=self.state)
            self.running.add(job, job.priority if rank is None else rank, fresh)
            if fresh:
                self._admissions += 1
            if fresh and self.park:
                # a candidate from the next cycle on (logged then); but its queue may have just gone above its
                # guarantee, which opens its older jobs to reclaim now (engine.core.searchwake)
                queue = self.state.queues.get(job.queue)
                if queue is not None and above_guarantee(queue) and not _above_without(queue, job.demand):
                    self.usage_changed(job.queue)

    def stop_holding(self, job: Job, dirty: set[str]) -> None:
        """``job`` is about to release its capacity: no candidate victim any more, and if it is a victim
        its preemptor's nomination now books what it held (the preemptor looks again once all are gone)."""
        self.running.discard(job.id)
        if job.state is not JobState.EVICTING:
            return
        jobs = self.state.jobs
        preemptor = jobs.get(job.preempted_by)
        if preemptor is not None and job.id in preemptor.victims:
            self.state.victim_gone(preemptor.id, job)
            if not any(v != job.id and v in jobs and jobs[v].state.holds_resources for v in preemptor.victims):
                self.awaiting.add(preemptor.id)
                dirty.add(preemptor.id)

    # -- preemptors ------------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """No ``attempt`` can act in this state: nobody to evict, or this cycle's dry-run budget is spent (its
        first test, inlined there)."""
        return not self.running or self._dry_runs[0] <= 0

    def hopeless(self, job: Job) -> bool:
        """``job``'s key found no eligible victim this cycle, and still would: its ``attempt`` returns at once
        (engine.core.settle)."""
        return self._known_hopeless(self._key(job))

    def _known_hopeless(self, key: Optional[Hashable]) -> bool:
        return key is not None and (key in self._hopeless or key in self._hopeless_here and self._still_here())

    def _still_here(self) -> bool:
        """No job admitted and no candidate gone since ``_hopeless_here`` was filled (else it is emptied)."""
        if self._here_at == (self._admissions, self.running.version):
            return True
        self._hopeless_here.clear()
        return False

    def attempt(self, job: Job, now: float, fit: Callable[[Job], Optional[Placement]]
                ) -> tuple[Optional[Preemption], Optional[float]]:
        """Try to free capacity for ``job``: (the preemption issued, or None and when protected victims
        become eligible if that is why none was)."""
        state = self.state
        # Nobody to evict: not parked either, though such a search is hopeless. Parking every refused key of a
        # fill (the keys, rules and reads that takes) doubled the fill cycle (20,000 / 200 / 20, churn or random
        # mix: 1.05 -> 2.05 s profiled); with a random mix of priorities the fill's admissions then woke every
        # key again, and in the churn bench it saved ~12,000 examinations in each of the next two cycles
        if not self.running or self._dry_runs[0] <= 0:   # nobody to evict, or this cycle's budget is spent
            return None, None
        key = self._key(job)
        if self._known_hopeless(key):
            return None, None
        seen = self._log.end
        if self.park and key is not None and self.parked(job, key) is not None:
            return None, None                  # the search it parked would find no candidate again
        rules: list[PreemptRule] = self.pipeline.preempt_rule(job=job, state=state, now=now)
        if not rules:
            if self.park and key is not None:
                self._park(job, key, [], seen)
            return None, None
        protect = self.pipeline.protect

        def protected(preemptor: Job, victim: Job, rule: PreemptRule) -> Optional[str]:
            return protect(preemptor=preemptor, victim=victim, rule=rule, state=state, now=now)

        search = VictimSearch(state, self.running, fit, protected, now, self._dry_runs,
                              self.pipeline.fitting_clusters_only, self._standing if self.park else None,
                              key is not None and key in self._coming)
        found = search.run(job, rules)
        if key is not None:
            if found is not None and not found.victims:
                if len(self._coming) >= _COMING_MAX:
                    self._coming.clear()
                self._coming.add(key)
            else:
                self._coming.discard(key)
        if found is None:
            if key is not None and search.hopeless and search.protected_until is None:
                if self.park and not search.volatile and self._park(job, key, rules, seen):
                    self._hopeless.add(key)
                elif self.park:
                    if not self._still_here():
                        self._here_at = (self._admissions, self.running.version)
                    self._hopeless_here.add(key)
            elif key is not None and self.park and search.protected_until is None and not search.volatile \
                    and not search.tried and search.rooms:
                # candidates met, no dry run: parked on the room it lacked too (engine.core.searchroom)
                self._park(job, key, rules, seen, Room(job.min_demand, search.rooms, self.state, self.running,
                                                       self._log, seen, search.one_cluster))
            return None, search.protected_until
        if not found.victims:          # it fits on what earlier evictions free beyond their claims: no victim
            return None, None          # of its own; the epoch moves when they are gone
        rule = found.rule
        ids = tuple(v.id for v in found.victims)
        for victim in found.victims:
            self.running.discard(victim.id)
            victim.state = JobState.EVICTING
            victim.preempted_by = job.id
            victim.evicted_at = now
            victim.pending_reason = f"preempted by {job.id} ({rule.reason}) at t={now:g}"
        job.nominated = found.placement
        job.nominated_at = now
        job.victims = ids
        state.nominate(job.id, booked(job, found.placement), list(found.victims))
        self.deadline[job.id] = now + rule.nomination_timeout
        return Preemption(job.id, ids, rule.reason, now, rule.grace_period, rule.plugin), None

    # -- parked searches (engine.core.searchwake) ---------------------------------------------------
    def _park(self, job: Job, key: Hashable, rules: Optional[list[PreemptRule]], seen: int,
              room: Optional[Room] = None) -> bool:
        """Park the search of ``key``; False when a preempt plugin declares no reads (never parked)."""
        declared = self.pipeline.preempt_reads(job, self.state)
        if declared is None:
            return False
        assert self._reads is not None
        # Not whether evictions under way free enough for the job (FleetState.freeing): only a dry run reads it,
        # and a parked search ran none and, while its watch or room holds, would run none again
        # (tests/core/test_freeing_wakes_nobody.py). Reading it woke every key of a small shape at each eviction.
        reads = declared
        shared = scopes(rules) if rules is not None else None
        watch = self._watches.get(shared) if shared is not None else None
        if watch is None or not watch.holds():
            # a shared watch from before this search may wake for a candidate this search already saw (a
            # wake-up too many, never one too few)
            watch = Watch(self._log, rules, seen)
            if shared is not None:
                if len(self._watches) >= 100_000:
                    self._watches.clear()
                self._watches[shared] = watch
        self._parked[key] = ParkedSearch(watch, self._reads.signature(reads), room)
        return True

    def parked(self, job: Job, key: Optional[Hashable] = None) -> Optional[ParkedSearch]:
        """The parked search of ``job``'s preempt key while it still holds, else None."""
        if not self.park:
            return None
        if key is None:
            key = self._key(job)
            if key is None:
                return None
        parked = self._parked.get(key)
        if parked is None:
            return None
        assert self._reads is not None
        if (parked.room is None or parked.room.demand == job.min_demand) and parked.holds() and \
                self._reads.holds(parked.reads):
            return parked
        del self._parked[key]
        return None

    def wake_reads(self, job: Job) -> Optional[tuple[Hashable, ...]]:
        """For parking ``job``'s capacity refusal (engine.core.wake): the reads that wake its parked search,
        None when it has none (it is then examined again at every capacity change)."""
        parked = self.parked(job)
        if parked is None:
            return None
        # the watch is shared by scope; a room is the search's own (engine.core.searchroom)
        victims = parked.room if parked.room is not None else parked.watch
        return (("victims", victims),) + tuple(read for read, _ in parked.reads)

    def _candidate(self, job_id: str) -> bool:
        return self.running.candidate(job_id)

    def usage_changed(self, queue: str) -> None:
        """A queue's usage changed without a job becoming a candidate: every search that looks at it wakes, and a
        key found hopeless earlier in this cycle is no longer known to be (its older jobs may be candidates now)."""
        self._hopeless.clear()
        if self.park:
            self._log.add(queue, -ANY)

    def log_end(self) -> int:
        return self._log.end

    @property
    def log(self) -> CandidateLog:
        """Every job as it became a victim candidate (engine.core.searchwake)."""
        return self._log

    def _standing(self, rule: PreemptRule) -> Optional[Standing]:
        """The Standing searches of ``rule``'s scope share while the state and the candidates stay as they are
        (``FleetState.changes`` and ``RunningIndex.version`` grow with any change of queues, usage or
        candidates), on the base of its shared scope when it has one; None for a rule without a scope."""
        if rule.scope is None:
            return None
        at = (self.state.changes, self.running.version)
        if at != self._standings_at or len(self._standings) >= STANDINGS_MAX:
            self._standings.clear()
            self._standings_at = at
        key = (rule.plugin, rule.scope)
        found = self._standings.get(key)
        if found is None:
            base = None
            if rule.shared_scope is not None:
                shared = (rule.plugin, "shared", rule.shared_scope)
                base = self._standings.get(shared)
                if base is None:
                    base = self._standings[shared] = Standing()
            found = self._standings[key] = Standing(base, rule.own_queues)
        return found

    def _key(self, job: Job) -> Optional[Hashable]:
        """What the preempt stage's rules read of ``job`` (its plugins' ``verdict_key``s) and what the
        engine's own rules read (queue line, the job that evicted it); None if a plugin declares none."""
        known = self._keys.get(job.id)
        if known is not None and known[0] is job and known[1:4] == (job.generation, job.attempts, job.preempted_by):
            return known[4]
        key: Optional[Hashable] = (job.queue, job.preempted_by)
        parts = []
        for plugin in self.pipeline.stages["preempt"]:
            declared = getattr(plugin, "verdict_key", None)
            part = declared(job) if callable(declared) else None
            if part is None:
                key = None
                break
            parts.append(part)
        if key is not None:
            key = (job.queue, job.preempted_by, tuple(parts))
        if len(self._keys) >= 200_000:
            self._keys.clear()
        self._keys[job.id] = (job, job.generation, job.attempts, job.preempted_by, key)
        return key

    def waiting(self, job: Job, victims: tuple[str, ...], reason: str) -> Refusal:
        shown = ", ".join(victims[:3]) + (f" and {len(victims) - 3} more" if len(victims) > 3 else "")
        deadline = self.deadline.get(job.id, 0.0)
        # retry_at: a nominee's refusal is its own (never shared with jobs of the same verdict key)
        return Refusal(f"preempting {len(victims)} job(s) for it ({reason}): {shown}; their capacity is held "
                       f"for it until they are gone (at the latest t={deadline:g})", "preempt", retry_at=deadline)

    def still_waiting(self, job: Job, now: float) -> Optional[Refusal]:
        """A nominee waits while its victims still hold capacity, until its deadline."""
        jobs = self.state.jobs
        left = tuple(v for v in job.victims if v in jobs and jobs[v].state.holds_resources)
        if left and now < self.deadline.get(job.id, now):
            return self.waiting(job, left, "waiting")
        return None

    def lift(self, job: Job) -> Optional[Booking]:
        """Its own booking is room for the nominee, not against it: lift it for its examination."""
        return self.state.unnominate(job.id)

    def settle(self, job: Job, booking: Booking, admitted: bool, now: float) -> Optional[Refusal]:
        """After the lifted examination: admitted, or past its deadline, the nomination ends; otherwise
        (the victims are gone but their capacity does not show yet) it is booked again and the nominee
        waits, never preempting again for the same need."""
        deadline = self.deadline.get(job.id, now)
        if not admitted and now < deadline:
            self.state.renominate(job.id, booking)
            return Refusal(f"its victims are gone; waiting for their capacity to show in the clusters' status "
                           f"(held for it until t={deadline:g})", "preempt", retry_at=deadline)
        self.clear(job, freed=not admitted)
        return None

    def drop(self, job: Job) -> None:
        """The nominee left (finished, failed, removed): its booking is free for everyone."""
        if job.nominated is not None:
            self.state.unnominate(job.id)
            self.clear(job, freed=True)

    def clear(self, job: Job, freed: bool) -> None:
        if freed:
            self.state.capacity_epoch += 1        # what was booked for it is free for everyone again
        self.awaiting.discard(job.id)
        self.deadline.pop(job.id, None)
        job.nominated = None
        job.nominated_at = None
        job.victims = ()


def _above_without(queue: Queue, demand: Resources) -> bool:
    """``above_guarantee`` of ``queue`` had it not been charged ``demand``."""
    guarantee = queue.guarantee
    return any(amount - demand.get(name, 0) > guarantee.get(name, 0) for name, amount in queue.allocated.items())
