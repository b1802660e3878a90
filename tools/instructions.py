"""Instructions executed by the engine's churn cycles (``engine.bench.Churn``), counted by valgrind's callgrind.

On a shared VM, wall and CPU time of one run vary by up to 40 % from run to run; the instruction count of the same
code varies by ~0.01 %, whatever the load, so two checkouts can be compared side by side and a 3 % change shows:

    python tools/instructions.py 20000 200 20 4                # the cycles after the first 4 finishes
    python tools/instructions.py 20000 200 20 20 --warm 10     # 20 cycles after 10 uncounted ones

Run from the checkout to measure (it imports ``engine`` from the working directory). Prints one JSON line: the
instructions counted and each counted cycle's (examined, admitted, preemptions), which must be equal between the
checkouts compared. Needs valgrind; the whole run is ~40x slower than without it (20,000 jobs: ~2 min).
Only the counted cycles run inside ``operator.methodcaller`` (``--toggle-collect=methodcaller_call``), which
nothing else in a cycle calls."""

from __future__ import annotations

import argparse
import json
import operator
import os
import re
import subprocess
import sys
import tempfile

_INSIDE = "ATOLL_INSTRUCTIONS_INSIDE"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int)
    parser.add_argument("queues", type=int)
    parser.add_argument("clusters", type=int)
    parser.add_argument("finishes", type=int, help="cycles counted, each after one finish")
    parser.add_argument("--warm", type=int, default=0, help="finishes and cycles run before, not counted")
    parser.add_argument("--policy", default="policies/default.yaml")
    args = parser.parse_args(argv)
    if os.environ.get(_INSIDE) == "1":
        return _inside(args)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
