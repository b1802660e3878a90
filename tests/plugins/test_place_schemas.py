"""Every placement plugin: discovered by name, a valid 2020-12 schema with descriptions and defaults,
and built with ``{}`` it carries exactly the schema's defaults."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from engine.plugin import SCHEMA_DIR, discover

STAGES = {
    "gang": ("admit", "place"),
    "gpu-capacity": ("admit", "place"),
    "cluster-filter": ("place",),
    "cluster-score": ("place",),
    "binpack": ("place",),
    "spread": ("place",),
    "karmada-divided": ("place",),
    "requeue-backoff": ("recover",),
}


@pytest.mark.parametrize("name", sorted(STAGES))
def test_schema_and_defaults(name: str) -> None:
    entry = discover(entry_points=False).get(name)
    assert entry is not None and entry.source == "atoll (built-in)"
    assert entry.cls.stages == STAGES[name]
    path = SCHEMA_DIR / "plugins" / f"{name}.schema.json"
    schema = json.loads(path.read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["description"] and schema["additionalProperties"] is False
    defaults = {}
    for prop, spec in schema["properties"].items():
        assert spec.get("description"), f"{name}.{prop} has no description"
        assert "default" in spec, f"{name}.{prop} has no default"
        Draft202012Validator(spec).validate(spec["default"])
        defaults[prop] = spec["default"]
    Draft202012Validator(schema).validate(defaults)
    assert entry.cls.schema() == schema
    assert entry.cls({}, None).config == defaults
