"""A test run leaves nothing in the temporary directory: test files ran in a pytest of their own with $TMPDIR an
empty directory (and pytest's own basetemp elsewhere) leave it empty. The policy variants of tests/core were
written to a fresh mkdtemp per variant at import, never removed (~440 dirs in /tmp after a day), and each
browser run left its screenshots and a ~3 MB Chromium profile."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.dashboard.browser import require_browser

ROOT = Path(__file__).resolve().parents[1]


def left_in_tmpdir(tmp_path: Path, *args: str) -> list[str]:
    """What pytest ``args`` left in a $TMPDIR of their own. That one is short and directly under the system's
    (Chromium's SingletonSocket goes in a directory under $TMPDIR, and a Unix socket path is at most 107 bytes:
    under tmp_path Chromium exited at once)."""
    with tempfile.TemporaryDirectory(prefix="atoll-leaks-") as tmpdir:
        env = {k: v for k, v in os.environ.items() if k != "ATOLL_SCREENSHOTS"}
        env["TMPDIR"] = tmpdir
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                               "--basetemp", str(tmp_path / "basetemp"), *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return sorted(os.listdir(tmpdir))


def test_the_policy_variants_of_the_core_tests_are_removed(tmp_path: Path) -> None:
    """Importing test_admitshare (which imports test_pruned_exact) writes every policy variant."""
    assert left_in_tmpdir(tmp_path, "tests/core/test_admitshare.py", "-k", "a_gpu_capability_of_zero") == []


def test_the_browser_tests_leave_no_profile_or_screenshots(tmp_path: Path) -> None:
    require_browser()
    assert left_in_tmpdir(tmp_path, "tests/dashboard/test_browser.py", "-k", "job_detail_clusters") == []
