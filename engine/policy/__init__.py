"""Policies: YAML -> JSON Schema -> plugin configs -> CEL -> Pipeline.

One package for everything that reads a policy: ``load`` (the loader), ``yaml_source`` (safe YAML with
positions), ``schema_check`` (JSON Schema with precise errors), ``cel`` and ``cel_vars`` (CEL compiled
once; the documented variables) and ``docs`` (the generated sections of docs/policy.md).
"""

from engine.policy.load import (API_VERSION, KIND, POLICY_SCHEMA_PATH, Policy, default_catalog, load_policy,
                                load_policy_text)

__all__ = ["API_VERSION", "KIND", "POLICY_SCHEMA_PATH", "Policy", "default_catalog", "load_policy",
           "load_policy_text"]
