"""Carry out planned writes on the Karmada API with bounded concurrency.

Writes for one binding run in order; different bindings run in parallel up to ``concurrency`` (an unbounded
burst would only queue in the apiserver and starve the watches). The runner submits a step's writes without
waiting for them, so deciding and writing overlap. A 404 means the binding is gone (its job is
dropped by the next watch event); 409 or any transient error hands the write back to the controller, which
re-issues it next step with the freshest cache state.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any, Callable, Optional, Protocol

from kubernetes_asyncio.client.exceptions import ApiException

from engine.kube import metrics
from engine.kube.plan import MERGE_PATCH, BindingRef, Event, Patch, bind_status_patch, event_body

log = logging.getLogger("atoll.writer")

GROUP, VERSION = "work.karmada.io", "v1alpha2"
TIMEOUT = 30        # seconds per write: a frozen apiserver must not hold a concurrency slot forever


class Api(Protocol):
    async def patch_binding(self, ref: BindingRef, body: dict[str, Any], content_type: str,
                            subresource: str = "") -> Any: ...

    async def create_event(self, namespace: str, body: dict[str, Any]) -> Any: ...


class KubeApi:
    """``Api`` on kubernetes-asyncio: CustomObjectsApi merge patches (content type forced: its default for
    a dict body is JSON patch, which the apiserver rejects), CoreV1Api events."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio import client

        # Any: the bundled stubs omit ``_content_type``, which the generated methods accept and honour.
        self.custom: Any = client.CustomObjectsApi(api_client)
        self.core: Any = client.CoreV1Api(api_client)

    async def patch_binding(self, ref: BindingRef, body: dict[str, Any], content_type: str = MERGE_PATCH,
                            subresource: str = "") -> Any:
        if ref.namespace:
            if subresource == "status":
                return await self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, ref.namespace, "resourcebindings", ref.name, body, _content_type=content_type,
                    _request_timeout=TIMEOUT)
            return await self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, ref.namespace, "resourcebindings", ref.name, body, _content_type=content_type,
                _request_timeout=TIMEOUT)
        if subresource == "status":
            return await self.custom.patch_cluster_custom_object_status(
                GROUP, VERSION, "clusterresourcebindings", ref.name, body, _content_type=content_type,
                _request_timeout=TIMEOUT)
        return await self.custom.patch_cluster_custom_object(
            GROUP, VERSION, "clusterresourcebindings", ref.name, body, _content_type=content_type,
            _request_timeout=TIMEOUT)

    async def create_event(self, namespace: str, body: dict[str, Any]) -> Any:
        resp = await self.core.create_namespaced_event(namespace, body, _preload_content=False,
                                                      _request_timeout=TIMEOUT)
        resp.release()          # nothing to read back: skip deserialising the created Event


