"""``up``/``down`` of a second, small fleet next to the session's: own state dir and port block,
clear refusal when a port is taken, and nothing left running after ``down``."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from e2e.conftest import FleetHandle
from e2e.harness.config import load_config
from e2e.harness.fleet import Fleet, FleetError
from e2e.harness.procs import exited, port_in_use

pytestmark = pytest.mark.e2e

OFFSET = 500  # above the session fleet's block (base .. base+113 for two members); this one has one member


def small_fleet(fleet: FleetHandle, state: Path) -> Fleet:
    base = int(fleet.info.base_port) + OFFSET
    return Fleet(load_config(members=1, nodes=1, base_port=base), state)


def test_up_refuses_a_taken_port_and_names_it(fleet: FleetHandle, tmp_path: Path) -> None:
    f = small_fleet(fleet, tmp_path / "fleet")
    port = f.cfg.ports.webhook
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        with pytest.raises(FleetError, match=rf"karmada-webhook :{port}"):
            f.up()
    assert not f.running_components()


def test_second_fleet_up_status_down_leaves_no_process(fleet: FleetHandle, tmp_path: Path) -> None:
    f = small_fleet(fleet, tmp_path / "fleet")
    procs = {}
    try:
        info = f.up()
        assert f.status_problems() == []
        assert info.member("member1").get("/api/v1/nodes/member1-node-0")["metadata"]["name"] == "member1-node-0"
        assert fleet.host().healthy(), "the session fleet must be unaffected"
        procs = {n: p for n in f.sup.recorded() if (p := f.sup.get(n)) is not None}
        assert len(procs) == 11, sorted(procs)  # 7 host components + 4 per member
    finally:
        stopped = f.down()
    assert sorted(stopped) == sorted(procs)
    leftovers = [n for n, p in procs.items() if not exited(p.pid)]
    assert leftovers == [], f"still running after down: {leftovers}"
    busy = [port for _, port in f.cfg.ports.table(f.cfg.members) if port_in_use(port)]
    assert busy == [], f"ports still bound after down: {busy}"

