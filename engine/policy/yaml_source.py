"""YAML documents with their positions, so an error can say "line 12" of the user's file.

PyYAML silently keeps the last of two equal keys; a policy with ``drf:`` twice would then
quietly lose a config, so duplicate keys are errors here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence, Union

import yaml

from engine.errors import InputError

PathPart = Union[str, int]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:          # unhashable key: let the base constructor report it
            break
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})", key_node.start_mark)
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_source(path: Union[str, Path], what: str) -> str:
    """A policy's or scenario's text; an unreadable or non-UTF-8 file is an InputError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", str(path)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} is not UTF-8 text: {exc.reason} at byte {exc.start}", str(path)) from None


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document; raise InputError with line and column on a syntax error."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}: line {mark.line + 1}, column {mark.column + 1}" if mark else source
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise InputError(f"YAML syntax error: {problem}", where) from None
    except yaml.YAMLError as exc:
        raise InputError(f"YAML error: {exc}", source) from None


def format_path(path: Sequence[PathPart]) -> str:
    """``["spec", "pipeline", "order", 1]`` -> ``spec.pipeline.order[1]`` (the form users grep for)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            if not text or any(c in text for c in ".[] '\""):
                text = f"[{text!r}]"
                out += text
            else:
                out += f".{text}" if out else text
    return out


def line_of(text: str, path: Sequence[PathPart]) -> Optional[int]:
    """1-based line of the node at ``path`` (or of its nearest existing parent); None if unparsable."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line: int = node.start_mark.line + 1
    for part in path:
        child: Optional[yaml.Node] = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                    child, line = value_node, key_node.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line
