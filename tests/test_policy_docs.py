"""docs/policy.md's generated tables match the schema and engine.policy.cel_vars (regenerate: python -m engine.policy.docs)."""

from __future__ import annotations

import pytest

from engine.policy.cel_vars import VARIABLES
from engine.policy.docs import DOC, _marker, generated, render


def test_policy_doc_is_in_sync() -> None:
    text = DOC.read_text()
    assert render(text) == text, "docs/policy.md is stale: run `python -m engine.policy.docs`"


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


def test_every_builtin_plugin_and_config_field_is_documented() -> None:
    from engine.plugin import discover

    text = generated()["builtin-plugins"]
    catalog = discover(entry_points=False)
    assert catalog.names()
    for name in catalog.names():
        assert f'<a id="plugin-{name}"></a>`{name}`' in text
        for field in catalog.entries[name].cls.schema().get("properties", {}):
            assert f"| `{field}` |" in text, (name, field)


def test_render_replaces_only_the_marked_sections() -> None:
    text = ("intro\n<!-- BEGIN policy-fields (x) -->\nSTALE-TEXT\n<!-- END policy-fields -->\nmiddle\n"
            "<!-- BEGIN builtin-plugins (x) -->\n<!-- END builtin-plugins -->\n"
            "<!-- BEGIN cel-variables (x) -->\n<!-- END cel-variables -->\nend\n")
    out = render(text)
    assert out.startswith("intro\n") and "\nmiddle\n" in out and out.endswith("end\n") and "STALE-TEXT" not in out
    assert _marker("cel-variables").search(out)
    with pytest.raises(ValueError, match="lacks the markers of section policy-fields"):
        render("no markers")


def test_the_example_policy_in_the_doc_is_valid() -> None:
    from engine.policy import load_policy_text

    text = DOC.read_text()
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    policy = load_policy_text(example, "docs/policy.md example")
    assert policy.managed_workloads["namespaces"]["exclude"] == ["sandbox-*"]
