"""pytest fixtures for the e2e suite: one real Karmada fleet per session.

``fleet`` reuses a running healthy fleet in ``$ATOLL_E2E_STATE`` (default /tmp/atoll-e2e) or
builds (no-op when the cache is warm) and starts one on the port block at
``$ATOLL_E2E_BASE_PORT`` (default 31400), and stops it at the end only if it started it
(``ATOLL_E2E_KEEP=1`` keeps it). When an e2e test fails, the tail of every component's log is
attached to the failure report, so a red run says which component misbehaved.
"""
from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import build
from e2e.harness.config import load_config
from e2e.harness.fleet import Fleet, FleetError, FleetInfo, state_root
from e2e.harness.kube import Kube
from e2e.harness.procs import tail
from e2e.tests.support import delete, namespace, unique

LOG_LINES = int(os.environ.get("ATOLL_E2E_LOG_LINES", "25"))
EXTRA_LOG_DIRS: list[Path] = []
"""Log dirs of further fleets a test module runs (e.g. test_node_shapes' GPU fleet): attached on failure too."""


@dataclass(frozen=True)
class FleetHandle:
    """What tests get: API clients for the host and each member, and how the fleet was configured."""

    info: FleetInfo
    started_here: bool

    @property
    def members(self) -> list[str]:
        return sorted(self.info.member_servers)

    def host(self) -> Kube:
        return self.info.host()

    def member(self, name: str) -> Kube:
        return self.info.member(name)

    def node_names(self, member: str) -> list[str]:
        nodes = self.info.member_nodes[member]
        return list(nodes.get("names") or (f"{member}-node-{i}" for i in range(int(nodes["count"]))))


def _bring_up() -> tuple[FleetInfo, bool]:
    fleet = Fleet(load_config())
    if fleet.running_components():
        problems = fleet.status_problems()
        if problems:
            raise FleetError(f"a fleet is running in {fleet.state} but is unhealthy: {'; '.join(problems)}; "
                             "run `e2e/fleet down` (same ATOLL_E2E_STATE) and retry")
        return FleetInfo.load(fleet.state), False
    build.build()
    return fleet.up(), True


@pytest.fixture(scope="session")
def fleet() -> Iterator[FleetHandle]:
    info, started = _bring_up()
    handle = FleetHandle(info, started)
    yield handle
    if started and os.environ.get("ATOLL_E2E_KEEP") != "1":
        Fleet(load_config(), info.state_dir).down()


@pytest.fixture(scope="session")
def host(fleet: FleetHandle) -> Kube:
    return fleet.host()


@pytest.fixture
def ns(host: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, named after its module (test_controller_bind -> atoll-controller-bind-1a2b3c);
    deleting it at the end takes the test's objects with it."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = unique("atoll-" + module.replace("_", "-"))
    namespace(host, name)
    yield name
    delete(host, f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="session")
def members(fleet: FleetHandle) -> dict[str, Kube]:
    return {name: fleet.member(name) for name in fleet.members}


def component_logs(log_dir: Path, lines: int = LOG_LINES) -> str:
    """The last ``lines`` lines of every component log of the fleet, one block per component."""
    blocks = []
    for log in sorted(log_dir.glob("*.log")):
        blocks.append(f"----- {log.stem} ({log}) -----\n{tail(log, lines)}")
    return "\n".join(blocks)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, Any]:
    report = yield
    if report.failed and report.when == "call" and item.get_closest_marker("e2e") is not None:
        for log_dir in (state_root() / "logs", *EXTRA_LOG_DIRS):
            if log_dir.is_dir():
                report.sections.append((f"fleet component logs ({log_dir})", component_logs(log_dir)))
    return report
