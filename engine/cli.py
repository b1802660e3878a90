"""``atoll`` command line. Each subcommand lives in its own module and registers itself here.

Exit codes: 0 ok; 1 invalid input or an environment the user can fix (bad policy or scenario, a missing
file, a broken kubeconfig, an unreachable API server): one precise line on stderr, never a traceback;
2 usage (argparse: unknown flag, missing argument). A reader that closes the pipe early
(``atoll plugins list --json | head``) ends the command quietly with 0.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from typing import Optional, Sequence

from engine.errors import AtollError, UsageError

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
    parser.add_argument("--version", action="version", version=f"atoll {version()}")
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


EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def version() -> str:
    try:
        return importlib.metadata.version("atoll")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)          # usage errors: argparse prints them and exits 2
    if not getattr(args, "func", None):
        parser.print_usage(sys.stderr)
        print("atoll: error: a COMMAND is required (atoll --help lists them)", file=sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.func(args)
        sys.stdout.flush()
        return code
    except AtollError as exc:
        print(f"atoll: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_INVALID
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


def _quiet_stdout() -> None:
    """The reader went away: point stdout at /dev/null so Python's flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
