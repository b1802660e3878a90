"""cluster-filter / cluster-score: CEL over (job, cluster), evaluated only when its inputs change."""

from __future__ import annotations

import pytest

from engine.policy.cel import CelCompiler
from engine.core.state import FleetState
from engine.errors import InputError
from engine.model import Cluster, Job
from plugins._celpair import referenced_fields
from plugins.cluster_cel import ClusterFilter, ClusterScore

from tests.plugins._fleet import cluster, engine, job, task

CEL = CelCompiler()


def fleet() -> FleetState:
    s = FleetState()
    s.upsert_cluster(cluster("eu", {"region": "eu", "tier": "prod"}, cpu="10"))
    s.upsert_cluster(cluster("us", {"region": "us", "tier": "spot"}, cpu="20"))
    return s


def tiered(name: str, tier: str) -> Job:
    return job(name, task("w", 1, cpu="1"), labels={"tier": tier})


def test_filter_keeps_clusters_where_true_and_names_the_expression() -> None:
    expr = "job.labels['tier'] != 'prod' || cluster.labels['tier'] == 'prod'"
    f = ClusterFilter({"expression": expr}, CEL)
    s = fleet()
    clusters = list(s.clusters.values())
    assert f.atoll_filter(tiered("a", "prod"), clusters, s) == {"us": f"cluster-filter {expr!r} is false"}
    assert f.atoll_filter(tiered("b", "dev"), clusters, s) == {}


def test_results_are_shared_by_jobs_that_look_the_same_to_the_expression() -> None:
    f = ClusterFilter({"expression": "job.labels['tier'] != 'prod' || cluster.labels['tier'] == 'prod'"}, CEL)
    s = fleet()
    clusters = list(s.clusters.values())
    for i in range(50):
        f.atoll_filter(tiered(f"j{i}", "prod" if i % 2 else "dev"), clusters, s)
    assert f.pairs.evaluations == 4          # 2 label sets x 2 clusters


def test_cache_follows_job_and_cluster_generations() -> None:
    f = ClusterFilter({"expression": "job.name != cluster.labels['region']"}, CEL)
    s = fleet()
    j = job("eu", task("w", 1, cpu="1"))
    assert set(f.atoll_filter(j, list(s.clusters.values()), s)) == {"eu"}
    # the cluster's labels change: a new Cluster object bumps its generation
    s.upsert_cluster(cluster("eu", {"region": "elsewhere"}, cpu="10"))
    assert f.atoll_filter(j, list(s.clusters.values()), s) == {}
    j2 = job("us", task("w", 1, cpu="1"))
    assert set(f.atoll_filter(j2, list(s.clusters.values()), s)) == {"us"}


def test_a_status_report_with_the_same_labels_evaluates_nothing_again() -> None:
    f = ClusterFilter({"expression": "job.labels['tier'] != 'prod' || cluster.labels['tier'] == 'prod'"}, CEL)
    s = fleet()
    a = tiered("a", "prod")
    assert set(f.atoll_filter(a, list(s.clusters.values()), s)) == {"us"} and f.pairs.evaluations == 2
    s.upsert_cluster(cluster("us", {"region": "us", "tier": "spot"}, cpu="5"))     # a new report, new amounts
    s.upsert_cluster(cluster("eu", {"region": "eu", "tier": "prod"}, cpu="1"))
    assert set(f.atoll_filter(tiered("b", "prod"), list(s.clusters.values()), s)) == {"us"}
    assert f.pairs.evaluations == 2                           # labels and readiness unchanged: same results
    s.upsert_cluster(cluster("us", {"region": "us", "tier": "prod"}, cpu="5"))     # relabelled
    notready = cluster("eu", {"region": "eu", "tier": "prod"}, cpu="1")
    notready.ready = False
    s.upsert_cluster(notready)
    assert f.atoll_filter(a, list(s.clusters.values()), s) == {} and f.pairs.evaluations == 4
    r = ClusterFilter({"expression": "cluster.ready"}, CEL)
    assert set(r.atoll_filter(a, list(s.clusters.values()), s)) == {"eu"}
    s.upsert_cluster(cluster("eu", {"region": "eu", "tier": "prod"}, cpu="1"))     # ready again
    assert r.atoll_filter(a, list(s.clusters.values()), s) == {} and r.pairs.evaluations == 3


