"""``atoll bench --repeat N``: one command gives the spread of a timing on a shared machine, and the runs must
decide alike (the engine is deterministic; a difference is a bug, not a figure)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.bench import repeated
from engine.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def runs(*values: dict[str, Any]) -> Any:
    """A run function handing out ``values`` one call at a time."""
    it: Iterator[dict[str, Any]] = iter(values)
    return lambda: dict(next(it), load_average=[0.0, 0.0, 0.0])


def test_the_median_run_is_reported_with_every_runs_timings_in_order() -> None:
    result = repeated(runs({"cycle_cpu_ms": 30.0, "cycle_ms": 31.0, "admitted": 5},
                           {"cycle_cpu_ms": 10.0, "cycle_ms": 12.0, "admitted": 5},
                           {"cycle_cpu_ms": 20.0, "cycle_ms": 40.0, "admitted": 5}), 3)
    assert result["repeat"] == 3
    assert result["cycle_cpu_ms"] == 20.0 and result["cycle_ms"] == 40.0     # one real run: the median by CPU
    assert result["cycle_cpu_ms_runs"] == [30.0, 10.0, 20.0]
    assert result["cycle_ms_runs"] == [31.0, 12.0, 40.0]
    assert result["admitted"] == 5 and "admitted_runs" not in result


def test_churn_runs_are_ranked_by_their_median_cycle() -> None:
    result = repeated(runs({"cycle_cpu_ms_p50": 9.0, "cycle_ms_max": 100.0, "first_cycle_ms": 1.0},
                           {"cycle_cpu_ms_p50": 7.0, "cycle_ms_max": 300.0, "first_cycle_ms": 2.0}), 2)
    assert result["cycle_cpu_ms_p50"] == 7.0 and result["cycle_ms_max"] == 300.0   # the lower of two
    assert result["cycle_ms_max_runs"] == [100.0, 300.0] and result["first_cycle_ms_runs"] == [1.0, 2.0]


def test_runs_that_decide_differently_are_an_error_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"cycle_admitted: 6 in run 1, 7 in run 3"):
        repeated(runs({"cycle_cpu_ms": 1.0, "cycle_admitted": 6}, {"cycle_cpu_ms": 2.0, "cycle_admitted": 6},
                      {"cycle_cpu_ms": 3.0, "cycle_admitted": 7}), 3)


def test_one_run_is_the_run_itself_and_fewer_is_refused() -> None:
    assert repeated(runs({"cycle_cpu_ms": 1.0}), 1) == {"cycle_cpu_ms": 1.0, "load_average": [0.0, 0.0, 0.0]}
    with pytest.raises(ValueError, match="at least 1"):
        repeated(runs(), 0)


@pytest.mark.parametrize("extra, timing", [([], "cycle_cpu_ms"), (["--churn", "--finishes", "4"], "cycle_cpu_ms_p50")])
def test_the_command_repeats_on_fresh_engines(capsys: pytest.CaptureFixture[str], extra: list[str],
                                              timing: str) -> None:
    assert main(["bench", "--jobs", "80", "--queues", "2", "--clusters", "2", "--repeat", "2", "-o", "json",
                 *extra]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["repeat"] == 2 and len(result[f"{timing}_runs"]) == 2
    assert result[timing] in result[f"{timing}_runs"]


@pytest.mark.parametrize("args, words", [
    (["--jobs", "10", "--queues", "0", "--clusters", "1"], "argument --queues: must be at least 1, got 0"),
    (["--queues", "-1"], "argument --queues: must be at least 1, got -1"),
    (["--jobs", "-5"], "argument --jobs: must be at least 1, got -5"),
    (["--jobs", "0"], "argument --jobs: must be at least 1, got 0"),
    (["--jobs", "99999999999"], "argument --jobs: must be at most 1,000,000, got 99,999,999,999"),
    (["--jobs", "ten"], "argument --jobs: expected an integer, got 'ten'"),
    (["--clusters", "-2"], "argument --clusters: must be at least 1, got -2"),
    (["--clusters", "0"], "argument --clusters: must be at least 1, got 0"),
    (["--clusters", "100001"], "argument --clusters: must be at most 100,000, got 100,001"),
    (["--queues", "1000001"], "argument --queues: must be at most 1,000,000, got 1,000,001"),
    (["--churn", "--finishes", "-3"], "argument --finishes: must be at least 1, got -3"),
    (["--churn", "--finishes", "0"], "argument --finishes: must be at least 1, got 0"),
    (["--seed", "-1"], "argument --seed: must be at least 0, got -1"),      # as a scenario's spec.seed
    (["--churn", "--finishes", "1000001"], "argument --finishes: must be at most 1,000,000, got 1,000,001"),
    (["--repeat", "0"], "argument --repeat: must be at least 1, got 0"),
    (["--repeat", "-1"], "argument --repeat: must be at least 1, got -1"),
    (["--repeat", "101"], "argument --repeat: must be at most 100, got 101"),
    (["--repeat", "10000000000"], "argument --repeat: must be at most 100, got 10,000,000,000"),
    (["--repeat", "three"], "argument --repeat: expected an integer, got 'three'"),
])
def test_out_of_range_counts_are_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str],
                                              words: str) -> None:
    """Each crashed (IndexError with no queue), printed nonsense with exit 0, or ran until killed."""
    with pytest.raises(SystemExit) as info:
        main(["bench", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: atoll bench") and f"atoll bench: error: {words}\n" in err, err


def test_the_smallest_bench_and_seed_zero_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--jobs", "1", "--queues", "1", "--clusters", "1", "--seed", "0", "--churn",
                 "--finishes", "1", "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["jobs"], result["queues"], result["clusters"], result["seed"]) == (1, 1, 1, 0)


def test_the_caps_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1 to 1,000,000" in text and "1 to 100,000" in text
    assert "1 to 100:" in text                                    # --repeat
    assert "1 to 1,000,000; at most one per job" in text          # --finishes


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BOUNDED = re.compile(r"(--(?:jobs|queues|clusters|finishes|repeat))[ =]([0-9][0-9,_]*)")


def test_every_documented_bench_count_is_within_the_caps() -> None:
    """The caps refuse nothing the README and docs/ tell a reader to run (an invocation may wrap a line, so every
    such flag is taken; `python -m engine.dashboard.bench --jobs` is another command)."""
    seen = set()
    for path in DOCS:
        for line in path.read_text().splitlines():
            if "engine.dashboard.bench" not in line:
                seen.update(BOUNDED.findall(line))
    assert ("--repeat", "3") in seen and ("--jobs", "100000") in seen and ("--finishes", "200") in seen
    parser = build_parser()
    for flag, value in sorted(seen):
        parser.parse_args(["bench", flag, value.replace(",", "").replace("_", "")])    # exits 2 on a refusal
