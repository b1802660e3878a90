"""binpack's and spread's scores kept per job shape and cluster (plugins._scorecache) equal the scores computed
afresh, after random bookings, releases, status reports (node shapes on and off, readiness), dry runs and
subsets of candidate clusters: every answer compared after every change, and inside dry runs. Also refusal texts
kept by what they print (ReasonCache)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.nodefit import shapes_of
from engine.core.state import FleetState
from engine.model import Cluster, Job, Task
from engine.resources import CPU, GPU
from plugins._placeutil import ReasonCache, utilisation_scores
from plugins._scorecache import ScoreCache
from plugins.binpack import Binpack
from tests.plugins.test_node_fast_paths import ALLOCATABLE, GRADES, POD, TASK, hold, make_job

REPORT = st.tuples(st.lists(st.integers(0, 3), min_size=9, max_size=9), st.booleans(), st.booleans())
EVENT = st.one_of(st.tuples(st.just("hold"), st.integers(0, 3), POD, st.integers(1, 4)),
                  st.tuples(st.just("release"), st.integers(0, 20)),
                  st.tuples(st.just("report"), st.integers(0, 3), REPORT),
                  st.tuples(st.just("dry run"), st.integers(0, 20)))


def _cluster(name: str, report: tuple[list[int], bool, bool]) -> Cluster:
    counts, ready, shaped = report
    return Cluster(name, allocatable=dict(ALLOCATABLE), ready=ready,
                   node_shapes=shapes_of(GRADES, counts) if shaped else None)


def _check(cache: ScoreCache, asks: list[Any], clusters: list[Cluster], state: FleetState, weights: dict[str, int],
           first: int) -> int:
    n = first
    for spec in asks:       # every ask twice, as new Job objects of one shape: the second is served from the cache
        for _ in range(2):
            n += 1
            job = make_job(spec, n)
            for chosen in (clusters, clusters[::2]):
                assert cache.scores(job, chosen, state) == utilisation_scores(job, chosen, state.free, weights, state)
    return n


@settings(max_examples=200, deadline=None)
@given(reports=st.lists(REPORT, min_size=2, max_size=4), events=st.lists(EVENT, max_size=12),
       asks=st.lists(st.lists(TASK, min_size=1, max_size=2), min_size=1, max_size=4),
       weights=st.sampled_from(({}, {GPU: 3, CPU: 1})))
def test_kept_scores_equal_fresh_scores(reports: list, events: list, asks: list, weights: dict[str, int]) -> None:
    state = FleetState()
    names = [f"c{i}" for i in range(len(reports))]
    for name, report in zip(names, reports):
        state.upsert_cluster(_cluster(name, report))
    cache = ScoreCache(weights)
    held: list[Job] = []
    n = 0
    for event in [None, *events]:
        clusters = [state.clusters[name] for name in names]
        if event is None:
            pass
        elif event[0] == "hold":
            n += 1
            held.append(hold(state, names, event, n))
        elif event[0] == "release" and held:
            state.release(held.pop(event[1] % len(held)))
        elif event[0] == "report":
            _, where, report = event
            state.upsert_cluster(_cluster(names[where % len(names)], report))
        elif event[0] == "dry run" and held:
            # a supposed state: scores asked inside it are its own, and nothing of it is kept afterwards
            victim = held[event[1] % len(held)]
            saved = state.dry_run_begin()
            placed = {c: victim.placed_demand(c) for c in victim.placement or {}}
            state.suppose_gone(victim, placed)
            n = _check(cache, asks, clusters, state, weights, n)
            state.suppose_gone(victim, placed, -1)
            state.dry_run_end(saved)
        n = _check(cache, asks, [state.clusters[name] for name in names], state, weights, n)


def test_binpack_rescores_only_the_clusters_touched_since() -> None:
    """Not vacuous: a second job of a shape after one booking computes one cluster's score, not all of them."""
    state = FleetState()
    for i in range(6):
        state.upsert_cluster(Cluster(f"c{i}", allocatable=dict(ALLOCATABLE)))
    plugin = Binpack({}, None)
    clusters = list(state.clusters.values())
    computed: list[int] = []
    import plugins._scorecache as module
    real = module.utilisation_scores

    def counting(job: Job, chosen: Any, *rest: Any) -> Any:
        computed.append(len(chosen))
        return real(job, chosen, *rest)

    module.utilisation_scores = counting    # type: ignore[assignment]
    try:
        plugin.atoll_score(make_job([((0, 8000), 1, 0)], 1), clusters, state)
        booked = Job(id="b", name="b", queue="q", tasks=[Task("t", 1, 1, {CPU: 64_000})])
        booked.placement = {"c3": {"t": 1}}
        state.jobs["b"] = booked
        state.hold(booked)
        scores = plugin.atoll_score(make_job([((0, 8000), 1, 0)], 2), clusters, state)
    finally:
        module.utilisation_scores = real
    assert computed == [6, 1]
    assert scores["c3"] > scores["c0"] == scores["c5"]


def test_refusal_texts_are_kept_by_what_they_print() -> None:
    """ReasonCache (plugins._placeutil): a template that prints what was free is kept per free amount; one that
    does not is one text whatever is free (gpu-capacity's per-cluster "less than ... free", asked per cluster)."""
    cache = ReasonCache()
    need = {GPU: 2}
    short = cache.get("less than {need} free", need, {GPU: 1})
    assert cache.get("less than {need} free", need, {GPU: 0}) is short and short == "less than nvidia.com/gpu=2 free"
    across = "needs {need}; {have} free"
    assert cache.get(across, need, {GPU: 1}) != cache.get(across, need, {GPU: 0})
    assert len(cache._texts) == 3
