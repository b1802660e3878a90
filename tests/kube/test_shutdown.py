"""SIGTERM / SIGINT stop ``atoll run`` and ``atoll webhook`` gracefully (engine/kube/shutdown.py): a cycle's
writes in flight finish, the leader Lease is released so a standby takes over at once, a second signal exits at
once. Against in-memory fakes: a scripted binding API and a tiny Lease apiserver (the real kubernetes-asyncio
client and leader election on the wire)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, AsyncIterator, Iterator, Optional

import aiohttp
import pytest
from aiohttp import web

from engine.kube.plan import BindingRef, Event, Patch
from engine.kube.runner import Options, Runner
from engine.kube.shutdown import Shutdown
from engine.kube.webhook import ManagedSelector
from engine.kube.webhook_bench import sample_review
from engine.kube.webhook_server import WebhookServer, serve
from tests.kube.fake_server import api_client_for

ROOT = Path(__file__).resolve().parents[2]


class GatedApi:
    """Binding patches wait for ``gate``; ``started`` is set once one is in flight."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.landed: list[str] = []
        self.cancelled = 0

    async def patch_binding(self, ref: BindingRef, body: dict[str, Any], content_type: str,
                            subresource: str = "") -> Any:
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.landed.append(ref.key)
        return {}

    async def create_event(self, namespace: str, body: dict[str, Any]) -> Any:
        return {}


class StubController:
    """What Runner._loop needs of a Controller: step() hands out ``items`` once, then nothing."""

    def __init__(self, items: list[Patch | Event]) -> None:
        self.items = items
        self.steps = 0
        self.retried: list[Any] = []
        self.engine = SimpleNamespace(next_timer=lambda: None,
                                      state=SimpleNamespace(reports_to_redate=lambda horizon: []))

    def step(self, now: float) -> list[Patch | Event]:
        self.steps += 1
        out, self.items = self.items, []
        return out

    def retry_later(self, item: Any) -> None:
        self.retried.append(item)


def looping_runner(api: GatedApi, timeout: float) -> tuple[Runner, StubController]:
    runner = Runner(Options(shutdown_timeout=timeout))
    ctl = StubController([Patch(BindingRef("a", "ns"), {"n": 1}, "admit"),
                          Event({"name": "a", "namespace": "ns"}, "Admitted", "x")])
    runner.controller = ctl  # type: ignore[assignment]
    runner.kube = api  # type: ignore[assignment]
    return runner, ctl


async def test_a_stop_lets_the_cycles_patches_in_flight_complete() -> None:
    api = GatedApi()
    runner, ctl = looping_runner(api, timeout=5.0)
    loop = asyncio.create_task(runner._loop())
    await asyncio.wait_for(api.started.wait(), 5)        # the first cycle's admit patch is under way
    runner.shutdown.signal(signal.SIGTERM)
    steps = ctl.steps
    await asyncio.sleep(0.3)
    assert not loop.done(), "the loop must wait for the patch in flight"
    api.gate.set()
    await asyncio.wait_for(loop, 2)
    assert api.landed == ["ns/a"] and api.cancelled == 0
    assert ctl.steps == steps, "no new cycle once a stop is requested"


async def test_writes_still_in_flight_after_the_timeout_are_cancelled() -> None:
    api = GatedApi()
    runner, ctl = looping_runner(api, timeout=0.2)
    loop = asyncio.create_task(runner._loop())
    await asyncio.wait_for(api.started.wait(), 5)
    runner.shutdown.signal(signal.SIGINT)
    await asyncio.wait_for(loop, 2)                       # bounded: never waits for ever
    assert api.landed == [] and api.cancelled == 1


def test_a_second_signal_exits_at_once() -> None:
    exits: list[int] = []
    shutdown = Shutdown("test", force_exit=exits.append)
    asked: list[bool] = []
    shutdown.on_request.append(lambda: asked.append(True))
    shutdown.signal(signal.SIGTERM)
    assert shutdown.requested.is_set() and asked == [True] and exits == []
    shutdown.signal(signal.SIGTERM)
    assert exits == [1] and asked == [True]


async def test_signals_reach_the_running_loop_and_are_given_back() -> None:
    shutdown = Shutdown("test", force_exit=lambda code: None)
    shutdown.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)            # Python's default would end this process
        await asyncio.wait_for(shutdown.requested.wait(), 5)
    finally:
        shutdown.uninstall()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


# -- the leader Lease --------------------------------------------------------------------------------------

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


