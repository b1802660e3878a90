"""Synthetic backlog benchmark: how long one engine cycle takes, full and incremental.

The backlog is deliberately larger than the fleet (most jobs stay pending), so a full
cycle examines every job, and the incremental cycle after one new arrival shows the
O(changes) path. Numbers are wall-clock on this machine and are reported with it.
"""

from __future__ import annotations

import gc
import os
import platform
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from engine.core.scheduler import Engine
from engine.model import Cluster, CycleResult, Job, Queue, Task
from engine.pipeline import Pipeline
from engine.resources import CPU, GPU, MEMORY, PODS

GI = 2**30


@dataclass(frozen=True)
class BenchShape:
    jobs: int
    queues: int
    clusters: int
    seed: int = 1
    node_shapes: bool = False       # clusters report resource models (8 nodes of 8 GPUs each, per-GPU slices)


def build_fleet(shape: BenchShape) -> tuple[list[Cluster], list[Queue], list[Job]]:
    """Clusters of 1,000 cpu / 4Ti / 64 GPUs; queues with weights 1-4; gang jobs of 1-8 pods."""
    rng = random.Random(shape.seed)
    clusters = [
        Cluster(name=f"member{i:03d}", labels={"region": f"r{i % 4}", "gpu-model": "a100" if i % 2 else "h100"},
                allocatable={CPU: 1000_000, MEMORY: 4096 * GI, PODS: 5000, GPU: 64})
        for i in range(shape.clusters)
    ]
    if shape.node_shapes:
        from engine.core.nodefit import shapes_of
        grades = [{GPU: g, CPU: 15_000 * g, MEMORY: 64 * g * GI} for g in range(9)]     # 125 cpu / 512Gi per node
        for cluster in clusters:
            cluster.node_shapes = shapes_of(grades, [0] * 8 + [8])
    queues = [Queue(name=f"q{i:04d}", weight=rng.randint(1, 4), priority=rng.choice((0, 0, 0, 10)))
              for i in range(shape.queues)]
    jobs = [make_job(rng, i, queues) for i in range(shape.jobs)]
    return clusters, queues, jobs


def make_job(rng: random.Random, i: int, queues: list[Queue]) -> Job:
    replicas = rng.randint(1, 8)
    resources = {CPU: rng.choice((1000, 2000, 4000, 8000)), MEMORY: rng.choice((2, 4, 8, 16)) * GI}
    if rng.random() < 0.1:
        resources[GPU] = rng.choice((1, 2, 4, 8))
    return Job(id=f"ns/job-{i}", name=f"job-{i}", namespace="ns", queue=rng.choice(queues).name,
               priority=rng.randint(0, 100), labels={"tier": rng.choice(("prod", "dev"))}, submit_time=float(i),
               tasks=[Task("worker", replicas, replicas, resources)])


def fleet_engine(clusters: list[Cluster], queues: list[Queue], pipeline: Pipeline) -> Engine:
    """An Engine that knows the bench fleet's clusters and queues; its jobs are the caller's to submit (run_bench
    times the submits, tools/instructions.py counts none of them)."""
    engine = Engine(pipeline)
    for cluster in clusters:
        engine.upsert_cluster(cluster)
    for queue in queues:
        engine.upsert_queue(queue)
    return engine


