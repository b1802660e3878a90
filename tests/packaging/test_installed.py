"""The built wheel, installed into a fresh venv outside the source tree, runs every CLI verb.

An editable install reads schemas/ and policies/ from the checkout, so it cannot show a wheel that forgot
them (that shipped once: every command failed with FileNotFoundError). This builds the wheel, installs it
with its dependencies into a new venv (pip's cache makes that ~20-40 s warm) and runs the verbs from an
empty directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def atoll(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("installed")
    dist = work / "dist"
    env = clean_env()      # a PYTHONPATH at a checkout would make pip see atoll installed and install nothing
    # Built from a copy: setuptools builds in the source tree (build/, atoll.egg-info/), which would write into
    # the checkout other tests read, and a stale build/lib there could put a deleted file into the wheel
    source = work / "src"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", ".hypothesis", "__pycache__", ".mypy_cache", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
                   check=True, cwd=work, env=env, capture_output=True)
    wheel = next(dist.glob("atoll-*.whl"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
                   check=True, cwd=work, env=env, capture_output=True)
    empty = work / "cwd"
    empty.mkdir()
    return venv / "bin" / "atoll", empty


def clean_env() -> dict[str, str]:
    """The environment without what points Python at the source tree or at another virtualenv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def run(atoll: tuple[Path, Path], *args: str) -> subprocess.CompletedProcess[str]:
    exe, cwd = atoll
    return subprocess.run([str(exe), *args], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [
    ["--help"],
    ["simulate", "--help"], ["run", "--help"], ["webhook", "--help"], ["explain", "--help"],
    ["plugins", "list"],
    ["policy", "validate", "default"],
    ["bench", "--jobs", "200", "--queues", "4", "--clusters", "3"],
    ["--version"], ["plugins", "list", "-o", "yaml"], ["policy", "show", "default", "-o", "json"],
    ["bench", "--jobs", "50", "--queues", "2", "--clusters", "2", "-o", "yaml"],
    ["bench-webhook", "--help"],
])
def test_verbs_of_the_installed_package(atoll: tuple[Path, Path], args: list[str]) -> None:
    done = run(atoll, *args)
    assert done.returncode == 0, f"atoll {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr


def test_simulates_a_shipped_scenario_by_name(atoll: tuple[Path, Path]) -> None:
    done = run(atoll, "simulate", "quickstart")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "succeeded" in done.stdout.lower()


def test_validates_each_shipped_policy(atoll: tuple[Path, Path]) -> None:
    for policy in sorted((ROOT / "policies").glob("*.yaml")):
        done = run(atoll, "policy", "validate", policy.stem)
        assert done.returncode == 0, f"{policy.name}: {done.stdout}{done.stderr}"


def test_every_data_file_is_installed(atoll: tuple[Path, Path]) -> None:
    """Every schema, policy and scenario of the source tree is in the installed package."""
    venv = atoll[0].parent.parent
    site = next(venv.glob("lib/python*/site-packages"))
    shipped = {p.relative_to(site / "engine" / "_data").as_posix()
               for p in (site / "engine" / "_data").rglob("*") if p.is_file() and p.suffix in (".json", ".yaml")}
    expected = {p.relative_to(ROOT).as_posix() for folder in ("schemas", "policies", "scenarios")
                for p in (ROOT / folder).rglob("*") if p.suffix in (".json", ".yaml")}
    assert shipped == expected


def test_flags_and_exit_codes_of_the_installed_package(atoll: tuple[Path, Path]) -> None:
    assert run(atoll, "--version").stdout.startswith("atoll 0.")
    for verb in ("run", "explain", "webhook"):
        help_text = run(atoll, verb, "--help").stdout
        assert "--kubeconfig" in help_text and "--context" in help_text, verb
    missing = run(atoll, "explain", "ns/x", "--kubeconfig", "absent.yaml")
    assert missing.returncode == 1 and missing.stderr.strip() == "atoll: error: absent.yaml: kubeconfig not found"
    assert run(atoll, "simulate").returncode == 2
    report = run(atoll, "simulate", "quickstart", "--report", "out/sub/r.json")
    assert report.returncode == 0 and (atoll[1] / "out" / "sub" / "r.json").is_file()
