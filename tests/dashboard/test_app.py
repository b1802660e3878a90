"""The dashboard over HTTP: pages and JSON twins from one view-model, escaping, CSP, live updates by SSE."""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer

from engine.dashboard import app as dashboard
from engine.dashboard import view
from tests.dashboard.state import HOSTILE, job, known_source

PAGES = ["/", "/queues", "/jobs", "/jobs?state=pending&sort=waiting", "/jobs/default/b1", "/clusters", "/policy"]
APIS = ["/api/queues", "/api/jobs", "/api/jobs/default/b1", "/api/clusters", "/api/policy"]
STATIC = Path(dashboard.__file__).resolve().parent / "static"


async def client_for(hostile: bool = False):
    source, engine, clock = known_source(hostile)
    client = TestClient(TestServer(dashboard.make_app(source)))
    await client.start_server()
    return client, source, engine, clock


async def test_every_page_and_twin_is_served_with_a_strict_csp() -> None:
    client, *_ = await client_for()
    try:
        for path in PAGES + APIS:
            r = await client.get(path)
            assert r.status == 200, path
            csp = r.headers["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
            if not path.startswith("/api/"):
                html = await r.text()
                assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html) is None, f"inline script in {path}"
                assert " style=" not in html and "onclick" not in html, path
                assert 'id="status"' in html and "<main" in html
        missing = await client.get("/jobs/default/nope")
        assert missing.status == 404 and "Not found" in await missing.text()
        assert (await client.get("/api/jobs/default/nope")).status == 404
        fragment = await (await client.get("/jobs?fragment=1")).text()
        assert "<html" not in fragment and 'id="jobs"' in fragment
    finally:
        await client.close()


async def test_json_twins_are_the_view_model() -> None:
    client, source, engine, _ = await client_for()
    try:
        queues = await (await client.get("/api/queues")).json()
        assert queues["queues"] == view.queues_view(source)["queues"]
        page = await (await client.get("/queues")).text()
        for q in queues["queues"]:                                   # what the JSON says is what the page shows
            assert f'data-queue="{q["name"]}"' in page and f'data-pending="{q["pending"]}"' in page
        detail = await (await client.get("/api/jobs/default/b1")).json()
        assert detail["job"]["reason"] == "job requests cpu 4, more than the fleet has free"
        listing = await (await client.get("/api/jobs?state=admitted&cluster=m1")).json()
        assert [r["id"] for r in listing["rows"]] == ["default/p1"]
    finally:
        await client.close()


async def test_hostile_names_and_labels_render_as_text() -> None:
    client, *_ = await client_for(hostile=True)
    try:
        for path in ["/jobs", "/jobs?q=" + quote("<script>"), "/jobs/" + quote(f"default/{HOSTILE}", safe="/")]:
            r = await client.get(path)
            html = await r.text()
            assert r.status == 200, path
            assert "<script>alert" not in html, path
            assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&#34;é🙂" in html, path
        data = await (await client.get("/api/jobs/" + quote(f"default/{HOSTILE}", safe="/"))).json()
        assert data["job"]["name"] == HOSTILE and data["job"]["labels"] == {"x<y": HOSTILE}
    finally:
        await client.close()


async def read_event(stream: asyncio.StreamReader) -> dict[str, str]:
    fields: dict[str, str] = {}
    while True:
        line = (await asyncio.wait_for(stream.readline(), 5)).decode().rstrip("\n")
        if not line:
            if fields:
                return fields
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(": ")
        fields[key] = value


async def test_sse_sends_the_version_now_and_again_after_a_change_only() -> None:
    client, source, engine, _ = await client_for()
    try:
        hub = client.server.app[dashboard.HUB]
        r = await client.get("/events?page=queues")
        assert r.headers["Content-Type"] == "text/event-stream" and r.headers["Cache-Control"] == "no-cache"
        first = await read_event(r.content)
        assert first["event"] == "update" and first["id"] == str(hub.version)
        assert hub.check() is False                                  # nothing changed: no event, no work
        engine.submit(job("new", "team-b", "1", at=50))
        assert hub.check() is True
        second = await read_event(r.content)
        assert int(second["id"]) == int(first["id"]) + 1
        assert len(hub.history) == 2 and hub.history[-1][1]["prod"] == 0.75
        r.close()
    finally:
        await client.close()


def test_the_change_check_does_no_per_job_work() -> None:
    """The fingerprint reads counters only: with 10,000 jobs, touching a job's fields is never needed."""
    source, engine, _ = known_source()
    hub = dashboard.Hub(source)

    class Untouchable(dict):
        def values(self):
            raise AssertionError("the change check iterated the jobs")
        items = __iter__ = values

    engine.state.jobs = Untouchable(engine.state.jobs)
    hub.fingerprint()


def test_vendored_chart_library_matches_its_recorded_checksums() -> None:
    lines = (STATIC / "vendor" / "VERSIONS").read_text().splitlines()
    assert lines[0].startswith("uplot 1.6.32 (npm)")
    for line in lines[1:]:
        digest, name = line.split()
        assert hashlib.sha256((STATIC / "vendor" / name).read_bytes()).hexdigest() == digest, name
    assert "MIT" in (STATIC / "vendor" / "uPlot.LICENSE").read_text()


@pytest.mark.parametrize("seconds,text", [(None, "-"), (5, "5s"), (75, "1m 15s"), (7320, "2h 02m")])
def test_durations(seconds: float | None, text: str) -> None:
    assert dashboard.duration(seconds) == text


def test_every_template_and_static_file_ships_as_package_data() -> None:
    import fnmatch
    import tomllib

    root = STATIC.parent
    globs = tomllib.loads((root.parents[1] / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "engine.dashboard"]
    files = [p.relative_to(root).as_posix() for d in ("templates", "static") for p in (root / d).rglob("*")
             if p.is_file()]
    assert files and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), files