def run_bench(shape: BenchShape, pipeline_factory: Callable[[], Pipeline], policy_name: str) -> dict[str, Any]:
    clusters, queues, jobs = build_fleet(shape)
    engine = fleet_engine(clusters, queues, pipeline_factory())
    started = time.perf_counter()
    for job in jobs:
        engine.submit(job)
    submit_ms = (time.perf_counter() - started) * 1000
    started, cpu_started = time.perf_counter(), time.process_time()
    first = engine.cycle(1.0)
    cycle_ms = (time.perf_counter() - started) * 1000
    cycle_cpu_ms = (time.process_time() - cpu_started) * 1000     # less swayed by other work on a shared machine
    # the same backlog again, after capacity was freed: a second full cycle, warm caches
    engine.state.capacity_epoch += 1
    started = time.perf_counter()
    second = engine.cycle(2.0)
    full_again_ms = (time.perf_counter() - started) * 1000
    rng = random.Random(shape.seed + 1)
    late = make_job(rng, shape.jobs, queues)
    started = time.perf_counter()
    engine.submit(late)
    incremental = engine.cycle(3.0)
    incremental_ms = (time.perf_counter() - started) * 1000
    saturated = run_saturated(shape, pipeline_factory)
    return {
        "policy": policy_name,
        "jobs": shape.jobs, "queues": shape.queues, "clusters": shape.clusters, "seed": shape.seed,
        "submit_ms": round(submit_ms, 1),
        "cycle_ms": round(cycle_ms, 1),
        "cycle_cpu_ms": round(cycle_cpu_ms, 1),
        "cycle_examined": first.examined,
        "cycle_admitted": len(first.admitted),
        "full_cycle_again_ms": round(full_again_ms, 1),
        "full_cycle_again_examined": second.examined,
        "incremental_ms": round(incremental_ms, 2),
        "incremental_examined": incremental.examined,
        "pending_after": engine.pending_count(),
        **saturated,
        "load_average": _load_average(),
        "machine": machine_info(),
    }


def run_saturated(shape: BenchShape, pipeline_factory: Callable[[], Pipeline]) -> dict[str, Any]:
    """Every cluster full of running priority-0 jobs (reported by its status), then a backlog of
    ``shape.jobs`` jobs of priority 1-100: one full cycle, with preemption if the policy has it."""
    clusters, queues, backlog = build_fleet(shape)
    engine = Engine(pipeline_factory())
    for queue in queues:
        engine.upsert_queue(queue)
    rng = random.Random(shape.seed + 2)
    running = 0
    for cluster in clusters:
        engine.upsert_cluster(cluster)
        free = dict(cluster.allocatable)
        while True:
            job = make_job(rng, shape.jobs + running, queues)
            job.id, job.name, job.priority = f"ns/run-{running}", f"run-{running}", 0
            demand = job.demand
            if any(amount > free.get(name, 0) for name, amount in demand.items()):
                break
            for name, amount in demand.items():
                free[name] -= amount
            engine.adopt(job, {cluster.name: {"worker": job.tasks[0].replicas}}, 0.0, running=True)
            running += 1
        cluster.allocated = {name: amount - free.get(name, 0) for name, amount in cluster.allocatable.items()}
        cluster.status_time = 1.0
        engine.upsert_cluster(cluster)
    for job in backlog:
        job.priority = 1 + job.priority % 100
        engine.submit(job)
    started, cpu_started = time.perf_counter(), time.process_time()
    result = engine.cycle(100.0)
    return {
        "saturated_running": running,
        "saturated_cycle_ms": round((time.perf_counter() - started) * 1000, 1),
        "saturated_cycle_cpu_ms": round((time.process_time() - cpu_started) * 1000, 1),
        "saturated_examined": result.examined,
        "saturated_preemptions": len(result.preemptions),
        "saturated_victims": sum(len(p.victims) for p in result.preemptions),
    }


