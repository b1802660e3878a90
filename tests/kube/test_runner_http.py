"""The controller's HTTP side: /readyz says whether its decisions can be trusted yet (the chart probes it)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from engine.kube.cache import WatchCache
from engine.kube.controller import Controller
from engine.kube.runner import Options, Runner
from engine.pipeline import Pipeline
from tests.kube import objects as o


async def get(runner: Runner, path: str) -> tuple[int, str]:
    client: TestClient[Any, Any] = TestClient(TestServer(runner.app()))
    await client.start_server()
    try:
        r = await client.get(path)
        return r.status, await r.text()
    finally:
        await client.close()


async def test_leader_is_ready_only_after_every_cache_listed() -> None:
    runner = Runner(Options())
    runner.leading = True
    status, text = await get(runner, "/readyz")
    assert status == 503 and "not synced" in text
    assert (await get(runner, "/healthz"))[0] == 200       # alive all along: no restart while listing
    runner.synced = True
    assert await get(runner, "/readyz") == (200, "ok: leading, caches synced")


async def test_standby_replica_is_ready_and_says_why() -> None:
    runner = Runner(Options(leader_elect=True))
    assert await get(runner, "/readyz") == (200, "ok: standing by for the leader Lease")
    status, text = await get(runner, "/explain?job=ns/a")
    assert status == 503 and "not the leader" in text


async def test_without_leader_election_not_ready_until_synced() -> None:
    assert (await get(Runner(Options()), "/readyz"))[0] == 503


async def test_metrics_are_served() -> None:
    status, text = await get(Runner(Options()), "/metrics")
    assert status == 200 and "atoll_admissions_total" in text


async def test_metrics_show_each_watch_cache_size() -> None:
    """Observable proof the controller has caught up (the e2e throughput test waits on it instead of sleeping)."""
    runner = Runner(Options())
    jobs = WatchCache("jobs", _never_listed, lambda event, new, old: None)
    jobs.objects = {"ns/a": {}, "ns/b": {}}
    runner.caches.append(jobs)
    status, text = await get(runner, "/metrics")
    assert status == 200 and 'atoll_cache_objects{cache="jobs"} 2.0' in text
    jobs.objects.pop("ns/a")
    assert 'atoll_cache_objects{cache="jobs"} 1.0' in (await get(runner, "/metrics"))[1]


async def _never_listed(**_: Any) -> Any:
    raise AssertionError("the test does not list")


async def test_member_pod_watch_goes_through_the_cluster_proxy_and_stops_with_its_cluster() -> None:
    from kubernetes_asyncio import client

    from engine.kube.controller import Controller
    from engine.pipeline import Pipeline

    saved = client.Configuration.get_default_copy()
    cfg = client.Configuration(host="https://karmada.invalid:5443")
    client.Configuration.set_default(cfg)
    try:
        runner = Runner(Options())
        runner.controller = Controller(Pipeline({}))
        runner._start_member_pods("m1")
        task, api = runner.member_pods["m1"]
        assert api.configuration.host == \
            "https://karmada.invalid:5443/apis/cluster.karmada.io/v1alpha1/clusters/m1/proxy"
        await runner._stop_member_pods("m1")
        assert "m1" not in runner.member_pods and task.cancelled()
    finally:
        client.Configuration.set_default(saved)


async def test_metrics_say_which_clusters_are_checked_per_node() -> None:
    from engine.kube.controller import Controller
    from engine.pipeline import Pipeline
    from tests.kube import objects as o

    runner = Runner(Options())
    runner.controller = Controller(Pipeline({}))
    models = o.resource_models({"nvidia.com/gpu": ["0", "4", "8"]})
    runner.controller.on_cluster("ADDED", o.modeled_cluster("shaped", models, [0, 1, 1]), None, 0.0)
    runner.controller.on_cluster("ADDED", o.cluster("summed"), None, 0.0)
    defaults = o.resource_models({"cpu": ["0", "1", "2", "4", "8", "16", "32", "64", "128"],
                                  "memory": ["0", "4Gi", "16Gi", "32Gi", "64Gi", "128Gi", "256Gi", "512Gi", "1024Gi"]})
    runner.controller.on_cluster("ADDED", o.modeled_cluster("defaults", defaults, [0] * 6 + [2, 0, 0]), None, 0.0)
    status, text = await get(runner, "/metrics")
    assert status == 200
    assert 'atoll_cluster_node_view{cluster="shaped"} 1.0' in text
    assert 'atoll_cluster_node_view{cluster="summed"} 0.0' in text
    assert 'atoll_cluster_node_view{cluster="defaults"} 0.0' in text        # Karmada's default models: totals
async def test_accounting_shows_the_engines_books() -> None:
    runner = Runner(Options())
    assert (await get(runner, "/debug/accounting"))[0] == 503
    runner.controller = ctl = Controller(Pipeline({}))
    job = o.batch_job("j", parallelism=1)
    ctl.on_cluster("ADDED", o.cluster("m1"), None, 0.0)
    ctl.on_template("ADDED", job, None)
    ctl.on_binding("ADDED", o.binding(job), None)
    ctl.step(1.0)
    status, text = await get(runner, "/debug/accounting")
    books = json.loads(text)
    assert status == 200 and list(books["holding"]) == ["team-a/j-job"]
    assert books["clusters"]["m1"]["reserved_for"] == ["team-a/j-job"]
    assert books["queues"]["default"] == books["holding"]["team-a/j-job"]["demand"]
