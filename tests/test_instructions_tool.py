"""tools/instructions.py: the churn cycles whose instructions callgrind counts are the bench's own (``Churn``), so a
count compares what ``atoll bench --churn`` times. Run here without valgrind (its inner side only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.bench import BenchShape, Churn
from engine.policy import load_policy

ROOT = Path(__file__).resolve().parents[1]


def test_the_counted_cycles_are_the_benchs_after_the_warm_ones() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "instructions.py"), "600", "6", "2", "3", "--warm", "2"],
                         cwd=ROOT, env={**os.environ, "ATOLL_INSTRUCTIONS_INSIDE": "1"}, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    churn = Churn(BenchShape(600, 6, 2, 1), load_policy(ROOT / "policies" / "default.yaml").pipeline)
    first = churn.fill()
    cycles = []
    for _ in range(5):
        assert churn.finish()
        result = churn.cycle()
        cycles.append([result.examined, len(result.admitted), len(result.preemptions)])
    assert out["first"] == [first.examined, len(first.admitted)]
    assert out["warm"] == cycles[:2] and out["counted"] == cycles[2:]
    assert any(c[0] for c in cycles)              # the cycles examine something: a count of nothing would pass too
