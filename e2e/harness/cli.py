"""``e2e/fleet``: build, start, inspect and stop the local Karmada fleet.

Exit codes: 0 ok, 1 a step failed (the message names the component and its log), 2 usage.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from . import build, versions
from .config import ConfigError, load_config
from .fleet import Fleet, FleetError, FleetInfo, state_root
from .kube import KubeError
from .procs import Supervisor, tail


def _env_name(member: str) -> str:
    return "ATOLL_E2E_" + "".join(c if c.isalnum() else "_" for c in member.upper()) + "_KUBECONFIG"


def env_lines(info: FleetInfo) -> list[str]:
    """Shell export lines for a running fleet (also used by the README examples)."""
    art = build.load()
    lines = [f"export ATOLL_E2E_STATE={shlex.quote(str(info.state_dir))}",
             f"export KUBECONFIG={shlex.quote(str(info.host_kubeconfig))}",
             f"export ATOLL_E2E_HOST_KUBECONFIG={shlex.quote(str(info.host_kubeconfig))}",
             f"export ATOLL_E2E_MEMBER_NAMES={shlex.quote(' '.join(info.member_kubeconfigs))}"]
    lines += [f"export {_env_name(n)}={shlex.quote(str(p))}" for n, p in info.member_kubeconfigs.items()]
    if art is not None:
        lines.append(f"export PATH={shlex.quote(str(art.root / 'bin'))}:\"$PATH\"  # kubectl, helm, kwok ...")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="e2e/fleet", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build all binaries into the cache (no-op when warm)")
    b.add_argument("--force", action="store_true", help="rebuild even if the cache is complete")
    up = sub.add_parser("up", help="build if needed, then start a fresh fleet (or reuse a healthy one)")
    up.add_argument("--config", type=Path, help="fleet YAML (default: $ATOLL_E2E_CONFIG or built-in defaults)")
    up.add_argument("--members", type=int, help="number of member clusters (default 2)")
    up.add_argument("--nodes", type=int, help="kwok nodes per member (default 2)")
    up.add_argument("--base-port", type=int, help="first port of the fleet's port block (default 31400)")
    sub.add_parser("down", help="stop every fleet process")
    sub.add_parser("status", help="components, pids, RSS, health")
    sub.add_parser("env", help="print export lines (KUBECONFIG for the host, one per member)")
    lg = sub.add_parser("logs", help="list log files, or tail one component's log")
    lg.add_argument("component", nargs="?")
    lg.add_argument("-n", type=int, default=60, help="lines to show")
    args = ap.parse_args(argv)
    try:
        return _run(args)
    except (FleetError, build.BuildError, ConfigError, KubeError, FileNotFoundError) as e:
        print(f"[fleet {args.cmd}] FAILED: {e}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.cmd == "build":
        build.build(force=args.force)
        return 0
    if args.cmd == "up":
        cfg = load_config(args.config, members=args.members, nodes=args.nodes, base_port=args.base_port)
        build.build()
        Fleet(cfg).up()
        return 0
    if args.cmd == "down":
        stopped = Fleet(load_config()).down()
        print(f"[fleet down] stopped {len(stopped)} processes" + (f": {', '.join(stopped)}" if stopped else ""))
        return 0
    if args.cmd == "status":
        fleet = Fleet(load_config())
        problems = fleet.status_problems()
        print(f"state {state_root()}; versions: " + ", ".join(f"{k} {v}" for k, v in versions.describe().items()))
        print("\n".join(fleet.status_lines()))
        print("healthy" if not problems else "UNHEALTHY: " + "; ".join(problems))
        return 0 if not problems else 1
    if args.cmd == "env":
        if not (state_root() / "fleet.json").is_file():
            raise FleetError(f"no fleet recorded in {state_root()}: run `e2e/fleet up` (same ATOLL_E2E_STATE)")
        print("\n".join(env_lines(FleetInfo.load())))
        return 0
    if args.cmd == "logs":
        sup = Supervisor(state_root())
        if not args.component:
            for f in sorted(sup.log_dir.glob("*.log")):
                print(f)
            return 0
        print(tail(sup.log_path(args.component), args.n))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
