"""gpu-capacity: GPU quotas, model matching, O(1) refusal and the free-GPU filter."""

from __future__ import annotations

from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Queue
from plugins.gang import Gang
from plugins.gpu_capacity import GpuCapacity

from tests.plugins._fleet import cluster, engine, job, task

A100 = {"gpu-model": "A100"}
H100 = {"nvidia.com/gpu.product": "h100"}


def fleet() -> FleetState:
    s = FleetState()
    s.upsert_cluster(cluster("a", A100, cpu="64", nvidia_com_gpu="8"))
    s.upsert_cluster(cluster("h", H100, cpu="64", nvidia_com_gpu="4"))
    s.upsert_cluster(cluster("cpu", cpu="64"))
    s.upsert_queue(Queue("q"))
    return s


def gpu_job(n: int, model: str = "", replicas: int = 1, queue: str = "q", annotate: bool = False) -> Job:
    meta = {"atoll.dev/gpu-model": model} if model else {}
    return job("j", task("w", replicas, cpu="1", nvidia_com_gpu=str(n)), queue=queue,
               labels={} if annotate else meta, annotations=meta if annotate else {})


def test_jobs_without_gpus_are_not_touched() -> None:
    p = GpuCapacity({"queueQuotas": {"q": 0}}, None)
    s = fleet()
    assert p.atoll_admit(job("j", task("w", 1, cpu="1")), s) is None
    assert p.atoll_filter(job("j", task("w", 1, cpu="1")), list(s.clusters.values()), s) == {}


def test_o1_refusal_when_no_cluster_has_the_gpus_free() -> None:
    refusal = GpuCapacity({}, None).atoll_admit(gpu_job(3, replicas=3), fleet())
    assert refusal is not None and refusal.retry_at is None
    assert refusal.reason == "needs nvidia.com/gpu=9 in one cluster; no ready cluster has that much free"


def test_model_matching_uses_cluster_label_then_gpu_product_case_insensitively() -> None:
    p = GpuCapacity({}, None)
    s = fleet()
    clusters = list(s.clusters.values())
    assert p.atoll_admit(gpu_job(2, "a100"), s) is None
    assert p.atoll_admit(gpu_job(2, "H100", annotate=True), s) is None
    assert set(p.atoll_filter(gpu_job(2, "h100"), clusters, s)) == {"a", "cpu"}
    assert p.atoll_filter(gpu_job(2, "h100"), clusters, s)["a"] == "GPU model a100, job asks for h100"
    assert set(p.atoll_filter(gpu_job(2, "a100,h100"), clusters, s)) == {"cpu"}
    refusal = p.atoll_admit(gpu_job(1, "v100"), s)
    assert refusal is not None and "no ready cluster has GPU model v100" in refusal.reason


def test_model_cluster_without_enough_free_gpus() -> None:
    p = GpuCapacity({}, None)
    s = fleet()
    refusal = p.atoll_admit(gpu_job(5, "h100"), s)     # h has 4, a has 8 but is the wrong model
    assert refusal is not None and "with GPU model h100" in refusal.reason
    reasons = p.atoll_filter(gpu_job(5), list(s.clusters.values()), s)
    assert set(reasons) == {"h", "cpu"} and reasons["h"] == "less than nvidia.com/gpu=5 free"


def test_model_index_follows_label_changes() -> None:
    p = GpuCapacity({}, None)
    s = fleet()
    assert p.atoll_admit(gpu_job(1, "l4"), s) is not None
    s.upsert_cluster(cluster("cpu", {"gpu-model": "L4"}, cpu="64", nvidia_com_gpu="2"))
    assert p.atoll_admit(gpu_job(1, "l4"), s) is None


def test_queue_gpu_quota_and_capability_including_ancestors() -> None:
    s = fleet()
    s.upsert_queue(Queue("parent"))
    s.upsert_queue(Queue("child", parent="parent", capability={"nvidia.com/gpu": 6}))
    s.queues["child"].allocated = {"nvidia.com/gpu": 4}
    s.queues["parent"].allocated = {"nvidia.com/gpu": 4, "amd.com/gpu": 1}
    p = GpuCapacity({"queueQuotas": {"parent": 6}}, None)
    assert p.atoll_admit(gpu_job(2, queue="child"), s) is not None       # parent: 5 in use + 2 > 6
    refusal = p.atoll_admit(gpu_job(2, queue="child"), s)
    assert refusal is not None and refusal.reason.startswith("queue parent GPU quota 6 would be exceeded")
    p2 = GpuCapacity({}, None)
    refusal = p2.atoll_admit(gpu_job(3, queue="child"), s)
    assert refusal is not None and "capability nvidia.com/gpu=6" in refusal.reason
    assert p2.atoll_admit(gpu_job(2, queue="child"), s) is None


def test_gpu_resource_globs() -> None:
    p = GpuCapacity({"gpuResources": ["nvidia.com/mig-*"]}, None)
    assert p.gpus({"nvidia.com/mig-1g.10gb": 2, "nvidia.com/gpu": 1, "cpu": 4}) == {"nvidia.com/mig-1g.10gb": 2}


def test_quota_is_enforced_through_a_real_engine() -> None:
    p = GpuCapacity({"queueQuotas": {"q": 8}}, None)
    g = Gang({}, None)
    e = engine({"admit": [p, g], "place": [p, g]},
               [cluster("a", A100, cpu="64", nvidia_com_gpu="8"), cluster("b", A100, cpu="64", nvidia_com_gpu="8")])
    for i in range(3):
        j = gpu_job(4, "a100")
        j.id = j.name = f"j{i}"
        e.submit(j)
    result = e.cycle(0)
    assert len(result.admitted) == 2
    assert "GPU quota 8" in e.state.jobs["j2"].pending_reason and e.state.jobs["j2"].state is JobState.PENDING


def test_split_mode_sums_model_clusters() -> None:
    s = FleetState()
    s.upsert_cluster(Cluster("a1", labels=A100, allocatable={"nvidia.com/gpu": 4}))
    s.upsert_cluster(Cluster("a2", labels=A100, allocatable={"nvidia.com/gpu": 4}))
    s.upsert_queue(Queue("q"))
    assert GpuCapacity({}, None).atoll_admit(gpu_job(1, "a100", replicas=6), s) is not None
    split = GpuCapacity({"allowSplit": True}, None)
    assert split.atoll_admit(gpu_job(1, "a100", replicas=6), s) is None
    assert split.atoll_admit(gpu_job(1, "a100", replicas=9), s) is not None
    assert split.atoll_filter(gpu_job(1, "a100", replicas=6), list(s.clusters.values()), s) == {}


def test_min_available_zero_needs_one_gpu_replica() -> None:
    p = GpuCapacity({}, None)
    s = fleet()
    lax = job("j", task("w", 10, 0, cpu="1", nvidia_com_gpu="3"))
    assert p.job_gpus(lax) == ({"nvidia.com/gpu": 30}, {"nvidia.com/gpu": 3})
    assert p.atoll_admit(lax, s) is None
    assert p.atoll_admit(job("k", task("w", 10, 0, cpu="1", nvidia_com_gpu="9")), s) is not None
