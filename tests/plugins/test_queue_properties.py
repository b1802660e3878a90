"""Property tests (hypothesis) for the queue/order/admit plugins through a real Engine.

* capacity never lets a queue (or a parent) exceed its capability, the fleet exceed its
  allocatable, or an admission eat into another queue's unused guarantee (checked against
  a brute-force reference of the guarantee definition, so the ledger's caching is tested);
* jobs of one queue are admitted in priority order;
* drf's order equals the definition computed independently with exact fractions;
* same inputs -> same admissions.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.scheduler import Engine
from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Cluster, Job, Queue, Refusal, Task
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from engine.resources import CPU, GPU, MEMORY, Resources, add_into
from plugins.capacity import Capacity
from plugins.drf import Drf
from plugins.fifo import Fifo
from plugins.job_priority import JobPriority
from plugins.queue_priority import QueuePriority
from plugins.queue_resolve import QueueResolve
from plugins.queue_state import QueueState

GI = 2**30
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- a brute-force reference of the guarantee definition (plugins/_guarantees.py) ----------------
def _children(queues: dict[str, Queue]) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for q in queues.values():
        kids.setdefault(q.parent if q.parent in queues else "", []).append(q.name)
    return kids


def _reserved(name: str, queues: dict[str, Queue], kids: dict[str, list[str]]) -> Resources:
    q = queues[name]
    below: Resources = {}
    for child in kids.get(name, []):
        add_into(below, _reserved(child, queues, kids))
    own = {r: g - q.allocated.get(r, 0) for r, g in q.guarantee.items() if g > q.allocated.get(r, 0)}
    return {r: max(own.get(r, 0), below.get(r, 0)) for r in set(own) | set(below) if max(own.get(r, 0), below.get(r, 0))}


def reference_protected(name: str, state: FleetState) -> Resources:
    queues, kids = state.queues, _children(state.queues)
    line = {name} | {a.name for a in state.ancestors(name)}
    out: Resources = {}
    for parent in [""] + [a.name for a in state.ancestors(name)]:
        for child in kids.get(parent, []):
            if child not in line:
                add_into(out, _reserved(child, queues, kids))
    return out


class Auditor(Plugin):
    """Listed after capacity in admit: every job capacity lets through must satisfy the definitions."""

    name = "t-auditor"
    stages = ("admit",)

    def __init__(self, capacity: Capacity) -> None:
        super().__init__({}, None)
        self.capacity = capacity

    @hookimpl
    def atoll_admit(self, job: Job, state: FleetState) -> Optional[Refusal]:
        queue = state.queues[job.queue]
        for q in [queue, *state.ancestors(queue.name)]:
            for r, limit in (q.capability or {}).items():
                assert q.allocated.get(r, 0) + job.demand.get(r, 0) <= limit, (q.name, r)
        protected = reference_protected(queue.name, state)
        # what capacity used for this very job (synced at its call, not refreshed since) is exact
        ledger = self.capacity.ledger
        assert (ledger.protected_from(queue.name, state) if ledger.active else {}) == protected
        for r, amount in job.demand.items():
            assert amount <= state.fleet_free.get(r, 0) - protected.get(r, 0), (job.id, r, protected)
        return None


# -- random fleets and job streams ---------------------------------------------------------------
@st.composite
def scenarios(draw: Any) -> dict[str, Any]:
    clusters = [{CPU: draw(st.integers(1, 16)) * 1000, MEMORY: draw(st.integers(1, 64)) * GI,
                 GPU: draw(st.sampled_from((0, 0, 4, 8)))} for _ in range(draw(st.integers(1, 3)))]
    queues = []
    for i in range(draw(st.integers(1, 5))):
        parent = draw(st.none() | st.integers(0, i - 1)) if i else None
        capability = draw(st.none() | st.fixed_dictionaries({CPU: st.integers(1, 30).map(lambda c: c * 1000)}))
        guarantee = draw(st.just({}) | st.fixed_dictionaries({CPU: st.integers(1, 8).map(lambda c: c * 1000)}))
        queues.append({"name": f"q{i}", "parent": None if parent is None else f"q{parent}", "capability": capability,
                       "guarantee": guarantee, "weight": draw(st.integers(1, 4)), "priority": draw(st.integers(0, 2)),
                       "open": draw(st.booleans() | st.just(True))})
    ops = draw(st.lists(st.one_of(
        st.tuples(st.just("submit"), st.integers(0, len(queues) - 1), st.integers(1, 8), st.integers(1, 8),
                  st.sampled_from((0, 0, 0, 1, 2)), st.integers(1, 3), st.integers(0, 5)),
        st.tuples(st.just("cycle")),
        st.tuples(st.just("finish"), st.integers(0, 50)),
    ), min_size=1, max_size=40))
    return {"clusters": clusters, "queues": queues, "ops": ops}


def build(scenario: dict[str, Any], audit: bool) -> Engine:
    prio = JobPriority({}, None)
    capacity = Capacity({"lendGuarantees": False}, None)   # guarantees kept free, not lent
    admit: list[Plugin] = [QueueState({}, None), capacity]
    if audit:
        admit.append(Auditor(capacity))
    engine = Engine(Pipeline({"enqueue": [QueueResolve({}, None), prio],
                              "order": [QueuePriority({}, None), Drf({}, None), prio, Fifo({}, None)],
                              "admit": admit}))
    for i, alloc in enumerate(scenario["clusters"]):
        engine.upsert_cluster(Cluster(name=f"m{i}", allocatable={k: v for k, v in alloc.items() if v}))
    for q in scenario["queues"]:
        engine.upsert_queue(Queue(name=q["name"], parent=q["parent"], weight=q["weight"], priority=q["priority"],
                                  open=q["open"], capability=q["capability"], guarantee=dict(q["guarantee"])))
    return engine


def run(scenario: dict[str, Any], audit: bool = True) -> list[tuple[Any, ...]]:
    """Play the ops; return every decision (for determinism) after checking the invariants."""
    engine = build(scenario, audit)
    log: list[tuple[Any, ...]] = []
    held: list[str] = []
    now = 0.0
    for n, op in enumerate(scenario["ops"] + [("cycle",)]):
        now += 1.0
        if op[0] == "submit":
            _, qi, cpu, mem, gpu, replicas, priority = op
            per = {CPU: cpu * 500, MEMORY: mem * GI // 2}
            if gpu:
                per[GPU] = gpu
            engine.submit(Job(id=f"j{n}", name=f"j{n}", queue=f"q{qi}", priority=priority, submit_time=now,
                              tasks=[Task("w", replicas, replicas, per)]))
        elif op[0] == "finish" and held:
            engine.finished(held.pop(op[1] % len(held)))
        elif op[0] == "cycle":
            result = engine.cycle(now)
            by_queue: dict[str, list[Job]] = {}
            for a in result.admitted:
                held.append(a.job_id)
                by_queue.setdefault(a.queue, []).append(engine.state.jobs[a.job_id])
                log.append((n, a.job_id, tuple(sorted((c, tuple(sorted(p.items()))) for c, p in a.placement.items()))))
            for jobs in by_queue.values():          # inside a queue, admissions follow the job order
                keys = [(j.sort_key, j.seq) for j in jobs]
                assert keys == sorted(keys)
            log.append((n, tuple(sorted(result.reasons.items()))))
            check_no_overcommit(engine)
    return log


def check_no_overcommit(engine: Engine) -> None:
    state = engine.state
    holding = [j for j in state.jobs.values() if j.state.holds_resources]
    used: Resources = {}
    for j in holding:
        add_into(used, j.demand)
    for r, amount in used.items():
        assert amount <= state.fleet_allocatable.get(r, 0), r
    for c in state.clusters.values():
        on: Resources = {}
        for j in holding:
            add_into(on, j.placed_demand(c.name))
        for r, amount in on.items():
            assert amount <= c.allocatable.get(r, 0), (c.name, r)
    for q in state.queues.values():
        expected: Resources = {}
        subtree = {q.name}
        for other in state.queues.values():
            if q.name in {a.name for a in state.ancestors(other.name)}:
                subtree.add(other.name)
        for j in holding:
            if j.queue in subtree:
                add_into(expected, j.demand)
        assert q.allocated == expected, q.name
        for r, limit in (q.capability or {}).items():
            assert q.allocated.get(r, 0) <= limit, (q.name, r)


@SETTINGS
@given(scenarios())
def test_capacity_never_overcommits_and_honours_guarantees(scenario: dict[str, Any]) -> None:
    run(scenario)


@SETTINGS
@given(scenarios())
def test_same_inputs_same_admissions(scenario: dict[str, Any]) -> None:
    assert run(scenario, audit=False) == run(scenario, audit=False)


@SETTINGS
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=30), st.integers(0, 30))
def test_priority_order_respected_within_a_queue(priorities: list[int], slots: int) -> None:
    prio = JobPriority({}, None)
    engine = Engine(Pipeline({"enqueue": [prio], "order": [prio, Fifo({}, None)], "admit": [Capacity({}, None)]}))
    engine.upsert_cluster(Cluster(name="m", allocatable={CPU: slots * 1000}))
    engine.upsert_queue(Queue("q"))
    for i, p in enumerate(priorities):
        engine.submit(Job(id=f"j{i}", name=f"j{i}", queue="q", priority=p, submit_time=float(i),
                          tasks=[Task("w", 1, 1, {CPU: 1000})]))
    got = [a.job_id for a in engine.cycle(0.0).admitted]
    expected = [f"j{i}" for i in sorted(range(len(priorities)), key=lambda i: (-priorities[i], i))][:slots]
    assert got == expected


# -- drf against its definition ------------------------------------------------------------------
@st.composite
def queue_trees(draw: Any) -> tuple[dict[str, int], list[Queue]]:
    total = {CPU: draw(st.integers(1, 10**6)), MEMORY: draw(st.integers(1, 10**6)), GPU: draw(st.integers(0, 64))}
    queues: list[Queue] = []
    for i in range(draw(st.integers(1, 12))):
        parent = draw(st.none() | st.integers(0, i - 1)) if i else None
        queues.append(Queue(name=f"q{i:02d}", parent=None if parent is None else f"q{parent:02d}",
                            weight=draw(st.integers(1, 5))))
    for q in queues:          # leaf usage, charged up the tree like FleetState._charge
        usage = draw(st.just({}) | st.fixed_dictionaries(          # empty usage: ties at share 0
            {CPU: st.integers(0, 10**6), MEMORY: st.integers(0, 10**6), GPU: st.integers(0, 64)}))
        node: Optional[Queue] = q
        while node is not None:
            add_into(node.allocated, usage)
            node = next((p for p in queues if p.name == node.parent), None)
    return total, queues


def exact_share(q: Queue, total: dict[str, int]) -> Fraction:
    shares = [Fraction(a, total[r]) if total.get(r, 0) > 0 else Fraction(1) for r, a in q.allocated.items() if a > 0]
    return max(shares, default=Fraction(0)) / q.weight


def reference_order(queues: list[Queue], total: dict[str, int]) -> list[str]:
    """Descend from the root: at each level visit children by (weighted share, name), parent before its children."""
    names = {q.name for q in queues}
    out: list[str] = []

    def visit(parent: Optional[str]) -> None:
        kids = [q for q in queues if (q.parent if q.parent in names else None) == parent]
        for q in sorted(kids, key=lambda k: (exact_share(k, total), k.name)):
            out.append(q.name)
            visit(q.name)

    visit(None)
    return out


@SETTINGS
@given(queue_trees())
def test_drf_order_matches_the_definition(tree: tuple[dict[str, int], list[Queue]]) -> None:
    total, queues = tree
    state = FleetState()
    state.upsert_cluster(Cluster(name="m", allocatable={r: v for r, v in total.items() if v}))
    for q in queues:
        allocated = dict(q.allocated)
        state.upsert_queue(q)
        q.allocated = allocated
    drf = Drf({}, None)
    keyed = sorted(queues, key=lambda q: (drf.atoll_queue_order(q, state, None), q.name))
    assert [q.name for q in keyed] == reference_order(queues, total)


def _seeded_scenario(seed: int) -> dict[str, Any]:
    import random

    rng = random.Random(seed)
    queues = [{"name": f"q{i}", "parent": None if i < 2 else f"q{rng.randint(0, 1)}",
               "capability": rng.choice((None, {CPU: 20_000})), "guarantee": rng.choice(({}, {CPU: 4000})),
               "weight": rng.randint(1, 3), "priority": rng.randint(0, 1), "open": True} for i in range(5)]
    ops: list[tuple[Any, ...]] = []
    for _ in range(120):
        roll = rng.random()
        if roll < 0.7:
            ops.append(("submit", rng.randint(0, 4), rng.randint(1, 8), rng.randint(1, 8), rng.choice((0, 1)),
                        rng.randint(1, 3), rng.randint(0, 5)))
        elif roll < 0.85:
            ops.append(("cycle",))
        else:
            ops.append(("finish", rng.randint(0, 50)))
    return {"clusters": [{CPU: 16_000, MEMORY: 64 * GI, GPU: 4}, {CPU: 8000, MEMORY: 32 * GI, GPU: 0}],
            "queues": queues, "ops": ops}


def test_same_seed_same_admissions_across_processes_and_hash_seeds() -> None:
    import os
    import subprocess
    import sys

    code = ("import json; from tests.plugins.test_queue_properties import run, _seeded_scenario; "
            "print(json.dumps(run(_seeded_scenario(7), audit=False)))")
    outputs = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert '"j' in outputs[0]                     # something was admitted
