"""tools/instructions.py: the churn cycles whose instructions callgrind counts are the bench's own (``Churn``), so a
count compares what ``atoll bench --churn`` times. Run here without valgrind (its inner side only)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def test_the_fresh_count_is_run_bench_s_first_cycle_and_its_decisions() -> None:
    """``--fresh``: one first cycle of the fleet ``run_bench`` builds (node shapes too); its (examined, admitted)
    and digests of its admissions, in order with their placements, and of its pending reasons."""
    from engine.bench import build_fleet, fleet_engine

    tool = _tool()
    for shapes in ([], ["--node-shapes"]):
        run = subprocess.run([sys.executable, str(ROOT / "tools" / "instructions.py"), "600", "6", "2", "--fresh",
                              *shapes], cwd=ROOT, env={**os.environ, "ATOLL_INSTRUCTIONS_INSIDE": "1"},
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        clusters, queues, jobs = build_fleet(BenchShape(600, 6, 2, 1, bool(shapes)))
        engine = fleet_engine(clusters, queues, load_policy(ROOT / "policies" / "default.yaml").pipeline)
        for job in jobs:
            engine.submit(job)
        result = engine.cycle(1.0)
        assert out["node_shapes"] is bool(shapes)
        assert {k: out[k] for k in ("cycle", "admissions", "reasons")} == tool.fresh_digest(result)
        assert out["cycle"] == [600, len(result.admitted)] and 0 < len(result.admitted) < 600


def test_the_digest_tells_a_placement_or_an_order_apart() -> None:
    from engine.model import Admission, CycleResult

    tool = _tool()
    a, b = Admission("a", "q", {"c1": {"t": 1}}, 1.0), Admission("b", "q", {"c2": {"t": 2}}, 1.0)
    base = tool.fresh_digest(CycleResult(admitted=[a, b], reasons={"x": "full"}, examined=3))
    assert base["cycle"] == [3, 2]
    other = [CycleResult(admitted=[b, a], reasons={"x": "full"}, examined=3),
             CycleResult(admitted=[a, Admission("b", "q", {"c2": {"t": 3}}, 1.0)], reasons={"x": "full"}, examined=3),
             CycleResult(admitted=[a, b], reasons={"x": "empty"}, examined=3)]
    assert all(tool.fresh_digest(r) != base for r in other)


def test_fresh_takes_no_finishes_and_churn_needs_them() -> None:
    for argv in (["600", "6", "2", "3", "--fresh"], ["600", "6", "2", "--fresh", "--warm", "1"], ["600", "6", "2"],
                 ["600", "6", "2", "3", "--node-shapes"]):
        run = subprocess.run([sys.executable, str(ROOT / "tools" / "instructions.py"), *argv], cwd=ROOT,
                             env={**os.environ, "ATOLL_INSTRUCTIONS_INSIDE": "1"}, capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 2 and "error:" in run.stderr, argv


def _tool() -> Any:
    """tools/instructions.py as a module (tools/ is no package)."""
    spec = importlib.util.spec_from_file_location("instructions_tool", ROOT / "tools" / "instructions.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool
