"""``atoll policy validate FILE...``: load each policy exactly as the engine would, report each file."""

from __future__ import annotations

import argparse
import sys

from engine.errors import AtollError


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser("policy", help="work with scheduling policies")
    sub = parser.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    validate = sub.add_parser("validate", help="validate policy files (schema, plugins, plugin configs, CEL)")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.set_defaults(func=_validate)


def _validate(args: argparse.Namespace) -> int:
    """One line per file: ``OK file: name (stages)`` on stdout or the precise error on stderr."""
    from engine.policy import default_catalog, load_policy

    catalog = default_catalog()
    failed = 0
    for path in args.files:
        try:
            policy = load_policy(path, catalog)
        except AtollError as exc:
            failed += 1
            print(f"INVALID {exc}", file=sys.stderr)
            continue
        print(f"OK {path}: policy {policy.name} (placementMode {policy.placement_mode}; {policy.summary()})")
    return 1 if failed else 0
