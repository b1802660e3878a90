"""docs/policy.md's generated tables match the schema and engine.cel_vars (regenerate: python -m engine.policy_docs)."""

from __future__ import annotations

import pytest

from engine.cel_vars import VARIABLES
from engine.policy_docs import DOC, _marker, generated, render


def test_policy_doc_is_in_sync() -> None:
    text = DOC.read_text()
    assert render(text) == text, "docs/policy.md is stale: run `python -m engine.policy_docs`"


def test_every_cel_variable_field_is_documented() -> None:
    table = generated()["cel-variables"]
    for variable, fields in VARIABLES.items():
        for name in fields:
            assert f"| `{variable}` | `{name}` |" in table


def test_every_schema_field_is_documented_with_its_default() -> None:
    table = generated()["policy-fields"]
    for path in ("spec.placementMode", "spec.managedWorkloads.namespaces.exclude", "spec.pipeline.recover",
                 "metadata.name"):
        assert f"| `{path}` |" in table
    assert '`"gate"`' in table


def test_render_replaces_only_the_marked_sections() -> None:
    text = ("intro\n<!-- BEGIN policy-fields (x) -->\nSTALE-TEXT\n<!-- END policy-fields -->\nmiddle\n"
            "<!-- BEGIN cel-variables (x) -->\n<!-- END cel-variables -->\nend\n")
    out = render(text)
    assert out.startswith("intro\n") and "\nmiddle\n" in out and out.endswith("end\n") and "STALE-TEXT" not in out
    assert _marker("cel-variables").search(out)
    with pytest.raises(ValueError, match="lacks the markers of section policy-fields"):
        render("no markers")
