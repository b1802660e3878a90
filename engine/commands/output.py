"""Output helpers shared by the verbs: ``-o json|yaml`` for data, and a rich Console that never cuts a table.

rich sizes a Console to the terminal, or to 80 columns when stdout is a pipe or a file, and then folds or
truncates cells to fit: ``atoll plugins list | cat`` would lose text. Piped, the width is unlimited instead
(tables keep their natural width); on a terminal, rich's own sizing stays.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional, Sequence

from rich.console import Console

PIPED_WIDTH = 100_000


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich's own handler exits 1; a closed pipe is the reader's choice: ``atoll.cli`` ends with 0."""
        raise BrokenPipeError()


def console(file: Optional[Any] = None) -> Console:
    """A Console for tables: the terminal's width on a TTY, unlimited when piped."""
    probe = _Console(file=file)
    if probe.is_terminal:
        return probe
    return _Console(file=file, width=PIPED_WIDTH)


def add_output(parser: argparse.ArgumentParser, choices: Sequence[str], default: str) -> None:
    parser.add_argument("-o", "--output", choices=list(choices), default=default,
                        help=f"output format (default {default})")


def emit(data: Any, fmt: str) -> None:
    """Print ``data`` as JSON or YAML on stdout."""
    if fmt == "json":
        print(json.dumps(data, indent=2))
    elif fmt == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120))
    else:
        raise ValueError(f"not a data format: {fmt}")
