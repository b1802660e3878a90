"""A small engine state with known answers for the dashboard tests (the default policy, real plugins)."""

from __future__ import annotations

from pathlib import Path

from engine.core.scheduler import Engine
from engine.dashboard.source import PolicyLog, Source
from engine.model import Cluster, Job, Queue, Task
from engine.policy import load_policy
from engine.resources import parse_resources

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "default.yaml"
HOSTILE = "<script>alert('x')</script>\"é🙂"


def res(gpus: str = "", **amounts: str) -> dict[str, int]:
    return parse_resources({**amounts, **({"nvidia.com/gpu": gpus} if gpus else {})})


def job(name: str, queue: str, cpu: str, replicas: int = 1, at: float = 0.0, **kw: object) -> Job:
    return Job(id=f"default/{name}", name=name, queue=queue, submit_time=at,
               tasks=[Task("w", replicas, replicas, res(cpu=cpu, memory="1Gi"))], **kw)  # type: ignore[arg-type]


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def known_source(hostile: bool = False) -> tuple[Source, Engine, Clock]:
    """Clusters m1 (8 cpu, 4 GPUs) and m2 (8 cpu); queues research (w1) > team-a, team-b; prod (w2).
    After one cycle at t=10: a1 (4 cpu) on one cluster, p1 (8 cpu) on the other, b1 waits (4 cpu: no room),
    p2 waits; jobs in a queue that does not exist wait with that reason."""
    policy = load_policy(POLICY)
    engine = Engine(policy.pipeline)
    engine.upsert_cluster(Cluster("m1", labels={"gpu": "a100"}, allocatable=res(cpu="8", memory="32Gi", pods="110",
                                                                               gpus="4")))
    engine.upsert_cluster(Cluster("m2", allocatable=res(cpu="8", memory="32Gi", pods="110")))
    for q in (Queue("research", weight=1), Queue("team-a", parent="research"), Queue("team-b", parent="research"),
              Queue("prod", weight=2, guarantee=res(cpu="4"))):
        engine.upsert_queue(q)
    engine.submit(job("a1", "team-a", "4", at=1))
    engine.submit(job("p1", "prod", "8", at=2))
    engine.submit(job("b1", "team-b", "4", at=3))
    engine.submit(job("p2", "prod", "2", replicas=2, at=4))
    engine.submit(job("lost", "nowhere", "1", at=5))
    if hostile:
        engine.submit(Job(id=f"default/{HOSTILE}", name=HOSTILE, queue="team-a", submit_time=6,
                          labels={"x<y": HOSTILE}, tasks=[Task("w", 1, 1, res(cpu="64"))]))
    engine.cycle(10.0)
    log = PolicyLog()
    log.loaded(policy.name, policy.digest, POLICY.read_text(), str(POLICY), "gate", at=5.0)
    clock = Clock(100.0)
    return Source(engine, log, clock=clock), engine, clock
