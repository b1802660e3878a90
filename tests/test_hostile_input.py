"""Hostile or careless input: alias bombs, deep nesting, oversized files and absurd amounts are refused with
one line before they cost memory, stack or time; random and mutated documents never give a traceback."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import InputError
from engine.kube.webhook import BadReview, ManagedSelector, review_bytes
from engine.policy import load_policy, load_policy_text
from engine.policy.cel import CelCompiler
from engine.policy.yaml_source import POLICY_LIMITS, load_yaml
from engine.resources import parse_quantity
from engine.sim import scenario as scenario_module
from engine.sim.scenario import load_scenario, load_scenario_text
from tests.test_policy import CATALOG, GOOD

CelCompiler()          # builds celpy's parser before hypothesis times anything

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = (ROOT / "scenarios" / "quickstart.yaml").read_text()


def bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": each anchor repeats the previous one ``width`` times (~350 bytes, 9^9 leaves)."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    "alias bomb": (bomb(), "alias bomb"),
    "alias bomb as merge keys": ("a: &a {x: 1, y: 2}\n" + "".join(
        f"b{i}: &b{i} {{<<: [{', '.join(['*a' if i == 0 else f'*b{i - 1}'] * 1)}], "
        + ", ".join(f"k{j}: {'*a' if i == 0 else f'*b{i - 1}'}" for j in range(8)) + "}\n" for i in range(9)),
        "alias bomb"),
    "100k-deep flow sequence": ("[" * 100_000 + "]" * 100_000, "nesting deeper than 64"),
    "100k-deep JSON object": ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nesting deeper than 64"),
    "deep block nesting": ("- " * 100_000 + "x", "nesting deeper than 64"),
    "recursive alias": ("a: &a {b: *a}\n", "recursive"),
    "oversized": ("a: " + "x" * POLICY_LIMITS.max_bytes, "larger than 1 MiB"),
    "oversized in multi-byte characters": ("a: " + "é" * (POLICY_LIMITS.max_bytes // 2), "larger than 1 MiB"),
    "impossible date": ("a: 2026-02-30\n", "day is out of range"),
    "5,000-digit integer": ("a: " + "9" * 5000 + "\n", "digits"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_policy_loader_refuses_hostile_documents_in_one_line(name: str) -> None:
    text, words = HOSTILE[name]
    with pytest.raises(InputError) as info:
        load_policy_text(text, "p.yaml", CATALOG)
    message = str(info.value)
    assert message.startswith("p.yaml") and words in message and "\n" not in message, message


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_scenario_loader_refuses_hostile_documents_in_one_line(name: str) -> None:
    text, words = HOSTILE[name]
    if name.startswith("oversized"):
        text, words = "a: " + "x" * scenario_module.LIMITS.max_bytes, "larger than 8 MiB"
    with pytest.raises(InputError) as info:
        load_scenario_text(text, "s.yaml")
    message = str(info.value)
    assert message.startswith("s.yaml") and words in message and "\n" not in message, message


def test_alias_bomb_is_refused_before_it_costs_memory() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(InputError):
            load_yaml(bomb(), "p.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"


def test_anchors_and_aliases_within_the_limit_still_work() -> None:
    assert load_yaml("a: &a {x: 1}\nb: *a\nc: {<<: *a, y: 2}\n", "p.yaml") == \
        {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1, "y": 2}}
    assert load_yaml("[" * 60 + "]" * 60, "p.yaml") is not None


def test_an_oversized_file_is_not_read_in_full(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:            # sparse: 64 GiB on paper, nothing on disk
        fh.truncate(64 << 30)
    for loader, words in ((load_policy, "larger than 1 MiB"), (load_scenario, "larger than 8 MiB")):
        with pytest.raises(InputError) as info:
            loader(big)
        assert str(info.value) == f"{big}: {'policy' if loader is load_policy else 'scenario'} is {words} " \
                                  "(the limit for this file)"


def test_unreadable_paths_are_one_line(tmp_path: Path) -> None:
    for path, words in ((tmp_path / "missing.yaml", "No such file"), (tmp_path, "Is a directory")):
        with pytest.raises(InputError) as info:
            load_policy(path)
        assert words in str(info.value)
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        load_scenario(binary)


@pytest.mark.parametrize("change, words", [
    ("count: 4\n          allocatable: {cpu: \"16\", memory: 64Gi, pods: \"110\", nvidia",
     "nodes in all clusters"),
    ("count: 20\n      namePrefix: a-batch", "jobs once generators are expanded"),
    ("replicas: 4, minAvailable: 4, resources: {cpu: \"4\", memory: 8Gi}", "pods (replicas over all jobs)"),
])
def test_scenario_expansion_budget_is_checked_before_expanding(change: str, words: str) -> None:
    huge = change.replace("count: 4", "count: 1000000000").replace("count: 20", "count: 1000000") \
        .replace("replicas: 4,", "replicas: 1000000000,")
    assert change in SCENARIO
    start = time.process_time()
    with pytest.raises(InputError) as info:
        load_scenario_text(SCENARIO.replace(change, huge, 1), "s.yaml")
    assert words in str(info.value) and str(info.value).startswith("s.yaml: spec.")
    assert time.process_time() - start < 5          # a budget check, not an expansion (which takes minutes)


def test_a_job_whose_pods_would_not_fit_in_memory_is_refused_before_it_runs() -> None:
    """One job of 9,000,000 replicas passed the old budget (10,000,000 pods) and the simulator built a Pod object
    per replica once it started: ~6 GiB, a MemoryError traceback under a 3 GiB limit. Every replica over all jobs
    may be live at once (a policy without a capacity plugin admits them all), so the budget is what fits."""
    change = "{name: master, replicas: 1, minAvailable: 1,"
    assert change in SCENARIO
    text = SCENARIO.replace(change, "{name: master, replicas: 3000000, minAvailable: 1,", 1)
    with pytest.raises(InputError) as info:
        load_scenario_text(text, "s.yaml")
    assert str(info.value) == "s.yaml: spec.jobs (line 25): 3,000,164 pods (replicas over all jobs); at most " \
                              "2,000,000 (the simulator keeps every pod of a running job in memory)"


@pytest.mark.parametrize("value", ["1e99999", "1e999999999", "9223372036854775808", 1e300, 10**30])
def test_absurd_quantities_are_input_errors(value: object) -> None:
    with pytest.raises(InputError, match="quantity"):
        parse_quantity(value, "memory", "x")


def test_deep_json_admission_review_is_a_bad_review() -> None:
    with pytest.raises(BadReview, match="nested too deeply"):
        review_bytes(b"[" * 100_000 + b"]" * 100_000, ManagedSelector())


# -- property tests: random and mutated documents ---------------------------------------------------------
# ``deadline`` bounds every example (hypothesis fails a test whose example takes longer, after re-running it):
# generous, because this machine is shared, but a hang or an expansion would blow through it.
PROPERTY = settings(max_examples=150, deadline=timedelta(seconds=20), suppress_health_check=[HealthCheck.too_slow])

YAML_BITS = st.sampled_from(["&a ", "*a", "&b ", "*b", "<<: *a", "[", "]", "{", "}", ": ", "- ", "\n", "\n  ",
                             "!!binary ", "!!python/object ", "? ", "'", '"', "|", ">", "#", "%YAML 1.1\n",
                             "---\n", "...", "~", "2026-02-30", "99999999999999999999", "1e999999", ",",
                             "\t", "\\", "\x00", "\ufeff", "é"])
NOISE = st.lists(YAML_BITS | st.text(max_size=4), max_size=12).map("".join)


def _only_input_errors(load: object, text: str, source: str) -> None:
    try:
        load(text, source)  # type: ignore[operator]
    except InputError as exc:
        message = str(exc)
        assert message.startswith(source) and "\n" not in message and "Traceback" not in message, message


def _load_policy(text: str, source: str) -> object:
    return load_policy_text(text, source, CATALOG)


@PROPERTY
@given(start=st.integers(0, len(GOOD)), length=st.integers(0, 30), noise=NOISE)
def test_mutated_policies_give_input_errors_only(start: int, length: int, noise: str) -> None:
    _only_input_errors(_load_policy, GOOD[:start] + noise + GOOD[start + length:], "p.yaml")


@PROPERTY
@given(start=st.integers(0, len(SCENARIO)), length=st.integers(0, 30), noise=NOISE)
def test_mutated_scenarios_give_input_errors_only(start: int, length: int, noise: str) -> None:
    _only_input_errors(load_scenario_text, SCENARIO[:start] + noise + SCENARIO[start + length:], "s.yaml")


def _anchored(depth: int, width: int, alias: bool) -> str:
    """A generated document: nested flow collections, optionally each level an alias-repeated anchor."""
    lines = ["l0: &l0 [x]"]
    for i in range(1, depth):
        item = f"*l{i - 1}" if alias else "[" * (i % 12) + "x" + "]" * (i % 12)
        lines.append(f"l{i}: &l{i} [{', '.join([item] * width)}]")
    return "\n".join(lines) + "\n"


@settings(PROPERTY, max_examples=60)
@given(depth=st.integers(1, 30), width=st.integers(1, 20), alias=st.booleans(),
       where=st.sampled_from(["policy", "scenario"]))
def test_generated_anchor_and_nesting_documents_give_input_errors_only(depth: int, width: int, alias: bool,
                                                                       where: str) -> None:
    text = _anchored(depth, width, alias)
    if where == "policy":
        _only_input_errors(_load_policy, text, "p.yaml")
    else:
        _only_input_errors(load_scenario_text, text, "s.yaml")


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=4), max_leaves=30)


@PROPERTY
@given(doc=JSONISH, where=st.sampled_from(["policy", "scenario"]))
def test_random_json_documents_give_input_errors_only(doc: object, where: str) -> None:
    import json

    text = json.dumps(doc)
    if where == "policy":
        _only_input_errors(_load_policy, text, "p.yaml")
    else:
        _only_input_errors(load_scenario_text, text, "s.yaml")


def test_hostile_files_on_disk_too(tmp_path: Path) -> None:
    for name, (text, words) in HOSTILE.items():
        path = tmp_path / f"{name.replace(' ', '-')}.yaml"
        path.write_text(text, encoding="utf-8")
        assert os.path.getsize(path) > 0
        with pytest.raises(InputError) as info:
            load_policy(path, CATALOG)
        assert words in str(info.value), (name, str(info.value))


# -- non-finite numbers in the shipped plugins' configs ------------------------------------------------------------
DEFAULT_POLICY = (ROOT / "policies" / "default.yaml").read_text()


@pytest.mark.parametrize("old, new, where", [
    ("      gracePeriod: 30s\n    reclaim:", "      gracePeriod: .nan\n    reclaim:",
     "spec.plugins.priority-preemption.gracePeriod (line 66): .nan"),
    ("      gracePeriod: 30s\n    reclaim:", "      gracePeriod: 30s\n      nominationTimeout: .NaN\n    reclaim:",
     "spec.plugins.priority-preemption.nominationTimeout (line 67): .nan"),
    ("minRuntime: 0s               # strict", "minRuntime: .inf               # strict",
     "spec.plugins.priority-preemption.minRuntime (line 64): .inf"),
    ("factor: 2", "factor: .inf", "spec.plugins.requeue-backoff.factor (line 74): .inf"),
    ("factor: 2", "factor: .nan", "spec.plugins.requeue-backoff.factor (line 74): .nan"),
    ("initialDelay: 10s", "initialDelay: .nan", "spec.plugins.requeue-backoff.initialDelay (line 73): .nan"),
    ("maxDelay: 600s", "maxDelay: -.inf", "spec.plugins.requeue-backoff.maxDelay (line 75): -.inf"),
])
def test_nan_and_infinity_in_plugin_configs_are_refused_at_load(old: str, new: str, where: str) -> None:
    """Each passed `atoll policy validate` and then broke at run time (gracePeriod .nan: "simulator made no
    progress"; initialDelay .nan: silently maxDelay)."""
    assert DEFAULT_POLICY.count(old) == 1, old
    with pytest.raises(InputError) as info:
        load_policy_text(DEFAULT_POLICY.replace(old, new), "default.yaml")
    assert str(info.value) == f"default.yaml: {where} is not a finite number; NaN and infinities are not " \
                              "allowed in a policy"


def test_finite_floats_in_plugin_configs_still_load() -> None:
    text = DEFAULT_POLICY.replace("factor: 2", "factor: 1.5").replace("initialDelay: 10s", "initialDelay: 2.5")
    config = load_policy_text(text, "default.yaml").raw["spec"]["plugins"]["requeue-backoff"]
    assert config["factor"] == 1.5 and config["initialDelay"] == 2.5


def test_a_configmap_edit_with_nan_keeps_the_running_policy() -> None:
    from engine.kube.controller import Controller
    from engine.kube.runner import Options, Runner

    def cm(text: str, rv: str) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "atoll-policy", "namespace": "atoll-system", "uid": "u1", "resourceVersion": rv},
                "data": {"policy.yaml": text}}

    runner = Runner(Options(policy_configmap="atoll-system/atoll-policy"))
    runner._on_configmap("ADDED", cm(DEFAULT_POLICY, "1"), None)
    assert runner.policy is not None
    runner.controller = Controller(runner.policy.pipeline, runner.policy.selector, runner.policy.mode)
    running, policy = runner.controller.engine.pipeline, runner.policy
    runner._on_configmap("MODIFIED", cm(DEFAULT_POLICY.replace("gracePeriod: 30s", "gracePeriod: .nan", 1), "2"), None)
    assert runner.controller.engine.pipeline is running and runner.policy is policy
