"""``atoll bench --repeat N``: one command gives the spread of a timing on a shared machine, and the runs must
decide alike (the engine is deterministic; a difference is a bug, not a figure)."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from engine.bench import repeated
from engine.cli import main


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


def test_a_repeat_below_one_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--jobs", "10", "--repeat", "0"]) == 2
    assert "--repeat must be at least 1" in capsys.readouterr().err
