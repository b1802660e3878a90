"""Measuring tools for the throughput tests: load at a fixed rate, and a watch that timestamps scheduling.

Both sides of every latency are taken on this host's monotonic clock: the moment a POST is sent and the moment
the watch delivers the binding with Scheduled=True. Nothing here asserts on time; the tests report numbers.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Optional

import aiohttp

from e2e.harness.kube import Kube, KubeError
from e2e.tests.support import RB_API, is_true, until
from engine.stats import percentile


class CpuMeter:
    """Where the machine's CPU went while a measurement ran, from /proc (Linux): the fleet's processes, this
    test process (load generator and watch), its children (Atoll's webhook and controller), and everything else
    on the machine (other people's work on a shared box), in cores (CPU seconds / wall seconds). On 2 cores a
    number means little without this: the same 50/s bind load gave create -> Scheduled p50 0.24 s and 5.7 s depending on
    what else ran."""

    def __init__(self, state_dir: Path) -> None:
        fleet: list[int] = []
        for f in (state_dir / "pids").glob("*.json"):
            try:
                fleet.append(int(json.loads(f.read_text())["pid"]))
            except (OSError, ValueError, KeyError):
                continue
        # when this test run started the fleet, its processes are this process's children too: count them once
        self.groups: dict[str, list[int]] = {"fleet": fleet, "test": [os.getpid()],
                                             "atoll": [p for p in _children(os.getpid()) if p not in fleet]}
        self.start = (time.monotonic(), _machine_busy(), {g: _cpu(pids) for g, pids in self.groups.items()})

    def cores(self) -> dict[str, float]:
        t0, busy0, cpu0 = self.start
        wall = time.monotonic() - t0
        out = {g: (_cpu(pids) - cpu0[g]) / wall for g, pids in self.groups.items()}
        out["machine_busy"] = (_machine_busy() - busy0) / wall
        out["others"] = out["machine_busy"] - sum(out[g] for g in self.groups)
        return {k: round(v, 2) for k, v in out.items()}


def _ticks() -> int:
    return int(os.sysconf("SC_CLK_TCK"))


def _machine_busy() -> float:
    """CPU seconds the machine spent busy (user, nice, system, irq, softirq, steal) since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / _ticks()


def _cpu(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue                  # gone: its CPU is counted under "others"
        total += int(rest[11]) + int(rest[12])
    return total / _ticks()


def _children(parent: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == parent:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


def latency(values: list[float]) -> dict[str, float]:
    return {**{f"p{q}": round(percentile(values, q) or 0.0, 3) for q in (50, 95)}, "max": round(max(values), 3)}


def post_at_rate(kube: Kube, path: str, bodies: dict[str, dict[str, Any]], rate: float,
                 clients: int = 32) -> tuple[dict[str, float], float]:
    """POST each body to ``path``, the i-th at start + i / rate, open loop: it is sent on time whatever the
    earlier POSTs are doing, over at most ``clients`` kept-alive connections (a POST that finds them all busy
    waits for one, and that wait counts in its latency). Returns when each was sent (by name, the monotonic
    clock) and how long sending all took; raises the first API error.

    Why not threads and ``Kube.request``: that client opens a TLS connection per request (a handshake on both
    sides, ~1.3 ms more client CPU per POST than a kept-alive connection here) and a pool of N threads cannot
    offer more than N / latency POSTs/s, so a slow apiserver lowered the offered rate instead of showing up
    as latency (32 threads made 31-38/s when a POST took ~1 s under load)."""
    return asyncio.run(_post_at_rate(kube, path, bodies, rate, clients))


async def _post_at_rate(kube: Kube, path: str, bodies: dict[str, dict[str, Any]], rate: float,
                        clients: int) -> tuple[dict[str, float], float]:
    payloads = {name: json.dumps(body).encode() for name, body in bodies.items()}     # not timed
    sent: dict[str, float] = {}
    url = kube.server + path
    headers = {**kube.auth_headers(), "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=clients, ssl=kube.ssl_context)
    async with aiohttp.ClientSession(connector=connector, trust_env=False,
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        async def send(name: str, payload: bytes) -> None:
            sent[name] = time.monotonic()
            try:
                async with session.post(url, data=payload, headers=headers) as resp:
                    raw = await resp.read()
                    if resp.status >= 300:
                        raise KubeError(resp.status, f"{kube.name}: POST {path} ({name}): HTTP {resp.status}: "
                                                     f"{raw[:300].decode(errors='replace')}")
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                raise KubeError(0, f"{kube.name}: POST {path} ({name}): {type(e).__name__}: {e}") from None

        start = time.monotonic()
        try:
            async with asyncio.TaskGroup() as group:
                for i, (name, payload) in enumerate(payloads.items()):
                    delay = start + i / rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    group.create_task(send(name, payload))
        except BaseExceptionGroup as group_error:
            raise group_error.exceptions[0] from None
    return sent, time.monotonic() - start


class ScheduledWatch:
    """When each ResourceBinding of a namespace is first seen with Scheduled=True, and with FullyApplied=True
    (its Works applied in the members: dispatched), on the monotonic clock, from a watch opened before the load
    starts, so no binding can be missed or timed late by a polling interval."""

    CONDITIONS = ("Scheduled", "FullyApplied")

    def __init__(self, kube: Kube, ns: str) -> None:
        self.kube = kube
        self.path = f"{RB_API}/namespaces/{ns}/resourcebindings"
        self.first: dict[str, dict[str, float]] = {c: {} for c in self.CONDITIONS}
        self.seen = self.first["Scheduled"]
        self.error: Optional[BaseException] = None
        self._rv = str(kube.get(self.path)["metadata"]["resourceVersion"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch {ns}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for event in self.kube.watch(self.path, self._rv):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise KubeError(int(obj.get("code") or 0), f"watch {self.path}: {obj.get('message')}")
                    self._rv = str(obj["metadata"]["resourceVersion"])
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        for ctype, seen in self.first.items():
                            if is_true(obj, ctype):
                                seen.setdefault(obj["metadata"]["name"], time.monotonic())
                    if self._stop.is_set():
                        return
        except BaseException as e:       # reported by wait_all, in the test's thread
            self.error = e

    def wait_all(self, names: set[str], timeout: float, ctype: str = "Scheduled") -> dict[str, float]:
        """When each of ``names`` was first seen with condition ``ctype`` True (the watch keeps running)."""
        seen = self.first[ctype]

        def done() -> Optional[dict[str, float]]:
            if self.error is not None:
                raise RuntimeError(f"the watch on {self.path} failed: {self.error}")
            return dict(seen) if names <= seen.keys() else None

        try:
            return until(f"all {len(names)} bindings {ctype}", done, timeout,
                         show=lambda: f"{len(names & seen.keys())} of {len(names)} seen {ctype}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._stop.set()
