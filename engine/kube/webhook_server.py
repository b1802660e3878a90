"""The HTTPS server around ``webhook.review``: TLS with cert reload, policy reload, health and metrics.

Cert and policy files are re-read when their mtime changes (cert-manager rotates Secrets and the kubelet
updates mounted ConfigMaps in place), so neither needs a restart. A bad policy edit keeps the old selector.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

from engine.kube.webhook import BadReview, ManagedSelector, review_bytes
from engine.kube.shutdown import SHUTDOWN_TIMEOUT

log = logging.getLogger("atoll.webhook")

LATENCY = Histogram(
    "atoll_webhook_request_duration_seconds", "Time to answer one AdmissionReview (parse, decide, encode).",
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5))
DECISIONS = Counter("atoll_webhook_decisions_total", "AdmissionReviews answered, by outcome.", ["outcome"])
POLICY_ERRORS = Counter("atoll_webhook_policy_reload_errors_total", "Policy reloads rejected as invalid.")

MAX_REVIEW_BYTES = 8 * 1024 * 1024
"""The largest AdmissionReview body read (aiohttp's default is 1 MiB: a legal binding above it got 413 and, with
``failurePolicy: Ignore``, was created unpaused, past the queue). The API server takes request bodies up to 3 MiB
and etcd stores objects up to 1.5 MiB by default; a review carries the object, and on UPDATE its oldObject too,
re-encoded as JSON, so 2 x 3 MiB plus the envelope stays under 8 MiB for anything that can exist. Bodies above
it still get 413 before they are read."""

SelectorLoader = Callable[[], ManagedSelector]
AsyncSelectorLoader = Callable[[], Awaitable[ManagedSelector]]


@dataclass
class WatchedFiles:
    """Remembers mtimes so a poll can tell whether files changed."""

    paths: tuple[str, ...]
    stamps: tuple[float, ...] = field(default=())

    def changed(self) -> bool:
        try:
            now = tuple(os.stat(p).st_mtime_ns for p in self.paths)
        except OSError:
            return False                    # mid-rotation: try again on the next poll
        if now != self.stamps:
            self.stamps = now
            return True
        return False


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


class WebhookServer:
    """Holds the live selector; handlers read it without locks (a single attribute swap)."""

    def __init__(self, selector: ManagedSelector, loader: Optional[SelectorLoader] = None,
                 policy_files: tuple[str, ...] = (), async_loader: Optional[AsyncSelectorLoader] = None) -> None:
        self.selector = selector
        self.loader = loader
        self.async_loader = async_loader
        self.policy_files = WatchedFiles(policy_files)
        self.policy_files.changed()
        self.ready = True
        self.draining = False       # asked to stop, still answering (``serve``'s shutdown_delay)

    async def mutate(self, request: web.Request) -> web.Response:
        start = time.perf_counter()
        raw = await request.read()
        try:
            decision = review_bytes(raw, self.selector)
        except BadReview as exc:
            DECISIONS.labels("bad-request").inc()
            return web.json_response({"error": str(exc)}, status=400)
        finally:
            LATENCY.observe(time.perf_counter() - start)
        DECISIONS.labels(decision.outcome).inc()
        response = web.json_response(decision.response)
        if self.draining:
            response.force_close()     # the API server's next review opens a new connection: to another replica
        return response

    async def healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(self, _: web.Request) -> web.Response:
        ready = self.ready and not self.draining
        return web.Response(text="ok" if ready else "not ready", status=200 if ready else 503)

    async def metrics(self, _: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    def reload_policy(self) -> bool:
        """Re-read the policy if its files changed; keep the old selector on error."""
        if self.loader is None or not self.policy_files.changed():
            return False
        try:
            self.selector = self.loader()
        except Exception as exc:              # any invalid edit must not take the webhook down
            POLICY_ERRORS.inc()
            log.error("policy reload rejected, keeping the previous policy: %s", exc)
            return False
        log.info("policy reloaded: kinds=%s", sorted(self.selector.kinds))
        return True

    async def poll_policy(self) -> bool:
        """Fetch the policy from the API (ConfigMap source); keep the old selector on any error."""
        if self.async_loader is None:
            return False
        try:
            selector = await self.async_loader()
        except Exception as exc:              # API down or invalid edit: keep serving the last good policy
            POLICY_ERRORS.inc()
            log.error("policy refresh failed, keeping the previous policy: %s", exc)
            return False
        changed = selector != self.selector
        self.selector = selector
        return changed

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REVIEW_BYTES)
        app.router.add_post("/mutate", self.mutate)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics)
        return app


async def watch_files(server: WebhookServer, ctx: Optional[ssl.SSLContext], cert: str, key: str,
                      interval: float) -> None:
    """Poll cert and policy files; new TLS handshakes use a reloaded chain immediately."""
    certs = WatchedFiles((cert, key))
    certs.changed()
    tick = 0
    while True:
        await asyncio.sleep(interval)
        tick += 1
        if tick % 5 == 0:
            await server.poll_policy()
        if ctx is not None and certs.changed():
            try:
                ctx.load_cert_chain(cert, key)
                log.info("TLS certificate reloaded from %s", cert)
            except (OSError, ssl.SSLError) as exc:      # e.g. caught between the cert and the key being written
                certs.stamps = ()                          # so the next poll tries again, changed or not
                log.error("TLS reload failed, keeping the previous certificate (retrying): %s", exc)
        server.reload_policy()


async def serve(server: WebhookServer, host: str, port: int, cert: Optional[str], key: Optional[str],
                interval: float = 2.0, started: Optional[Callable[[int], Any]] = None,
                stop: Optional[asyncio.Event] = None, shutdown_timeout: float = SHUTDOWN_TIMEOUT,
                shutdown_delay: float = 0.0) -> None:
    """Run until cancelled or ``stop`` is set (SIGTERM/SIGINT, engine/kube/shutdown.py). Once ``stop`` is set it
    keeps answering for ``shutdown_delay`` seconds (draining: /readyz answers 503 and every answer closes its
    connection, so clients reconnect through the Service to a replica that stays), then the listener closes and
    requests under way get ``shutdown_timeout`` seconds to be answered. ``cert``/``key`` None means plain HTTP
    (tests and local debugging only)."""
    ctx = tls_context(cert, key) if cert and key else None
    runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ctx, backlog=1024)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or ()
    bound = int(sockets[0].getsockname()[1]) if sockets else port
    log.info("atoll webhook listening on %s://%s:%d", "https" if ctx else "http", host, bound)
    if started is not None:
        started(bound)
    watcher = asyncio.create_task(watch_files(server, ctx, cert or "", key or "", interval))
    try:
        await (stop or asyncio.Event()).wait()
        if shutdown_delay > 0:
            server.draining = True
            log.info("atoll webhook draining: still answering for %g s while the Service's endpoints drop this "
                     "replica", shutdown_delay)
            await asyncio.sleep(shutdown_delay)
        log.info("atoll webhook stopping: no new connections; answering the requests under way (at most %g s)",
                 shutdown_timeout)
    finally:
        watcher.cancel()
        await runner.cleanup()
    log.info("atoll webhook stopped")
