"""`atoll run --dashboard-port` on the real fleet: the dashboard's JSON twins (and pages) follow a job from
paused-with-a-reason to admitted-with-a-placement while the controller admits jobs.

Fleet: two members with 2 kwok nodes x 32 cpu each. Two 2 x 30 cpu jobs fill both members; a third waits
with a reason until the first (20 s) ends and Karmada reports the freed capacity (~10 s status period).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.controller_support import ControllerProcess, atoll, fill_then_queue_a_third, rb_name
from e2e.tests.support import until
from e2e.tests.webhook_support import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dashboard(fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControllerProcess, str]]:
    port = free_port()
    policy = (REPO / "policies" / "default.yaml").read_text()
    with atoll(fleet.info, tmp_path_factory.mktemp("atoll"), policy, ["--dashboard-port", str(port)]) as (_, ctl, _):
        yield ctl, f"http://127.0.0.1:{port}"


def get(url: str) -> tuple[Any, dict[str, str]]:
    with urllib.request.urlopen(url, timeout=5) as r:
        body = r.read().decode()
        return (json.loads(body) if "json" in r.headers.get("Content-Type", "") else body), dict(r.headers)


def job_row(base: str, name: str) -> Optional[dict[str, Any]]:
    """The dashboard's row for the binding of workload ``name`` (found by the id filter)."""
    data, _ = get(f"{base}/api/jobs?q={name}&limit=10")
    rows = [r for r in data["rows"] if r["id"].endswith("/" + name) or r["name"] == name]
    return rows[0] if rows else None


def test_dashboard_shows_a_paused_jobs_reason_then_its_placement(fleet: FleetHandle, host: Kube, ns: str,
                                                                 dashboard: tuple[ControllerProcess, str]) -> None:
    ctl, base = dashboard
    m1, m2 = fleet.members[:2]
    policy, headers = get(f"{base}/api/policy")
    assert policy["policy"]["generation"] == 1 and "kind: SchedulingPolicy" in policy["policy"]["text"]
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    _, _, third = fill_then_queue_a_third(host, ns, m1, m2)
    name = rb_name(third)

    def waiting() -> Optional[dict[str, Any]]:
        row = job_row(base, name)
        return row if row and row["state"] == "Pending" and row["reason"] else None
    row = until(f"the dashboard shows {name} pending with a reason", waiting, 60,
                show=lambda: (job_row(base, name), ctl.log_tail()))
    assert row["queue"] == "default" and row["position"] == 1, row
    detail, _ = get(f"{base}/api/jobs/{row['id']}")
    assert detail["job"]["reason"] == row["reason"]
    assert {v["cluster"] for v in detail["clusters"]} >= {m1, m2}
    page, _ = get(f"{base}/jobs/{row['id']}")
    assert 'id="job-reason"' in page and name in page
    queues, _ = get(f"{base}/api/queues")
    default = next(q for q in queues["queues"] if q["name"] == "default")
    assert default["pending"] >= 1 and default["admitted"] >= 2, default

    def placed() -> Optional[dict[str, Any]]:
        r = job_row(base, name)
        return r if r and r["state"] in ("Admitted", "Running") and r["clusters"] else None
    row = until(f"the dashboard shows {name} admitted with its placement", placed, 120,
                show=lambda: (job_row(base, name), ctl.log_tail()))
    assert row["clusters"] == [m1] and row["placement"].startswith(f"{m1}:"), row
    assert row["admittedAt"] is not None and row["reason"] == ""
    detail, _ = get(f"{base}/api/jobs/{row['id']}")
    events = [e["event"] for e in detail["timeline"]]
    assert events[0] == "submitted" and "attempt 1 admitted" in events, detail["timeline"]
    clusters, _ = get(f"{base}/api/clusters")
    assert {c["name"] for c in clusters["clusters"]} >= {m1, m2}
