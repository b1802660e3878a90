"""WatchCache and Writer against a tiny fake apiserver (aiohttp): the real kubernetes-asyncio client on the wire."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any, AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from engine.kube.cache import WatchCache
from engine.kube.plan import BindingRef, Event, Patch, bind_patch, resume_patch
from engine.kube.writer import KubeApi, Writer
from tests.kube.fake_server import api_client_for

PATH = "/apis/work.karmada.io/v1alpha2/resourcebindings"


def rb(name: str, rv: str) -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class FakeApi:
    """LIST returns ``items``; WATCH streams ``script`` (list of event dicts) once per call, then ends."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.rv = "1"
        self.scripts: list[list[dict[str, Any]]] = []
        self.lists = 0
        self.watches: list[str] = []
        self.patches: list[tuple[str, str, Any]] = []
        self.events: list[Any] = []
        self.hang = False
        self.next_items: Any = None
        self.status_errors = 0
        self.bogus_lists = 0

    async def list_or_watch(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "True", "1"):
            self.watches.append(request.query.get("resourceVersion", ""))
            resp = web.StreamResponse()
            await resp.prepare(request)
            script = self.scripts.pop(0) if self.scripts else []
            for ev in script:
                await resp.write((json.dumps(ev) + "\n").encode())
            if self.next_items is not None:          # what changed while the client was not watching
                self.items, self.rv, self.next_items = self.next_items, "9", None
            if self.hang or not script:
                await asyncio.sleep(3600)
            return resp
        self.lists += 1
        if self.bogus_lists:
            self.bogus_lists -= 1
            return web.json_response({})
        return web.json_response({"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBindingList",
                                  "metadata": {"resourceVersion": self.rv}, "items": self.items})

    async def patch(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.patches.append((request.path, request.headers["Content-Type"], body))
        if request.match_info["name"] == "gone":
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
        if request.path.endswith("/status") and self.status_errors:
            self.status_errors -= 1
            return web.json_response({"kind": "Status", "code": 500, "reason": "InternalError"}, status=500)
        return web.json_response({"metadata": {"name": request.match_info["name"], "generation": 3},
                                  "status": {"conditions": [{"type": "FullyApplied", "status": "True"}]}})

    async def event(self, request: web.Request) -> web.Response:
        self.events.append(await request.json())
        return web.json_response({}, status=201)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeApi, Any]]:
    api = FakeApi()
    app = web.Application()
    app.router.add_get(PATH, api.list_or_watch)
    app.router.add_patch("/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings/{name}", api.patch)
    app.router.add_patch("/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings/{name}/status", api.patch)
    app.router.add_post("/api/v1/namespaces/{ns}/events", api.event)
    async with api_client_for(app) as api_client:
        yield api, api_client


async def test_cache_lists_watches_and_relists_after_410(fake: tuple[FakeApi, Any]) -> None:
    api, api_client = fake
    api.items = [rb("a", "1"), rb("b", "1")]
    api.next_items = [rb("a", "5"), rb("c", "8")]        # b deleted, c created while we were not watching
    api.scripts = [
        [{"type": "MODIFIED", "object": rb("a", "5")}, {"type": "BOOKMARK", "object": {
            "kind": "ResourceBinding", "metadata": {"resourceVersion": "7"}}},
         {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}],
    ]
    seen: list[tuple[str, str]] = []

    def handler(event: str, new: Any, old: Any) -> None:
        seen.append((event, (new or old)["metadata"]["name"]))

    custom = client.CustomObjectsApi(api_client)
    fn = functools.partial(custom.list_cluster_custom_object, "work.karmada.io", "v1alpha2", "resourcebindings")
    cache = WatchCache("rb", fn, handler, timeout_seconds=30)
    task = asyncio.create_task(cache.run())
    await asyncio.wait_for(cache.synced.wait(), 5)
    for _ in range(100):
        if api.lists >= 2 and len(api.watches) >= 2:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    task.cancel()
    assert api.watches[0] == "1"                          # watched from the listed resourceVersion
    assert seen[:3] == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]
    assert ("DELETED", "b") in seen and ("ADDED", "c") in seen   # the relist after 410 emitted the difference
    assert set(cache.objects) == {"ns/a", "ns/c"} and cache.relists == 2
    assert api.watches[1] == "9"


async def test_cache_watchdog_abandons_a_silent_watch(fake: tuple[FakeApi, Any]) -> None:
    api, api_client = fake
    api.items = [rb("a", "1")]
    custom = client.CustomObjectsApi(api_client)
    fn = functools.partial(custom.list_cluster_custom_object, "work.karmada.io", "v1alpha2", "resourcebindings")
    cache = WatchCache("rb", fn, lambda *a: None, timeout_seconds=30, watchdog=0.3)
    task = asyncio.create_task(cache.run())
    for _ in range(100):
        if api.lists >= 2:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    assert api.lists >= 2, "a hung watch was never abandoned"


