"""``python -m engine.dashboard.bench --jobs 10000``: how long the dashboard takes to answer for a big backlog.

Builds an engine with the default policy, 10 queues, 4 clusters and N pending jobs (none fits: every one
keeps a reason), runs one cycle, then times each page's first response through the real aiohttp app
(view-model + template + HTTP on loopback), median of ``--repeat`` requests. Timing is printed, never
asserted (see docs/dashboard.md for measured numbers and the load they were taken at).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

from engine._data import data_path
from engine.core.scheduler import Engine
from engine.dashboard.source import PolicyLog, Source
from engine.model import Cluster, Job, Queue, Task
from engine.resources import parse_resources

POLICY = data_path("policies", "default.yaml")
PAGES = ("/jobs?state=pending", "/api/jobs?state=pending", "/queues", "/clusters", "/jobs/default/job-00042")


def backlog_source(jobs: int, queues: int = 10, clusters: int = 4) -> Source:
    from engine.policy import load_policy

    policy = load_policy(POLICY)
    engine = Engine(policy.pipeline)
    for c in range(clusters):
        engine.upsert_cluster(Cluster(f"member{c + 1}", allocatable=parse_resources(
            {"cpu": "64", "memory": "256Gi", "pods": "1000"})))
    for q in range(queues):
        engine.upsert_queue(Queue(f"team-{q:02d}", weight=1 + q % 3))
    big = parse_resources({"cpu": "100", "memory": "1Gi"})       # more than any cluster: every job waits
    for i in range(jobs):
        engine.submit(Job(id=f"default/job-{i:05d}", name=f"job-{i:05d}", queue=f"team-{i % queues:02d}",
                          priority=i % 7, submit_time=float(i), tasks=[Task("w", 1, 1, big)]))
    engine.cycle(float(jobs))
    log = PolicyLog()
    log.loaded(policy.name, policy.digest, POLICY.read_text(), str(POLICY), "gate", at=0.0)
    return Source(engine, log, clock=lambda: float(jobs) + 60)


async def measure(source: Source, repeat: int) -> dict[str, dict[str, float]]:
    """Per page: the first request (templates compiled then) and the median of ``repeat`` more, as wall
    time and as this process's CPU time (client and server together: an upper bound that a busy machine
    inflates far less than wall time)."""
    from aiohttp.test_utils import TestClient, TestServer

    from engine.dashboard.app import make_app

    out: dict[str, dict[str, float]] = {}
    async with TestClient(TestServer(make_app(source))) as client:
        for page in PAGES:
            wall, cpu = [], []
            for _ in range(repeat + 1):
                start, start_cpu = time.perf_counter(), time.process_time()
                response = await client.get(page)
                await response.read()
                assert response.status == 200, page
                wall.append(1000 * (time.perf_counter() - start))
                cpu.append(1000 * (time.process_time() - start_cpu))
            out[page] = {"firstWallMs": round(wall[0], 1), "firstCpuMs": round(cpu[0], 1),
                         "medianWallMs": round(statistics.median(wall[1:]), 1),
                         "medianCpuMs": round(statistics.median(cpu[1:]), 1)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    source = backlog_source(args.jobs)
    setup = time.perf_counter() - start
    timings = asyncio.run(measure(source, args.repeat))
    print(json.dumps({"pendingJobs": args.jobs, "setupSeconds": round(setup, 2), "pages": timings,
                      "loadAverage": [round(x, 2) for x in os.getloadavg()]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
