"""The policy loader: every kind of mistake gives one precise InputError (file, YAML path, line, CEL column)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Optional

import pytest

from engine.policy.cel_vars import CelCache, job_vars
from engine.core.scheduler import Engine
from engine.errors import InputError
from engine.hookspecs import hookimpl
from engine.model import Cluster, Job, Queue, Refusal, Task
from engine.plugin import Plugin, PluginCatalog, PluginEntry
from engine.policy import Policy, load_policy, load_policy_text
from engine.resources import parse_resources


class TPriority(Plugin):
    """Job priority from a CEL expression (enqueue sets it, order sorts by it)."""

    name = "t-priority"
    stages = ("enqueue", "order")
    config_schema = {
        "type": "object", "additionalProperties": False,
        "properties": {"priority": {"type": "string", "default": "job.priority"},
                       "boost": {"type": "integer", "minimum": 0, "default": 0}},
    }

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        self.expr = cel.compile(config["priority"], f"{self.where}.priority", ("job",), "int")
        self.cache: CelCache[tuple[str, int]] = CelCache()

    @hookimpl
    def atoll_enqueue(self, job: Job) -> None:
        job.priority = self.cache.get((job.id, job.generation),
                                      lambda: self.expr.evaluate({"job": job_vars(job)})) + self.config["boost"]

    @hookimpl
    def atoll_job_order(self, job: Job) -> tuple[int]:
        return (-job.priority,)

    @hookimpl
    def atoll_queue_order(self, queue: Queue) -> tuple[str]:
        return (queue.name,)


class TCounter(Plugin):
    """Admits at most ``limit`` jobs; in admit and place to prove the instance is shared."""

    name = "t-counter"
    stages = ("admit", "place")
    config_schema = {"type": "object", "additionalProperties": False, "required": ["limit"],
                     "properties": {"limit": {"type": "integer", "minimum": 1}}}

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        self.admitted = 0

    @hookimpl
    def atoll_admit(self, job: Job) -> Optional[Refusal]:
        if self.admitted >= self.config["limit"]:
            return Refusal(f"limit {self.config['limit']} reached", self.name)
        return None

    @hookimpl
    def atoll_place(self, job: Job, clusters: list[Cluster]) -> dict[str, dict[str, int]]:
        self.admitted += 1
        return {clusters[0].name: {t.name: t.replicas for t in job.tasks}}


class TFifo(Plugin):
    name = "t-fifo"
    stages = ("order",)

    @hookimpl
    def atoll_job_order(self, job: Job) -> tuple[int]:
        return (job.seq,)


class TBroken(Plugin):
    name = "t-broken"
    stages = ("admit",)

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        raise KeyError("oops")


class TFieldOnly(Plugin):
    """Raises InputError naming only its field, as a careless plugin might."""

    name = "t-field-only"
    stages = ("admit",)
    config_schema = {"type": "object", "properties": {"mode": {"type": "string"}}}

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        super().__init__(config, cel, where)
        if config.get("mode") == "bad":
            raise InputError("mode 'bad' is not supported", "spec.plugins.t-field-only.mode")


class TBadSchema(Plugin):
    name = "t-bad-schema"
    stages = ("admit",)
    config_schema = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}


class TBadHook(Plugin):
    name = "t-bad-hook"
    stages = ("admit",)

    @hookimpl
    def atoll_admit(self, job: Job, nonsense: int) -> None:
        return None


CATALOG = PluginCatalog({cls.name: PluginEntry(cls, "tests 0") for cls in
                         (TPriority, TCounter, TFifo, TBroken, TBadSchema, TBadHook, TFieldOnly)})

GOOD = """\
apiVersion: atoll.dev/v1alpha1
kind: SchedulingPolicy
metadata: {name: test}
spec:
  managedWorkloads:
    kinds: [batch/v1/Job]
    namespaces: {include: ["team-*"]}
  pipeline:
    enqueue: [t-priority]
    order: [t-priority, t-fifo]
    admit: [t-counter]
    place: [t-counter]
  plugins:
    t-priority:
      priority: "job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0)"
    t-counter: {limit: 2}
