"""The dashboard's view-model on a known engine state: the numbers the pages and their JSON twins show."""

from __future__ import annotations

import json

from engine.dashboard import jobs, view
from engine.dashboard.source import Attempt, History, Source
from engine.model import JobState
from tests.dashboard.state import HOSTILE, known_source


def by_name(rows: list[dict], key: str = "name") -> dict[str, dict]:
    return {r[key]: r for r in rows}


def test_queues_show_share_target_reasons_and_flags() -> None:
    source, _, _ = known_source()
    data = view.queues_view(source)
    json.dumps(data)                                                   # a JSON twin: serialisable as is
    q = by_name(data["queues"])
    assert [r["name"] for r in data["queues"]] == ["prod", "research", "team-a", "team-b", "nowhere"]  # tree order
    assert q["team-a"]["depth"] == 1 and q["team-a"]["parent"] == "research"
    # fleet: 16 cpu. prod holds p1 (8) + p2 (4) = 12 -> 0.75; research (team-a's a1) 4 -> 0.25
    assert (q["prod"]["dominantShare"], q["prod"]["dominantResource"]) == (0.75, "cpu")
    assert q["research"]["allocated"]["cpu"] == "4" and q["research"]["allocatedRaw"]["cpu"] == 4000
    # targets: prod (w2) vs research (w1) -> 2/3 and 1/3; research's two active children split its third
    assert (q["prod"]["target"], q["research"]["target"], q["team-a"]["target"], q["team-b"]["target"]) == \
        (0.6667, 0.3333, 0.1667, 0.1667)
    assert q["prod"]["guaranteeShare"] == 0.25 and q["prod"]["overGuarantee"] and q["prod"]["borrowing"]
    assert q["team-b"]["starved"] and q["team-b"]["pending"] == 1 and not q["team-b"]["borrowing"]
    assert q["team-b"]["pendingByReason"] == [{"reason": "job requests cpu N, more than the fleet has free", "count": 1}]
    assert q["prod"]["admitted"] == 2 and q["prod"]["pending"] == 0
    assert not q["nowhere"]["known"] and q["nowhere"]["pending"] == 1
    assert data["resources"] == ["cpu", "memory", "nvidia.com/gpu", "pods"]


def test_jobs_filter_sort_page_and_positions() -> None:
    source, engine, clock = known_source()
    data = jobs.jobs_view(source, {"state": "pending"})
    assert [r["id"] for r in data["rows"]] == ["default/b1", "default/lost"]        # by submit time
    b1 = data["rows"][0]
    assert b1["waiting"] == 97.0 and b1["position"] == 1 and b1["reason"] == "job requests cpu 4, more than the fleet has free"
    assert data["matched"] == 2 and data["total"] == 5
    admitted = jobs.jobs_view(source, {"state": "admitted", "cluster": "m2", "sort": "name", "order": "desc"})
    assert [r["id"] for r in admitted["rows"]] == ["default/p2", "default/a1"]
    assert admitted["rows"][0]["placement"] == "m2: w=2" and admitted["rows"][0]["admittedAt"] == 10.0
    paged = jobs.jobs_view(source, {"limit": "2", "page": "2"})
    assert [r["id"] for r in paged["rows"]] == ["default/b1", "default/p2"] and paged["pages"] == 3
    assert jobs.jobs_view(source, {"limit": "2", "page": "99"})["params"]["page"] == 3       # clamped
    bad = jobs.jobs_view(source, {"state": "nonsense", "sort": "x"})
    assert bad["params"]["state"] == "all" and len(bad["notes"]) == 2
    groups = jobs.jobs_view(source, {})["groups"]
    assert {"reason": "queue 'nowhere' does not exist", "queue": "nowhere", "count": 1} in groups


def test_stable_sort_keeps_ties_in_id_order() -> None:
    source, engine, _ = known_source()
    for job in engine.state.jobs.values():
        job.priority = 5
    first = [r["id"] for r in jobs.jobs_view(source, {"sort": "priority"})["rows"]]
    again = [r["id"] for r in jobs.jobs_view(source, {"sort": "priority"})["rows"]]
    assert first == again and first == sorted(first, key=lambda i: engine.state.jobs[i].submit_time)