async def test_writer_sends_merge_patches_with_exact_bodies_and_events(fake: tuple[FakeApi, Any]) -> None:
    api, api_client = fake
    retried: list[Any] = []
    writer = Writer(KubeApi(api_client), retried.append, concurrency=2, clock=lambda: 0.0)
    body = resume_patch("research", 1_800_000_000.0)
    ref = BindingRef("train-job", "ns", "uid-1")
    await writer.run([Patch(ref, body, "admit"), Patch(BindingRef("gone", "ns"), body, "admit"),
                      Event({"kind": "ResourceBinding", "name": "train-job", "namespace": "ns"}, "Admitted", "ok")])
    await writer.drain()
    api.patches.sort(key=lambda p: p[0], reverse=True)
    assert api.patches[0] == ("/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/train-job",
                              "application/merge-patch+json", body)
    assert body["spec"] == {"suspension": {"scheduling": False}}
    assert retried == []                                  # 404: the binding is gone, nothing to retry
    (ev,) = api.events
    assert ev["reason"] == "Admitted" and ev["involvedObject"]["name"] == "train-job"


async def test_bind_writes_scheduled_status_keeping_other_conditions_and_retries_it(
        fake: tuple[FakeApi, Any]) -> None:
    """Bind mode: spec.clusters, then the status subresource: Scheduled=True for the generation the spec patch
    returned, FullyApplied (Karmada's) kept; a failed status write is handed back, not lost."""
    api, api_client = fake
    api.status_errors = 1
    retried: list[Any] = []
    writer = Writer(KubeApi(api_client), retried.append, clock=lambda: 1_800_000_000.0)
    ref = BindingRef("train-job", "ns", "uid-1")
    await writer.run([Patch(ref, bind_patch("q", 1_800_000_000.0, {"m1": {"w": 2}}), "bind")])
    spec_path = "/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/train-job"
    assert [p[0] for p in api.patches] == [spec_path, spec_path + "/status"]
    (again,) = retried
    assert again.why == "bind-status" and again.subresource == "status"
    status = again.body["status"]
    assert status["schedulerObservedGeneration"] == 3
    assert [c["type"] for c in status["conditions"]] == ["FullyApplied", "Scheduled"]
    await writer.run(retried)
    assert api.patches[-1] == (spec_path + "/status", "application/merge-patch+json", again.body)


class ScriptedApi:
    """An ``Api`` whose patches fail as scripted (exception instances, in order) and record what landed."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.landed: list[tuple[str, str]] = []
        self.gate = asyncio.Event()

    async def patch_binding(self, ref: BindingRef, body: dict[str, Any], content_type: str,
                            subresource: str = "") -> Any:
        if body.get("slow"):
            await self.gate.wait()
        if self.failures:
            raise self.failures.pop(0)
        self.landed.append((ref.key, str(body.get("n"))))
        return {}

    async def create_event(self, namespace: str, body: dict[str, Any]) -> Any:
        raise RuntimeError("events are best effort")


async def test_writes_pipeline_across_steps_but_stay_ordered_per_binding() -> None:
    """submit() returns at once; a later step's patch on the same binding waits for the earlier one, while
    other bindings go ahead."""
    api = ScriptedApi([])
    writer = Writer(api, lambda item: None)
    a, b = BindingRef("a", "ns"), BindingRef("b", "ns")
    writer.submit([Patch(a, {"n": 1, "slow": True}, "admit")])
    writer.submit([Patch(a, {"n": 2}, "pending"), Patch(b, {"n": 3}, "admit"),
                   Event({"name": "a", "namespace": "ns"}, "Admitted", "x")])
    await asyncio.sleep(0.05)
    assert api.landed == [("ns/b", "3")] and writer.in_flight() == 1
    api.gate.set()
    await writer.drain()
    assert api.landed == [("ns/b", "3"), ("ns/a", "1"), ("ns/a", "2")] and writer.in_flight() == 0


async def test_a_write_cut_off_by_a_vanishing_server_is_handed_back() -> None:
    """aiohttp's ServerDisconnectedError is no OSError: it used to escape the writer and lose the write."""
    from aiohttp import ServerDisconnectedError
    retried: list[Any] = []
    api = ScriptedApi([ServerDisconnectedError()])
    writer = Writer(api, retried.append)
    first, then = Patch(BindingRef("a", "ns"), {"n": 1}, "admit"), Patch(BindingRef("a", "ns"), {"n": 2}, "pending")
    await writer.run([first, then])
    assert retried == [first, then] and api.landed == []


async def test_a_list_answer_that_is_no_list_deletes_nothing(fake: tuple[FakeApi, Any]) -> None:
    """A karmada-apiserver starting up answered a LIST with 200 and an empty object; taken as an empty list it
    deleted every cached binding (and the controller's jobs). It is an error: the cache lists again."""
    api, api_client = fake
    api.items = [rb("a", "1"), rb("b", "1")]
    custom = client.CustomObjectsApi(api_client)
    fn = functools.partial(custom.list_cluster_custom_object, "work.karmada.io", "v1alpha2", "resourcebindings")
    seen: list[tuple[str, str]] = []

    def handler(event: str, new: Any, old: Any) -> None:
        seen.append((event, (new or old)["metadata"]["name"]))
    cache = WatchCache("rb", fn, handler, timeout_seconds=30, max_backoff=0.05)
    await cache.relist()
    api.bogus_lists = 2
    with pytest.raises(Exception, match="no resourceVersion"):
        await cache.relist()
    assert sorted(cache.objects) == ["ns/a", "ns/b"]
    task = asyncio.create_task(cache.run())
    for _ in range(100):
        if api.lists >= 4:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    assert api.lists >= 4 and ("DELETED", "a") not in seen and sorted(cache.objects) == ["ns/a", "ns/b"]
