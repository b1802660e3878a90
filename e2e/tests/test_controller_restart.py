"""Stopping the leading controller mid-stream loses no job and admits none twice; a standby takes over the Lease.

Two ways it stops: SIGKILL (a node dies: the standby waits for the Lease to expire, 15 s) and SIGTERM (a rollout or a
drain: the leader finishes its writes in flight, releases the Lease the way client-go does, and exits 0, so the
standby takes over at its next retry instead of after the Lease's duration)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube
from e2e.tests.controller_support import (POLICY_NS, admitted, annotations_of, events_for, job, policy_configmap, propagate,
                                          rb_name, start_controller)
from e2e.tests.support import delete, namespace, unique, until
from e2e.tests.webhook_support import registered, start_webhook
from engine.kube.plan import parse_stamp

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
JOBS = 12          # 1 pod x 30 cpu each; the fleet has 4 such slots, so they go in ~3 waves



@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_stop_leader_mid_stream_standby_takes_over_nothing_lost_nothing_twice(
        fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path, how: str) -> None:
    host.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POLICY_NS}})
    cm, lease = unique("policy"), unique("lease")
    host.apply(policy_configmap(cm, (REPO / "policies" / "default.yaml").read_text()))
    elect = ["--leader-elect", "--lease-name", lease, "--lease-namespace", POLICY_NS]
    wh = start_webhook(tmp_path)
    ctl_a = ctl_b = None
    try:
        with contextlib.contextmanager(registered)(host, wh):
            ctl_a = start_controller(fleet.info, tmp_path, f"{POLICY_NS}/{cm}", elect + ["--identity", "a"], "a")
            until("controller a holds the Lease", lambda: (host.get_or_none(
                f"/apis/coordination.k8s.io/v1/namespaces/{POLICY_NS}/leases/{lease}") or {}).get("spec", {}).get(
                "holderIdentity") == "a", 30)
            ctl_b = start_controller(fleet.info, tmp_path, f"{POLICY_NS}/{cm}", elect + ["--identity", "b"], "b")
            with pytest.raises(urllib.error.HTTPError):       # the standby has no live engine
                ctl_b.explain(f"{ns}/x")
            jobs = [job(f"j{i:02d}", ns, cpu="30", pods=1, run_seconds=15) for i in range(JOBS)]
            for j in jobs:
                host.apply(j)
                propagate(host, j, fleet.members)
            until("the first wave admitted", lambda: sum(admitted(host, j) is not None for j in jobs) >= 2, 60)
            killed_at = time.time()          # a's admitted-at stamps (this host's clock) are all before this
            if how == "sigkill":
                ctl_a.kill()                                    # SIGKILL mid-stream
            else:
                ctl_a.proc.send_signal(signal.SIGTERM)          # a graceful stop mid-stream
                try:
                    code = ctl_a.proc.wait(60)                  # its stop budget: 10 s of writes, 5 s for the Lease
                except subprocess.TimeoutExpired:
                    pytest.fail(f"controller a still running 60 s after SIGTERM:\n{ctl_a.log_tail()}")
                assert code == 0, f"exit status {code} after SIGTERM:\n{ctl_a.log_tail()}"
                assert "a released the leader Lease" in ctl_a.log.read_text(), ctl_a.log_tail()
                holder = (host.get_or_none(f"/apis/coordination.k8s.io/v1/namespaces/{POLICY_NS}/leases/{lease}")
                          or {}).get("spec", {}).get("holderIdentity")
                assert holder in ("", None, "b"), holder            # released: nobody, or b already
            before = {rb_name(j): annotations_of(rb)["atoll.dev/admitted-at"]
                      for j in jobs if (rb := admitted(host, j)) is not None}
            assert 2 <= len(before) < JOBS, before
            until("controller b takes the Lease", lambda: (host.get_or_none(
                f"/apis/coordination.k8s.io/v1/namespaces/{POLICY_NS}/leases/{lease}") or {}).get("spec", {}).get(
                "holderIdentity") == "b", 60)
            print(f"\n{how}: controller b leads {time.time() - killed_at:.1f} s after a was stopped")
            until(f"all {JOBS} jobs admitted", lambda: all(admitted(host, j) is not None for j in jobs), 240,
                  show=lambda: [(rb_name(j), admitted(host, j) is not None) for j in jobs])
            for name, stamp in before.items():               # adopted by b, not admitted again
                rb = host.get(f"/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings/{name}")
                assert annotations_of(rb)["atoll.dev/admitted-at"] == stamp, name

            def admits(j: dict[str, Any]) -> int:
                return sum(e["reason"] == "Admitted" for e in events_for(host, ns, rb_name(j)))

            # b announces each of its admissions with one Event; a, killed, may have admitted a job without
            # getting its Event out (Events are best effort), but never may a job be announced twice
            stamps = {rb_name(j): parse_stamp(annotations_of(admitted(host, j) or {})["atoll.dev/admitted-at"])
                      for j in jobs}
            by_b = [j for j in jobs if (stamps[rb_name(j)] or 0) > killed_at]
            assert by_b, stamps
            until("an Admitted Event for each of b's admissions", lambda: all(admits(j) == 1 for j in by_b), 30,
                  show=lambda: {rb_name(j): admits(j) for j in by_b})
            twice = {rb_name(j): n for j in jobs if (n := admits(j)) > 1}
            assert twice == {}, f"admitted more than once: {twice}"
            assert "adopted" in ctl_b.log.read_text()
    finally:
        for c in (ctl_a, ctl_b):
            if c is not None:
                c.stop()
        wh.stop()
        delete(host, f"/api/v1/namespaces/{POLICY_NS}/configmaps/{cm}")
        delete(host, f"/apis/coordination.k8s.io/v1/namespaces/{POLICY_NS}/leases/{lease}")
