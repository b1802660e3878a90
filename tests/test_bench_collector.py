"""The churn bench says how much of its cycle times is Python's cyclic garbage collector (``CollectorClock``):
``Engine.cycle`` pauses the collector, and its catching up after a cycle lands inside the bench's timed window."""

from __future__ import annotations

import gc
import json

import pytest

from engine.bench import CollectorClock
from engine.cli import main


def _cyclic_garbage(n: int) -> None:
    for _ in range(n):
        a: list = []
        a.append(a)                 # garbage only the collector frees


def test_the_clock_adds_up_collections_only_while_timing() -> None:
    clock = CollectorClock()
    gc.callbacks.append(clock)
    try:
        _cyclic_garbage(1000)
        gc.collect()
        assert clock.ms == 0.0
        clock.timing = True
        _cyclic_garbage(1000)
        gc.collect()
        timed = clock.ms
        assert timed > 0.0
        clock.timing = False
        gc.collect()
        assert clock.ms == timed
    finally:
        gc.callbacks.remove(clock)


def test_the_churn_bench_reports_the_collectors_share(capsys: pytest.CaptureFixture[str]) -> None:
    callbacks = list(gc.callbacks)
    assert main(["bench", "--churn", "--jobs", "300", "--queues", "3", "--clusters", "2", "--finishes", "20",
                 "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert 0.0 <= result["collector_ms_max"] <= result["cycle_ms_max"]
    assert result["collector_ms_max"] <= result["collector_ms_sum"]
    assert gc.callbacks == callbacks                 # the clock is taken out again