def test_job_detail_explains_each_cluster_and_shows_history() -> None:
    source, engine, _ = known_source()
    data = jobs.job_view(source, "default/b1")
    assert data is not None and data["job"]["state"] == "Pending"
    verdicts = by_name(data["clusters"], "cluster")
    assert verdicts["m1"]["verdict"] == "refused" and "short of cpu=4" in verdicts["m1"]["reason"]
    assert "free now: fleet cpu=0" in data["explain"]
    engine.state.clusters["m2"].ready = False
    engine.state._ready = None                                         # what upsert_cluster would reset
    data = jobs.job_view(source, "default/b1")
    assert data is not None and by_name(data["clusters"], "cluster")["m2"]["reason"] == \
        "cluster is not ready"
    assert jobs.job_view(source, "default/none") is None

    class WithHistory(Source):
        def history(self, job_id: str) -> History:
            return History([Attempt(20.0, {"m1": {"w": 1}}, 21.0, 50.0, "ClusterLost", "m1 went away")],
                           [(10.0, "fleet has cpu 0 free")])
    rich = jobs.job_view(WithHistory(engine, source.policy, source.clock), "default/a1")
    assert rich is not None
    assert [e["event"] for e in rich["timeline"]] == ["submitted", "waiting", "attempt 1 admitted",
                                                      "attempt 1 running", "attempt 1 ClusterLost"]
    assert rich["clusters"] == []                                        # admitted: no refusals to explain

    class Trimmed(Source):                      # the adapter kept 3 changes of reason, 5 left out after the 2nd
        def history(self, job_id: str) -> History:
            return History([], [(1.0, "r1"), (2.0, "r2"), (9.0, "r8")], not_kept=5, first=2)
    trimmed = jobs.job_view(Trimmed(engine, source.policy, source.clock), "default/a1")
    assert trimmed is not None
    assert [(e["time"], e["detail"]) for e in trimmed["timeline"] if e["event"] == "waiting"] == \
        [(1.0, "r1"), (2.0, "r2"), (2.0, "... 5 more changes of reason, not kept"), (9.0, "r8")]


def test_clusters_capacity_reserved_free_and_jobs() -> None:
    source, _, _ = known_source()
    data = view.clusters_view(source)
    m1, m2 = data["clusters"]
    cpu = by_name(m2["resources"])["cpu"]
    # nothing reported yet: a1 and p2 are Atoll's in-flight reservations on m2
    assert (cpu["capacityRaw"], cpu["allocatedRaw"], cpu["reservedRaw"], cpu["freeRaw"]) == (8000, 0, 8000, 0)
    assert cpu["usedFraction"] == 1.0 and m2["jobs"] == 2 and m1["jobs"] == 1
    assert by_name(m1["resources"])["nvidia.com/gpu"]["capacity"] == "4"
    assert m1["labels"] == {"gpu": "a100"} and [q["queue"] for q in m2["queues"]] == ["prod", "team-a"]


def test_policy_view_shows_the_running_text_and_the_last_refused_edit() -> None:
    source, _, _ = known_source()
    data = view.policy_view(source)
    assert data["policy"]["generation"] == 1 and "kind: SchedulingPolicy" in data["policy"]["text"]
    assert data["policy"]["pipeline"]["admit"][:2] == ["queue-state", "capacity"] and data["refused"] is None
    edit = source.policy.text.replace("      allowSplit: false ", "      allowSplit: maybe ")
    assert edit != source.policy.text
    source.policy.refused(edit, "policy.yaml: spec.plugins.gang.allowSplit: 'maybe' is not of type 'boolean'", at=50.0)
    refused = view.policy_view(source)["refused"]
    assert (refused["text"], refused["at"], refused["count"]) == (edit, 50.0, 1) and "allowSplit" in refused["error"]
    changed = [line for line in refused["diff"].splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert [line.split("#")[0].strip() for line in changed] == ["-      allowSplit: false", "+      allowSplit: maybe"]


def test_no_engine_gives_empty_pages_not_errors() -> None:
    source = Source(None)
    assert view.queues_view(source)["queues"] == [] and view.clusters_view(source)["clusters"] == []
    detail = jobs.job_view(source, "x")
    assert jobs.jobs_view(source, {})["rows"] == [] and detail is not None and detail["job"] is None


def test_view_model_is_tolerant_of_fields_other_helpers_add() -> None:
    source, engine, _ = known_source(hostile=True)
    job = engine.state.jobs["default/a1"]
    job.preemptions = 3
    row = next(r for r in jobs.jobs_view(source, {"q": "a1"})["rows"])
    assert row["preemptions"] == 3
    hostile = jobs.job_view(source, f"default/{HOSTILE}")
    assert hostile is not None and hostile["job"]["labels"] == {"x<y": HOSTILE}
    assert engine.state.jobs[f"default/{HOSTILE}"].state is JobState.PENDING


def test_positions_from_the_engine_index_equal_the_rebuilt_order() -> None:
    from engine.dashboard.bench import backlog_source
    source = backlog_source(300)
    engine = source.engine()
    assert engine is not None
    queues = set(engine.state.queues)
    fast = jobs.positions(engine, queues)
    index = engine.__dict__.pop("_pending")                 # as if the engine kept no such index
    try:
        assert jobs.positions(engine, queues) == fast and len(fast) == 300
    finally:
        engine._pending = index
    assert sorted(p for j, p in fast.items() if engine.state.jobs[j].queue == "team-00") == list(range(1, 31))
