"""``atoll policy validate FILE...``: load each policy exactly as the engine would, report each file."""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from typing import TYPE_CHECKING, Any

from engine._data import shipped
from engine.commands.output import add_output, emit
from engine.errors import AtollError

if TYPE_CHECKING:
    from engine.policy import Policy


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser("policy", help="work with scheduling policies")
    sub = parser.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    validate = sub.add_parser("validate", help="validate policy files (schema, plugins, plugin configs, CEL)")
    validate.add_argument("files", nargs="+", metavar="FILE", help="policy files, or directories of *.yaml")
    validate.set_defaults(func=_validate)
    show = sub.add_parser("show", help="print a policy as the engine uses it: defaults filled in, every plugin's "
                                       "effective config")
    show.add_argument("file", metavar="FILE")
    add_output(show, ("yaml", "json"), "yaml")
    show.set_defaults(func=_show)


def _validate(args: argparse.Namespace) -> int:
    """One line per file: ``OK file: name (stages)`` on stdout or the precise error on stderr."""
    from engine.policy import default_catalog, load_policy

    catalog = default_catalog()
    failed = 0
    for path in _expand(args.files):
        try:
            policy = load_policy(path, catalog)
        except AtollError as exc:
            failed += 1
            print(f"INVALID {exc}", file=sys.stderr)
            continue
        print(f"OK {path}: policy {policy.name} (placementMode {policy.placement_mode}; {policy.summary()})")
    return 1 if failed else 0


def _expand(paths: list[str]) -> list[str]:
    """Files as given; a directory stands for its *.yaml and *.yml files (sorted)."""
    out: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            out.extend(str(f) for f in sorted([*p.glob("*.yaml"), *p.glob("*.yml")]))
        else:
            out.append(str(shipped(path, "policies")))
    return out


def effective(policy: "Policy") -> dict[str, Any]:
    """The policy document with schema defaults and every listed plugin's effective config."""
    doc = copy.deepcopy(policy.raw)
    doc["spec"]["managedWorkloads"] = copy.deepcopy(policy.managed_workloads)
    doc["spec"]["plugins"] = {plugin.name: copy.deepcopy(plugin.config) for plugin in policy.pipeline.plugins}
    return doc


def _show(args: argparse.Namespace) -> int:
    import yaml

    from engine.policy import load_policy

    policy = load_policy(shipped(args.file, "policies"))
    if args.output == "json":
        emit(effective(policy), "json")
        return 0
    print(f"# {args.file}: effective policy (sha256 {policy.digest[:12]})")
    print(yaml.safe_dump(effective(policy), sort_keys=False, default_flow_style=False, width=120), end="")
    return 0
