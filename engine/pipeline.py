"""The six-stage pipeline of one loaded policy, as pluggy hook callers.

Each stage gets its own PluginManager holding only the plugins the policy lists for
that stage, registered in reverse so pluggy's last-in-first-out call order equals
the policy's order. The engine calls these callers directly: one hook call per job
per stage, never per comparison.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Hashable, Optional, Sequence

import pluggy

from engine.hookspecs import PROJECT, STAGES, StageSpecs
from engine.plugin import Plugin


def _manager(plugins: Sequence[Plugin], label: str) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(StageSpecs)
    for plugin in reversed(plugins):
        pm.register(plugin, name=f"{label}:{plugin.name}")
    return pm


def _caller(hook: pluggy.HookCaller, empty: Any) -> Callable[..., Any]:
    """The hook as a direct caller (see ``_direct``), or a plain function returning pluggy's empty
    answer when no plugin of the policy implements it: a hook call costs ~1-3 us, paid per job on
    the hot path for nothing."""
    if hook.get_hookimpls():
        return _direct(hook)

    def nobody(**_: Any) -> Any:
        return list(empty) if isinstance(empty, list) else empty

    return nobody


def _direct(hook: pluggy.HookCaller) -> Callable[..., Any]:
    """Call the implementations exactly as pluggy's ``_multicall`` does (policy order, None results
    skipped, firstresult stops at the first answer) without its per-call machinery, which costs
    ~3 us per call and ran ~100,000 times per cycle on a large backlog. Wrappers and optional
    keyword arguments need pluggy's own loop: the hook itself is returned then. The managers are
    private to the Pipeline and never change after construction, so the snapshot stays exact."""
    impls = list(reversed(hook.get_hookimpls()))
    spec = hook.spec
    if spec is None or any(i.hookwrapper or i.wrapper or i.kwargnames for i in impls):
        return hook
    firstresult = bool(spec.opts.get("firstresult"))
    everything = tuple(spec.argnames)
    complete = frozenset(everything)
    # an implementation taking every argument of the spec is called with the caller's keywords as they are
    calls = [(i.function, tuple(i.argnames), tuple(i.argnames) == everything and _by_keyword(i.function))
             for i in impls]

    if firstresult:
        def first(**kwargs: Any) -> Any:
            exact = kwargs.keys() == complete
            for function, names, takes_all in calls:
                result = function(**kwargs) if takes_all and exact else function(*_arguments(kwargs, names))
                if result is not None:
                    return result
            return None
        return first

    def collect(**kwargs: Any) -> list[Any]:
        exact = kwargs.keys() == complete
        results = []
        for function, names, takes_all in calls:
            result = function(**kwargs) if takes_all and exact else function(*_arguments(kwargs, names))
            if result is not None:
                results.append(result)
        return results
    return collect


def _joined_keys(keys: Sequence[Callable[[Any], Optional[Hashable]]], job: Any) -> Optional[tuple[Any, ...]]:
    """The verdict keys joined in order, or None as soon as one declares nothing (None)."""
    parts = []
    for key_of in keys:
        part = key_of(job)
        if part is None:
            return None
        parts.append(part)
    return tuple(parts)


def _joined_reads(readers: Sequence[Callable[[Any, Any], Optional[Sequence[Any]]]], job: Any,
                  state: Any) -> Optional[tuple[Any, ...]]:
    """The reads of every reader joined in order, or None as soon as one declares nothing (None)."""
    reads: list[Any] = []
    for reads_of in readers:
        part = reads_of(job, state)
        if part is None:
            return None
        reads.extend(part)
    return tuple(reads)


def _positional(hook: pluggy.HookCaller, empty: Any) -> Callable[..., Any]:
    """Like ``_caller`` but called with the spec's arguments by position, in the spec's order: the
    admit hook runs once per examined job (~100,000 times in a large first cycle), and building
    and unpacking keyword dicts is a good part of a refusal's cost. So does the queue order hook
    when a plugin reads its ``candidate`` (a collecting hook: the list of results)."""
    impls = list(reversed(hook.get_hookimpls()))
    spec = hook.spec
    if spec is None or not impls or any(i.hookwrapper or i.wrapper or i.kwargnames for i in impls):
        keywords = _caller(hook, empty)
        names = tuple(spec.argnames) if spec is not None else ()
        return lambda *args: keywords(**dict(zip(names, args)))
    everything = tuple(spec.argnames)
    calls = [(i.function, None if tuple(i.argnames) == everything else tuple(everything.index(n) for n in i.argnames))
             for i in impls]
    if spec.opts.get("firstresult") and len(everything) == 2 and all(picks is None for _, picks in calls):
        return _first_of_two(tuple(function for function, _ in calls))
    if not spec.opts.get("firstresult"):
        def collect(*args: Any) -> list[Any]:
            results = []
            for function, picks in calls:
                result = function(*args) if picks is None else function(*[args[i] for i in picks])
                if result is not None:
                    results.append(result)
            return results
        return collect

    def first(*args: Any) -> Any:
        for function, picks in calls:
            result = function(*args) if picks is None else function(*[args[i] for i in picks])
            if result is not None:
                return result
        return None
    return first


def _first_of_two(functions: tuple[Callable[[Any, Any], Any], ...]) -> Callable[[Any, Any], Any]:
    """``_positional``'s caller for a firstresult hook of two arguments whose every implementation takes both, in
    order (the admit hook: (job, state), ~100,000 calls a cycle): plain two-argument calls, without packing the
    arguments into a tuple and spreading it again per implementation (CPython does not specialise ``f(*args)``)."""
    def first(a: Any, b: Any) -> Any:
        for function in functions:
            result = function(a, b)
            if result is not None:
                return result
        return None
    return first


def _own_dict(plugin: Plugin) -> None:
    """Give a registered plugin a plain dict of its attributes again. pluggy's ``register`` lists them
    (``dir``), which turns CPython 3.11's inline attribute values into a split dict, and no read of a split
    dict's attribute stays specialised (``LOAD_ATTR_WITH_HINT`` deoptimises on it every time: 1.6x the cost
    of a read measured), while plugins read their config and caches from ``self`` on every examined job.
    The same items in a new dict: nothing else changes (``Plugin`` has a ``__dict__``, whatever its subclass)."""
    plugin.__dict__ = dict(plugin.__dict__)


def _by_keyword(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.kind is not inspect.Parameter.POSITIONAL_ONLY for p in parameters)


def _arguments(kwargs: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    try:
        return [kwargs[name] for name in names]
    except KeyError as exc:
        raise pluggy.HookCallError(f"hook call must provide argument {exc.args[0]!r}") from exc


def join_keys(parts: Sequence[Any]) -> tuple[Any, ...]:
    """Concatenate the order keys of several plugins into one tuple (smaller sorts first)."""
    if len(parts) == 2 and type(parts[0]) is tuple and type(parts[1]) is tuple:
        return parts[0] + parts[1]      # the default policy's queue key (queue-priority, drf), once per examined job
    key: list[Any] = []
    for part in parts:
        if isinstance(part, tuple):
            key.extend(part)
        else:
            key.append(part)
    return tuple(key)


class Pipeline:
    """Hook callers for enqueue → order → admit → place → preempt → recover."""

    def __init__(self, stages: dict[str, list[Plugin]], lookback: int = 0) -> None:
        self.stages = {stage: list(stages.get(stage, [])) for stage in STAGES}
        self.lookback = lookback          # policy spec.lookback: per cycle, the first N jobs of each queue (0: all)
        managers = {stage: _manager(self.stages[stage], stage) for stage in STAGES}
        unique: dict[int, Plugin] = {}
        for plugins in self.stages.values():
            for plugin in plugins:
                unique.setdefault(id(plugin), plugin)
        self.plugins: list[Plugin] = list(unique.values())
        for plugin in self.plugins:
            _own_dict(plugin)
        self.cycle_start = _caller(_manager(self.plugins, "all").hook.atoll_cycle_start, [])
        self.enqueue = _caller(managers["enqueue"].hook.atoll_enqueue, None)
        self.job_order = _caller(managers["order"].hook.atoll_job_order, [])
        self.queue_order = _caller(managers["order"].hook.atoll_queue_order, [])
        self.queue_order_positional = _positional(managers["order"].hook.atoll_queue_order, [])  # (queue, state, candidate)
        # some order plugin keys a queue by its next job (hookimpl argnames): re-key after refusals too
        self.queue_order_candidate = any("candidate" in i.argnames
                                         for i in managers["order"].hook.atoll_queue_order.get_hookimpls())
        # every order plugin reading the candidate keys by its demand, rising with it: a bound (Engine._bound_turn)
        self.queue_keys_bounded = self.queue_order_candidate and all(
            getattr(i.plugin, "keys_rise_with_demand", lambda: False)()
            for i in managers["order"].hook.atoll_queue_order.get_hookimpls() if "candidate" in i.argnames)
        # every order plugin keys a queue by its line alone: keys are kept across cycles (Engine._queue_key)
        self.queue_keys_by_line = all(getattr(i.plugin, "keys_queues_by_line", lambda: False)()
                                      for i in managers["order"].hook.atoll_queue_order.get_hookimpls())
        self.admit = _caller(managers["admit"].hook.atoll_admit, None)
        self.admit_positional = _positional(managers["admit"].hook.atoll_admit, None)     # (job, state)
        self.filter = _caller(managers["place"].hook.atoll_filter, [])
        self.score = _caller(managers["place"].hook.atoll_score, [])
        self.place = _caller(managers["place"].hook.atoll_place, None)
        self.recover = _caller(managers["recover"].hook.atoll_recover, None)
        self.preempt_rule = _caller(managers["preempt"].hook.atoll_preempt_rule, [])
        self.protect = _caller(managers["preempt"].hook.atoll_protect, None)
        self.victim_rank = _caller(managers["preempt"].hook.atoll_victim_rank, None)
        self.has_preempt = bool(managers["preempt"].hook.atoll_preempt_rule.get_hookimpls())
        self.has_filter = bool(managers["place"].hook.atoll_filter.get_hookimpls())
        self.has_score = bool(managers["place"].hook.atoll_score.get_hookimpls())
        # every place plugin only ever uses clusters where the job's gang minimum fits: see Engine._place
        self.fitting_clusters_only = all(p.judges_fitting_clusters_only() for p in self.stages["place"])
        # the plugins whose verdicts decide admission (each once, in stage order), for verdict_key
        judges: dict[int, Plugin] = {}
        for stage in ("admit", "place", "preempt"):
            for plugin in self.stages.get(stage, []):
                judges.setdefault(id(plugin), plugin)
        self._judges = [p.verdict_key for p in judges.values()]
        self._placers = [p.verdict_key for p in self.stages.get("place", [])]
        self._readers = [p.verdict_reads for p in judges.values()
                         if any(p in self.stages.get(stage, []) for stage in ("admit", "place"))]
        self._preempt_readers = [p.verdict_reads for p in self.stages.get("preempt", [])]
        self._place_readers = [p.verdict_reads for p in self.stages.get("place", [])]
        self._admit_readers = [p.admit_reads for p in self.stages.get("admit", [])]
        # admit verdicts shared across queues (engine.core.admitshare): only when every admit plugin declares a key
        admitters = self.stages.get("admit", [])
        self._sharers = [p.shared_verdict_key for p in admitters]
        self._alike = [p.admits_alike for p in admitters]
        self.shares_admit = bool(admitters) and all(
            type(p).shared_verdict_key is not Plugin.shared_verdict_key for p in admitters)
        # every judge overrides Plugin.verdict_key: jobs can be grouped (else the engine stays exhaustive)
        self.declares_verdict_keys = all(type(p).verdict_key is not Plugin.verdict_key for p in judges.values())

    def verdict_key(self, job: Any) -> Optional[tuple[Any, ...]]:
        """The joined ``Plugin.verdict_key`` of every admit/place/preempt plugin, or None when one of
        them declares nothing for this job (then it is examined on its own)."""
        return _joined_keys(self._judges, job)

    def shared_admit_key(self, job: Any) -> Optional[tuple[Any, ...]]:
        """The joined ``Plugin.shared_verdict_key`` of the admit plugins, or None when one declares nothing."""
        return _joined_keys(self._sharers, job)

    def admits_alike(self, queue: Any, state: Any) -> bool:
        """Every admit plugin's ``Plugin.admits_alike`` for ``queue``."""
        return all(alike(queue, state) for alike in self._alike)

    def place_key(self, job: Any) -> Optional[tuple[Any, ...]]:
        """The joined ``Plugin.verdict_key`` of the place stage's plugins alone (filters, scores, placement): jobs
        with equal place keys are filtered, scored and placed alike in one state. None when one declares nothing."""
        return _joined_keys(self._placers, job)

    def verdict_reads(self, job: Any, state: Any) -> Optional[tuple[Any, ...]]:
        """The joined ``Plugin.verdict_reads`` of every admit/place plugin, or None when one of them
        declares nothing for this job in this state (its key is then never parked)."""
        return _joined_reads(self._readers, job, state)

    def admit_reads(self, job: Any, state: Any) -> Optional[tuple[Any, ...]]:
        """The joined ``Plugin.admit_reads`` of the admit stage's plugins alone (what a refusal the admit stage gave
        read), or None when one declares nothing for this job."""
        return _joined_reads(self._admit_readers, job, state)

    def place_reads(self, job: Any, state: Any) -> Optional[tuple[Any, ...]]:
        """The joined ``Plugin.verdict_reads`` of the place stage's plugins alone (what their filters, scores,
        placement and refusal texts read), or None when one declares nothing for this job."""
        return _joined_reads(self._place_readers, job, state)

    def preempt_reads(self, job: Any, state: Any) -> Optional[tuple[Any, ...]]:
        """The joined ``Plugin.verdict_reads`` of every preempt plugin (what its rule and protections read
        besides the running jobs), or None when one declares nothing (its searches are never parked)."""
        return _joined_reads(self._preempt_readers, job, state)

    def describe(self) -> dict[str, list[str]]:
        return {stage: [p.name for p in plugins] for stage, plugins in self.stages.items()}
