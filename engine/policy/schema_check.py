"""JSON Schema (2020-12) checks with one reused validator per schema, and defaults filled in.

Building a validator re-checks its schema; doing it per validation is ~20x slower, so
validators are cached by schema identity (schemas are module-level constants or files
read once). ``best_match`` picks the one error a user should fix first.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match, relevance

from engine.policy.yaml_source import PathPart

_VALIDATORS: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


class BadSchema(Exception):
    """The schema itself is invalid (a plugin author's bug, not the policy writer's)."""


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    """The cached validator of ``schema`` (kept alive with it, so ids are not reused)."""
    cached = _VALIDATORS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise BadSchema(f"invalid JSON Schema at {'/'.join(str(p) for p in exc.absolute_path) or 'top'}: "
                        f"{exc.message}") from None
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


@lru_cache(maxsize=None)
def load_schema_file(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def first_error(schema: dict[str, Any], instance: Any) -> Optional[tuple[list[PathPart], str]]:
    """(path inside ``instance``, message) of the most relevant violation, or None if valid."""
    error: Optional[ValidationError] = best_match(validator_for(schema).iter_errors(instance), key=_relevance)
    if error is None:
        return None
    return list(error.absolute_path), _message(error)


def _relevance(error: ValidationError) -> tuple[Any, ...]:
    """jsonschema's ``relevance`` with the error's path made comparable: YAML allows mapping keys that are not
    strings (``0: x``, ``~: x``), and jsonschema compares sibling errors' paths, which then mix ints and strings
    (a TypeError inside ``best_match``, found by tests/test_policy_fuzz.py)."""
    depth, path, *rest = relevance(error)
    return (depth, tuple(_comparable(part) for part in path), *rest)


def _comparable(part: Any) -> tuple[int, int, str]:
    """List indices in numeric order, then every other key by its text."""
    if isinstance(part, int) and not isinstance(part, bool):
        return (0, part, "")
    return (1, 0, str(part))


def _message(error: ValidationError) -> str:
    if error.validator == "additionalProperties" and isinstance(error.schema, dict):
        allowed = sorted(error.schema.get("properties", {}))
        if allowed:
            return f"{error.message}; allowed: {', '.join(allowed)}"
    if error.validator == "const":
        return f"must be {error.validator_value!r}, got {error.instance!r}"
    return error.message


def with_defaults(schema: dict[str, Any], instance: Any) -> Any:
    """A copy of a *valid* ``instance`` with ``default`` values of ``properties`` filled in, recursively.

    Only plain ``properties`` are followed (no $ref/allOf); a default is deep-copied so
    instances never share a mutable default."""
    if not isinstance(instance, dict) or not isinstance(schema, dict):
        return instance
    out = dict(instance)
    for key, sub in schema.get("properties", {}).items():
        if not isinstance(sub, dict):
            continue
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        if key in out:
            out[key] = with_defaults(sub, out[key])
    return out
