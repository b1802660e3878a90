"""``atoll simulate SCENARIO --serve``: run a scenario at a chosen speed and serve the live dashboard from it.

The simulation advances on the event loop, one event timestamp at a time, sleeping until the wall
clock reaches ``simulated time / speed``; when it falls behind (a high speed, a big cycle) it yields
to the web server at least every ``BUDGET`` seconds so pages stay responsive. The dashboard reads
the simulator's own Engine, plus what only the simulator knows (every attempt and reason change).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable, Optional

from engine.dashboard.app import serve
from engine.dashboard.source import Attempt, History, PolicyLog, Source
from engine.sim.driver import Simulation
from engine.sim.outcome import REASONS_FIRST, SimResult

BUDGET = 0.05          # seconds of simulation work between yields to the web server


class SimSource(Source):
    kind = "simulation"

    def __init__(self, sim: Simulation, policy: PolicyLog, speed: float) -> None:
        super().__init__(sim.engine, policy, clock=lambda: sim.now)
        self.sim = sim
        self.speed = speed
        self.finished = False

    def version(self) -> int:
        return self.sim.cycles * 2 + len(self.sim.timeline) + (1 if self.finished else 0)

    def history(self, job_id: str) -> Optional[History]:
        sim_job = self.sim.jobs.get(job_id)
        if sim_job is None:
            return None
        attempts = [Attempt(a.admit_time, a.placement, a.start_time, a.end_time, a.outcome, a.message)
                    for a in sim_job.attempts]
        return History(attempts, list(sim_job.reasons), sim_job.reasons_dropped, REASONS_FIRST)

    def info(self) -> dict[str, Any]:
        done = sum(1 for j in self.sim.jobs.values() if j.state in ("Succeeded", "Failed"))
        return {"kind": self.kind, "scenario": self.sim.scenario.name, "speed": self.speed, "done": done,
                "jobs": len(self.sim.jobs), "finished": self.finished}


def policy_log(path: Path, name: str) -> PolicyLog:
    """The policy file as the dashboard's Policy page shows it (the simulation never reloads it)."""
    from engine.policy import load_policy

    log = PolicyLog()
    if not path.exists():                      # a test's in-memory pipeline
        log.loaded(name, "", "", str(path), at=0.0)
        return log
    policy = load_policy(path)
    log.loaded(str(policy.name), str(policy.digest), path.read_text(encoding="utf-8"), str(path),
               str(policy.placement_mode or "gate"), at=0.0)
    return log


async def run_paced(sim: Simulation, source: SimSource, speed: float) -> SimResult:
    """The simulation at ``speed`` simulated seconds per wall second."""
    loop = asyncio.get_running_loop()
    sim.start()
    start = loop.time()
    while True:
        due = sim.next_time()
        if due is not None and due <= sim.scenario.horizon:
            delay = start + due / speed - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        slice_end = loop.time() + BUDGET
        while True:
            horizon = sim.step()
            if horizon is not None:
                source.finished = True
                return sim.finish(horizon)
            due = sim.next_time()
            if due is None or start + due / speed > loop.time() or loop.time() > slice_end:
                break
        await asyncio.sleep(0)


async def serve_simulation(sim: Simulation, policy: PolicyLog, speed: float, host: str, port: int,
                           announce: Callable[[str], None], done: Callable[[SimResult], None],
                           linger: bool = True) -> SimResult:
    """Serve the dashboard while the simulation runs; afterwards keep serving (until cancelled) if ``linger``."""
    source = SimSource(sim, policy, speed)
    runner = await serve(source, host, port)
    try:
        bound = runner.addresses[0][1] if runner.addresses else port
        announce(f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{bound}/")
        result = await run_paced(sim, source, speed)
        done(result)
        if linger:
            await asyncio.Event().wait()          # until Ctrl-C
        return result
    finally:
        await runner.cleanup()
