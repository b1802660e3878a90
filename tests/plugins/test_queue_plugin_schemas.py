"""Config schemas of the queue/order/admit plugins: valid 2020-12, documented, defaults = code defaults."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from engine.plugin import SCHEMA_DIR, discover
from plugins.capacity import Capacity
from plugins.drf import Drf
from plugins.fifo import Fifo
from plugins.job_priority import JobPriority
from plugins.queue_priority import QueuePriority
from plugins.queue_resolve import QueueResolve
from plugins.queue_state import QueueState
from plugins.round_robin import RoundRobin
from plugins.volcano_capacity import VolcanoCapacity

CLASSES: list[Any] = [QueueResolve, JobPriority, QueuePriority, Fifo, Drf, RoundRobin, QueueState, Capacity,
                      VolcanoCapacity]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_schema_is_valid_documented_and_matches_code_defaults(cls: Any) -> None:
    path = SCHEMA_DIR / "plugins" / f"{cls.name}.schema.json"
    assert path.exists(), path
    schema = cls.schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    assert schema.get("description")
    defaults = {}
    for key, prop in schema["properties"].items():
        assert prop.get("description"), f"{cls.name}.{key} has no description"
        if "default" in prop:
            defaults[key] = prop["default"]
    assert defaults == cls.DEFAULTS
    validator = Draft202012Validator(schema)
    assert not list(validator.iter_errors({}))
    assert not list(validator.iter_errors(dict(cls.DEFAULTS)))
    assert list(validator.iter_errors({"noSuchKey": 1}))


def test_all_are_discovered_as_builtins_in_their_stages() -> None:
    catalog = discover(entry_points=False)
    stages = {"queue-resolve": ("enqueue",), "job-priority": ("enqueue", "order"), "queue-priority": ("order",),
              "fifo": ("order",), "drf": ("order",), "round-robin": ("order",), "queue-state": ("admit",),
              "capacity": ("admit",), "volcano-capacity": ("admit",)}
    for name, expected in stages.items():
        entry = catalog.get(name)
        assert entry is not None, name
        assert entry.cls.stages == expected
        assert entry.source == "atoll (built-in)"
