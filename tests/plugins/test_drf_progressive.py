"""drf progressive filling (Armada's rule, the default): queues compared by their share *after* their next
job; ``progressive: false`` keeps the share before it (Volcano's rule)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.core.scheduler import Engine
from engine.core.state import FleetState
from engine.errors import InputError
from engine.model import Job, Task
from engine.pipeline import Pipeline
from engine.policy import load_policy
from engine.resources import parse_resources
from plugins.drf import Drf
from plugins.fifo import Fifo
from tests.plugins.queue_helpers import admitted, cluster, engine_with, job, queue, res


def gpu_job(name: str, q: str, cpu: str, gpu: int, submit: float = 0.0) -> Job:
    return Job(id=name, name=name, queue=q, submit_time=submit,
               tasks=[Task("worker", 1, 1, parse_resources({"cpu": cpu, "nvidia.com/gpu": gpu}))])


def _tie(drf: Drf) -> list[str]:
    """Queues a and b hold the same (share 0.2 each of 10 cpu, 6 free); a's next job asks 6 cpu, b's next
    two 1 cpu each: the fleet has room for a's job or for b's two, not for both."""
    engine = engine_with(order=[drf, Fifo({}, None)])
    engine.upsert_cluster(cluster("m1", cpu="10"))
    engine.upsert_queue(queue("a"))
    engine.upsert_queue(queue("b"))
    engine.submit(job("a-run", q="a", cpu="2"))
    engine.submit(job("b-run", q="b", cpu="2"))
    assert sorted(admitted(engine)) == ["a-run", "b-run"]
    engine.submit(job("a-big", q="a", cpu="6", submit=1))
    engine.submit(job("b-small", q="b", cpu="1", submit=1))
    engine.submit(job("b-small2", q="b", cpu="1", submit=2))
    return admitted(engine, 1.0)


def test_equal_shares_go_to_the_queue_whose_next_job_adds_less() -> None:
    # after: a 8/10 = 0.8, b 3/10 = 0.3 -> b; then b 0.4 < a 0.8 -> b; then only a is left and 6 cpu do not fit
    assert _tie(Drf({}, None)) == ["b-small", "b-small2"]


def test_progressive_false_keeps_the_share_before_the_job() -> None:
    # before: a 0.2 == b 0.2, equal: the flat key leaves the tie to the queue name (a), a-big takes the 6
    # free cpu and b's small jobs wait
    assert _tie(Drf({"progressive": False}, None)) == ["a-big"]


def test_progressive_filling_does_not_strand_gpus_behind_a_cpu_heavy_job() -> None:
    """The worked example of docs/policy.md: 8 cpu and 8 GPUs, both queues idle. a's next job takes every
    cpu and 1 GPU, b's jobs 1 cpu and 2 GPUs each. Before the job both shares are 0: the old rule serves a
    (name order), and 7 GPUs stay idle behind it. After the job, a's share is 1.0 and b's 0.25: b fills
    the GPUs (0.25, 0.5, 0.75, 1.0) and 4 cpu stay free for any cpu job."""
    def run(drf: Drf) -> tuple[list[str], dict[str, int]]:
        engine = engine_with(order=[drf, Fifo({}, None)])
        engine.upsert_cluster(cluster("m1", cpu="8", gpu=8))
        engine.upsert_queue(queue("a"))
        engine.upsert_queue(queue("b"))
        engine.submit(gpu_job("a-cpu", "a", cpu="8", gpu=1))
        for i in range(5):
            engine.submit(gpu_job(f"b{i}", "b", cpu="1", gpu=2, submit=i))
        order = admitted(engine)
        return order, dict(engine.state.fleet_free)

    order, free = run(Drf({}, None))
    assert order == ["b0", "b1", "b2", "b3"]
    assert free.get("nvidia.com/gpu", 0) == 0 and free["cpu"] == 4000
    old, old_free = run(Drf({"progressive": False}, None))
    assert old == ["a-cpu"]
    assert old_free["nvidia.com/gpu"] == 7 and old_free.get("cpu", 0) == 0


def test_key_adds_the_candidates_demand_to_the_queue_and_every_ancestor() -> None:
    state = FleetState()
    state.upsert_cluster(cluster("m1", cpu="100"))
    for q in (queue("org-a"), queue("org-b"), queue("a1", parent="org-a"), queue("b1", parent="org-b")):
        state.upsert_queue(q)
    state._charge("a1", res(cpu="10"), +1)       # org-a 0.10
    state._charge("b1", res(cpu="20"), +1)       # org-b 0.20
    drf = Drf({}, None)
    a1, b1 = state.queues["a1"], state.queues["b1"]
    big = job("big", q="a1", cpu="30")
    assert drf.atoll_queue_order(a1, state, None) == ((0.1, "org-a", 0.1, "a1"),)
    assert drf.atoll_queue_order(a1, state, big) == ((0.4, "org-a", 0.4, "a1"),)     # 10 + 30 at both levels
    assert drf.atoll_queue_order(a1, state, big) > drf.atoll_queue_order(b1, state, job("s", q="b1", cpu="1"))
    assert a1.allocated == res(cpu="10") and state.queues["org-a"].allocated == res(cpu="10")   # nothing booked


def test_above_guarantee_counts_the_candidate_beyond_the_guarantee_only() -> None:
    state = FleetState()
    state.upsert_cluster(cluster("m1", cpu="10"))
    g = queue("g", guarantee=res(cpu="6"))
    state.upsert_queue(g)
    state._charge("g", res(cpu="4"), +1)
    drf = Drf({"share": "aboveGuarantee"}, None)
    assert drf.share(g, state, job("fits", q="g", cpu="2")) == 0.0          # 4 + 2 <= 6
    assert drf.share(g, state, job("over", q="g", cpu="5")) == 0.3          # 4 + 5 - 6 = 3 of 10


def test_the_engine_rekeys_only_for_order_plugins_that_read_the_candidate() -> None:
    assert Pipeline({"order": [Drf({}, None)]}).queue_order_candidate
    assert not Pipeline({"order": [Drf({"progressive": False}, None)]}).queue_order_candidate
    assert not Pipeline({"order": [Fifo({}, None)]}).queue_order_candidate


@pytest.mark.parametrize("value", ["'yes'", "1", "null", "[true]"])
def test_a_bad_progressive_value_is_a_precise_error(tmp_path: Any, value: str) -> None:
    text = (ROOT / "policies" / "default.yaml").read_text()
    line = "      progressive: true "
    assert text.count(line) == 1
    policy = tmp_path / "p.yaml"
    policy.write_text(text.replace(line, f"      progressive: {value} "))
    with pytest.raises(InputError) as err:
        load_policy(policy)
    message = str(err.value)
    assert "spec.plugins.drf.progressive" in message and "p.yaml" in message, message
    assert "\n" not in message.strip()


def test_the_shipped_policies_load_with_progressive_drf() -> None:
    for path in sorted((ROOT / "policies").glob("*.yaml")):
        pipeline = load_policy(path).pipeline
        drf = [p for p in pipeline.stages["order"] if isinstance(p, Drf)]
        assert all(p.progressive for p in drf), path.name
        assert pipeline.queue_order_candidate == bool(drf), path.name


def test_engine_with_default_policy_is_progressive() -> None:
    engine = Engine(load_policy(ROOT / "policies" / "default.yaml").pipeline)
    assert engine.pipeline.queue_order_candidate


from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
