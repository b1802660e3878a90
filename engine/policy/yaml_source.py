"""YAML documents with their positions, so an error can say "line 12" of the user's file.

PyYAML silently keeps the last of two equal keys; a policy with ``drf:`` twice would then
quietly lose a config, so duplicate keys are errors here.

Hostile or careless files are refused with one line *before* they cost memory or stack
(``YamlLimits``): a file larger than ``max_bytes`` is not even read in full; while the
document is composed, every node counts, and every alias counts as the whole subtree it
repeats, so a 500-byte "billion laughs" alias bomb stops at ``max_nodes``; nesting deeper
than ``max_depth`` stops before Python's recursion limit (YAML flow style is a superset of
JSON, so ``[[[[...]]]]`` 100k deep is the same case). An alias to an enclosing node
(``&a [*a]``), which would make a recursive structure, is an error too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import yaml

from engine.errors import InputError

PathPart = Union[str, int]


@dataclass(frozen=True)
class YamlLimits:
    """What one document may cost. ``max_nodes`` counts alias expansions (see the module doc)."""

    max_bytes: int
    max_nodes: int
    max_depth: int


POLICY_LIMITS = YamlLimits(max_bytes=1 << 20, max_nodes=50_000, max_depth=64)
"""A policy: 1 MiB (a ConfigMap's own limit), 50,000 nodes, 64 levels (the default policy: 2.4 KB, 150 nodes)."""


class YamlLimitError(yaml.composer.ComposerError):
    """A document over one of its ``YamlLimits`` (reported as "refused", not as a syntax error)."""


class _LimitedComposer(yaml.SafeLoader):
    """SafeLoader whose composer counts nodes (aliases as what they expand to) and depth."""

    limits = POLICY_LIMITS

    def compose_document(self) -> Optional[yaml.Node]:
        self._nodes = 0
        self._depth = 0
        self._sizes: dict[str, int] = {}        # anchor -> nodes it stands for (once composed)
        return super().compose_document()

    def compose_node(self, parent: Optional[yaml.Node], index: Any) -> Optional[yaml.Node]:
        limits = self.limits
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            if event.anchor in self.anchors and event.anchor not in self._sizes:
                raise YamlLimitError(None, None, f"alias *{event.anchor} refers to a node that "
                                                  "contains it (a recursive structure)", event.start_mark)
            self._count(self._sizes.get(event.anchor, 1), event.start_mark)
            return super().compose_node(parent, index)
        event = self.peek_event()
        self._count(1, event.start_mark)
        if self._depth >= limits.max_depth:
            raise YamlLimitError(None, None, f"nesting deeper than {limits.max_depth} levels "
                                              "(the limit for this file)", event.start_mark)
        before = self._nodes
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if event.anchor is not None:
            self._sizes[event.anchor] = self._nodes - before + 1
        return node

    def _count(self, nodes: int, mark: Any) -> None:
        self._nodes += nodes
        if self._nodes > self.limits.max_nodes:
            raise YamlLimitError(None, None, f"more than {self.limits.max_nodes:,} nodes once "
                                              "aliases are expanded (the limit for this file; an alias bomb?)",
                                              mark)


class _StrictLoader(_LimitedComposer):
    """SafeLoader that rejects duplicate mapping keys (and has the composer's limits)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":       # ``<<: *defaults``: merged keys may be overridden
            continue
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


def read_source(path: Union[str, Path], what: str, limits: YamlLimits = POLICY_LIMITS) -> str:
    """A policy's or scenario's text; an unreadable, oversized or non-UTF-8 file is an InputError naming
    it. At most ``limits.max_bytes + 1`` bytes are read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limits.max_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", str(path)) from None
    if len(data) > limits.max_bytes:
        raise InputError(f"{what} is larger than {_size(limits.max_bytes)} (the limit for this file)", str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} is not UTF-8 text: {exc.reason} at byte {exc.start}", str(path)) from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n % (1 << 20) == 0 else f"{n:,} bytes"


def check_size(text: str, source: str, limits: YamlLimits) -> None:
    """InputError if ``text`` is longer than ``limits.max_bytes`` in UTF-8."""
    if len(text) > limits.max_bytes or (len(text) * 4 > limits.max_bytes
                                        and len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes):
        raise InputError(f"the document is larger than {_size(limits.max_bytes)} (the limit for this file)", source)


def _loader(limits: YamlLimits) -> type[_StrictLoader]:
    if limits == _StrictLoader.limits:
        return _StrictLoader
    cached = _LOADERS.get(limits)
    if cached is None:
        cached = _LOADERS[limits] = type("_LimitedLoader", (_StrictLoader,), {"limits": limits})
    return cached


_LOADERS: dict[YamlLimits, type[_StrictLoader]] = {}


def load_yaml(text: str, source: str, limits: YamlLimits = POLICY_LIMITS) -> Any:
    """Parse one YAML document within ``limits``; raise InputError with line and column on a syntax error
    or a limit."""
    check_size(text, source, limits)
    try:
        return yaml.load(text, Loader=_loader(limits))  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}: line {mark.line + 1}, column {mark.column + 1}" if mark else source
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        kind = "YAML refused" if isinstance(exc, YamlLimitError) else "YAML syntax error"
        raise InputError(f"{kind}: {_one_line(problem)}", where) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise InputError(f"YAML syntax error: character {exc.character!r} is not allowed in YAML",
                         f"{source}: line {line}, column {column}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"YAML error: {_one_line(str(exc))}", source) from None
    except (ValueError, OverflowError) as exc:   # e.g. a timestamp 2026-02-30, an int of 5,000 digits
        raise InputError(f"YAML value error: {_one_line(str(exc))}", source) from None


def first_non_finite(doc: Any) -> Optional[tuple[list[PathPart], str]]:
    """(path, what) of the first NaN or infinity in a loaded document (values in document order); None if none.

    YAML has ``.nan``, ``.inf`` and ``-.inf`` (JSON has neither): no schema ``minimum`` or ``maximum`` refuses
    NaN (every comparison with it is false), and an infinite duration or factor passes ``minimum: 0``; a
    loader that refuses them here covers every field of every plugin, third-party ones included. A key that
    is not finite is reported at its mapping's path, when the walk reaches that mapping. ``what`` is the
    value as YAML spells it (``.nan``)."""
    stack: list[tuple[list[PathPart], Any]] = [([], doc)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path, _yaml_float(node)
        if isinstance(node, dict):
            children: list[tuple[list[PathPart], Any]] = []
            for key, value in node.items():
                if isinstance(key, float) and not math.isfinite(key):
                    return path, f"key {_yaml_float(key)}"
                children.append((path + [key], value))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend((path + [index], value) for index, value in reversed(list(enumerate(node))))
    return None


def _yaml_float(value: float) -> str:
    return ".nan" if math.isnan(value) else ".inf" if value > 0 else "-.inf"


def _one_line(text: str) -> str:
    return " ".join(text.split())


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


def line_of(text: str, path: Sequence[PathPart], limits: YamlLimits = POLICY_LIMITS) -> Optional[int]:
    """1-based line of the node at ``path`` (or of its nearest existing parent); None if unparsable."""
    try:
        node = yaml.compose(text, Loader=_loader(limits))  # noqa: S506 - a SafeLoader subclass
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
