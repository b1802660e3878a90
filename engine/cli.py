"""``atoll`` command line. Each subcommand lives in its own module and registers itself here.

Errors a user can fix (bad policy, bad scenario) print one precise line and exit 2;
never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

from engine.errors import AtollError

# module path -> it defines ``register(subparsers)`` adding its subcommands with a ``func``.
COMMAND_MODULES = (
    "engine.commands.policy_cmd",
    "engine.commands.plugins_cmd",
    "engine.commands.bench_cmd",
    "engine.sim.cli",
    "engine.kube.webhook_cli",
    "engine.kube.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="atoll", description="Multi-cluster batch scheduler for Karmada fleets.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue            # that part of Atoll is not built yet
            raise
        module.register(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
        return code
    except AtollError as exc:
        print(f"atoll: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
