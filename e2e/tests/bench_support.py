"""Measuring tools for the throughput tests: load at a fixed rate, and a watch that timestamps scheduling.

Both sides of every latency are taken on this host's monotonic clock: the moment a POST is sent and the moment
the watch delivers the binding with Scheduled=True. Nothing here asserts on time; the tests report numbers.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from e2e.harness.kube import Kube, KubeError
from e2e.tests.support import RB_API, is_true, until
from engine.stats import percentile


def latency(values: list[float]) -> dict[str, float]:
    return {**{f"p{q}": round(percentile(values, q) or 0.0, 3) for q in (50, 95)}, "max": round(max(values), 3)}


def post_at_rate(kube: Kube, path: str, bodies: dict[str, dict[str, Any]], rate: float,
                 clients: int = 32) -> tuple[dict[str, float], float]:
    """POST each body to ``path``, the i-th at start + i / rate, from ``clients`` threads. Returns when each
    was sent (by name) and how long sending all took; raises the first API error."""
    sent: dict[str, float] = {}

    def send(name: str, body: dict[str, Any]) -> None:
        sent[name] = time.monotonic()
        kube.request("POST", path, body)

    start = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        futures = []
        for i, (name, body) in enumerate(bodies.items()):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(send, name, body))
        for f in futures:
            f.result()
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
