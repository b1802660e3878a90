"""Generated sections of docs/policy.md: the policy fields (schemas/policy.schema.json), the built-in
plugins with their config fields (their schemas) and the CEL variables (engine.policy.cel_vars.VARIABLES),
so the reference cannot drift from the code.

``python -m engine.policy.docs`` rewrites the sections in place; tests/test_policy_docs.py fails
when the committed doc is stale.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Iterator

from engine.policy.cel_vars import VARIABLES
from engine.plugin import discover
from engine.policy import POLICY_SCHEMA_PATH
from engine.policy.schema_check import load_schema_file

DOC = Path(__file__).resolve().parents[2] / "docs" / "policy.md"     # the source tree (a docs tool)
SECTIONS = ("policy-fields", "builtin-plugins", "cel-variables")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(schema: dict[str, Any]) -> str:
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "$ref" in schema:
        return "list of plugin names"
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(_type(alt) for alt in schema.get("anyOf", schema.get("oneOf", [])))
    if isinstance(schema.get("type"), list):
        return " or ".join(schema["type"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {})) if schema.get('items') else 'any'}"
    if kind == "string" and "pattern" in schema and "default" in schema and "s" in str(schema["default"]):
        return "duration string"
    if kind == "object" and not schema.get("properties"):
        return "map"
    return str(kind)


def _fields(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        here = f"{path}.{name}" if path else name
        yield here, sub, name in required
        if sub.get("properties"):
            yield from _fields(sub, here)


def fields_table() -> str:
    rows = ["| field | type | required | default | meaning |", "|---|---|---|---|---|"]
    for path, sub, required in _fields(load_schema_file(POLICY_SCHEMA_PATH), ""):
        default = f"`{json.dumps(sub['default'])}`" if "default" in sub else ""
        if path == "spec.plugins":
            path = "spec.plugins.&lt;name&gt;"
        rows.append(f"| `{path}` | {_type(sub)} | {'yes' if required else ''} | {_cell(default)} | "
                    f"{_cell(sub.get('description', ''))} |")
    return "\n".join(rows)


def plugins_reference() -> str:
    """Built-in plugins (not pip-installed ones): a summary table, then each one's config fields."""
    catalog = discover(entry_points=False)
    out = ["| plugin | stages | what it does |", "|---|---|---|"]
    for name in catalog.names():
        cls = catalog.entries[name].cls
        out.append(f"| [`{name}`](#plugin-{name}) | {', '.join(cls.stages)} | {_cell(cls.description)} |")
    for name in catalog.names():
        cls = catalog.entries[name].cls
        schema = cls.schema()
        out += ["", f"#### <a id=\"plugin-{name}\"></a>`{name}` ({', '.join(cls.stages)})", "",
                _cell(schema.get("description", cls.description)), ""]
        fields = list(_fields(schema, f"spec.plugins.{name}"))
        if not fields:
            out.append("No settings.")
            continue
        out += ["| field | type | default | meaning |", "|---|---|---|---|"]
        for path, sub, _ in fields:
            default = f"`{json.dumps(sub['default'])}`" if "default" in sub else ""
            out.append(f"| `{path.removeprefix(f'spec.plugins.{name}.')}` | {_type(sub)} | {_cell(default)} | "
                       f"{_cell(sub.get('description', ''))} |")
    return "\n".join(out)


def variables_table() -> str:
    rows = ["| variable | field | type and meaning |", "|---|---|---|"]
    for variable, fields in VARIABLES.items():
        for name, doc in fields.items():
            rows.append(f"| `{variable}` | `{name}` | {_cell(doc)} |")
    return "\n".join(rows)


def generated() -> dict[str, str]:
    return {"policy-fields": fields_table(), "builtin-plugins": plugins_reference(),
            "cel-variables": variables_table()}


def _marker(section: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- BEGIN {section} [^>]*-->\n)(.*?)(<!-- END {section} -->)", re.S)


def render(text: str) -> str:
    """``text`` with every generated section replaced by its current content."""
    for section, body in generated().items():
        pattern = _marker(section)
        if not pattern.search(text):
            raise ValueError(f"docs/policy.md lacks the markers of section {section}")
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(3), text)
    return text


def main() -> int:
    text = DOC.read_text()
    DOC.write_text(render(text))
    print(f"updated {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
