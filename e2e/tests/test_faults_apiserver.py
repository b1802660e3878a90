"""The Karmada API server misbehaves under a 200-job stream; every job is still admitted exactly once, none is lost,
none is left paused (see fault_support.AdmissionWatch for how "exactly once" is read off the bindings).

- karmada-apiserver restarted mid-stream (SIGTERM, same flags): watches break, writes fail, then resume.
- watch expiry: the controller (watches ending every 5 s) is frozen (SIGSTOP) while bindings are created and
  deleted, etcd is compacted past its resourceVersions and karmada-apiserver restarted (its watch cache rebuilt),
  so the watches of the thawed controller, ended cleanly by the server meanwhile, reopen from versions that no
  longer exist: 410 Gone, relist; the deletions and creations it missed are each applied once.
- a second writer merge-patches and PUTs the same bindings while Atoll patches them.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.kube import Kube, KubeError
from e2e.tests.controller_support import atoll, annotations_of
from e2e.tests.fault_support import (AdmissionWatch, Stream, binding_body, etcd_compact, make_jobs, restart,
                                     wait_host_ready)
from e2e.tests.support import delete, is_true, merge_patch, rb_path, until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
JOBS = 200


def default_policy() -> str:
    return (REPO / "policies" / "default.yaml").read_text()


def bodies_for(fleet: FleetHandle, host: Kube, ns: str, count: int = JOBS) -> dict[str, dict[str, Any]]:
    return {f"{n}-job": binding_body(n, uid, ns, fleet.members) for n, uid in make_jobs(host, ns, count).items()}


def clusters_ready(fleet: FleetHandle, host: Kube) -> None:
    """The fleet is whole again for the tests after this one."""
    def ready() -> bool:
        return all(is_true(host.get_or_none(f"/apis/cluster.karmada.io/v1alpha1/clusters/{m}"), "Ready")
                   for m in fleet.members)
    until("every Cluster Ready", ready, 120)


def test_apiserver_restarted_mid_stream(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    bodies = bodies_for(fleet, host, ns)
    with atoll(fleet.info, tmp_path, default_policy()) as (_, ctl, _cm):
        watch = AdmissionWatch(host, ns)
        stream = Stream(host, rb_path(ns), bodies, rate=25)
        until("a third of the stream sent", lambda: stream.progress() >= JOBS // 3, 60)
        restart(fleet, "karmada-apiserver")
        wait_host_ready(fleet)
        stream.wait(240)
        watch.wait_all_admitted(set(bodies), 240)
        watch.check_exactly_once(set(bodies))
        assert ctl.alive(), ctl.log_tail()
        print(f"\nstream POSTs retried during the outage: {stream.retried}; watch reconnects: {watch.reconnects}")
        watch.stop()
    clusters_ready(fleet, host)


def test_watch_expiry_forced_by_etcd_compaction(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    bodies = bodies_for(fleet, host, ns)
    first = dict(list(bodies.items())[:JOBS // 2])
    rest = dict(list(bodies.items())[JOBS // 2:])
    gone = sorted(first)[:10]
    # watches end every 5 s: while the controller is frozen the server ends them cleanly, so on thawing it
    # reopens each from its last resourceVersion (instead of relisting after a broken connection)
    with atoll(fleet.info, tmp_path, default_policy(), ["--watch-timeout", "5"]) as (_, ctl, _cm):
        watch = AdmissionWatch(host, ns)
        Stream(host, rb_path(ns), first, rate=50).wait(120)
        watch.wait_all_admitted(set(first), 120)
        ctl.proc.send_signal(signal.SIGSTOP)          # frozen: it sees none of what follows
        try:
            time.sleep(7)                              # a fault's duration (no condition to wait on): > 5 s
            Stream(host, rb_path(ns), rest, rate=50).wait(120)
            for name in gone:                          # deletions it must not miss (their usage is released)
                delete(host, rb_path(ns, name))
            until("the deleted bindings gone", lambda: all(host.get_or_none(rb_path(ns, n)) is None for n in gone), 60)
            revision = etcd_compact(fleet)
            restart(fleet, "karmada-apiserver")       # its watch cache restarts at the compacted revision
            wait_host_ready(fleet)
        finally:
            ctl.proc.send_signal(signal.SIGCONT)
        watch.wait_all_admitted(set(bodies) - set(gone), 240)
        watch.check_exactly_once(set(bodies) - set(gone))
        log = ctl.log.read_text()
        assert "410 Gone" in log, "no watch expired: the test did not test what it says"
        for name in gone:                              # the missed deletions reached the engine
            assert "is not known to the engine" in ctl.explain(f"{ns}/{name}"), ctl.explain(f"{ns}/{name}")
        assert ctl.alive(), ctl.log_tail()
        print(f"\ncompacted at etcd revision {revision}; relists after 410: {log.count('410 Gone')}")
        watch.stop()
    clusters_ready(fleet, host)


def test_second_writer_on_the_same_bindings(fleet: FleetHandle, host: Kube, ns: str, tmp_path: Path) -> None:
    """Another controller annotates every binding (merge patches) and rewrites whole objects (GET + PUT with
    the resourceVersion, retried on 409) while Atoll admits them. Atoll's merge patches neither conflict nor
    undo the other writer's fields, and the other writer cannot undo Atoll's admission."""
    bodies = bodies_for(fleet, host, ns)
    stop = threading.Event()
    stats = {"patches": 0, "puts": 0, "conflicts": 0}
    touched: dict[str, int] = {}

    def other_writer() -> None:
        i = 0
        while not stop.is_set():
            for name in list(bodies):
                if stop.is_set():
                    return
                i += 1
                try:
                    if i % 2:
                        merge_patch(host, rb_path(ns, name), {"metadata": {"annotations": {"other.io/touch": str(i)}}})
                        stats["patches"] += 1
                    else:
                        obj = host.get(rb_path(ns, name))
                        obj["metadata"].setdefault("labels", {})["other.io/put"] = str(i)
                        host.request("PUT", rb_path(ns, name), obj)
                        stats["puts"] += 1
                    touched[name] = i
                except KubeError as e:
                    if e.status == 409:
                        stats["conflicts"] += 1
                    elif e.status != 404:
                        raise

    with atoll(fleet.info, tmp_path, default_policy()) as (_, ctl, _cm):
        watch = AdmissionWatch(host, ns)
        writer = threading.Thread(target=other_writer, daemon=True)
        writer.start()
        try:
            Stream(host, rb_path(ns), bodies, rate=50).wait(120)
            watch.wait_all_admitted(set(bodies), 180)
        finally:
            stop.set()
            writer.join(30)
        watch.check_exactly_once(set(bodies))
        final = {n: host.get(rb_path(ns, n)) for n in bodies}
        kept = [n for n, rb in final.items() if "other.io/touch" in annotations_of(rb)
                or "other.io/put" in (rb["metadata"].get("labels") or {})]
        assert len(kept) == len([n for n in bodies if n in touched]), "Atoll removed the other writer's fields"
        assert ctl.alive(), ctl.log_tail()
        assert "failed: 409" not in ctl.log.read_text(), "an Atoll patch conflicted"
        print(f"\nsecond writer: {stats}")
        watch.stop()