def _load_average() -> list[float]:
    """The 1/5/15-minute load when the run ended: how busy the shared machine was (0 where unknown)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return [0.0, 0.0, 0.0]


def machine_info() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model or platform.processor(), "cores": os.cpu_count(),
            "python": platform.python_version(), "implementation": platform.python_implementation()}


# -- churn: a saturated fleet, a deep backlog, a stream of finishes ---------------------------------
CHURN_SHAPES: list[tuple[int, int, dict[str, int]]] = [       # replicas, minAvailable, per-replica resources
    (1, 1, {CPU: 2000, MEMORY: 8 * GI}),
    (8, 8, {CPU: 4000, MEMORY: 16 * GI}),
    (4, 4, {CPU: 16000, MEMORY: 64 * GI}),
    (1, 1, {CPU: 8000, MEMORY: 32 * GI, GPU: 1}),
    (4, 4, {CPU: 16000, MEMORY: 128 * GI, GPU: 8}),
]


def make_churn_job(rng: random.Random, i: int, queues: list[Queue]) -> Job:
    """A job of one of a few shapes (real backlogs have few): what makes O(shapes) possible."""
    replicas, minimum, resources = rng.choice(CHURN_SHAPES)
    return Job(id=f"ns/job-{i}", name=f"job-{i}", namespace="ns", queue=rng.choice(queues).name,
               priority=rng.randint(0, 2), submit_time=float(i), tasks=[Task("worker", replicas, minimum, dict(resources))])


class Churn:
    """A fleet filled from a backlog several times its size (``fill``), then one admitted job finished at a time
    (``finish``, exact end time, as the simulator reports it) and a cycle after each (``cycle``). The victims of a
    cycle's preemptions are gone (``Engine.evicted``) before the next finish. ``run_churn`` times the cycles;
    tools/instructions.py counts their instructions."""

    def __init__(self, shape: BenchShape, pipeline: Pipeline) -> None:
        self.rng = random.Random(shape.seed)
        clusters, queues, _ = build_fleet(BenchShape(0, shape.queues, shape.clusters, shape.seed))
        self.engine = engine = fleet_engine(clusters, queues, pipeline)
        for i in range(shape.jobs):
            engine.submit(make_churn_job(self.rng, i, queues))
        self.running: list[str] = []
        self.evicting: list[str] = []
        self.now = 1.0

    def fill(self) -> CycleResult:
        """The first cycle, at t=1."""
        return self._settle(self.engine.cycle(self.now))

    def finish(self) -> bool:
        """The last cycle's victims gone, one running job (at random) finishes, one second later; False when
        nothing runs."""
        self.now += 1.0
        engine, now = self.engine, self.now
        for victim in self.evicting:
            engine.evicted(victim, now, ended_at=now)
        gone = set(self.evicting)
        if gone:
            self.running = [j for j in self.running if j not in gone]
        if not self.running:
            return False
        engine.finished(self.running.pop(self.rng.randrange(len(self.running))), True, ended_at=now)
        return True

    def cycle(self) -> CycleResult:
        return self._settle(self.engine.cycle(self.now))

    def _settle(self, result: CycleResult) -> CycleResult:
        self.evicting = [v for p in result.preemptions for v in p.victims]
        self.running.extend(a.job_id for a in result.admitted)
        return result


def run_churn(shape: BenchShape, pipeline_factory: Callable[[], Pipeline], policy_name: str,
              finishes: int = 200) -> dict[str, Any]:
    """Fill the fleet, then time the cycle after each finish (``Churn``)."""
    from engine.stats import percentile

    churn = Churn(shape, pipeline_factory())
    started = time.perf_counter()
    first = churn.fill()
    first_ms = (time.perf_counter() - started) * 1000
    times: list[float] = []
    cpu: list[float] = []          # process CPU per cycle: less swayed by other work on a shared machine
    collector: list[float] = []    # of each cycle's time, Python's cyclic garbage collector's
    examined: list[int] = []
    admitted = 0
    preemptions = 0
    reasons = 0                   # pending reasons changed: each one a Patch and an Event in the controller
    clock = CollectorClock()
    gc.callbacks.append(clock)
    try:
        for _ in range(finishes):
            if not churn.finish():
                break
            clock.ms = 0.0
            clock.timing = True
            started, cpu_started = time.perf_counter(), time.process_time()
            result = churn.cycle()
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - cpu_started) * 1000)
            clock.timing = False
            collector.append(clock.ms)
            examined.append(result.examined)
            admitted += len(result.admitted)
            preemptions += len(result.preemptions)
            reasons += len(result.reasons)
    finally:
        gc.callbacks.remove(clock)
    engine = churn.engine
    return {
        "policy": policy_name, "mode": "churn",
        "jobs": shape.jobs, "queues": shape.queues, "clusters": shape.clusters, "seed": shape.seed,
        "first_cycle_ms": round(first_ms, 1), "first_cycle_admitted": len(first.admitted),
        "finishes": len(times),
        "cycle_ms_p50": _rounded(percentile(times, 50)),
        "cycle_ms_p99": _rounded(percentile(times, 99)),
        "cycle_ms_max": _rounded(max(times, default=None)),
        "cycle_cpu_ms_p50": _rounded(percentile(cpu, 50)),
        "cycle_cpu_ms_p99": _rounded(percentile(cpu, 99)),
        "cycle_cpu_ms_sum": _rounded(sum(cpu)),
        "collector_ms_sum": _rounded(sum(collector)),
        "collector_ms_max": _rounded(max(collector, default=None)),
        "examined_per_cycle_p50": percentile([float(e) for e in examined], 50),
        "examined_per_cycle_p99": percentile([float(e) for e in examined], 99),
        "admitted_after_finishes": admitted,
        "preemptions_after_finishes": preemptions,
        "reasons_after_finishes": reasons,
        "pending_after": engine.pending_count(),
        "load_average": _load_average(),
        "machine": machine_info(),
    }


class CollectorClock:
    """A ``gc.callbacks`` entry adding up, in ``ms``, the time Python's cyclic garbage collector runs while
    ``timing``. ``Engine.cycle`` pauses the collector; it catches up once the cycle is over, on what the cycle
    left and, now and then, on every object the engine keeps (a full collection: ~0.4 s at 100,000 pending
    jobs). Most of that happens inside the churn bench's timed window, so ``run_churn`` reports it
    (``collector_ms_sum``, ``collector_ms_max``): the share of the cycle times that is the collector's."""

    def __init__(self) -> None:
        self.ms = 0.0
        self.timing = False
        self._started: Optional[float] = None

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            if self.timing:
                self.ms += (time.perf_counter() - self._started) * 1000
            self._started = None