def test_free_capacity_is_part_of_the_key_when_read() -> None:
    f = ClusterFilter({"expression": "cluster.free['cpu'] >= 8000"}, CEL)
    e = engine({"place": [f]}, [cluster("eu", cpu="10")])
    e.submit(job("a", task("w", 1, cpu="4")))
    e.submit(job("b", task("w", 1, cpu="4")))
    result = e.cycle(0)
    assert [a.job_id for a in result.admitted] == ["a"]          # after a, eu has 6 cpu free < 8
    assert "cluster-filter" in e.state.jobs["b"].pending_reason


def test_only_candidate_clusters_are_evaluated() -> None:
    f = ClusterFilter({"expression": "true"}, CEL)
    s = fleet()
    f.atoll_filter(tiered("a", "x"), [s.clusters["eu"]], s)
    assert f.pairs.evaluations == 1


def test_runtime_error_removes_the_cluster_with_the_error() -> None:
    f = ClusterFilter({"expression": "job.labels['team'] == 'ml'"}, CEL)
    s = fleet()
    reasons = f.atoll_filter(tiered("a", "x"), [s.clusters["eu"]], s)
    assert reasons["eu"].startswith("cluster-filter \"job.labels['team'] == 'ml'\" failed")


def test_score_weights_and_rounds() -> None:
    sc = ClusterScore({"expression": "cluster.labels['tier'] == 'spot' ? 0.5 : 2.0", "weight": 3}, CEL)
    s = fleet()
    assert sc.atoll_score(tiered("a", "x"), list(s.clusters.values()), s) == {"eu": 6, "us": 2}


def test_score_orders_the_engine_candidates() -> None:
    sc = ClusterScore({"expression": "cluster.name == 'us' ? 10 : 0"}, CEL)
    e = engine({"place": [sc]}, [cluster("eu", cpu="10"), cluster("us", cpu="10")])
    e.submit(job("a", task("w", 1, cpu="1")))
    assert e.cycle(0).admitted[0].placement == {"us": {"w": 1}}


@pytest.mark.parametrize("expression", ["1.0 / 0.0", "-1.0 / 0.0", "double('nan')", "1e308 * 10.0"])
def test_a_score_that_is_not_a_finite_number_scores_0_like_an_error(expression: str) -> None:
    """``double(x) / double(cluster.allocatable['cpu'])`` on a cluster of 0 cpu is inf: ``round(inf)`` raised
    OverflowError (NaN: ValueError) in every placement, each contained as a plugin error and retried every 60 s,
    so no job was ever placed and `atoll simulate quickstart.yaml` ran for minutes formatting tracebacks."""
    sc = ClusterScore({"expression": f"cluster.name == 'us' ? {expression} : 2.0", "weight": 3}, CEL)
    s = fleet()
    assert sc.atoll_score(tiered("a", "x"), list(s.clusters.values()), s) == {"eu": 6, "us": 0}
    e = engine({"place": [sc]}, [cluster("eu", cpu="10"), cluster("us", cpu="10")])
    e.submit(job("a", task("w", 1, cpu="1")))
    assert e.cycle(0).admitted[0].placement == {"eu": {"w": 1}}


def test_load_errors_name_the_field() -> None:
    with pytest.raises(InputError) as info:
        ClusterFilter({"expression": "job.prority > 1"}, CEL, "p.yaml: spec.plugins.cluster-filter")
    assert "p.yaml: spec.plugins.cluster-filter.expression" in str(info.value)
    with pytest.raises(InputError):
        ClusterFilter({"expression": "1 + 1"}, CEL)          # not a bool
    with pytest.raises(InputError):
        ClusterScore({"expression": "'x'"}, CEL)


def test_defaults_work_without_a_compiler() -> None:
    s = fleet()
    assert ClusterFilter({}, None).atoll_filter(tiered("a", "x"), list(s.clusters.values()), s) == {}
    assert ClusterScore({}, None).atoll_score(tiered("a", "x"), list(s.clusters.values()), s) == {"eu": 0, "us": 0}


def test_referenced_fields() -> None:
    assert referenced_fields("job.labels['x'] == 'job.name' && job . priority > 1", "job") == {"labels", "priority"}
    assert referenced_fields("size(job) > 1", "job") is None
    assert referenced_fields("cluster.free['cpu'] > 1", "cluster") == {"free"}
    assert referenced_fields("x.job == 1", "job") == frozenset()


