"""FleetState's node view: reported node shapes minus Atoll's in-flight pods decide "does it fit"."""

from __future__ import annotations

from engine.core.nodefit import allocatable_modelings, shapes_of
from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Task
from engine.resources import GPU
from plugins.binpack import Binpack
from plugins.capacity import Capacity
from plugins.gang import Gang
from plugins.gpu_capacity import GpuCapacity
from tests.plugins._fleet import engine

GRADES = [{GPU: g} for g in range(9)]             # one grade per GPU count: an exact histogram


def gpu_cluster(name: str, used: list[int], shapes: bool = True, at: float = 0.0) -> Cluster:
    """8-GPU nodes, ``used`` GPUs bound on each."""
    nodes = [({GPU: 8}, [{GPU: u}] if u else []) for u in used]
    return Cluster(name, allocatable={GPU: 8 * len(used)}, allocated={GPU: sum(used)}, status_time=at,
                   node_shapes=shapes_of(GRADES, allocatable_modelings(GRADES, nodes)) if shapes else None)


def gpu_job(name: str, gpus: int, pods: int = 1) -> Job:
    return Job(id=name, name=name, queue="q", tasks=[Task("t", pods, pods, {GPU: gpus})])


def test_summed_gpus_fit_but_no_node_does() -> None:
    state = FleetState()
    state.upsert_cluster(gpu_cluster("a", [5, 5, 5, 5]))
    assert state.free("a") == {GPU: 12}
    assert state.replicas_fit("a", {GPU: 8}) == 0           # totals alone: 1
    assert state.replicas_fit("a", {GPU: 3}) == 4
    assert not state.fits_tasks("a", [({GPU: 8}, 1)])
    assert state.fits_tasks("a", [({GPU: 3}, 4)])
    assert not state.fits_tasks("a", [({GPU: 3}, 4), ({GPU: 1}, 1)])     # totals hold 13 > 12
    assert state.node_note("a") == "node shapes: from resource models (nvidia.com/gpu)"


def test_without_shapes_totals_decide() -> None:
    state = FleetState()
    state.upsert_cluster(gpu_cluster("a", [5, 5, 5, 5], shapes=False))
    assert state.replicas_fit("a", {GPU: 8}) == 1
    assert state.fits_tasks("a", [({GPU: 8}, 1)])
    assert state.node_note("a") == "node shapes: totals only (no resource models)"


def test_inflight_pods_are_booked_on_nodes_until_a_newer_report() -> None:
    gang = Gang({}, None)
    e = engine({"admit": [gang], "place": [gang]}, [gpu_cluster("a", [0, 0, 0, 0])])
    for i in range(6):
        e.submit(gpu_job(f"inf-{i}", 5))
    result = e.cycle(1.0)
    assert len(result.admitted) == 4                      # one 5-GPU pod per 8-GPU node; totals said 6
    assert e.state.replicas_fit("a", {GPU: 5}) == 0
    assert "on nodes" in e.state.jobs["inf-4"].pending_reason
    for i in range(4):
        e.started(f"inf-{i}", 1.0)
    # a report taken after they started shows them on the nodes: reservations dropped, same answer
    e.upsert_cluster(gpu_cluster("a", [5, 5, 5, 5], at=2.0))
    assert e.state.inflight("a") == {}
    assert e.state.replicas_fit("a", {GPU: 5}) == 0 and e.state.replicas_fit("a", {GPU: 3}) == 4


def test_a_freed_node_reawakens_a_job_whose_totals_did_not_change() -> None:
    """Same free GPU total (12), but one whole node free: the capacity epoch moves, the 8-GPU job goes."""
    gang = Gang({}, None)
    e = engine({"admit": [gang], "place": [gang]}, [gpu_cluster("a", [5, 5, 5, 5])])
    e.upsert_cluster(gpu_cluster("a", [4, 4, 4, 8], at=1.0))   # free 4, 4, 4, 0: 12
    e.submit(gpu_job("train", 8))
    assert e.cycle(2.0).admitted == []
    e.upsert_cluster(gpu_cluster("a", [0, 6, 6, 8], at=3.0))   # free 8, 2, 2, 0: still 12, one node whole
    assert [a.job_id for a in e.cycle(4.0).admitted] == ["train"]


def test_binpack_and_gpu_capacity_move_a_pod_to_the_cluster_whose_nodes_fit() -> None:
    """The issue's example: binpack prefers the fuller cluster, whose summed GPUs fit but no node does."""
    a = gpu_cluster("a", [5, 5, 5, 5])                  # 12 free, fuller
    b = gpu_cluster("b", [0, 0, 0, 0])
    gpu, gang = GpuCapacity({}, None), Gang({}, None)
    e = engine({"admit": [Capacity({}, None), gpu, gang], "place": [gpu, gang, Binpack({}, None)]}, [a, b])
    e.submit(gpu_job("inf", 5))
    e.submit(gpu_job("train", 8, pods=2))
    placed = {x.job_id: set(x.placement) for x in e.cycle(1.0).admitted}
    assert placed == {"inf": {"b"}, "train": {"b"}}
    assert "fit checked by: b: node shapes: from resource models (nvidia.com/gpu)" in e.explain("inf")
    e.submit(gpu_job("late", 8, pods=3))
    e.cycle(2.0)
    assert "fit checked by: node shapes: from resource models (nvidia.com/gpu) (every cluster)" in e.explain("late")


def test_releasing_an_inflight_job_gives_its_node_back() -> None:
    state = FleetState()
    state.upsert_cluster(gpu_cluster("a", [0, 0]))
    jobs = [gpu_job(f"j{i}", 5) for i in range(2)]
    for job in jobs:
        job.placement, job.state = {"a": {"t": 1}}, JobState.ADMITTED
        state.jobs[job.id] = job
        assert state.replicas_fit("a", {GPU: 5}) == 2 - int(job is jobs[1])   # view cached, then booked on
        state.hold(job)
    assert state.replicas_fit("a", {GPU: 5}) == 0 and state.replicas_fit("a", {GPU: 3}) == 2
    state.release(jobs[0])
    assert state.replicas_fit("a", {GPU: 5}) == 1 and state.fits_tasks("a", [({GPU: 8}, 1)])