def repeated(run: Callable[[], dict[str, Any]], times: int) -> dict[str, Any]:
    """``run`` ``times`` times (each builds its own engine): the result of the run whose ``cycle_cpu_ms`` (or
    ``cycle_cpu_ms_p50``) is the median, with each timing (a key with ``_ms``) also as ``<key>_runs``, every run's
    value in order, so one command gives the spread on a shared machine. Everything else is a decision or a
    count, the same in every run: a difference raises ValueError naming the field (the engine is deterministic)."""
    if times < 1:
        raise ValueError(f"--repeat must be at least 1, got {times}")
    runs = [run() for _ in range(times)]
    if times == 1:
        return runs[0]
    first = runs[0]
    for i, other in enumerate(runs[1:], start=2):
        for key, value in first.items():
            if not _timing(key) and key != "load_average" and other.get(key) != value:
                raise ValueError(f"bench runs disagree on {key}: {value!r} in run 1, {other.get(key)!r} in run {i}")
    rank = "cycle_cpu_ms" if "cycle_cpu_ms" in first else "cycle_cpu_ms_p50"
    order = sorted(runs, key=lambda r: (r[rank] is None, r[rank] or 0.0))     # None: a churn run without finishes
    median = order[(times - 1) // 2]
    out: dict[str, Any] = {"repeat": times}
    for key, value in median.items():
        out[key] = value
        if _timing(key):
            out[f"{key}_runs"] = [r.get(key) for r in runs]
    out["load_average"] = runs[-1]["load_average"]
    return out


def _timing(key: str) -> bool:
    return key.endswith("_ms") or "_ms_" in key


def _rounded(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 2)
