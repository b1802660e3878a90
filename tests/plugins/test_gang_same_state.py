"""gang's admit verdict shared by the jobs of one shape while the state stays the same (``Gang.atoll_admit``):
kept with the FleetState and its ``changes``, asked again after any change (bookings, releases, dry runs'
supposed victims and their undoing, reports), in another state, and in a new cycle. Every verdict of a plugin
that keeps them is compared with a new plugin's (which has none kept), refusal texts included; every job shape
is asked twice per state, so the kept verdict is what answers the second time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.state import FleetState
from engine.model import Job, Task
from engine.resources import CPU, GPU
from plugins.gang import Gang
from tests.core.test_fit_holds import EVENT, POD, REPORT, cluster, play

ASK = st.tuples(POD, st.integers(1, 12), st.integers(0, 12))       # per pod, minAvailable, extra replicas


def ask(spec: tuple[tuple[int, int], int, int], n: int) -> Job:
    (gpus, cpu), low, extra = spec
    return Job(id=f"ask{n}", name=f"ask{n}", queue="q",     # tasks are fixed once a Job is built: minAvailable now
               tasks=[Task("t", low + extra, low, {CPU: cpu, **({GPU: gpus} if gpus else {})})])


def check(gang: Gang, state: FleetState, asks: list, split: bool) -> None:
    for n, spec in enumerate(asks):
        for _ in range(2):                      # a new Job of the same shape: the second answer is the kept one
            job = ask(spec, n)
            assert gang.atoll_admit(job, state) == Gang({"allowSplit": split}, None).atoll_admit(job, state)


@settings(max_examples=200, deadline=None)
@given(reports=st.lists(REPORT, min_size=1, max_size=4), events=st.lists(EVENT, max_size=14),
       asks=st.lists(ASK, min_size=1, max_size=5), split=st.booleans())
def test_kept_verdicts_equal_new_ones_after_every_change(reports: list, events: list, asks: list,
                                                         split: bool) -> None:
    state = FleetState()
    names = [f"c{i}" for i in range(len(reports))]
    for name, (counts, ready) in zip(names, reports):
        state.upsert_cluster(cluster(name, counts, ready))
    gang = Gang({"allowSplit": split}, None)
    play(state, names, events, lambda: check(gang, state, asks, split))


def test_a_verdict_is_kept_for_its_own_state_only() -> None:
    """Two states with as many changes each, one with a node for the gang and one without: each gets its own."""
    roomy, full = FleetState(), FleetState()
    roomy.upsert_cluster(cluster("c0", [0] * 8 + [1], True))            # one node of 8 GPUs
    full.upsert_cluster(cluster("c0", [0, 0, 0, 0, 1, 1, 0, 0, 0], True))   # 4 + 5 GPUs on two nodes
    assert roomy.changes == full.changes
    gang = Gang({}, None)
    assert gang.atoll_admit(ask(((8, 1000), 1, 0), 0), roomy) is None
    refusal = gang.atoll_admit(ask(((8, 1000), 1, 0), 1), full)
    assert refusal is not None and "on nodes" in refusal.reason
    assert gang.atoll_admit(ask(((8, 1000), 1, 0), 2), roomy) is None


def test_a_new_cycle_asks_again() -> None:
    """A measurement's oracle (engine.sim.node_oracle) answers the node check from facts the state does not
    count as changes; between cycles they move, so a verdict is not carried into the next cycle."""
    state = FleetState()
    state.upsert_cluster(cluster("c0", [0] * 8 + [1], True))
    room = [True]
    setattr(state, "fits_one_somewhere", lambda per_pod, count: room[0])
    gang = Gang({}, None)
    assert gang.atoll_admit(ask(((8, 1000), 1, 0), 0), state) is None
    room[0] = False
    assert gang.atoll_admit(ask(((8, 1000), 1, 0), 1), state) is None          # same cycle, same state: kept
    gang.atoll_cycle_start(state, 1.0)
    refusal = gang.atoll_admit(ask(((8, 1000), 1, 0), 2), state)
    assert refusal is not None and "on nodes" in refusal.reason
