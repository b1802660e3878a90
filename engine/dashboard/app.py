"""The read-only dashboard as an aiohttp application: HTML pages, their JSON twins, and live updates.

Every page is rendered on the server from the view-model dict (``view``/``jobs``), complete without
JavaScript; ``/api/<page>`` returns that same dict as JSON. Live updates are server-sent events:
one ticker per application checks once a second whether anything changed (the source's version
counter and a few O(1)/O(queues) engine counters: no per-job work) and, if so, tells every open
stream the new version; a page then re-fetches its own fragment (``?fragment=1``, the same template)
and its chart data. So an update costs the engine nothing per job and at most one event a second
per stream, however busy the fleet is.

Security: Jinja autoescaping for all user data (job names, labels, reasons, policy text); a
Content-Security-Policy that forbids inline scripts and styles (all JS/CSS are static files,
charts use SVG attributes or canvas); the app has no route that changes anything.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from typing import Any, Awaitable, Callable, Optional
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from engine.dashboard import jobs as jobs_vm
from engine.dashboard import view
from engine.dashboard.source import Source

log = logging.getLogger("atoll.dashboard")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
TICK = 1.0                  # seconds between change checks: at most one update a second per stream
KEEPALIVE = 15.0            # an SSE comment keeps idle proxies from closing the stream
HISTORY = 600               # share samples kept for the share-over-time chart (10 min at 1/s)
HUB: web.AppKey["Hub"] = web.AppKey("hub")

Page = Callable[[web.Request], Optional[dict[str, Any]]]


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("engine.dashboard", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    env.filters["dur"] = duration
    env.filters["jobpath"] = lambda job_id: quote(str(job_id), safe="/")
    env.filters["pretty"] = lambda v: json.dumps(v, indent=1, sort_keys=True)
    env.globals["query"] = lambda params, **changes: "?" + urlencode(
        {k: v for k, v in {**params, **changes}.items() if v not in ("", None)})
    return env


def duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def stamp(data: dict[str, Any]) -> Callable[[Optional[float]], str]:
    """Times as people read them: a UTC date for a live fleet, t=... seconds for a simulation."""
    absolute = data.get("header", {}).get("absoluteTimes", False)

    def fmt(t: Optional[float]) -> str:
        if t is None:
            return "-"
        if absolute:
            return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
        return f"t={t:,.1f}s"
    return fmt


class Hub:
    """Change detection and fan-out for the live streams of one application."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.version = 0
        self.history: collections.deque[tuple[float, dict[str, float]]] = collections.deque(maxlen=HISTORY)
        self._fingerprint: Any = None
        self._changed = asyncio.Event()
        self.closing = False
        self.streams = 0

    def fingerprint(self) -> Any:
        engine = self.source.engine()
        if engine is None:
            return (self.source.version(), self.source.policy.generation, self.source.policy.refused_count)
        state = engine.state
        return (self.source.version(), self.source.policy.generation, self.source.policy.refused_count,
                state.capacity_epoch, len(state.jobs), engine.pending_count(), len(state.clusters),
                len(state.queues))

    def check(self) -> bool:
        """One tick: True (and wake every stream) if anything changed since the last tick."""
        fp = self.fingerprint()
        engine = self.source.engine()
        if fp == self._fingerprint:
            return False
        self._fingerprint = fp
        self.version += 1
        if engine is not None:
            self.history.append((self.source.now(), view.share_sample(engine)))
        event, self._changed = self._changed, asyncio.Event()
        event.set()
        return True

    async def wait(self, seen: int, timeout: float) -> None:
        if self.version != seen or self.closing:
            return
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def run(self) -> None:
        while not self.closing:
            try:
                self.check()
            except Exception:                    # never let a view bug stop the live updates
                log.exception("dashboard change check failed")
            await asyncio.sleep(TICK)

    def close(self) -> None:
        self.closing = True
        self._changed.set()


