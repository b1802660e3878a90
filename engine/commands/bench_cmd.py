"""``atoll bench``: time one engine cycle over a synthetic backlog (see engine.bench)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine._data import data_path
from engine.bench import BenchShape, repeated, run_bench, run_churn
from engine.commands.args import count as _count
from engine.commands.output import add_output, emit
from engine.pipeline import Pipeline

DEFAULT_POLICY = data_path("policies", "default.yaml")
MAX_JOBS = 1_000_000         # 5x the simulator's scenario cap (engine.sim.scenario_checks.MAX_JOBS, 200,000)
MAX_QUEUES = 1_000_000
MAX_CLUSTERS = 100_000       # the simulator's cap of nodes over all clusters (engine.sim.scenario_checks.MAX_NODES)
MAX_FINISHES = MAX_JOBS      # at most one finish per job: more never happen (the stream stops when nothing runs)
MAX_REPEAT = 100             # fresh engines, one after another: 100 runs of 100,000 jobs take hours; docs use 3


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser("bench", help="time a scheduling cycle over a synthetic backlog (JSON out)")
    parser.add_argument("--jobs", type=_count(1, MAX_JOBS), default=3200,
                        help=f"pending jobs in the backlog, 1 to {MAX_JOBS:,} (default 3200)")
    parser.add_argument("--queues", type=_count(1, MAX_QUEUES), default=10,
                        help=f"queues, 1 to {MAX_QUEUES:,} (default 10)")
    parser.add_argument("--clusters", type=_count(1, MAX_CLUSTERS), default=10,
                        help=f"member clusters, 1 to {MAX_CLUSTERS:,} (default 10)")
    parser.add_argument("--seed", type=_count(0), default=1,
                        help="seed of the synthetic backlog, 0 or more (as spec.seed of a scenario; default 1)")
    parser.add_argument("--node-shapes", action="store_true",
                        help="clusters report resource models (8 x 8-GPU nodes each): node-aware fit (docs/node-shapes.md)")
    parser.add_argument("--churn", action="store_true",
                        help="saturated fleet, deep backlog, a stream of finishes: per-cycle p50/p99 and "
                             "examinations per cycle after each finish")
    parser.add_argument("--finishes", type=_count(1, MAX_FINISHES), default=200,
                        help=f"finishes timed with --churn, 1 to {MAX_FINISHES:,}; at most one per job (default 200)")
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY, help="policy file (default policies/default.yaml)")
    parser.add_argument("--repeat", type=_count(1, MAX_REPEAT), default=1,
                        help=f"run N times, 1 to {MAX_REPEAT}: each on a fresh engine, the median run (by cycle CPU) "
                             "with every run's timings as <key>_runs; decisions must agree (default 1)")
    add_output(parser, ("json", "yaml"), "json")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from engine.policy import load_policy

    policy = load_policy(args.policy)      # validated once; each run gets fresh plugin instances

    def factory() -> Pipeline:
        return load_policy(args.policy).pipeline

    shape = BenchShape(args.jobs, args.queues, args.clusters, args.seed, args.node_shapes)
    try:
        if args.churn:
            result = repeated(lambda: run_churn(shape, factory, policy.name, args.finishes), args.repeat)
        else:
            result = repeated(lambda: run_bench(shape, factory, policy.name), args.repeat)
    except ValueError as exc:            # runs that decided differently: a bug worth reporting, not a figure
        print(f"atoll bench: {exc}", file=sys.stderr)
        return 1
    emit(result, args.output)
    return 0
