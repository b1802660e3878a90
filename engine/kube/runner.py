"""``atoll run``: watch caches -> Controller.step -> Writer, under leader election, with metrics and reload.

The first step runs only after every cache has listed once, so all resumed bindings are adopted (holding
their capacity) before anything new is admitted: a restart neither loses a job nor admits one twice.

SIGTERM / SIGINT stop it gracefully (engine/kube/shutdown.py): no new cycle, the writes in flight finish (at
most ``--shutdown-timeout`` seconds, then they are cancelled), the watches stop, the leader Lease is released
(holderIdentity cleared, as client-go's ReleaseOnCancel does: a standby takes over at its next retry instead
of after a whole lease duration), the servers and API clients close, exit status 0.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Optional

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from engine.dashboard.source import AdmissionLog, PolicyLog
from engine.errors import AtollError, InputError
from engine.kube import access, metrics, plan, policy_source
from engine.kube.cache import WatchCache
from engine.kube.controller import Controller
from engine.kube.plan import Event
from engine.kube.leadership import Leadership
from engine.kube.shutdown import SHUTDOWN_TIMEOUT, Shutdown
from engine.kube.policy_watch import PolicyWatch
from engine.kube.works import metadata_lister
from engine.kube.accounting import accounting
from engine.kube.writer import KubeApi, Writer

log = logging.getLogger("atoll.run")

REPORT_SLACK = 5.0     # seconds a status collection may take beyond its period to reach us: see _redate_reports


@dataclass
class Options:
    policy_configmap: Optional[str] = None          # NS/NAME, key policy.yaml
    policy_file: Optional[str] = None
    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    leader_elect: bool = False
    lease_name: str = "atoll-controller"
    lease_namespace: str = "atoll-system"
    concurrency: int = 32
    watch_timeout: int = 60
    identity: str = ""
    stuck_after: float = 20.0     # seconds a pod may stay Unschedulable in its member; 0: no member pod watches
    cluster_status_period: float = 10.0   # Karmada's --cluster-status-update-frequency (see _redate_reports)
    dashboard_port: Optional[int] = None            # the read-only web dashboard (engine/dashboard); off if None
    dashboard_host: str = "127.0.0.1"
    shutdown_timeout: float = SHUTDOWN_TIMEOUT      # seconds the writes in flight may take after SIGTERM


class Runner(PolicyWatch, Leadership):
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
        self.member_pods: dict[str, tuple[asyncio.Task[None], Any]] = {}   # cluster -> (watch task, ApiClient)
        self.policy_log = PolicyLog()  # running policy text and last refused edit, for the dashboard
        self.dashboard_version = 0     # bumped by steps that wrote something: the dashboard's live updates
        self.policy_deleted = False  # the policy ConfigMap is gone (the running policy stays)
        self.early_events: list[Event] = []     # PolicyRejected before the controller exists
        self.admissions = AdmissionLog()  # each job's admissions, for the dashboard's job timeline
        self.shutdown = Shutdown("atoll run")   # SIGTERM/SIGINT: stop gracefully; twice: exit at once
        self.stopping = self.shutdown.requested
        self.shutdown.on_request.append(self.wake.set)   # the loop sees it without waiting for its timer
        self._lead_task: Optional[asyncio.Task[Any]] = None   # the task running lead(), once leading

    # -- entry --------------------------------------------------------------------------------------
    async def main(self) -> int:
        self.shutdown.install()
        try:
            return await self._main()
        finally:
            self.shutdown.uninstall()

    async def _main(self) -> int:
        from kubernetes_asyncio import client

        await access.load(self.opts.kubeconfig, self.opts.context)
        self.api_client = client.ApiClient()
        try:
            await access.probe(self.api_client)
        except BaseException:
            await self.api_client.close()
            raise
        _no_environment_lookups(self.api_client)
        self.kube = KubeApi(self.api_client)
        try:
            site = await self._serve_metrics()
        except OSError as exc:
            await self.api_client.close()
            raise InputError(f"cannot serve metrics on {self.opts.metrics_host}:{self.opts.metrics_port}: "
                             f"{exc.strerror or exc}", "--metrics-port") from None
        dashboard = None
        if self.opts.dashboard_port is not None:
            from engine.dashboard.app import serve
            from engine.dashboard.source import ControllerSource
            dashboard = await serve(ControllerSource(self), self.opts.dashboard_host, self.opts.dashboard_port)
        try:
            return await self._until_stopped()
        finally:
            if dashboard is not None:
                await dashboard.cleanup()
            await site.stop()
            await self.api_client.close()
            if self.stopping.is_set():
                log.info("%s stopped: API clients and servers closed", self.identity)

    async def lead(self) -> None:
        self._lead_task = asyncio.current_task()
        if self.stopping.is_set():
            return
        metrics.LEADER.set(1)
        self.leading = True
        log.info("%s leads; starting watches", self.identity)
        await self._load_initial_policy()
        assert self.policy is not None
        self._start_controller()
        tasks = [asyncio.create_task(c.run(), name=c.name) for c in self._make_caches()]
        try:
            try:
                await asyncio.wait_for(asyncio.gather(*(c.synced.wait() for c in self.caches)), 300)
            except asyncio.TimeoutError:
                slow = ", ".join(c.name for c in self.caches if not c.synced.is_set())
                raise AtollError(f"atoll run: watch caches did not list within 300 s ({slow}); see the log "
                                 "for the API errors") from None
            log.info("caches synced (%s); first cycle", ", ".join(f"{c.name}={len(c.objects)}" for c in self.caches))
            self.synced = True
            await self._loop()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*(self._stop_member_pods(name) for name in list(self.member_pods)))

    def _start_controller(self) -> Controller:
        assert self.policy is not None
        self.controller = Controller(self.policy.pipeline, self.policy.selector, self.policy.mode,
                                     on_admit=self._admitted, stuck_after=self.opts.stuck_after or 20.0)
        for event in self.early_events:        # rejections seen before it existed go out with its first step
            self.controller.retry_later(event)
        self.early_events.clear()
        return self.controller

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
            name = str(((new or old or {}).get("metadata") or {}).get("name", ""))
            if new is None and name in self.member_pods:
                asyncio.get_running_loop().create_task(self._stop_member_pods(name))  # stopped now, closed later
            elif new is not None and name and name not in self.member_pods and self.opts.stuck_after > 0:
                self._start_member_pods(name)

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

    def _start_member_pods(self, cluster: str) -> None:
        """Watch the member's unbound pods (fieldSelector spec.nodeName=) through Karmada's cluster proxy
        (``/apis/cluster.karmada.io/v1alpha1/clusters/NAME/proxy``): the one place "no node can host this pod"
        shows (engine/kube/stuck.py). Not part of the sync gate: an unreachable member must not stall the rest."""
        from kubernetes_asyncio import client

        assert self.controller is not None
        ctl = self.controller
        cfg = client.Configuration.get_default_copy()
        cfg.host = f"{(cfg.host or '').rstrip('/')}/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}/proxy"
        api = client.ApiClient(configuration=cfg)
        lister = functools.partial(client.CoreV1Api(api).list_pod_for_all_namespaces, field_selector="spec.nodeName=")

        def on_pod(event: str, new: Any, old: Any) -> None:
            ctl.on_member_pod(cluster, event, new, old, time.time())
        cache = WatchCache(f"pods@{cluster}", lister, self._handler(on_pod), timeout_seconds=self.opts.watch_timeout)
        self.member_pods[cluster] = (asyncio.get_running_loop().create_task(cache.run(), name=cache.name), api)

    def _stop_member_pods(self, cluster: str) -> Any:
        """Stop a member's pod watch now (a Cluster re-added at once starts a fresh one); returns the awaitable
        that closes its connection pool."""
        task, api = self.member_pods.pop(cluster)
        task.cancel()
        if self.controller is not None:
            self.controller.stuck.forget_cluster(cluster)

        async def close() -> None:
            await asyncio.gather(task, return_exceptions=True)
            await api.close()
        return close()

    # -- the loop ---------------------------------------------------------------------------------------
    async def _loop(self) -> None:
        assert self.controller is not None and self.kube is not None
        ctl = self.controller
        writer = Writer(self.kube, ctl.retry_later, self.opts.concurrency, "atoll-controller")
        while not self.stopping.is_set():
            now = time.time()
            timer = ctl.engine.next_timer()
            timeout = 1.0 if timer is None else min(1.0, max(0.0, timer - now))
            try:
                await asyncio.wait_for(self.wake.wait(), timeout)
                await asyncio.sleep(0.02)            # let a burst of watch events land: one step for all
            except asyncio.TimeoutError:
                pass
            if self.stopping.is_set():
                break
            self.wake.clear()
            now = time.time()
            self._redate_reports(now)
            start = time.perf_counter()
            items = ctl.step(now)
            metrics.CYCLE.observe(time.perf_counter() - start)
            self.dashboard_version += 1 if items else 0
            if items:
                writer.submit(items)       # not awaited: the next step overlaps these round trips
        await self._finish_writes(writer)

    async def _finish_writes(self, writer: Writer) -> None:
        """Stopping: no new cycle; the last cycles' patches and Events finish, within --shutdown-timeout."""
        log.info("stopping: no new cycles; %d binding(s) with writes in flight (waiting at most %g s)",
                 writer.in_flight(), self.opts.shutdown_timeout)
        try:
            await asyncio.wait_for(writer.drain(), self.opts.shutdown_timeout)
        except asyncio.TimeoutError:
            cut = await writer.abandon()
            log.warning("stopping: %d write(s) still in flight after %g s were cancelled; the next leader decides "
                        "those bindings afresh", cut, self.opts.shutdown_timeout)
        else:
            log.info("stopping: writes in flight done")

    def _redate_reports(self, now: float) -> None:
        """Karmada writes a Cluster's status only when it changes, collecting it every
        ``--cluster-status-period``; our watch is live, so a summary we hold was current as of
        ``now - period - REPORT_SLACK``. A report older than that is re-dated to it where this ends the
        reservation of a job started before (its pods were in the report: had they not been, it would have
        changed). A reservation so lasts at most period + slack + one loop tick (1 s) after the job's start,
        not until the cluster's next change."""
        assert self.controller is not None
        horizon = now - self.opts.cluster_status_period - REPORT_SLACK
        names = self.controller.engine.state.reports_to_redate(horizon)
        if not names:
            return
        for c in self.caches:
            if c.name == "clusters":
                for obj in list(c.objects.values()):
                    if (obj.get("metadata") or {}).get("name") in names:
                        self.controller.on_cluster("MODIFIED", obj, obj, horizon)

    def _admitted(self, key: str, queue: str, now: float) -> None:
        metrics.ADMISSIONS.labels(queue).inc()
        assert self.controller is not None
        job = self.controller.engine.state.jobs.get(key)
        if job is not None and job.placement:
            self.admissions.admitted(key, job.placement, now)
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
        app.router.add_get("/debug/accounting", self._accounting)
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
            for name, cluster in engine.state.clusters.items():
                shapes = cluster.node_shapes      # Karmada's default models are too coarse: FleetState uses totals
                metrics.NODE_VIEW.labels(name).set(0 if shapes is None or shapes.karmada_defaults else 1)
        resp = web.Response(body=generate_latest())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    async def _accounting(self, _: web.Request) -> web.Response:
        """The engine's books as JSON, to compare with the API's truth (fault tests, debugging)."""
        if self.controller is None:
            return await _no_engine()
        return web.json_response(accounting(self.controller))

    async def _explain(self, request: web.Request) -> web.Response:
        job = request.query.get("job", "")
        if self.controller is None:
            return web.Response(text="this replica is not the leader (no live engine)\n", status=503)
        return web.Response(text=self.controller.explain(job) + "\n")


def _no_environment_lookups(api_client: Any) -> None:
    """kubernetes-asyncio opens its aiohttp session with trust_env=True, so every request looks for proxy
    variables and reads ~/.netrc in a worker thread: 17 % of the controller's CPU under load (py-spy). The
    kubeconfig says where the API is and how to authenticate; the environment has nothing to add."""
    session = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False


async def _no_engine() -> web.Response:
    return web.Response(text="this replica is not the leader (no live engine)\n", status=503)
