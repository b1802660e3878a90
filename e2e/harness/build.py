"""Build every fleet binary from Go modules into a versioned cache; a warm call builds nothing.

Layout: ``$ATOLL_E2E_CACHE/<key>/bin/*`` plus ``crds/volcano/*.yaml`` and ``stamp.json``, where
``<key>`` hashes the pins (versions.py) and the e2e go.mod/go.sum files. A build goes to
``<key>.tmp`` and is renamed only when complete, so a failed or interrupted build never looks
warm. ``stamp.json`` also records the module directories (Karmada's CRDs and webhook
configuration, kwok's node stages) read at ``fleet up`` time.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import versions

GO_FALLBACK = "/usr/local/go/bin/go"


class BuildError(RuntimeError):
    """A build step failed; the message names the step and the tail of its output."""


@dataclass(frozen=True)
class Artifacts:
    """What a finished build provides."""

    root: Path
    stamp: dict[str, str]

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)

    @property
    def karmada_dir(self) -> Path:
        return Path(self.stamp["karmada_dir"])

    @property
    def kwok_dir(self) -> Path:
        return Path(self.stamp["kwok_dir"])

    @property
    def volcano_crd_dir(self) -> Path:
        return self.root / "crds" / "volcano"


def cache_root() -> Path:
    return Path(os.environ.get("ATOLL_E2E_CACHE", Path.home() / ".cache" / "atoll-e2e"))


def go_binary() -> str:
    found = shutil.which("go")
    if found:
        return found
    if Path(GO_FALLBACK).is_file():
        return GO_FALLBACK
    raise BuildError("no `go` on PATH and none at /usr/local/go/bin/go; install Go >= 1.25")


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")  # never download another toolchain
    env.setdefault("GOFLAGS", "-mod=readonly")
    env["CGO_ENABLED"] = env.get("CGO_ENABLED", "0")
    return env


def _run(step: str, argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> str:
    """Run one build step, streaming output to ``log``; raise BuildError with its tail on failure."""
    print(f"[fleet build] {step} ...", flush=True)
    t0 = time.monotonic()
    with open(log, "ab") as out:
        out.write(f"\n=== {step}: {' '.join(argv)} (cwd {cwd})\n".encode())
        out.flush()
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=out, check=False)
    if proc.returncode != 0:
        lines = log.read_text(errors="replace").splitlines()[-30:]
        raise BuildError(f"step '{step}' failed (exit {proc.returncode}); full log {log}:\n" + "\n".join(lines))
    print(f"[fleet build] {step} done in {time.monotonic() - t0:.0f}s", flush=True)
    return proc.stdout.decode()


def load() -> Artifacts | None:
    """The cached build for the current pins, or None if it is missing or incomplete."""
    root = cache_root() / versions.cache_key()
    try:
        stamp = json.loads((root / "stamp.json").read_text())
    except (OSError, ValueError):
        return None
    art = Artifacts(root, stamp)
    if not all((root / "bin" / b).is_file() for b in versions.ALL_BINARIES):
        return None
    if not (art.karmada_dir / "charts/karmada/_crds").is_dir() or not (art.kwok_dir / "kustomize").is_dir():
        return None  # module cache was cleaned; rebuild re-downloads
    return art


def require() -> Artifacts:
    art = load()
    if art is None:
        raise BuildError(f"no complete build for cache key {versions.cache_key()} under {cache_root()}; "
                         "run `e2e/fleet build` first")
    return art


def build(force: bool = False) -> Artifacts:
    """Build everything unless a complete build for these pins exists; idempotent and locked."""
    root_dir = cache_root()
    root_dir.mkdir(parents=True, exist_ok=True)
    with open(root_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent `fleet build` waits for this one
        art = load()
        if art is not None and not force:
            print(f"[fleet build] up to date: {art.root} ({', '.join(f'{k} {v}' for k, v in versions.describe().items())})")
            return art
        return _build(root_dir)


def _build(root_dir: Path) -> Artifacts:
    key = versions.cache_key()
    final, tmp = root_dir / key, root_dir / f"{key}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "bin").mkdir(parents=True)
    (tmp / "crds" / "volcano").mkdir(parents=True)
    log = tmp / "build.log"
    go, env = go_binary(), _go_env()
    gotools, crdgen = versions.E2E_DIR / "gotools", versions.E2E_DIR / "crdgen"
    t0 = time.monotonic()
    print(f"[fleet build] cache key {key} -> {final}; log {log}", flush=True)
    pkgs = list(versions.GO_MODULE_BINARIES.values())
    _run(f"build {len(pkgs)} binaries: {', '.join(versions.GO_MODULE_BINARIES)} (slow on a cold cache)",
         [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(tmp / "bin") + "/", *pkgs], gotools, env, log)
    for out_name, pkg in versions.GO_MODULE_BINARIES.items():
        built = tmp / "bin" / pkg.rstrip("/").rsplit("/", 1)[-1]
        if built.name != out_name:
            built.rename(tmp / "bin" / out_name)
    install_env = {**env, "GOBIN": str(tmp / "bin"), "GOFLAGS": ""}
    for name, spec in versions.GO_INSTALL_BINARIES.items():
        _run(f"go install {spec}", [go, "install", "-trimpath", "-ldflags=-s -w", spec], gotools, install_env, log)
    _run("generate Volcano CRDs (controller-gen on volcano.sh/apis)",
         [go, "tool", "controller-gen", "crd:crdVersions=v1,generateEmbeddedObjectMeta=true,maxDescLen=0",
          "paths=volcano.sh/apis/pkg/apis/batch/v1alpha1", "paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1",
          f"output:crd:dir={tmp / 'crds' / 'volcano'}"], crdgen, env, log)
    karmada_dir = _run("locate karmada module", [go, "list", "-m", "-f", "{{.Dir}}", "github.com/karmada-io/karmada"],
                       gotools, env, log).strip()
    kwok_json = _run("locate kwok module", [go, "mod", "download", "-json", f"sigs.k8s.io/kwok@{versions.KWOK}"],
                     gotools, {**env, "GOFLAGS": ""}, log)
    kwok_dir = json.loads(kwok_json)["Dir"]
    stamp = {"key": key, **versions.describe(), "karmada_dir": karmada_dir, "kwok_dir": kwok_dir,
             "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "build_seconds": f"{time.monotonic() - t0:.0f}"}
    (tmp / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    print(f"[fleet build] done in {time.monotonic() - t0:.0f}s -> {final}", flush=True)
    art = load()
    if art is None:
        raise BuildError(f"build finished but {final} is incomplete (missing binary or module dir)")
    return art


def main() -> int:
    try:
        build(force="--force" in sys.argv)
    except BuildError as e:
        print(f"[fleet build] FAILED: {e}", file=sys.stderr)
        return 1
    return 0