class FakeLeases:
    """GET / POST / PUT of Leases with resourceVersion conflicts, as the API server does."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.rv = 0

    def _store(self, ns: str, body: dict[str, Any]) -> web.Response:
        self.rv += 1
        body.setdefault("metadata", {}).update(namespace=ns, resourceVersion=str(self.rv))
        body.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        self.leases[body["metadata"]["name"]] = body
        return web.json_response(body)

    async def get(self, request: web.Request) -> web.Response:
        lease = self.leases.get(request.match_info["name"])
        if lease is None:
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
        return web.json_response(lease)

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body["metadata"]["name"] in self.leases:
            return web.json_response({"kind": "Status", "code": 409, "reason": "AlreadyExists"}, status=409)
        return self._store(request.match_info["ns"], body)

    async def replace(self, request: web.Request) -> web.Response:
        body = await request.json()
        current = self.leases.get(request.match_info["name"])
        if current is None or body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return web.json_response({"kind": "Status", "code": 409, "reason": "Conflict"}, status=409)
        return self._store(request.match_info["ns"], body)

    def holder(self, name: str = "atoll-controller") -> Optional[str]:
        return ((self.leases.get(name) or {}).get("spec") or {}).get("holderIdentity")


@pytest.fixture
async def leases() -> AsyncIterator[tuple[FakeLeases, Any]]:
    fake = FakeLeases()
    app = web.Application()
    app.router.add_get(LEASES + "/{name}", fake.get)
    app.router.add_put(LEASES + "/{name}", fake.replace)
    app.router.add_post(LEASES, fake.create)
    async with api_client_for(app) as api_client:
        yield fake, api_client


async def until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_the_leader_releases_its_lease_on_stop_and_a_standby_takes_over_at_once(
        leases: tuple[FakeLeases, Any]) -> None:
    from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
    from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

    fake, api_client = leases
    runner = Runner(Options(leader_elect=True, identity="leader", shutdown_timeout=2.0))
    runner.api_client = api_client
    led = asyncio.Event()

    async def lead() -> None:          # leading: a loop that stops when asked (the real one: tests above)
        runner._lead_task = asyncio.current_task()
        runner.synced = True
        led.set()
        await runner.stopping.wait()
    runner.lead = lead  # type: ignore[method-assign]
    work = asyncio.create_task(runner._until_stopped())
    await asyncio.wait_for(led.wait(), 10)
    assert fake.holder() == "leader"

    took_over = asyncio.Event()

    async def standby_leads() -> None:
        took_over.set()
    standby_cfg = electionconfig.Config(LeaseLock("atoll-controller", "atoll-system", "standby", api_client),
                                        lease_duration=15, renew_deadline=10, retry_period=2,
                                        onstarted_leading=standby_leads,
                                        # its LeaderElection checks for None; the stub's annotation omits it
                                        onstopped_leading=None)  # type: ignore[arg-type]
    standby = asyncio.create_task(leaderelection.LeaderElection(standby_cfg).run())
    try:
        await asyncio.sleep(2.5)                          # the standby tried, and stands by
        assert not took_over.is_set() and fake.holder() == "leader"
        stopped_at = time.monotonic()
        runner.shutdown.signal(signal.SIGTERM)
        assert await asyncio.wait_for(work, 10) == 0
        lease = fake.leases["atoll-controller"]["spec"]
        assert not lease.get("holderIdentity") and lease["leaseDurationSeconds"] == 1
        await asyncio.wait_for(took_over.wait(), 5)      # not the 15 s lease duration
        assert time.monotonic() - stopped_at < 5 and fake.holder() == "standby"
    finally:
        standby.cancel()
        await asyncio.gather(standby, return_exceptions=True)


async def test_a_standby_leaves_the_leaders_lease_alone(leases: tuple[FakeLeases, Any]) -> None:
    fake, api_client = leases
    fake.leases["atoll-controller"] = {"metadata": {"name": "atoll-controller", "resourceVersion": "7"},
                                       "spec": {"holderIdentity": "other", "leaseDurationSeconds": 15,
                                                "acquireTime": "2026-11-29T05:00:00.000000Z",
                                                "renewTime": "2026-11-29T05:00:00.000000Z"}}
    runner = Runner(Options(leader_elect=True, identity="standby"))
    runner.api_client = api_client
    work = asyncio.create_task(runner._until_stopped())
    await asyncio.sleep(0.3)                    # waiting to acquire
    runner.shutdown.signal(signal.SIGTERM)
    assert await asyncio.wait_for(work, 10) == 0
    assert fake.holder() == "other" and fake.leases["atoll-controller"]["metadata"]["resourceVersion"] == "7"


# -- the webhook ----------------------------------------------------------------------------------------

async def test_the_webhook_server_returns_when_asked_to_stop() -> None:
    stop = asyncio.Event()
    bound: list[int] = []
    task = asyncio.create_task(serve(WebhookServer(ManagedSelector()), "127.0.0.1", 0, None, None,
                                     started=bound.append, stop=stop))
    await until(lambda: bool(bound))
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_the_webhook_keeps_answering_for_its_shutdown_delay_then_stops() -> None:
    """Asked to stop, it answers reviews as before for ``shutdown_delay`` (the Service's endpoints still send
    it some), each answer closing its connection and /readyz 503; then the listener closes and serve returns."""
    stop = asyncio.Event()
    bound: list[int] = []
    server = WebhookServer(ManagedSelector())
    task = asyncio.create_task(serve(server, "127.0.0.1", 0, None, None, started=bound.append, stop=stop,
                                     shutdown_delay=1.0))
    await until(lambda: bool(bound))
    url = f"http://127.0.0.1:{bound[0]}"
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/readyz") as r:
            assert r.status == 200
        stop.set()
        stopped_at = time.monotonic()
        await until(lambda: server.draining)
        body = sample_review(0)
        async with http.post(url + "/mutate", json=body) as r:
            assert r.status == 200 and r.headers["Connection"] == "close"
            assert (await r.json())["response"]["uid"] == body["request"]["uid"]
        async with http.get(url + "/readyz") as r:
            assert r.status == 503
        assert not task.done()
        await asyncio.wait_for(task, 5)
        assert time.monotonic() - stopped_at >= 1.0
        with pytest.raises(aiohttp.ClientConnectionError):       # the listener is closed
            async with http.get(url + "/healthz"):
                pass


@contextlib.contextmanager
def _webhook(*flags: str) -> Iterator[tuple[subprocess.Popen[str], int, list[str]]]:
    """``atoll webhook`` on a free port, once it listens: the process, its port and its log so far; killed on the
    way out if it is still running (a test never leaves a process behind)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "webhook", "--insecure-http", "--host",
                             "127.0.0.1", "--port", str(port), *flags], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "listening on" in line:
            break
    try:
        yield proc, port, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _read_until(proc: subprocess.Popen[str], lines: list[str], text: str) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if text in line:
            return
    raise AssertionError(f"{text!r} never logged:\n" + "".join(lines))