class Writer:
    def __init__(self, api: Api, retry: Callable[[Patch | Event], None], concurrency: int = 32,
                 component: str = "atoll", clock: Callable[[], float] = time.time,
                 on_patched: Optional[Callable[[Patch, Any], None]] = None) -> None:
        self.api = api
        self.retry = retry
        self.sem = asyncio.Semaphore(concurrency)
        self.event_sem = asyncio.Semaphore(max(1, concurrency // 4))
        self._background: set[asyncio.Task[None]] = set()
        self._chains: dict[str, asyncio.Task[None]] = {}     # binding -> its latest batch of patches
        self.component = component
        self.clock = clock
        self.on_patched = on_patched

    async def run(self, items: list[Patch | Event]) -> None:
        """Carry out ``items`` and wait for their patches (Events go on in the background)."""
        tasks = self.submit(items)
        if tasks:
            await asyncio.wait(tasks)

    def submit(self, items: list[Patch | Event]) -> list[asyncio.Task[None]]:
        """Start ``items`` and return at once, so the next step need not wait for this one's round trips
        (pipelining: under load a step's writes take longer than the step). A binding's patches still go in
        order: each batch for a binding starts after the one submitted before it has finished."""
        by_binding: dict[str, list[Patch]] = {}
        for item in items:
            if isinstance(item, Patch):
                by_binding.setdefault(item.ref.key, []).append(item)
            else:                    # off the critical path: nothing waits for Events
                self._spawn(self._event(item))
        out = []
        for key, patches in by_binding.items():
            task = self._spawn(self._after(self._chains.get(key), patches))
            self._chains[key] = task
            task.add_done_callback(functools.partial(self._chain_done, key))
            out.append(task)
        return out

    def in_flight(self) -> int:
        """Bindings with patches not yet done."""
        return len(self._chains)

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _chain_done(self, key: str, task: asyncio.Task[None]) -> None:
        if self._chains.get(key) is task:
            del self._chains[key]

    async def _after(self, previous: Optional[asyncio.Task[None]], patches: list[Patch]) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        await self._patches(patches)

    async def drain(self) -> None:
        """Wait for every write still under way (tests, shutdown)."""
        while self._background:
            await asyncio.wait(list(self._background))

    async def abandon(self) -> int:
        """Cancel every write still under way and wait for them to end (shutdown past its timeout); returns
        how many were cancelled. A binding patch cut here is simply not made: the next leader decides afresh
        from what the API holds."""
        tasks = [t for t in self._background if not t.done()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

    async def _patches(self, patches: list[Patch]) -> None:
        for i, patch in enumerate(patches):
            async with self.sem:
                outcome = await self._patch(patch)
            if outcome != "ok":
                if outcome == "retry":
                    for later in patches[i + 1:]:
                        self.retry(later)
                return

    async def _patch(self, patch: Patch) -> str:
        """"ok", "gone" (404: nothing to retry) or "retry" (handed back to the controller)."""
        try:
            result = await self.api.patch_binding(patch.ref, patch.body, patch.content_type, patch.subresource)
        except ApiException as exc:
            if exc.status == 404:
                log.info("%s %s is gone; dropping its %s patch", patch.ref.kind, patch.ref.key, patch.why)
                return "gone"
            metrics.WRITE_ERRORS.labels(f"patch-{patch.why}").inc()
            log.warning("patch (%s) of %s %s failed: %s %s; retrying next step", patch.why, patch.ref.kind,
                        patch.ref.key, exc.status, exc.reason)
            self.retry(patch)
            return "retry"
        except Exception as exc:     # connection refused/reset, server gone mid-request (aiohttp's
            # ServerDisconnectedError is no OSError), timeouts: the write is handed back, never lost
            metrics.WRITE_ERRORS.labels(f"patch-{patch.why}").inc()
            log.warning("patch (%s) of %s failed: %s: %s; retrying next step", patch.why, patch.ref.key,
                        type(exc).__name__, exc)
            self.retry(patch)
            return "retry"
        if self.on_patched is not None:
            self.on_patched(patch, result)
        if patch.why == "bind":
            await self._bind_status(patch, result)
        return "ok"

    async def _bind_status(self, patch: Patch, result: Any) -> None:
        """Bind mode: report Scheduled=True for the generation we placed, as karmada-scheduler would."""
        obj = result if isinstance(result, dict) else {}
        generation = (obj.get("metadata") or {}).get("generation")
        if not isinstance(generation, int):
            return
        conditions = (obj.get("status") or {}).get("conditions") if isinstance(obj.get("status"), dict) else None
        await self._patch(Patch(patch.ref, bind_status_patch(generation, self.clock(), conditions), "bind-status",
                                subresource="status"))

    async def _event(self, ev: Event) -> None:
        body = event_body(ev, self.clock(), self.component)
        try:
            async with self.event_sem:
                await self.api.create_event(body["metadata"]["namespace"], body)
        except Exception as exc:     # best effort: an Event lost is only a message lost
            metrics.WRITE_ERRORS.labels("event").inc()
            log.debug("event %s on %s not recorded: %s", ev.reason, ev.involved.get("name"), exc)
