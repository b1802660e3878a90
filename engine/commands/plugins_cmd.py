"""``atoll plugins list``: every plugin this installation can use, and where it comes from."""

from __future__ import annotations

import argparse
from typing import Any

from engine.commands.output import add_output, console, emit
from engine.plugin import PluginCatalog


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser("plugins", help="list installed scheduling plugins")
    sub = parser.add_subparsers(dest="plugins_command", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="plugins with their stages, package and description")
    add_output(listing, ("table", "json", "yaml"), "table")
    listing.add_argument("--json", dest="output", action="store_const", const="json", help="same as -o json")
    listing.set_defaults(func=_list)


def describe(catalog: PluginCatalog) -> list[dict[str, Any]]:
    """One row per plugin, sorted by name: name, stages, source (package and version), description."""
    rows = []
    for name in catalog.names():
        entry = catalog.entries[name]
        doc = (entry.cls.__doc__ or "").strip().splitlines()
        rows.append({
            "name": name,
            "stages": list(entry.cls.stages),
            "source": entry.source,
            "description": entry.cls.description or (doc[0] if doc else ""),
        })
    return rows


def _list(args: argparse.Namespace) -> int:
    from engine.policy import default_catalog

    rows = describe(default_catalog())
    if args.output != "table":
        emit(rows, args.output)
        return 0
    from rich.table import Table

    table = Table(title=f"{len(rows)} Atoll plugins")
    for column in ("name", "stages", "source", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["name"], ", ".join(row["stages"]), row["source"], row["description"])
    console().print(table)
    return 0