def test_attempts_change_invalidates_whole_job_keys() -> None:
    f = ClusterScore({"expression": "job.attempts"}, CEL)
    s = FleetState()
    s.upsert_cluster(Cluster("c", allocatable={"cpu": 1000}))
    j = tiered("a", "x")
    assert f.atoll_score(j, [s.clusters["c"]], s) == {"c": 0}
    j.attempts = 2
    assert f.atoll_score(j, [s.clusters["c"]], s) == {"c": 2}


def test_a_cluster_removed_and_added_again_is_evaluated_again() -> None:
    f = ClusterFilter({"expression": "cluster.labels['region'] == 'eu'"}, CEL)
    s = fleet()
    j = tiered("a", "x")
    assert f.atoll_filter(j, [s.clusters["eu"]], s) == {}
    s.remove_cluster("eu")
    s.upsert_cluster(cluster("eu", {"region": "moved"}, cpu="10"))       # generation 0 again, new object
    assert set(f.atoll_filter(j, [s.clusters["eu"]], s)) == {"eu"}


def test_job_key_getters_cover_every_cel_job_field_with_the_same_values() -> None:
    """The key part of a field read whole (``key_getter``: scalars as they are, the rest frozen) is the frozen
    value CEL sees, and hashable."""
    from engine.policy.cel_vars import VARIABLES, job_vars
    from plugins._celjob import FIELDS, freeze, key_getter

    assert set(FIELDS) == set(VARIABLES["job"])
    j = job("j", task("a", 3, 2, cpu="1", nvidia_com_gpu="1"), task("b", 1, cpu="500m"),
            labels={"tier": "prod"}, annotations={"x": "y"})
    j.attempts, j.priority, j.submit_time = 2, 7, 3.5
    plain = job_vars(j)

    for name in FIELDS:
        getter = key_getter(f"size(job.{name}) > 0", name)      # read whole, not through literal keys
        assert getter(j) == freeze(plain[name]), name
        hash(getter(j))


def test_labels_read_by_literal_key_are_the_key_not_the_whole_map() -> None:
    """Kubernetes labels every batch/v1 Job with its own controller-uid: keyed on the whole label map, every Job
    was a cache miss. Keyed on the label keys the expression reads, they share results (and verdict keys), with
    the values evaluating each job gives."""
    from plugins._celjob import map_keys_read

    text = ("!('atoll.dev/region' in job.labels) || ('region' in cluster.labels && "
            "cluster.labels['region'] == job.labels['atoll.dev/region'])")
    assert map_keys_read(text, "labels") == {"atoll.dev/region"}
    assert map_keys_read("size(job.labels) > 1 || job.labels['a'] == ''", "labels") is None
    assert map_keys_read("job.labels.a == '' || 'b' in job.labels", "labels") is None
    assert map_keys_read("job.labels[k] == ''", "labels") is None
    assert map_keys_read("r'a' in job.labels", "labels") is None
    assert map_keys_read("job.labels['a\\'b'] == ''", "labels") is None
    assert map_keys_read("'x' in job.labels['y'] && job.labels['z'].startsWith('q')", "labels") == {"y", "z"}
    f = ClusterFilter({"expression": text}, CEL)
    s = fleet()
    clusters = list(s.clusters.values())
    jobs = [job(f"j{i}", task("w", 1, cpu="1"), labels={"controller-uid": f"uid-{i}",
                                                        **({"atoll.dev/region": r} if r else {})})
            for i, r in enumerate(["eu", "us", None, "eu", "us", None])]
    results = [f.pairs.evaluate(j, clusters, s) for j in jobs]
    assert f.pairs.evaluations == 6                            # 3 distinct region values x 2 clusters, not 12
    assert results[:3] == results[3:]
    assert results[0] == {"eu": (True, True), "us": (True, False)} and results[2] == {"eu": (True, True),
                                                                                       "us": (True, True)}
    assert f.verdict_key(jobs[0]) == f.verdict_key(jobs[3]) != f.verdict_key(jobs[1])
    uncached = ClusterFilter({"expression": "size(job.labels) >= 0 && (" + text + ")"}, CEL)
    assert [uncached.pairs.evaluate(j, clusters, s) for j in jobs] == results and uncached.pairs.evaluations == 12
