"""``atoll run``: watch caches -> Controller.step -> Writer, under leader election, with metrics and reload.

The first step runs only after every cache has listed once, so all resumed bindings are adopted (holding
their capacity) before anything new is admitted: a restart neither loses a job nor admits one twice.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from engine._data import data_path
from engine.errors import InputError
from engine.kube import metrics, plan, policy_source
from engine.kube.cache import WatchCache
from engine.kube.controller import Controller
from engine.kube.plan import Event
from engine.kube.works import metadata_lister
from engine.kube.writer import KubeApi, Writer

log = logging.getLogger("atoll.run")

RESERVATION_REFRESH = 15.0     # seconds: see _refresh_clusters


@dataclass
class Options:
    policy_configmap: Optional[str] = None          # NS/NAME, key policy.yaml
    policy_file: Optional[str] = None
    kubeconfig: Optional[str] = None
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    leader_elect: bool = False
    lease_name: str = "atoll-controller"
    lease_namespace: str = "atoll-system"
    concurrency: int = 32
    watch_timeout: int = 60
    identity: str = ""


class Runner:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.identity = opts.identity or f"{socket.gethostname()}-{os.getpid()}"
        self.wake = asyncio.Event()
        self.controller: Optional[Controller] = None
        self.policy: Optional[policy_source.RunningPolicy] = None
        self.policy_text: Optional[str] = None
        self.caches: list[WatchCache] = []
        self.api_client: Any = None
        self.kube: Optional[KubeApi] = None
        self.leading = False
        self.synced = False          # every watch cache has listed once: the engine's view is complete

    # -- entry --------------------------------------------------------------------------------------
    async def main(self) -> int:
        from kubernetes_asyncio import client, config

        if self.opts.kubeconfig:
            await config.load_kube_config(config_file=self.opts.kubeconfig)
        else:
            await config.load_config()
        self.api_client = client.ApiClient()
        self.kube = KubeApi(self.api_client)
        site = await self._serve_metrics()
        try:
            if not self.opts.leader_elect:
                await self.lead()
                return 0
            return await self._elect()
        finally:
            await site.stop()
            await self.api_client.close()

    async def _elect(self) -> int:
        from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
        from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

        lock = LeaseLock(self.opts.lease_name, self.opts.lease_namespace, self.identity, self.api_client)
        cfg = electionconfig.Config(lock, lease_duration=15, renew_deadline=10, retry_period=2,
                                    onstarted_leading=self.lead, onstopped_leading=self._lost)
        log.info("%s waiting to lead via Lease %s/%s", self.identity, self.opts.lease_namespace, self.opts.lease_name)
        await leaderelection.LeaderElection(cfg).run()
        return 1                     # leadership lost: exit so a fresh process rebuilds from the API

    async def _lost(self) -> None:
        metrics.LEADER.set(0)
        log.error("%s lost the leader Lease; exiting", self.identity)

    async def lead(self) -> None:
        metrics.LEADER.set(1)
        self.leading = True
        log.info("%s leads; starting watches", self.identity)
        await self._load_initial_policy()
        assert self.policy is not None
        self.controller = Controller(self.policy.pipeline, self.policy.selector, self.policy.mode,
                                     on_admit=self._admitted)
        tasks = [asyncio.create_task(c.run(), name=c.name) for c in self._make_caches()]
        try:
            await asyncio.wait_for(asyncio.gather(*(c.synced.wait() for c in self.caches)), 300)
            log.info("caches synced (%s); first cycle", ", ".join(f"{c.name}={len(c.objects)}" for c in self.caches))
            self.synced = True
            await self._loop()
        finally:
            for t in tasks:
                t.cancel()

    # -- caches -------------------------------------------------------------------------------------
    def _handler(self, fn: Any) -> Any:
        def handle(event: str, new: Any, old: Any) -> None:
            fn(event, new, old)
            self.wake.set()
        return handle

    def _make_caches(self) -> list[WatchCache]:
        from kubernetes_asyncio import client

        assert self.controller is not None
        ctl = self.controller
        custom = client.CustomObjectsApi(self.api_client)

        def lister(group: str, version: str, plural: str) -> Any:
            return functools.partial(custom.list_cluster_custom_object, group, version, plural)

        def cache(name: str, fn: Any, handler: Any) -> WatchCache:
            return WatchCache(name, fn, self._handler(handler), timeout_seconds=self.opts.watch_timeout)

        def on_cluster(event: str, new: Any, old: Any) -> None:
            ctl.on_cluster(event, new, old, time.time())

        def on_work(event: str, new: Any, old: Any) -> None:
            if ctl.on_work(event, new, old):
                self.wake.set()

        self.caches += [
            cache("clusters", lister("cluster.karmada.io", "v1alpha1", "clusters"), on_cluster),
            cache("queues", lister("scheduling.volcano.sh", "v1beta1", "queues"), ctl.on_queue),
            cache("priorityclasses", lister("scheduling.k8s.io", "v1", "priorityclasses"), ctl.on_priority_class),
            cache("volcano-jobs", lister("batch.volcano.sh", "v1alpha1", "jobs"), ctl.on_template),
            cache("jobs", lister("batch", "v1", "jobs"), ctl.on_template),
            cache("deployments", lister("apps", "v1", "deployments"), ctl.on_template),
            cache("resourcebindings", lister("work.karmada.io", "v1alpha2", "resourcebindings"), ctl.on_binding),
            cache("clusterresourcebindings", lister("work.karmada.io", "v1alpha2", "clusterresourcebindings"),
                  ctl.on_binding),
            # metadata only, and a step only for a Work of a victim being evicted (see engine/kube/works.py)
            WatchCache("works", metadata_lister(self.api_client), on_work, timeout_seconds=self.opts.watch_timeout),
        ]
        return self.caches

    # -- policy ---------------------------------------------------------------------------------------
    async def _load_initial_policy(self) -> None:
        if self.opts.policy_configmap:
            from kubernetes_asyncio import client

            ns, _, name = self.opts.policy_configmap.partition("/")
            if not ns or not name:
                raise InputError("expected NAMESPACE/NAME", "--policy-configmap")
            core = client.CoreV1Api(self.api_client)
            fn = functools.partial(core.list_namespaced_config_map, ns, field_selector=f"metadata.name={name}")
            cm_cache = WatchCache("policy-configmap", fn, self._on_configmap, timeout_seconds=self.opts.watch_timeout)
            self.caches.append(cm_cache)
            await cm_cache.relist()
            if self.policy is None:
                raise InputError(f"no valid policy in ConfigMap {self.opts.policy_configmap} (key policy.yaml)",
                                 "--policy-configmap")
            asyncio.create_task(cm_cache.run(), name="policy-configmap")
        elif self.opts.policy_file:
            try:
                with open(self.opts.policy_file, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise InputError(f"cannot read policy: {exc.strerror}", self.opts.policy_file) from None
            self.policy = policy_source.load(text, self.opts.policy_file)
            metrics.POLICY_GENERATION.inc()
        else:
            default = data_path("policies", "default.yaml")
            if not default.exists():
                raise InputError("no policy given: use --policy-configmap NS/NAME or --policy FILE", "atoll run")
            self.policy = policy_source.load(default.read_text(), str(default))
            metrics.POLICY_GENERATION.inc()

    def _on_configmap(self, event: str, new: Any, old: Any) -> None:
        if new is None:
            log.error("policy ConfigMap %s deleted; keeping the running policy", self.opts.policy_configmap)
            return
        text = (new.get("data") or {}).get("policy.yaml")
        if text is None or text == self.policy_text:
            return
        source = f"configmap {self.opts.policy_configmap}: policy.yaml"
        try:
            loaded = policy_source.load(text, source)
        except (InputError, ValueError) as exc:
            metrics.RELOAD_ERRORS.inc()
            log.error("policy edit rejected, the previous policy keeps running: %s", exc)
            self.policy_text = text
            if self.controller is not None:
                self.controller.retry_later(Event(_involved(new), "PolicyRejected",
                                                  f"invalid policy, previous one keeps running: {exc}", "Warning"))
                self.wake.set()
            return
        self.policy_text = text
        self.policy = loaded
        metrics.POLICY_GENERATION.inc()
        log.info("policy %s (%s) loaded from %s; mode %s", loaded.name, loaded.digest[:12], source, loaded.mode)
        if self.controller is not None:
            self.controller.set_pipeline(loaded.pipeline, loaded.selector, loaded.mode)
            self.controller.retry_later(Event(_involved(new), "PolicyLoaded", f"policy {loaded.name} "
                                                                        f"({loaded.digest[:12]}) is running"))
            self.wake.set()

    # -- the loop ---------------------------------------------------------------------------------------
    async def _loop(self) -> None:
        assert self.controller is not None and self.kube is not None
        ctl = self.controller
        writer = Writer(self.kube, ctl.retry_later, self.opts.concurrency, "atoll-controller")
        last_refresh = time.time()
        while True:
            now = time.time()
            timer = ctl.engine.next_timer()
            timeout = 1.0 if timer is None else min(1.0, max(0.0, timer - now))
            try:
                await asyncio.wait_for(self.wake.wait(), timeout)
                await asyncio.sleep(0.02)            # let a burst of watch events land: one step for all
            except asyncio.TimeoutError:
                pass
            self.wake.clear()
            now = time.time()
            if now - last_refresh >= RESERVATION_REFRESH:
                self._refresh_clusters(now)
                last_refresh = now
            start = time.perf_counter()
            items = ctl.step(now)
            metrics.CYCLE.observe(time.perf_counter() - start)
            if items:
                try:
                    await writer.run(items)
                except Exception:          # unforeseen: keep leading; the writes are re-planned on change
                    log.exception("writing %d planned changes failed", len(items))

    def _refresh_clusters(self, now: float) -> None:
        """Our caches are live, so a cluster summary we hold is current as of (now - Karmada's 10 s status
        period). Re-stamping it lets in-flight reservations of jobs started before that expire even when the
        summary did not change after their pods landed (Karmada writes status only on change)."""
        assert self.controller is not None
        for c in self.caches:
            if c.name == "clusters":
                for obj in list(c.objects.values()):
                    self.controller.on_cluster("MODIFIED", obj, obj, now - RESERVATION_REFRESH)

    def _admitted(self, key: str, queue: str, now: float) -> None:
        metrics.ADMISSIONS.labels(queue).inc()
        assert self.controller is not None
        obj = self.controller.bindings.get(key)
        paused = plan.parse_stamp(((obj or {}).get("metadata") or {}).get("annotations", {}).get(
            "atoll.dev/paused-by-webhook"))
        if paused is not None:
            metrics.RESUME_LATENCY.observe(max(0.0, now - paused))

    # -- metrics / explain ------------------------------------------------------------------------------
    async def _serve_metrics(self) -> web.TCPSite:
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.opts.metrics_host, self.opts.metrics_port)
        await site.start()
        return site

    def app(self) -> web.Application:
        """The metrics/health/explain routes (a method so tests can serve them without a port)."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/explain", self._explain)
        return app

    async def _healthz(self, _: web.Request) -> web.Response:
        return await self._text("ok")

    async def _readyz(self, _: web.Request) -> web.Response:
        """Ready once the leader's caches have all listed (its decisions then see every object), or while a
        standby waits for the Lease: a standby is exactly what it should be."""
        if self.synced:
            return await self._text("ok: leading, caches synced")
        if self.opts.leader_elect and not self.leading:
            return await self._text("ok: standing by for the leader Lease")
        return await self._text("not ready: watch caches not synced yet", 503)

    async def _text(self, text: str, status: int = 200) -> web.Response:
        return web.Response(text=text, status=status)

    async def _metrics(self, _: web.Request) -> web.Response:
        for c in self.caches:                # gauges of state are read when scraped, not kept per step
            metrics.CACHE_OBJECTS.labels(c.name).set(len(c.objects))
        if self.controller is not None:
            engine = self.controller.engine
            for name in engine.state.queues:
                metrics.PENDING.labels(name).set(engine.pending_count(name))
        resp = web.Response(body=generate_latest())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    async def _explain(self, request: web.Request) -> web.Response:
        job = request.query.get("job", "")
        if self.controller is None:
            return web.Response(text="this replica is not the leader (no live engine)\n", status=503)
        return web.Response(text=self.controller.explain(job) + "\n")


def _involved(configmap: dict[str, Any]) -> dict[str, str]:
    """The policy ConfigMap as an Event's involvedObject."""
    meta = configmap["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "namespace": meta["namespace"],
            "uid": meta.get("uid", "")}
