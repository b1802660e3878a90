"""Benchmark of the placement plugins with engine.bench (not a test: timing belongs here, not in asserts).

    .venv/bin/python -m tests.plugins.bench_place 3200 20 10      # jobs queues clusters [repeats]

Pipelines: the placement part of policies/default.yaml (gpu-capacity + gang admit; gpu-capacity,
cluster-filter, binpack, gang place; requeue-backoff), gang alone, spread with splitReplicas, and
karmada-divided (the karmada-fifo baseline), next to an empty pipeline (the engine's default placement).
"""

from __future__ import annotations

import statistics
import sys
from typing import Callable

from engine.bench import BenchShape, run_bench
from engine.policy.cel import CelCompiler
from engine.pipeline import Pipeline
from plugins.binpack import Binpack
from plugins.cluster_cel import ClusterFilter
from plugins.gang import Gang
from plugins.gpu_capacity import GpuCapacity
from plugins.karmada_divided import KarmadaDivided
from plugins.requeue_backoff import RequeueBackoff
from plugins.spread import Spread

REGION = ("!('atoll.dev/region' in job.labels) || "
          "('region' in cluster.labels && cluster.labels['region'] == job.labels['atoll.dev/region'])")
CEL = CelCompiler()


def placement() -> Pipeline:
    g, gpu = Gang({}, None), GpuCapacity({}, None)
    return Pipeline({"admit": [gpu, g], "place": [ClusterFilter({"expression": REGION}, CEL), gpu, g, Binpack({}, None)],
                     "recover": [RequeueBackoff({}, None)]})


def gang() -> Pipeline:
    g = Gang({}, None)
    return Pipeline({"admit": [g], "place": [g]})


def spread() -> Pipeline:
    g = Gang({}, None)
    return Pipeline({"admit": [g], "place": [Spread({"splitReplicas": True}, None), g]})


def karmada() -> Pipeline:
    return Pipeline({"place": [KarmadaDivided({}, None)]})


PIPELINES: dict[str, Callable[[], Pipeline]] = {
    "none": lambda: Pipeline({}), "gang": gang, "placement": placement, "spread-split": spread, "karmada-divided": karmada}


def main(argv: list[str]) -> None:
    jobs, queues, clusters = (int(a) for a in argv[:3])
    repeats = int(argv[3]) if len(argv) > 3 else 1
    names = argv[4:] or list(PIPELINES)
    shape = BenchShape(jobs, queues, clusters)
    for name in names:
        rows = [run_bench(shape, PIPELINES[name], name) for _ in range(repeats)]
        summary = {k: statistics.median(r[k] for r in rows)
                   for k in ("cycle_ms", "full_cycle_again_ms", "incremental_ms", "cycle_admitted")}
        print(f"{name:16} {summary}")


if __name__ == "__main__":
    main(sys.argv[1:])