def test_atoll_webhook_exits_0_on_sigterm() -> None:
    with _webhook("--shutdown-delay=0") as (proc, _, lines):        # 0: the listener closes at once
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, "".join(lines) + err
    assert "SIGTERM received; stopping gracefully" in err and "atoll webhook stopped" in err
    assert "draining" not in err


def test_atoll_webhook_answers_during_its_shutdown_delay_then_exits_0() -> None:
    with _webhook("--shutdown-delay=2") as (proc, port, lines):
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        _read_until(proc, lines, "draining")
        body = json.dumps(sample_review(1)).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:     # a review sent meanwhile
            conn.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            answer = b""
            while chunk := conn.recv(65536):          # to the end: the answer closes the connection
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and b'"allowed":true' in answer.replace(b" ", b"")
        _, err = proc.communicate(timeout=20)
        took = time.monotonic() - signalled
    assert proc.returncode == 0, "".join(lines) + err
    assert took >= 2.0 and "atoll webhook stopped" in err


def test_a_second_signal_during_the_shutdown_delay_exits_at_once() -> None:
    with _webhook("--shutdown-delay=60") as (proc, _, lines):
        proc.send_signal(signal.SIGTERM)
        _read_until(proc, lines, "draining")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)     # at once: well before the 60 s delay ends (generous: 2 busy cores)
    assert proc.returncode == 1, "".join(lines) + err           # engine.kube.shutdown.FORCED_EXIT
    assert "SIGTERM again while stopping; exiting at once" in err


async def test_a_leader_whose_lead_fails_gives_the_lease_up_and_exits_with_its_error(
        leases: tuple[FakeLeases, Any]) -> None:
    """kubernetes-asyncio runs the leading coroutine as a task nobody awaits: a policy refused at start left the
    leader renewing its Lease and doing nothing, and no standby could take over. Now the error ends the election,
    the Lease is released, and the error is raised as without leader election (the CLI exits 1)."""
    from engine.errors import AtollError

    fake, api_client = leases
    runner = Runner(Options(leader_elect=True, identity="leader"))
    runner.api_client = api_client

    async def lead() -> None:
        raise AtollError("policy refused")
    runner.lead = lead  # type: ignore[method-assign]
    with pytest.raises(AtollError, match="policy refused"):
        await asyncio.wait_for(runner._until_stopped(), 10)
    assert not fake.leases["atoll-controller"]["spec"].get("holderIdentity")
