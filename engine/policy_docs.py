"""Generated sections of docs/policy.md: the policy fields (from schemas/policy.schema.json) and the
CEL variables (from engine.cel_vars.VARIABLES), so the reference cannot drift from the code.

``python -m engine.policy_docs`` rewrites the sections in place; tests/test_policy_docs.py fails
when the committed doc is stale.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Iterator

from engine.cel_vars import VARIABLES
from engine.policy import POLICY_SCHEMA_PATH
from engine.schema_check import load_schema_file

DOC = Path(__file__).resolve().parent.parent / "docs" / "policy.md"
SECTIONS = ("policy-fields", "cel-variables")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(schema: dict[str, Any]) -> str:
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "$ref" in schema:
        return "list of plugin names"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {schema.get('items', {}).get('type', 'any')}"
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


def variables_table() -> str:
    rows = ["| variable | field | type and meaning |", "|---|---|---|"]
    for variable, fields in VARIABLES.items():
        for name, doc in fields.items():
            rows.append(f"| `{variable}` | `{name}` | {_cell(doc)} |")
    return "\n".join(rows)


def generated() -> dict[str, str]:
    return {"policy-fields": fields_table(), "cel-variables": variables_table()}


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