"""


def load(text: str) -> Policy:
    return load_policy_text(textwrap.dedent(text), "p.yaml", CATALOG)


def error(text: str) -> str:
    with pytest.raises(InputError) as info:
        load(text)
    return str(info.value)


def replace(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


# -- what a good policy gives ---------------------------------------------------------------------
def test_good_policy_fields_defaults_and_shared_instances() -> None:
    policy = load(GOOD)
    assert policy.name == "test" and policy.source == "p.yaml" and policy.placement_mode == "gate"
    assert len(policy.digest) == 64
    assert policy.managed_workloads == {"kinds": ["batch/v1/Job"], "namespaces": {"include": ["team-*"], "exclude": []}}
    assert policy.pipeline.describe() == {"enqueue": ["t-priority"], "order": ["t-priority", "t-fifo"],
                                          "admit": ["t-counter"], "place": ["t-counter"], "preempt": [], "recover": []}
    admit, place = policy.pipeline.stages["admit"][0], policy.pipeline.stages["place"][0]
    assert admit is place                                         # one instance shared by its stages
    assert policy.pipeline.stages["enqueue"][0] is policy.pipeline.stages["order"][0]
    prio = policy.pipeline.stages["enqueue"][0]
    assert prio.config == {"priority": "job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0)", "boost": 0}
    assert prio.where == "p.yaml: spec.plugins.t-priority"
    assert policy.raw["spec"]["placementMode"] == "gate"


def test_each_load_builds_fresh_instances_and_defaults_when_sections_are_missing() -> None:
    text = replace("  managedWorkloads:\n    kinds: [batch/v1/Job]\n    namespaces: {include: [\"team-*\"]}\n", "")
    a, b = load(text), load(text)
    assert a.pipeline.stages["admit"][0] is not b.pipeline.stages["admit"][0]
    assert a.managed_workloads["kinds"] == ["batch.volcano.sh/v1alpha1/Job", "batch/v1/Job", "apps/v1/Deployment"]
    assert a.managed_workloads["namespaces"] == {"include": [], "exclude": []}


def test_policy_runs_in_the_engine() -> None:
    engine = Engine(load(GOOD).pipeline)
    engine.upsert_cluster(Cluster("m1", allocatable=parse_resources({"cpu": "100"})))
    engine.upsert_queue(Queue("default"))
    for name, tier, prio in (("a", "dev", 5), ("b", "prod", 1), ("c", "dev", 9)):
        engine.submit(Job(id=name, name=name, priority=prio, labels={"tier": tier},
                          tasks=[Task("w", 1, 1, parse_resources({"cpu": "1"}))]))
    result = engine.cycle(0)
    assert [a.job_id for a in result.admitted] == ["b", "c"]      # prod boost first; the counter stops at 2
    assert engine.state.jobs["b"].priority == 1001
    assert "limit 2 reached" in engine.state.jobs["a"].pending_reason


def test_load_policy_reads_files_and_names_missing_ones(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD)
    assert load_policy(path, CATALOG).source == str(path)
    with pytest.raises(InputError, match=r"missing\.yaml: cannot read policy: No such file"):
        load_policy(tmp_path / "missing.yaml", CATALOG)


# -- YAML and document shape ----------------------------------------------------------------------
def test_yaml_syntax_error_has_line_and_column() -> None:
    message = error(replace("metadata: {name: test}", "metadata: {name: test"))
    assert message == "p.yaml: line 4, column 5: YAML syntax error: while parsing a flow mapping expected ',' or '}', " \
                      "but got ':'"


def test_duplicate_yaml_key_is_an_error() -> None:
    message = error(GOOD + "  plugins: {}\n")
    assert "p.yaml: line 17" in message and "duplicate key 'plugins' (first at line 13)" in message


@pytest.mark.parametrize("text, got", [("", "an empty document"), ("- a\n- b\n", "a list"), ("42", "a int")])
def test_non_mapping_document(text: str, got: str) -> None:
    assert error(text) == f"p.yaml: a policy must be a YAML mapping (apiVersion, kind, metadata, spec); got {got}"


def test_wrong_kind_and_missing_name() -> None:
    assert error(replace("kind: SchedulingPolicy", "kind: Policy")) == \
        "p.yaml: kind (line 2): must be 'SchedulingPolicy', got 'Policy'"
    assert error(replace("{name: test}", "{}")) == "p.yaml: metadata (line 3): 'name' is a required property"


def test_schema_violation_names_field_and_allowed_values() -> None:
    message = error(replace("spec:\n", "spec:\n  placementMode: gated\n"))
    assert message == "p.yaml: spec.placementMode (line 5): 'gated' is not one of ['gate', 'bind']"
    message = error(replace("kinds: [batch/v1/Job]", "kinds: [Job]"))
    assert message.startswith("p.yaml: spec.managedWorkloads.kinds[0] (line 6): 'Job' does not match")
    message = error(replace("spec:\n", "spec:\n  pipelines: {}\n"))
    assert "'pipelines' was unexpected" in message and "allowed: lookback, managedWorkloads, pipeline, placementMode, plugins" \
        in message


# -- pipeline -------------------------------------------------------------------------------------
def test_unknown_stage_with_suggestion() -> None:
    message = error(replace("    enqueue: [t-priority]", "    enqeue: [t-priority]"))
    assert message == ("p.yaml: spec.pipeline.enqeue (line 9): unknown stage 'enqeue' (did you mean 'enqueue'?); "
                       "stages: enqueue, order, admit, place, preempt, recover")


def test_unknown_plugin_lists_known_ones() -> None:
    message = error(replace("order: [t-priority, t-fifo]", "order: [t-priority, t-fifoo]"))
    assert message.startswith("p.yaml: spec.pipeline.order[1] (line 10): unknown plugin 't-fifoo' "
                              "(did you mean 't-fifo'?); known plugins: t-bad-hook, t-bad-schema, t-broken,")


def test_plugin_in_a_stage_it_does_not_declare() -> None:
    message = error(replace("admit: [t-counter]", "admit: [t-fifo, t-counter]"))
    assert message == "p.yaml: spec.pipeline.admit[0] (line 11): plugin 't-fifo' cannot be used in stage admit: " \
                      "it implements order only"


def test_duplicate_plugin_in_a_stage() -> None:
    message = error(replace("order: [t-priority, t-fifo]", "order: [t-fifo, t-priority, t-fifo]"))
    assert message == "p.yaml: spec.pipeline.order[2] (line 10): plugin 't-fifo' is listed twice in stage order"


def test_config_for_a_plugin_not_in_the_pipeline_is_an_error() -> None:
    message = error(replace("    t-counter: {limit: 2}", "    t-counter: {limit: 2}\n    t-broken: {}"))
    assert message == ("p.yaml: spec.plugins.t-broken (line 17): config for plugin 't-broken', which no stage of "
                       "spec.pipeline lists; list it in a stage or remove its config")
    message = error(replace("    t-counter: {limit: 2}", "    t-counter: {limit: 2}\n    t-fiffo: {}"))
    assert "(and no plugin is called 't-fiffo' (did you mean 't-fifo'?))" in message


# -- plugin configs -------------------------------------------------------------------------------
def test_plugin_config_schema_violation_names_the_field() -> None:
    message = error(replace("{limit: 2}", "{limit: 0}"))
    assert message == "p.yaml: spec.plugins.t-counter.limit (line 16): invalid config for plugin t-counter: " \
                      "0 is less than the minimum of 1"
    message = error(replace("{limit: 2}", "{}"))
    assert message == "p.yaml: spec.plugins.t-counter (line 16): invalid config for plugin t-counter: " \
                      "'limit' is a required property"
    message = error(replace("{limit: 2}", "{limit: 2, limt: 3}"))
    assert "spec.plugins.t-counter" in message and "'limt' was unexpected" in message and "allowed: limit" in message


def test_plugin_config_must_be_a_mapping() -> None:
    message = error(replace("{limit: 2}", "[2]"))
    assert message == "p.yaml: spec.plugins.t-counter (line 16): [2] is not of type 'object'"


def test_cel_errors_name_file_path_line_and_column() -> None:
    message = error(replace("\"job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0)\"", "'job.priority +'"))
    assert message.startswith("p.yaml: spec.plugins.t-priority.priority (line 15): CEL syntax error at column 14 in "
                              "'job.priority +'")
    message = error(replace("\"job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0)\"", "'job.prority'"))
    assert message.startswith("p.yaml: spec.plugins.t-priority.priority (line 15): 'job.prority': "
                              "no such field or key 'prority' at column 5; did you mean 'priority'?")
    message = error(replace("\"job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0)\"", "'job.priority > 1'"))
    assert message.startswith("p.yaml: spec.plugins.t-priority.priority (line 15): 'job.priority > 1' must return "
                              "int, returned bool")
    message = error(replace("\"job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0)\"", "'queue.priority'"))
    assert "unknown variable(s) ['queue'] (first at column 1); available here: ['job']" in message


def test_cel_default_is_compiled_too() -> None:
    assert load(replace("      priority: \"job.priority + (job.labels['tier'] == 'prod' ? 1000 : 0)\"\n",
                        "      boost: 3\n")).pipeline.stages["enqueue"][0].config["priority"] == "job.priority"


def test_plugin_init_crash_becomes_input_error_naming_the_plugin() -> None:
    message = error(replace("admit: [t-counter]", "admit: [t-counter, t-broken]"))
    assert message == "p.yaml: spec.plugins.t-broken: plugin t-broken (tests 0) failed to load its config: " \
                      "KeyError: 'oops'"


def test_plugin_with_broken_schema_or_hook_is_named() -> None:
    message = error(replace("admit: [t-counter]", "admit: [t-counter, t-bad-schema]"))
    assert message.startswith("p.yaml: plugin t-bad-schema (tests 0) ships a broken config schema: invalid JSON "
                              "Schema at properties/x/type")
    message = error(replace("admit: [t-counter]", "admit: [t-counter, t-bad-hook]"))
    assert message.startswith("p.yaml: plugin t-bad-hook (tests 0) has an invalid hook implementation:")
    assert "nonsense" in message


def test_plugin_input_error_without_the_file_gets_it() -> None:
    text = replace("admit: [t-counter]", "admit: [t-counter, t-field-only]") + "    t-field-only: {mode: bad}\n"
    assert error(text) == "p.yaml: spec.plugins.t-field-only.mode (line 17): mode 'bad' is not supported"


def test_validators_are_built_once_per_schema() -> None:
    from engine.policy import schema_check

    load(GOOD)
    before = dict(schema_check._VALIDATORS)
    load(GOOD)
    assert schema_check._VALIDATORS.keys() == before.keys()
    assert all(schema_check._VALIDATORS[k][1] is before[k][1] for k in before)
    assert schema_check.validator_for(TCounter.config_schema) is schema_check.validator_for(TCounter.config_schema)


def test_defaults_are_copied_not_shared() -> None:
    a, b = load(GOOD), load(GOOD)
    assert a.managed_workloads["namespaces"]["exclude"] is not b.managed_workloads["namespaces"]["exclude"]
    assert a.raw["spec"]["managedWorkloads"] is not b.raw["spec"]["managedWorkloads"]


# -- numbers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("old, new, where, what", [
    ("{limit: 2}", "{limit: .nan}", "spec.plugins.t-counter.limit (line 16)", ".nan"),
    ("{limit: 2}", "{limit: -.Inf}", "spec.plugins.t-counter.limit (line 16)", "-.inf"),
    ('{include: ["team-*"]}', '{include: ["team-*", .INF]}', "spec.managedWorkloads.namespaces.include[1] (line 7)",
     ".inf"),
    ("{limit: 2}", "{limit: 2, .NaN: 1}", "spec.plugins.t-counter (line 16)", "key .nan"),
])
def test_non_finite_numbers_are_refused_anywhere_with_path_and_line(old: str, new: str, where: str,
                                                                     what: str) -> None:
    """YAML's .nan/.inf pass a schema's ``minimum`` (NaN compares false) and then break the scheduler: refused
    before any schema, for every plugin (these are third-party test plugins) and every other field."""
    assert error(replace(old, new)) == f"p.yaml: {where}: {what} is not a finite number; NaN and infinities " \
                                       "are not allowed in a policy"


def test_strings_that_only_look_like_nan_or_inf_still_load() -> None:
    policy = load(replace('{include: ["team-*"]}', '{include: ["team-*", nan, "inf", ".nan", .infinity]}'))
    assert policy.managed_workloads["namespaces"]["include"] == ["team-*", "nan", "inf", ".nan", ".infinity"]
