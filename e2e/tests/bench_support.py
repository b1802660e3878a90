"""Client-side timing of ResourceBindings for the throughput benchmark.

Plain Karmada and Karmada + Atoll must be measured the same way, so every mark comes from this process's
monotonic clock: the POST returning, and a watch on the namespace's bindings seeing each one ADDED, unpaused
and Scheduled=True (karmada-scheduler's condition, written after spec.clusters). A watch, not polling: the
time of a mark does not depend on a poll interval.
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

from e2e.harness.kube import Kube
from e2e.tests.controller_support import PAUSED, ControllerProcess, annotations_of, is_paused
from e2e.tests.support import RB_API, is_true, rb_path, until
from engine.kube.plan import parse_stamp


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def spread(values: list[float]) -> dict[str, float]:
    return {"p50": round(pct(values, 50), 3), "p95": round(pct(values, 95), 3), "max": round(max(values), 3)}


def per_second(count: int, span: float) -> float:
    return round(count / span, 1) if span > 0 else float("inf")


def post_at_rate(kube: Kube, path: str, objs: list[dict[str, Any]], rate: float, clients: int
                 ) -> tuple[dict[str, float], dict[str, float]]:
    """POST ``objs`` at ``rate`` per second from ``clients`` threads; (sent, returned) monotonic times by name.
    The sleep paces the load generator; it waits for nothing."""
    sent: dict[str, float] = {}
    returned: dict[str, float] = {}

    def post(obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        sent[name] = time.monotonic()
        kube.request("POST", path, obj)
        returned[name] = time.monotonic()

    start = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        futures = []
        for i, obj in enumerate(objs):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(post, obj))
        for f in futures:
            f.result()
    return sent, returned


class BindingWatch:
    """Watches one namespace's ResourceBindings from now on, recording when each is first seen ADDED, unpaused
    and Scheduled=True (with spec.clusters). Start it before creating anything."""

    def __init__(self, kube: Kube, ns: str) -> None:
        self.kube, self.ns = kube, ns
        rv = kube.get(rb_path(ns))["metadata"]["resourceVersion"]
        self.added: dict[str, float] = {}
        self.unpaused: dict[str, float] = {}
        self.scheduled: dict[str, float] = {}
        self.error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(rv,), name=f"watch-{ns}", daemon=True)
        self._thread.start()

    def _run(self, rv: str) -> None:
        try:
            for event in self.kube.watch(rb_path(self.ns), rv, self._stop.is_set):
                now = time.monotonic()
                rb = event["object"]
                if event["type"] not in ("ADDED", "MODIFIED"):
                    continue
                name = rb["metadata"]["name"]
                self.added.setdefault(name, now)
                if not is_paused(rb):
                    self.unpaused.setdefault(name, now)
                if is_true(rb, "Scheduled") and (rb.get("spec") or {}).get("clusters"):
                    self.scheduled.setdefault(name, now)
        except BaseException as e:          # surfaced by wait_scheduled, never lost in a thread
            self.error = e

    def wait_scheduled(self, count: int, timeout: float) -> None:
        def done() -> bool:
            if self.error is not None:
                raise AssertionError(f"binding watch failed: {self.error}")
            return len(self.scheduled) >= count
        until(f"{count} bindings in {self.ns} seen Scheduled by the watch", done, timeout,
              show=lambda: f"{len(self.added)} added, {len(self.unpaused)} unpaused, {len(self.scheduled)} scheduled")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def cached(ctl: ControllerProcess, cache: str) -> int:
    """Objects in one of the controller's watch caches (atoll_cache_objects)."""
    m = re.search(rf'^atoll_cache_objects\{{cache="{re.escape(cache)}"\}} (\S+)$', ctl.metrics(), re.M)
    return int(float(m.group(1))) if m else -1


def wait_jobs_cached(kube: Kube, ctl: ControllerProcess, at_least: int) -> None:
    """The controller's Job template cache holds every batch/v1 Job the API server has (and at least
    ``at_least``): a binding then never waits for its template to arrive."""
    def caught_up() -> bool:
        have = cached(ctl, "jobs")
        return have >= at_least and have == len(kube.get("/apis/batch/v1/jobs")["items"])
    until("the controller's Job cache caught up with the API server", caught_up, 120,
          show=lambda: f"atoll_cache_objects{{cache=\"jobs\"}} = {cached(ctl, 'jobs')}")


def pause_to_resume(kube: Kube, ns: str, count: int, timeout: float = 300) -> dict[str, Any]:
    """Waits until all ``count`` bindings carry atoll.dev/admitted-at; rate and latency from Atoll's own stamps
    (webhook pause -> controller resume, both on this host's wall clock)."""
    def resumed() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = kube.get(f"{RB_API}/namespaces/{ns}/resourcebindings")["items"]
        done = [b for b in items if "atoll.dev/admitted-at" in annotations_of(b) and not is_paused(b)]
        return done if len(done) == count else None

    bindings = until(f"all {count} bindings resumed", resumed, timeout)
    paused = [parse_stamp(annotations_of(b).get(PAUSED)) for b in bindings]
    admitted = [parse_stamp(annotations_of(b)["atoll.dev/admitted-at"]) for b in bindings]
    lat = [a - p for a, p in zip(admitted, paused) if a is not None and p is not None]
    assert len(lat) == count and min(lat) >= 0, f"{count - len(lat)} bindings lack a stamp, or resumed before paused"
    span = max(a for a in admitted if a is not None) - min(p for p in paused if p is not None)
    return {"resumed_per_s": per_second(count, span), "pause_to_resume_s": spread(lat)}


def report(state_dir: Path, name: str, result: dict[str, Any]) -> None:
    print(f"\ncontroller bench ({name}):", json.dumps(result))
    (state_dir / f"controller-bench-{name}.json").write_text(json.dumps(result, indent=2))
