"""``atoll simulate --serve``: the paced simulation serves live pages and ends as the batch run does."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from engine.dashboard.simserve import serve_simulation
from engine.dashboard.source import PolicyLog
from engine.sim.driver import Simulation, simulate
from engine.sim.outcome import SimResult
from engine.sim.report import build_report
from tests.sim.helpers import pipeline, scenario
from tests.sim.test_report_cli import SCENARIO

ROOT = Path(__file__).resolve().parents[2]


async def test_paced_run_serves_live_state_and_matches_the_batch_run() -> None:
    urls: list[str] = []
    results: list[SimResult] = []
    sim = Simulation(scenario(SCENARIO), pipeline(), "plain")
    # 20 jobs of 60 s in 10-job waves: ~120 simulated seconds at 100x is ~1.2 s of wall time
    task = asyncio.create_task(serve_simulation(sim, PolicyLog(), 100.0, "127.0.0.1", 0, urls.append,
                                                results.append, linger=True))
    deadline = time.monotonic() + 30
    while not urls:
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.01)
    seen_running, finished = False, None
    async with aiohttp.ClientSession() as http:
        while finished is None:
            assert time.monotonic() < deadline, "the paced simulation did not finish in 30 s"
            async with http.get(urls[0] + "api/queues") as r:
                data = await r.json()
            info = data["header"]["source"]
            seen_running |= not info["finished"] and any(q["admitted"] for q in data["queues"])
            if info["finished"]:
                finished = data
            await asyncio.sleep(0.05)
        async with http.get(urls[0] + "api/jobs?state=finished&limit=100") as r:
            jobs = await r.json()
    task.cancel()
    assert seen_running, "never saw jobs admitted while the simulation ran"
    assert finished["header"]["now"] > 100 and jobs["matched"] == 20
    batch = build_report(simulate(scenario(SCENARIO), pipeline(), "plain"))
    assert build_report(results[0])["summary"]["makespan"] == batch["summary"]["makespan"]


def test_cli_announces_the_url_and_serves(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "simulate", str(ROOT / "scenarios/quickstart.yaml"),
                             "--serve", "--speed", "2000", "--dashboard-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("dashboard: http://127.0.0.1:"), line
        url = line.split()[1]
        import urllib.request
        with urllib.request.urlopen(url + "policy", timeout=10) as r:
            page = r.read().decode()
        assert "kind: SchedulingPolicy" in page and r.headers["Content-Security-Policy"]
    finally:
        proc.terminate()
        proc.wait(10)
