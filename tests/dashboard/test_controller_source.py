"""``atoll run``'s dashboard source: the runner records policy loads and refused edits; the pages read them."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer

from engine.dashboard.app import make_app
from engine.dashboard.source import ControllerSource
from engine.kube.controller import Controller
from engine.kube.runner import Options, Runner
from tests.kube.test_reload import POLICIES, cm


async def test_policy_page_shows_loads_and_the_last_refused_edit() -> None:
    runner = Runner(Options(policy_configmap="atoll-system/atoll-policy", dashboard_port=0))
    source = ControllerSource(runner)
    assert source.engine() is None and source.info()["kind"] == "controller"      # not leading yet
    runner._on_configmap("ADDED", cm((POLICIES / "default.yaml").read_text(), "1"), None)
    assert runner.policy is not None
    runner.controller = Controller(runner.policy.pipeline, runner.policy.selector, runner.policy.mode)
    runner._on_configmap("MODIFIED", cm((POLICIES / "karmada-fifo.yaml").read_text(), "2"), None)
    bad = "spec:\n  pipeline:\n    order: [no-such-plugin]\n"
    runner._on_configmap("MODIFIED", cm(bad, "3"), None)
    async with TestClient(TestServer(make_app(source))) as client:
        policy = await (await client.get("/api/policy")).json()
        assert policy["policy"]["name"] == "karmada-fifo" and policy["policy"]["generation"] == 2
        assert policy["policy"]["source"] == "configmap atoll-system/atoll-policy: policy.yaml"
        assert policy["policy"]["pipeline"]["order"] == ["fifo"]
        assert policy["refused"]["text"] == bad and "apiVersion" in policy["refused"]["error"]
        page = await (await client.get("/policy")).text()
        assert "&#39;apiVersion&#39; is a required property" in page and 'id="policy-generation">2<' in page
        queues = await (await client.get("/api/queues")).json()
        assert queues["header"]["source"]["kind"] == "controller" and queues["header"]["leading"]


def test_admission_log_feeds_the_job_timeline_and_stays_bounded() -> None:
    from engine.dashboard import jobs
    from engine.dashboard.source import AdmissionLog
    from tests.dashboard.state import known_source

    known, engine, _ = known_source()
    runner = Runner(Options())
    runner.controller = Controller(engine.pipeline, None, "gate")  # type: ignore[arg-type]
    runner.controller.engine = engine
    runner.admissions.admitted("default/a1", {"m1": {"w": 1}}, 20.0)
    runner._admitted("default/a1", "team-a", 40.0)             # what the controller calls on an admission
    source = ControllerSource(runner)
    source.policy = known.policy
    detail = jobs.job_view(source, "default/a1")
    assert detail is not None
    assert [(e["event"], e["detail"]) for e in detail["timeline"]][1:] == [
        ("attempt 1 admitted", "m1: w=1"), ("attempt 2 admitted", "m2: w=1")]
    waiting = jobs.job_view(source, "default/b1")
    assert waiting is not None and waiting["timeline"][-1]["detail"] == "job requests cpu 4, more than the fleet has free"
    log = AdmissionLog(limit=2)
    for i in range(3):
        log.admitted(f"j{i}", {"m": {"w": 1}}, float(i))
    assert list(log.jobs) == ["j1", "j2"]
