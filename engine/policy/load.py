"""Load a policy: YAML -> JSON Schema -> plugin configs (schema + defaults) -> CEL -> Pipeline.

Every mistake a user can make in a policy file ends as one InputError that names the
file, the YAML path (``spec.plugins.drf.weight``), the line, and for CEL the column;
never a traceback. A config for a plugin the pipeline does not list is an *error*, not
a warning: such a config silently does nothing, and a warning in a ConfigMap reload
log is easy to miss (comment the config out to disable a plugin).
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

import pluggy

from engine.policy.cel import CelCompiler
from engine.errors import InputError
from engine.hookspecs import STAGES
from engine.pipeline import Pipeline
from engine.plugin import SCHEMA_DIR, Plugin, PluginCatalog, discover
from engine.policy.schema_check import BadSchema, first_error, load_schema_file, with_defaults
from engine.policy.yaml_source import PathPart, first_non_finite, format_path, line_of, load_yaml, read_source

POLICY_SCHEMA_PATH = SCHEMA_DIR / "policy.schema.json"
API_VERSION = "atoll.dev/v1alpha1"
KIND = "SchedulingPolicy"


@dataclass
class Policy:
    """A validated policy with its plugin instances built (one per plugin, shared by its stages)."""

    name: str
    source: str
    digest: str                                  # sha256 of the text: reload only when it changes
    pipeline: Pipeline
    managed_workloads: dict[str, Any]            # spec.managedWorkloads, defaults applied
    placement_mode: str = "gate"                 # "gate" | "bind"
    raw: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        """``enqueue: a, b; order: c; ...`` for OK lines and logs."""
        return "; ".join(f"{stage}: {', '.join(names) or '-'}" for stage, names in self.pipeline.describe().items())


@lru_cache(maxsize=1)
def default_catalog() -> PluginCatalog:
    """Built-in and pip-installed plugins of this process, discovered once."""
    return discover()


def load_policy(path: str | Path, catalog: Optional[PluginCatalog] = None) -> Policy:
    """Read and load a policy file (see ``load_policy_text``)."""
    return load_policy_text(read_source(path, "policy"), str(path), catalog)


def load_policy_text(text: str, source: str, catalog: Optional[PluginCatalog] = None) -> Policy:
    """Validate ``text`` (from ``source``, used in every message) and build its Pipeline."""
    return _Loader(text, source, catalog or default_catalog()).load()


class _Loader:
    def __init__(self, text: str, source: str, catalog: PluginCatalog) -> None:
        self.text, self.source, self.catalog = text, source, catalog

    def fail(self, path: Sequence[PathPart], message: str) -> InputError:
        """An InputError at ``path``: ``file: spec.x.y (line N): message``."""
        where = f"{self.source}: {format_path(path)}" if path else self.source
        line = line_of(self.text, path)
        if line is not None:
            where += f" (line {line})"
        return InputError(message, where)

    def load(self) -> Policy:
        doc = load_yaml(self.text, self.source)
        if not isinstance(doc, dict):
            got = "an empty document" if doc is None else f"a {type(doc).__name__}"
            raise InputError(f"a policy must be a YAML mapping (apiVersion, kind, metadata, spec); got {got}",
                             self.source)
        self.check_finite(doc)
        self.check_stage_names(doc)
        problem = first_error(load_schema_file(POLICY_SCHEMA_PATH), doc)
        if problem is not None:
            raise self.fail(*problem)
        doc = with_defaults(load_schema_file(POLICY_SCHEMA_PATH), doc)
        spec = doc["spec"]
        stages: dict[str, list[str]] = {stage: list(spec["pipeline"].get(stage, [])) for stage in STAGES}
        configs: dict[str, dict[str, Any]] = spec.get("plugins", {})
        classes = self.resolve(stages)
        self.check_configs(configs, stages)
        compiler = CelCompiler()
        instances = {name: self.instantiate(cls, configs.get(name, {}), compiler) for name, cls in classes.items()}
        try:
            pipeline = Pipeline({stage: [instances[n] for n in names] for stage, names in stages.items()},
                                lookback=int(spec.get("lookback", 0)))
        except pluggy.PluginValidationError as exc:
            plugin = getattr(exc.plugin, "name", str(exc.plugin))
            raise InputError(f"plugin {plugin} ({self.origin(plugin)}) has an invalid hook implementation: {exc}",
                             self.source) from None
        managed = with_defaults(_MANAGED_SCHEMA, spec.get("managedWorkloads", {}))
        return Policy(
            name=doc["metadata"]["name"], source=self.source,
            digest=hashlib.sha256(self.text.encode("utf-8")).hexdigest(), pipeline=pipeline,
            managed_workloads=managed, placement_mode=spec.get("placementMode", "gate"), raw=doc,
        )

    def check_finite(self, doc: dict[str, Any]) -> None:
        """NaN and infinities (YAML ``.nan``, ``.inf``) are refused anywhere in the document, before any schema:
        ``minimum`` cannot refuse NaN, and either one passes validation only to break the scheduler at run time."""
        found = first_non_finite(doc)
        if found is not None:
            path, what = found
            raise self.fail(path, f"{what} is not a finite number; NaN and infinities are not allowed in a policy")

    def check_stage_names(self, doc: dict[str, Any]) -> None:
        spec = doc.get("spec")
        pipeline = spec.get("pipeline") if isinstance(spec, dict) else None
        if not isinstance(pipeline, dict):
            return
        for stage in pipeline:
            if stage not in STAGES:
                raise self.fail(["spec", "pipeline", stage],
                                f"unknown stage {stage!r}{_suggest(str(stage), STAGES)}; stages: {', '.join(STAGES)}")

    def resolve(self, stages: dict[str, list[str]]) -> dict[str, type[Plugin]]:
        """Plugin classes by name, in first-listed order; checks names, stages and duplicates."""
        classes: dict[str, type[Plugin]] = {}
        for stage, names in stages.items():
            seen: set[str] = set()
            for index, name in enumerate(names):
                path: list[PathPart] = ["spec", "pipeline", stage, index]
                if name in seen:
                    raise self.fail(path, f"plugin {name!r} is listed twice in stage {stage}")
                seen.add(name)
                entry = self.catalog.get(name)
                if entry is None:
                    raise self.fail(path, f"unknown plugin {name!r}{_suggest(name, self.catalog.names())}; "
                                          f"known plugins: {', '.join(self.catalog.names()) or '(none)'}")
                if stage not in entry.cls.stages:
                    raise self.fail(path, f"plugin {name!r} cannot be used in stage {stage}: it implements "
                                          f"{', '.join(entry.cls.stages)} only")
                classes.setdefault(name, entry.cls)
        return classes

    def check_configs(self, configs: dict[str, Any], stages: dict[str, list[str]]) -> None:
        listed = {name for names in stages.values() for name in names}
        for name in configs:
            if not isinstance(name, str):        # e.g. `~:` or an anchor with no key: YAML gives None
                raise self.fail(["spec", "plugins", str(name)],
                                f"config key {name!r} is not a plugin name; write the plugin's name as the key")
            if name not in listed:
                known = "" if self.catalog.get(name) else f" (and no plugin is called {name!r}" \
                    f"{_suggest(name, self.catalog.names())})"
                raise self.fail(["spec", "plugins", name],
                                f"config for plugin {name!r}, which no stage of spec.pipeline lists{known}; "
                                "list it in a stage or remove its config")

    def instantiate(self, cls: type[Plugin], config: dict[str, Any], compiler: CelCompiler) -> Plugin:
        name = cls.name
        path: list[PathPart] = ["spec", "plugins", name]
        try:
            schema = cls.schema()
            problem = first_error(schema, config)
        except BadSchema as exc:
            raise InputError(f"plugin {name} ({self.origin(name)}) ships a broken config schema: {exc}",
                             self.source) from None
        if problem is not None:
            sub, message = problem
            raise self.fail(path + sub, f"invalid config for plugin {name}: {message}")
        where = f"{self.source}: {format_path(path)}"
        try:
            return cls(with_defaults(schema, config), compiler, where)
        except InputError as exc:
            place = exc.where or where
            if not place.startswith(f"{self.source}: "):       # a plugin that named only the field
                place = f"{self.source}: {place}"
            line = line_of(self.text, self._cel_path(place, path))
            raise InputError(exc.message, f"{place} (line {line})" if line else place) from None
        except Exception as exc:  # a plugin's bug must not become a traceback for the policy writer
            raise InputError(f"plugin {name} ({self.origin(name)}) failed to load its config: "
                             f"{type(exc).__name__}: {exc}", where) from None

    def _cel_path(self, where: str, base: list[PathPart]) -> list[PathPart]:
        """The YAML path inside ``where`` (``file: spec.plugins.x.key``) as parts, for line lookup."""
        prefix = f"{self.source}: {format_path(base)}"
        if not where.startswith(prefix):
            return base
        rest = where[len(prefix):].lstrip(".")
        return base + [p for p in rest.split(".") if p] if rest else base

    def origin(self, name: str) -> str:
        entry = self.catalog.get(name)
        return entry.source if entry else "unknown source"


_MANAGED_SCHEMA: dict[str, Any] = (
    load_schema_file(POLICY_SCHEMA_PATH)["properties"]["spec"]["properties"]["managedWorkloads"]
)


def _suggest(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
