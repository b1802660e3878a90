"""cluster-filter's verdict cache (per job key, while the ready clusters are unchanged) answers exactly
as a fresh filter that evaluates every pair, through cluster changes and candidate subsets."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.policy.cel import CelCompiler
from engine.core.state import FleetState
from engine.model import Cluster, Job
from plugins.cluster_cel import ClusterFilter

CEL = CelCompiler()
REGION = ("!('atoll.dev/region' in job.labels) || "
          "('region' in cluster.labels && cluster.labels['region'] == job.labels['atoll.dev/region'])")
BROKEN = "cluster.labels['region'] == job.labels['atoll.dev/region']"      # fails (runtime error) without labels
WHOLE_JOB = "size(job) > 100 || ('region' in cluster.labels && cluster.labels['region'] == 'r0')"   # per-job key

op_st = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from("abcd"), st.sampled_from(("", "r0", "r1")), st.booleans()),
    st.tuples(st.just("remove"), st.sampled_from("abcd")),
    st.tuples(st.just("filter"), st.sampled_from(("", "r0", "r1")), st.lists(st.booleans(), min_size=4, max_size=4)),
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from((REGION, BROKEN, WHOLE_JOB)), st.lists(op_st, max_size=30))
def test_cached_verdicts_equal_a_fresh_judgement(expression: str, ops: list[Any]) -> None:
    cached = ClusterFilter({"expression": expression}, CEL)
    state = FleetState()
    for op in ops:
        if op[0] == "upsert":
            _, name, region, ready = op
            state.upsert_cluster(Cluster(name, labels={"region": region} if region else {}, ready=ready,
                                         allocatable={"cpu": 1000}))
        elif op[0] == "remove":
            state.remove_cluster(op[1])
        else:
            _, region, picks = op
            ready = state.ready_clusters()
            candidates = [c for c, keep in zip(ready, picks) if keep]
            job = Job(id="j", name="j", labels={"atoll.dev/region": region} if region else {})
            fresh = ClusterFilter({"expression": expression}, CEL)
            assert cached.atoll_filter(job, candidates, state) == fresh.atoll_filter(job, candidates, state)


def test_clusters_outside_the_state_are_judged_as_given() -> None:
    f = ClusterFilter({"expression": REGION}, CEL)
    state = FleetState()
    job = Job(id="j", name="j", labels={"atoll.dev/region": "r0"})
    assert f.atoll_filter(job, [Cluster("x", labels={"region": "r0"})], state) == {}
    assert f.atoll_filter(job, [Cluster("x", labels={"region": "r1"})], state) == \
        {"x": f"cluster-filter {REGION!r} is false"}
