"""Rendering charts/atoll with the real helm binary (shared by the chart unit tests)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "atoll"


def find_helm() -> str | None:
    """$ATOLL_HELM, then PATH, then the e2e build cache (e2e/fleet build puts helm in <cache>/<key>/bin)."""
    if os.environ.get("ATOLL_HELM"):
        return os.environ["ATOLL_HELM"]
    if shutil.which("helm"):
        return shutil.which("helm")
    cache = os.environ.get("ATOLL_E2E_CACHE", str(Path.home() / ".cache" / "atoll-e2e"))
    found = sorted(glob.glob(os.path.join(cache, "*", "bin", "helm")), key=os.path.getmtime)
    return found[-1] if found else None


HELM = find_helm()
# `make test` builds helm before the unit tests; in CI a missing helm fails these tests instead of skipping them
needs_helm = pytest.mark.skipif(HELM is None and os.environ.get("CI") != "true",
                                reason="helm not built yet: run `e2e/fleet build` or set ATOLL_HELM")

Docs = dict[tuple[str, str], dict[str, Any]]


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None, "helm not found: `make test` builds it (e2e/fleet build), or set ATOLL_HELM"
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=60)


def render_text(*sets: str, namespace: str = "atoll-system") -> str:
    argv = ["template", "rel", str(CHART), "-n", namespace]
    for s in sets:
        argv += ["--set", s]
    out = helm(*argv)
    assert out.returncode == 0, out.stderr
    return out.stdout


def render(*sets: str) -> Docs:
    docs = [d for d in yaml.safe_load_all(render_text(*sets)) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def one(docs: Docs, kind: str) -> dict[str, Any]:
    found = [d for (k, _), d in docs.items() if k == kind]
    assert len(found) == 1, f"{kind}: {len(found)}"
    return found[0]


def pod_specs(docs: Docs) -> dict[str, dict[str, Any]]:
    return {name: d["spec"]["template"]["spec"] for (kind, name), d in docs.items() if kind == "Deployment"}
