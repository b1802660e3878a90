"""Open-loop latency benchmark: real AdmissionReviews over TLS to 127.0.0.1 at a fixed rate.

Requests are sent on a fixed schedule (not "next after previous"), so a slow answer cannot hide behind
a lower offered rate. The server runs in its own process, as it would in production.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Optional

import aiohttp

from engine.errors import AtollError

from engine.kube.webhook_certs import write_certs
from engine.stats import percentile


def sample_review(i: int) -> dict[str, Any]:
    """A ResourceBinding CREATE as karmada-controller-manager sends it (managed Volcano Job)."""
    name = f"job-{i}"
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "team-a",
            "kind": {"group": "work.karmada.io", "version": "v1alpha2", "kind": "ResourceBinding"},
            "resource": {"group": "work.karmada.io", "version": "v1alpha2", "resource": "resourcebindings"},
            "object": {
                "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"name": f"{name}-job", "namespace": "team-a",
                             "labels": {"propagationpolicy.karmada.io/permanent-id": str(uuid.uuid4())}},
                "spec": {"resource": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                      "namespace": "team-a", "name": name, "uid": str(uuid.uuid4())},
                         "suspension": {"dispatching": False},
                         "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}},
            },
        },
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _wait_healthy(session: aiohttp.ClientSession, base: str, proc: Optional[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AtollError(f"the webhook under test exited with {proc.returncode}")
        try:
            async with session.get(base + "/healthz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise AtollError(f"no healthy webhook at {base} within 30 s (GET /healthz)")


async def run_bench(rate: float, count: int, url: Optional[str] = None, concurrency: int = 64) -> dict[str, Any]:
    proc: Optional[subprocess.Popen[bytes]] = None
    tmp = tempfile.TemporaryDirectory(prefix="atoll-wh-bench-")
    try:
        if url is None:
            certs = write_certs(tmp.name)
            port = _free_port()
            proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "webhook", "--cert", certs.cert,
                                     "--key", certs.key, "--host", "127.0.0.1", "--port", str(port),
                                     "--shutdown-delay=0"],     # no Service to drain: stop at once
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            base = f"https://127.0.0.1:{port}"
            ctx = ssl.create_default_context(cafile=certs.ca)
        else:
            base = url.rstrip("/").removesuffix("/mutate")
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        bodies = [json.dumps(sample_review(i)).encode() for i in range(count)]
        conn = aiohttp.TCPConnector(ssl=ctx, limit=concurrency)
        async with aiohttp.ClientSession(connector=conn) as session:
            await _wait_healthy(session, base, proc)
            for i in range(min(50, count)):          # warm up connections and code paths
                async with session.post(base + "/mutate", data=bodies[i]) as r:
                    await r.read()
            lat: list[float] = []
            errors = 0

            async def one(body: bytes) -> None:
                nonlocal errors
                t = time.perf_counter()
                try:
                    async with session.post(base + "/mutate", data=body,
                                            headers={"Content-Type": "application/json"}) as r:
                        data = await r.read()
                        if r.status != 200 or b'"patch"' not in data:
                            errors += 1
                except aiohttp.ClientError:
                    errors += 1
                lat.append((time.perf_counter() - t) * 1000)

            start = time.perf_counter()
            tasks = []
            for i, body in enumerate(bodies):
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(body)))
            await asyncio.gather(*tasks)
            elapsed = time.perf_counter() - start
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        tmp.cleanup()
    lat.sort()
    return {
        "target": base, "requests": count, "errors": errors, "offered_rate": rate,
        "achieved_rate": round(count / elapsed, 1),
        "latency_ms": {**{f"p{q}": round(percentile(lat, q) or 0.0, 3) for q in (50, 95, 99)},
                       "max": round(lat[-1], 3)},
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2)},
    }
