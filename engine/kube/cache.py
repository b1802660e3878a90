"""A small list+watch cache of one resource, as plain dicts (no informer exists for kubernetes-asyncio).

Why each piece: a LIST gives a consistent snapshot and a resourceVersion; a WATCH from there with bookmarks
keeps the version fresh so a reconnect rarely hits 410 Gone; on 410 (or any error) we relist and emit the
difference, so a missed event costs one relist, never a stale object. Watches are closed by the server every
``timeout_seconds`` and reopened from the last version; a watchdog abandons a stream that stays silent longer
than that (kubernetes-asyncio watches can hang without an error). Handlers get every change; the controller
never GETs per event.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable, Optional

from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.watch import Watch

from engine.kube.translate import object_key

log = logging.getLogger("atoll.cache")

Obj = dict[str, Any]
ListFn = Callable[..., Awaitable[Any]]
Handler = Callable[[str, Optional[Obj], Optional[Obj]], None]
"""handler(event, new, old): event is ADDED, MODIFIED or DELETED (new is None for DELETED)."""


class NotAList(Exception):
    """A LIST answered 200 with something that is not a list (no kind ...List, no resourceVersion)."""


class WatchStalled(Exception):
    """No event, not even a bookmark, within the watchdog period."""


class WatchCache:
    """Objects of one resource by ``namespace/name`` (or ``name``), kept current by list+watch."""

    def __init__(self, name: str, list_fn: ListFn, handler: Handler, *, timeout_seconds: int = 60,
                 watchdog: Optional[float] = None, max_backoff: float = 30.0) -> None:
        self.name = name
        self.list_fn = list_fn
        self.handler = handler
        self.timeout_seconds = timeout_seconds
        self.watchdog = watchdog if watchdog is not None else timeout_seconds + 15.0
        self.max_backoff = max_backoff
        self.objects: dict[str, Obj] = {}
        self.synced = asyncio.Event()
        self.relists = 0
        self.resource_version = ""

    async def run(self) -> None:
        """List, then watch forever; relist after 410 Gone, a stalled stream or an error (with backoff)."""
        delay = 0.5
        while True:
            try:
                await self.relist()
                delay = 0.5
                await self._watch()
            except asyncio.CancelledError:
                raise
            except ApiException as exc:
                if exc.status == 410:
                    log.info("%s: resourceVersion too old (410 Gone); relisting", self.name)
                    continue
                log.warning("%s: API error %s %s; relisting in %.1fs", self.name, exc.status, exc.reason, delay)
            except WatchStalled:
                log.warning("%s: watch silent for %.0fs; reconnecting with a relist", self.name, self.watchdog)
                continue
            except Exception as exc:   # connection resets, TLS errors, malformed streams: never give up
                log.warning("%s: watch failed (%s: %s); relisting in %.1fs", self.name, type(exc).__name__,
                            exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.max_backoff)

    async def relist(self) -> None:
        resp = await self.list_fn(_preload_content=False)
        try:
            raw = await resp.read()
        finally:
            resp.release()
        body = json.loads(raw)
        kind = str(body.get("kind", "")) if isinstance(body, dict) else type(body).__name__
        if not kind.endswith("List") or not ((body.get("metadata") or {}).get("resourceVersion")):
            # seen from a karmada-apiserver that is starting up: 200 with an empty object. Taken as a list it
            # would delete every cached object (and their jobs); it is an error, so we list again.
            raise NotAList(f"LIST answered with {kind or 'no kind'} and no resourceVersion: {raw[:120]!r}")
        self.apply_list(body)
        self.relists += 1
        self.synced.set()

    def apply_list(self, body: dict[str, Any]) -> None:
        """Replace the contents with a LIST result, emitting only the differences."""
        kind = str(body.get("kind", ""))
        kind = kind[:-4] if kind.endswith("List") else kind
        api_version = body.get("apiVersion", "")
        fresh: dict[str, Obj] = {}
        for item in body.get("items") or ():
            item.setdefault("kind", kind)           # list items of built-in types carry no kind/apiVersion
            item.setdefault("apiVersion", api_version)
            fresh[object_key(item)] = item
        old = self.objects
        self.objects = fresh
        self.resource_version = str((body.get("metadata") or {}).get("resourceVersion", ""))
        added = changed = 0
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                added += 1
                self._emit("ADDED", obj, None)
            elif _rv(before) != _rv(obj):
                changed += 1
                self._emit("MODIFIED", obj, before)
        gone = [key for key in old if key not in fresh]
        for key in gone:
            self._emit("DELETED", None, old[key])
        if old and (added or changed or gone):
            log.info("%s: relist at resourceVersion %s: %d new, %d changed, %d gone%s", self.name,
                     self.resource_version, added, changed, len(gone), f" (e.g. {gone[:3]})" if gone else "")

    def apply_event(self, kind: str, obj: Obj) -> None:
        """One watch event (ADDED / MODIFIED / DELETED)."""
        key = object_key(obj)
        before = self.objects.get(key)
        if kind == "DELETED":
            if self.objects.pop(key, None) is not None:
                self._emit("DELETED", None, before)
            return
        self.objects[key] = obj
        self._emit("MODIFIED" if before is not None else "ADDED", obj, before)

    async def _watch(self) -> None:
        """Watch from the listed version; returns never (raises to make ``run`` relist)."""
        while True:
            watch = Watch(return_type="object")
            stream = watch.stream(self.list_fn, resource_version=self.resource_version,
                                  allow_watch_bookmarks=True, timeout_seconds=self.timeout_seconds)
            try:
                while True:
                    try:
                        event = await asyncio.wait_for(stream.__anext__(), self.watchdog)
                    except StopAsyncIteration:
                        break                              # the server ended the watch: reopen from our rv
                    except asyncio.TimeoutError:
                        raise WatchStalled() from None
                    etype = str(event.get("type", ""))
                    obj = event.get("raw_object")
                    if isinstance(obj, dict):
                        rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if rv:
                            self.resource_version = str(rv)
                        if etype in ("ADDED", "MODIFIED", "DELETED"):
                            self.apply_event(etype, obj)
            finally:
                await watch.close()

    def _emit(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        try:
            self.handler(event, new, old)
        except Exception:      # one bad object must never stop the cache
            key = object_key(new or old or {})
            log.exception("%s: handler failed on %s %s; the object stays cached", self.name, event, key)


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