def make_app(source: Source) -> web.Application:
    env = environment()
    hub = Hub(source)
    app = web.Application(middlewares=[_headers])
    app[HUB] = hub

    def history() -> list[tuple[float, dict[str, float]]]:
        return list(hub.history)

    pages: dict[str, tuple[str, Page]] = {
        "queues": ("queues.html", lambda r: view.queues_view(source, history())),
        "jobs": ("jobs.html", lambda r: jobs_vm.jobs_view(source, r.query)),
        "job": ("job.html", lambda r: jobs_vm.job_view(source, r.match_info["id"])),
        "clusters": ("clusters.html", lambda r: view.clusters_view(source)),
        "policy": ("policy.html", lambda r: view.policy_view(source)),
    }

    def html(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        template, build = pages[name]

        async def handler(request: web.Request) -> web.Response:
            data = build(request)
            if data is None:
                return _not_found(env, source, request)
            fragment = request.query.get("fragment") == "1"
            text = env.get_template(template).render(data=data, page=name, fragment=fragment, t=stamp(data),
                                                     live=hub.version)
            return web.Response(text=text, content_type="text/html", charset="utf-8")
        return handler

    def api(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        _, build = pages[name]

        async def handler(request: web.Request) -> web.Response:
            data = build(request)
            if data is None:
                return web.json_response({"error": "not found", "path": request.path}, status=404)
            return web.json_response(data)
        return handler

    async def events(request: web.Request) -> web.StreamResponse:
        return await _stream(hub, request)

    async def start(app: web.Application) -> None:
        hub.check()
        app[TASK] = asyncio.create_task(hub.run(), name="dashboard-ticker")

    async def stop(app: web.Application) -> None:
        hub.close()
        task = app.get(TASK)
        if task is not None:
            task.cancel()

    app.router.add_get("/", html("queues"))
    app.router.add_get("/queues", html("queues"))
    app.router.add_get("/jobs", html("jobs"))
    app.router.add_get("/jobs/{id:.+}", html("job"))
    app.router.add_get("/clusters", html("clusters"))
    app.router.add_get("/policy", html("policy"))
    app.router.add_get("/api/queues", api("queues"))
    app.router.add_get("/api/jobs", api("jobs"))
    app.router.add_get("/api/jobs/{id:.+}", api("job"))
    app.router.add_get("/api/clusters", api("clusters"))
    app.router.add_get("/api/policy", api("policy"))
    app.router.add_get("/events", events)
    app.router.add_static("/static", _static_dir(), show_index=False)
    app.on_startup.append(start)
    app.on_shutdown.append(stop)
    return app


TASK: web.AppKey["asyncio.Task[None]"] = web.AppKey("dashboard-ticker")


def _static_dir() -> str:
    from pathlib import Path
    return str(Path(__file__).resolve().parent / "static")


def _not_found(env: jinja2.Environment, source: Source, request: web.Request) -> web.Response:
    data = {"header": view.header(source), "path": request.path}
    text = env.get_template("notfound.html").render(data=data, page="", fragment=False, t=stamp(data), live=0)
    return web.Response(text=text, status=404, content_type="text/html", charset="utf-8")


@web.middleware
async def _headers(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                   ) -> web.StreamResponse:
    response = await handler(request)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    if request.path.startswith("/api/") or request.path == "/events" or "text/html" in response.content_type:
        response.headers.setdefault("Cache-Control", "no-cache")
    return response


async def _stream(hub: Hub, request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``update`` with the dashboard version now and on every change (<= 1/s)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
    await response.prepare(request)
    hub.streams += 1
    seen = -1
    try:
        while not hub.closing:
            if hub.version != seen:
                seen = hub.version
                payload = json.dumps({"version": seen, "now": hub.source.now()})
                await response.write(f"id: {seen}\nevent: update\ndata: {payload}\n\n".encode())
            else:
                await response.write(b": keepalive\n\n")
            await hub.wait(seen, KEEPALIVE)
    except ConnectionResetError:           # the tab closed (aiohttp's ClientConnectionResetError)
        pass
    finally:
        hub.streams -= 1
    return response


async def serve(source: Source, host: str, port: int) -> web.AppRunner:
    """Start the dashboard on host:port (returns the runner; ``await runner.cleanup()`` stops it)."""
    runner = web.AppRunner(make_app(source), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
