"""Plugin base class and discovery of built-in and pip-installed plugins.

A plugin is a class with a unique ``name``, the ``stages`` it may be listed in, and
a JSON Schema for its config. Built-ins (package ``plugins``) and third-party
packages (entry-point group ``atoll.plugins``) are found the same way, through the
``atoll_plugin_classes`` discovery hook.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Hashable, Optional

import pluggy

from engine._data import data_path
from engine.errors import InputError
from engine.hookspecs import PROJECT, STAGES, DiscoverySpecs, StageSpecs

if TYPE_CHECKING:
    from engine.model import Job, Queue

ENTRY_POINT_GROUP = "atoll.plugins"
BUILTIN_MODULE = "plugins"
SCHEMA_DIR = data_path("schemas")
PLUGIN_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")      # the pattern of schemas/policy.schema.json


class Plugin:
    """Base of every Atoll plugin. Subclasses set ``name``, ``stages`` and ``config_schema``.

    The engine builds one instance per loaded policy, with the plugin's validated config
    (``{}`` when the policy gives none), ``cel``, an ``engine.policy.cel.CelCompiler`` for
    compiling the config's CEL expressions at load time (errors there reject the policy),
    and ``where``, the config's place for messages (``policy.yaml: spec.plugins.drf``).
    """

    name: ClassVar[str] = ""
    stages: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""
    config_schema: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        self.config = config
        self.cel = cel
        self.where = where or f"spec.plugins.{self.name}"

    def judges_fitting_clusters_only(self) -> bool:
        """True when, in the place stage, this plugin filters and scores each cluster on its own (the
        answer for one cluster never depends on the other candidates) and its ``atoll_place`` only
        ever chooses clusters where the job's gang minimum (``job.min_demand``) fits whole. When
        every place plugin of a policy says so, the engine first offers only those clusters, which
        cannot change the decision (see ``Engine._place``). False by default: a plugin that may
        split replicas over clusters where the minimum does not fit must keep seeing them all."""
        return False

    def keys_queues_by_line(self) -> bool:
        """True when this plugin's ``atoll_queue_order`` key for a queue reads nothing but the queue's line
        (the queue and its ancestors: their fields and ``allocated``), which queues exist, the fleet's
        allocatable (``FleetState.fleet_allocatable``) and the candidate's shape, and keeps no state of its
        own. When every order plugin of a policy says so, the engine keeps a queue's key across cycles
        until one of those changes (``FleetState.line_stamp``), instead of asking again in every cycle.
        False by default: the key is asked again after every admission and in every cycle, as before."""
        return False

    def keys_rise_with_demand(self) -> bool:
        """True when this plugin's ``atoll_queue_order`` key reads its ``candidate`` only through
        ``candidate.demand``, a queue's keys by different candidates have one structure (the same length, the
        same values but numbers), and no number in it falls when the demand grows in some resource (drf's
        shares after the candidate). When every order plugin taking ``candidate`` says so, the key by a
        candidate demanding, per resource, the most any job of the queue demands is above the key by each of
        them: while that bound stays below the next queues' keys, the engine passes refusals without keying the
        queue by every job (``Engine._serve_by_candidate``). False by default: the queue is keyed by each job."""
        return False

    def verdict_key(self, job: "Job") -> Optional[Hashable]:
        """Everything of ``job`` that this plugin's admit, place (and preempt) verdicts read besides
        FleetState and the plugin's own config, as a hashable value computed once per job version.
        Two jobs with equal keys, examined in the same FleetState, must get the same verdict, the same
        refusal text and the same placement: the engine then examines a key once per state and hands
        its refusal to every other job of the same queue and key without calling the pipeline (see
        ``engine.core.backlog``). None (the default) means undeclared: every job of a policy listing
        this plugin in admit or place is examined on its own, exactly as before. Typical keys:
        ``job.queue``, ``job.shape`` (tasks and their resources), the labels the plugin reads."""
        return None

    def verdict_reads(self, job: "Job", state: Any) -> Optional[tuple[Hashable, ...]]:
        """What of FleetState this plugin's admit and place verdicts (and refusal texts) read for ``job``,
        as reads of ``engine.core.wake`` (``("fleet", need)``, ``("max", need)``, ``("each", need)``);
        the queue line, the ready clusters and their labels are read by the engine for every job. In two
        states where these reads have equal values the plugin must give ``job`` the same verdict and the
        same refusal text: the engine then parks a refused key until a read changes (a finish elsewhere
        wakes only the keys it could help). None (the default): undeclared, the key is examined again
        after every capacity change, as before.

        A preempt plugin declares what its ``atoll_preempt_rule`` (the rule and its ``victim_queues`` /
        ``allows``) and ``atoll_protect`` read of FleetState for ``job`` besides the running jobs themselves
        (``("queues",)``: any queue's fields; ``("allocated", queue)``; ...). The engine watches the running
        jobs (a job becoming a candidate, a queue's usage rising above its guarantee): a victim search that
        met no candidate it could take is parked until one of those or a declared read changes
        (``engine.core.searchwake``). None: its searches are never parked."""
        return None

    def admit_reads(self, job: "Job", state: Any) -> Optional[tuple[Hashable, ...]]:
        """What this plugin's ``atoll_admit`` verdict (and refusal text) alone reads for ``job``, in the same
        vocabulary as ``verdict_reads``. A refusal the admit stage gave never reached placement, so its key is
        parked on the admit plugins' ``admit_reads`` (and the engine's queue-line and ready-cluster reads), not
        on what filters, scores and placement would read: a change that only placement could notice (another
        cluster's free capacity for a job no single cluster can hold) wakes nobody. The default is
        ``verdict_reads`` (both stages: never less than the verdict reads); a plugin declares less when its admit
        verdict reads less than its place verdict."""
        return self.verdict_reads(job, state)

    def shared_verdict_key(self, job: "Job") -> Optional[Hashable]:
        """An admit plugin's verdict key without the queue, for sharing its ``atoll_admit`` answer across queues:
        two jobs with equal keys, each of a queue for which ``admits_alike`` is True, must get the same verdict
        and the same refusal text in the same FleetState, whatever their queues. Computed once per job version,
        like ``verdict_key`` (typically ``job.shape_key`` and the labels the plugin reads). When every admit
        plugin of a policy declares one, a large cycle asks the admit stage once per key and state instead of
        once per job (engine.core.admitshare). None (the default): never shared, every job asks."""
        return None

    def admits_alike(self, queue: "Queue", state: Any) -> bool:
        """Whether this admit plugin's verdict for the jobs of ``queue`` depends on nothing of the queue, so that
        ``shared_verdict_key`` holds for them (e.g. no limit of this plugin's on the queue or its ancestors, the
        queue line open). It may read the fields of the queue and its ancestors and the plugin's config, nothing
        that changes with usage or capacity: the engine asks once per queue until a queue is added, edited or
        removed (``FleetState.queue_edits``). False (the default): its jobs ask the admit stage each."""
        return False

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The config schema: ``schemas/plugins/<name>.schema.json`` for built-ins, else the class attribute."""
        path = SCHEMA_DIR / "plugins" / f"{cls.name}.schema.json"
        if cls.__module__.split(".")[0] == BUILTIN_MODULE and path.exists():
            return _schema_file(path)
        return cls.config_schema

    def __repr__(self) -> str:
        return f"<plugin {self.name}>"


@lru_cache(maxsize=None)
def _schema_file(path: Path) -> dict[str, Any]:
    """Read once: the same dict object each time lets engine.policy.schema_check reuse its validator."""
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


@dataclass(frozen=True)
class PluginEntry:
    cls: type[Plugin]
    source: str          # distribution name and version, or "atoll (built-in)"


class PluginCatalog:
    """Every plugin class this process can use, by name."""

    def __init__(self, entries: dict[str, PluginEntry]) -> None:
        self.entries = entries

    def get(self, name: str) -> Optional[PluginEntry]:
        return self.entries.get(name)

    def names(self) -> list[str]:
        return sorted(self.entries)


def discover(entry_points: bool = True, extra_modules: tuple[str, ...] = ()) -> PluginCatalog:
    """Load built-ins, then pip-installed plugins (tox's order). Raises InputError on clashes."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(DiscoverySpecs)
    pm.register(import_module(BUILTIN_MODULE), name=BUILTIN_MODULE)
    for module in extra_modules:
        pm.register(import_module(module), name=module)
    sources: dict[str, str] = {}
    if entry_points:
        sources = _load_entry_points(pm)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise InputError(f"plugin module {exc.plugin!r} implements an unknown hook: {exc}", "plugins") from None
    entries: dict[str, PluginEntry] = {}
    for impl in pm.hook.atoll_plugin_classes.get_hookimpls():
        module_name = impl.plugin_name
        source = sources.get(module_name, "atoll (built-in)" if module_name == BUILTIN_MODULE else module_name)
        try:
            announced: Any = impl.function()
            classes: list[Any] = list(announced)
        except Exception as exc:
            raise InputError(f"{source}: atoll_plugin_classes() failed: {type(exc).__name__}: {exc}",
                             "plugins") from None
        for cls in classes:
            _check_plugin_class(cls, source)
            if cls.name in entries:
                raise InputError(
                    f"plugin name {cls.name!r} is provided twice: by {entries[cls.name].source} and by {source}",
                    "plugins",
                )
            entries[cls.name] = PluginEntry(cls, source)
    return PluginCatalog(entries)


def _load_entry_points(pm: pluggy.PluginManager) -> dict[str, str]:
    """Register every ``atoll.plugins`` entry point; a broken package is named, not a traceback.

    Returns {registered name: "dist version"}. Like pluggy's load_setuptools_entrypoints,
    but with one error per failing entry point."""
    sources: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP or pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            label = f"{dist.metadata['name']} {dist.version}"
            try:
                module = ep.load()
                pm.register(module, name=ep.name)
            except pluggy.PluginValidationError as exc:
                raise InputError(f"{label}: entry point {ep.name} = {ep.value}: {exc}", "plugins") from None
            except Exception as exc:
                raise InputError(f"cannot load plugin package {label} (entry point {ep.name} = {ep.value}): "
                                 f"{type(exc).__name__}: {exc}", "plugins") from None
            sources[ep.name] = label
    return sources


def _check_plugin_class(cls: object, source: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Plugin)):
        raise InputError(f"{source} returned {cls!r}, which is not an engine.plugin.Plugin subclass", "plugins")
    if not cls.name:
        raise InputError(f"{source}: plugin class {cls.__qualname__} has no name", "plugins")
    if not PLUGIN_NAME.fullmatch(cls.name):
        raise InputError(f"{source}: plugin name {cls.name!r} must be lower-case letters, digits and '-' "
                         "(as policies list it)", "plugins")
    unknown = set(cls.stages) - set(STAGES)
    if unknown or not cls.stages:
        raise InputError(
            f"{source}: plugin {cls.name!r} declares stages {list(cls.stages)}; allowed: {list(STAGES)}", "plugins"
        )
    misspelt = [attr for attr in dir(cls)
                if hasattr(getattr(cls, attr, None), f"{PROJECT}_impl") and not hasattr(StageSpecs, attr)]
    if misspelt:
        raise InputError(f"{source}: plugin {cls.name!r} marks {', '.join(misspelt)} as hook implementation(s), "
                         "but engine/hookspecs.py has no such hook (misspelt?)", "plugins")
