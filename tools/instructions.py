"""Instructions executed by the engine's churn cycles (``engine.bench.Churn``), or by one fresh first cycle
(``--fresh``, as ``engine.bench.run_bench`` builds it), counted by valgrind's callgrind.

On a shared VM, wall and CPU time of one run vary by up to 40 % from run to run; the instruction count of the same
code varies by ~0.01 %, whatever the load, so two checkouts can be compared side by side and a 3 % change shows:

    python tools/instructions.py 20000 200 20 4                # the cycles after the first 4 finishes
    python tools/instructions.py 20000 200 20 20 --warm 10     # 20 cycles after 10 uncounted ones
    python tools/instructions.py 10000 100 10 --fresh --node-shapes    # run_bench's first cycle, node shapes

Run from the checkout to measure (it imports ``engine`` from the working directory). Prints one JSON line: the
instructions counted and each counted cycle's (examined, admitted, preemptions), which must be equal between the
checkouts compared; with ``--fresh``, the cycle's (examined, admitted) and a digest of its admissions in order
(job, queue, placement) and of its pending reasons. Needs valgrind; the whole run is ~40x slower than without it (20,000 jobs: ~2 min).
Only the counted cycles (with ``--fresh``: the one cycle; the fleet's build, upserts and submits are not
counted) run inside ``operator.methodcaller`` (``--toggle-collect=methodcaller_call``), which
nothing else in a cycle calls."""

from __future__ import annotations

import argparse
import hashlib
import json
import operator
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

_INSIDE = "ATOLL_INSTRUCTIONS_INSIDE"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int)
    parser.add_argument("queues", type=int)
    parser.add_argument("clusters", type=int)
    parser.add_argument("finishes", type=int, nargs="?", help="cycles counted, each after one finish (churn)")
    parser.add_argument("--fresh", action="store_true",
                        help="count run_bench's fresh first cycle instead of churn cycles (no finishes)")
    parser.add_argument("--node-shapes", action="store_true", help="with --fresh: clusters report resource models")
    parser.add_argument("--warm", type=int, default=0, help="finishes and cycles run before, not counted")
    parser.add_argument("--policy", default="policies/default.yaml")
    parser.add_argument("--callgrind-out", metavar="FILE",
                        help="keep callgrind's output there, for callgrind_annotate (by default it is deleted)")
    args = parser.parse_args(argv)
    if args.fresh and (args.finishes is not None or args.warm):
        parser.error("--fresh counts one first cycle: no finishes, no --warm")
    if not args.fresh and (args.finishes is None or args.node_shapes):
        parser.error("churn cycles need a count of finishes, and --node-shapes goes with --fresh")
    if os.environ.get(_INSIDE) == "1":
        return _inside(args)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.abspath(args.callgrind_out) if args.callgrind_out else os.path.join(tmp, "callgrind.out")
        run = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                              "--toggle-collect=methodcaller_call", f"--callgrind-out-file={out}",
                              sys.executable, os.path.abspath(__file__), *argv],
                             env={**os.environ, _INSIDE: "1", "PYTHONHASHSEED": "0"}, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stderr[-4000:])
            return run.returncode
        with open(out) as f:
            summary = re.search(r"^summary: (\d+)", f.read(), re.M)
    if summary is None:
        sys.stderr.write("no summary in callgrind's output\n")
        return 1
    print(json.dumps({"instructions": int(summary.group(1)), **json.loads(run.stdout.strip().splitlines()[-1])}))
    return 0


def _inside(args: argparse.Namespace) -> int:
    sys.path.insert(0, os.getcwd())
    if args.fresh:
        return _inside_fresh(args)
    from engine.bench import BenchShape, Churn
    from engine.policy.load import load_policy

    churn = Churn(BenchShape(args.jobs, args.queues, args.clusters, 1), load_policy(args.policy).pipeline)
    first = churn.fill()

    def cycles(count: int) -> list[tuple[int, int, int]]:
        done = []
        for _ in range(count):
            if not churn.finish():
                break
            result = churn.cycle()
            done.append((result.examined, len(result.admitted), len(result.preemptions)))
        return done

    class Counted:
        def run(self) -> list[tuple[int, int, int]]:
            return cycles(args.finishes)

    warm = cycles(args.warm)
    counted = operator.methodcaller("run")(Counted())
    print(json.dumps({"load": [args.jobs, args.queues, args.clusters], "policy": args.policy,
                      "first": [first.examined, len(first.admitted)], "warm": warm, "counted": counted}))
    return 0


def _inside_fresh(args: argparse.Namespace) -> int:
    """run_bench's first cycle: the same fleet, upserts and submits (not counted), then ``engine.cycle(1.0)``."""
    from engine.bench import BenchShape, build_fleet, fleet_engine
    from engine.policy.load import load_policy

    clusters, queues, jobs = build_fleet(BenchShape(args.jobs, args.queues, args.clusters, 1, args.node_shapes))
    engine = fleet_engine(clusters, queues, load_policy(args.policy).pipeline)
    for job in jobs:
        engine.submit(job)

    class Counted:
        def run(self) -> Any:
            return engine.cycle(1.0)

    result = operator.methodcaller("run")(Counted())
    print(json.dumps({"load": [args.jobs, args.queues, args.clusters], "policy": args.policy,
                      "node_shapes": args.node_shapes, **fresh_digest(result)}))
    return 0


def fresh_digest(result: Any) -> dict[str, Any]:
    """What a cycle decided, in a few comparable fields: (examined, admitted), and sha256 digests of its admissions
    in order (job, queue, placement with clusters and tasks sorted) and of its pending reasons (sorted by job)."""
    admissions = [[a.job_id, a.queue, sorted((c, sorted(t.items())) for c, t in a.placement.items())]
                  for a in result.admitted]
    reasons = sorted(result.reasons.items())
    return {"cycle": [result.examined, len(result.admitted)],
            "admissions": hashlib.sha256(json.dumps(admissions).encode()).hexdigest()[:16],
            "reasons": hashlib.sha256(json.dumps(reasons).encode()).hexdigest()[:16]}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
