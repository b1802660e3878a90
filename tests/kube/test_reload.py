"""Policy hot reload from the ConfigMap: a valid edit switches the pipeline, an invalid one keeps it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InputError
from engine.kube import metrics, policy_source
from engine.kube.controller import Controller
from engine.kube.plan import Event
from engine.kube.runner import Options, Runner
from engine.pipeline import Pipeline

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def cm(text: str, rv: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "atoll-policy", "namespace": "atoll-system", "uid": "u1", "resourceVersion": rv},
            "data": {"policy.yaml": text}}


def test_valid_edit_switches_pipeline_and_invalid_edit_keeps_it() -> None:
    runner = Runner(Options(policy_configmap="atoll-system/atoll-policy"))
    runner._on_configmap("ADDED", cm((POLICIES / "default.yaml").read_text(), "1"), None)
    assert runner.policy is not None and runner.policy.name == "default"
    runner.controller = Controller(runner.policy.pipeline, runner.policy.selector, runner.policy.mode)
    generation = metrics.POLICY_GENERATION._value.get()
    runner._on_configmap("MODIFIED", cm((POLICIES / "karmada-fifo.yaml").read_text(), "2"), None)
    assert runner.controller.engine.pipeline.describe()["order"] == ["fifo"]
    assert metrics.POLICY_GENERATION._value.get() == generation + 1
    loaded = [i for i in runner.controller.pending if isinstance(i, Event)]
    assert loaded[-1].reason == "PolicyLoaded"

    errors = metrics.RELOAD_ERRORS._value.get()
    running: Pipeline = runner.controller.engine.pipeline
    runner._on_configmap("MODIFIED", cm("spec:\n  pipeline:\n    order: [no-such-plugin]\n", "3"), None)
    assert runner.controller.engine.pipeline is running
    assert metrics.RELOAD_ERRORS._value.get() == errors + 1
    rejected = [i for i in runner.controller.pending if isinstance(i, Event)][-1]
    assert rejected.reason == "PolicyRejected" and rejected.type == "Warning"
    assert rejected.involved == {"apiVersion": "v1", "kind": "ConfigMap", "name": "atoll-policy",
                                 "namespace": "atoll-system", "uid": "u1"}
    assert "configmap atoll-system/atoll-policy: policy.yaml" in rejected.message


def test_deleted_configmap_keeps_the_policy_and_says_so_until_recreated() -> None:
    runner = Runner(Options(policy_configmap="atoll-system/atoll-policy"))
    text = (POLICIES / "default.yaml").read_text()
    runner._on_configmap("ADDED", cm(text, "1"), None)
    assert runner.policy is not None
    runner.controller = Controller(runner.policy.pipeline, runner.policy.selector, runner.policy.mode)
    running = runner.controller.engine.pipeline
    runner._on_configmap("DELETED", None, cm(text, "1"))
    assert runner.controller.engine.pipeline is running
    (deleted,) = [i for i in runner.controller.pending if isinstance(i, Event)]
    assert deleted.reason == "PolicyDeleted" and deleted.type == "Warning" and "keeps running" in deleted.message
    runner._on_configmap("ADDED", cm(text, "5"), None)           # recreated with the same text
    assert runner.controller.engine.pipeline is running
    restored = [i for i in runner.controller.pending if isinstance(i, Event)][-1]
    assert restored.reason == "PolicyLoaded" and "recreated" in restored.message and "unchanged" in restored.message
    runner._on_configmap("MODIFIED", cm(text, "6"), None)        # nothing new: no Event
    assert len([i for i in runner.controller.pending if isinstance(i, Event)]) == 2


# -- every way a reload can fail: Event + metric + the running policy stays ------------------------------



BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))


def _running_runner() -> Runner:
    runner = Runner(Options(policy_configmap="atoll-system/atoll-policy"))
    runner._on_configmap("ADDED", cm((POLICIES / "default.yaml").read_text(), "1"), None)
    assert runner.policy is not None
    runner.controller = Controller(runner.policy.pipeline, runner.policy.selector, runner.policy.mode)
    return runner


def _assert_rejected(runner: Runner, errors_before: float, running: Pipeline, *words: str) -> None:
    assert runner.controller is not None
    assert runner.controller.engine.pipeline is running
    assert runner.policy is not None and runner.policy.pipeline is running
    assert metrics.RELOAD_ERRORS._value.get() == errors_before + 1
    events = [i for i in runner.controller.pending if isinstance(i, Event)]
    assert events and events[-1].reason == "PolicyRejected" and events[-1].type == "Warning"
    assert events[-1].involved["name"] == "atoll-policy" and events[-1].involved["namespace"] == "atoll-system"
    for word in words:
        assert word in events[-1].message, events[-1].message
    assert "previous policy keeps running" in events[-1].message


def _with_data(data: Any, rv: str = "2") -> dict[str, Any]:
    obj = cm("", rv)
    obj["data"] = data
    return obj


@pytest.mark.parametrize("name, new, words", [
    ("schema", cm("spec:\n  pipeline:\n    order: [no-such-plugin]\n", "2"), ["policy.yaml"]),
    ("alias bomb", cm(BOMB, "2"), ["alias bomb", "line"]),
    ("100k-deep flow nesting", cm("[" * 100_000 + "]" * 100_000, "2"), ["nesting deeper than 64"]),
    ("100k-deep JSON object", cm('{"a": ' * 100_000 + "1" + "}" * 100_000, "2"), ["nesting deeper"]),
    ("oversized", cm("a: " + "x" * (1 << 20), "2"), ["larger than 1 MiB"]),
    ("recursive alias", cm("a: &a [*a]\n", "2"), ["recursive"]),
    ("not UTF-8 safe value", cm("a: 2026-02-30\n", "2"), ["day is out of range"]),
    ("no policy.yaml key", _with_data({"other.yaml": "x"}), ["no key policy.yaml", "other.yaml"]),
    ("no data", _with_data(None), ["no key policy.yaml"]),
    ("data not a map", _with_data(["x"]), ["no key policy.yaml"]),
    ("policy.yaml not a string", _with_data({"policy.yaml": 3}), ["no key policy.yaml"]),
])
def test_every_invalid_edit_emits_event_and_metric_and_keeps_policy(name: str, new: dict[str, Any],
                                                                      words: list[str]) -> None:
    runner = _running_runner()
    assert runner.controller is not None
    running = runner.controller.engine.pipeline
    errors = metrics.RELOAD_ERRORS._value.get()
    runner._on_configmap("MODIFIED", new, None)
    _assert_rejected(runner, errors, running, *words)


@pytest.mark.parametrize("exc", [RuntimeError("plugin bug"), RecursionError("deep"), MemoryError(),
                                 TypeError("bad")])
def test_unexpected_loader_failure_is_a_rejection_not_a_crash(exc: BaseException,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    runner = _running_runner()
    assert runner.controller is not None
    running = runner.controller.engine.pipeline

    def boom(text: str, source: str) -> Any:
        raise exc

    monkeypatch.setattr(policy_source, "load", boom)
    errors = metrics.RELOAD_ERRORS._value.get()
    runner._on_configmap("MODIFIED", cm("anything", "2"), None)
    _assert_rejected(runner, errors, running, type(exc).__name__)


def test_same_bad_text_is_rejected_once_and_a_fix_then_loads() -> None:
    runner = _running_runner()
    assert runner.controller is not None
    errors = metrics.RELOAD_ERRORS._value.get()
    runner._on_configmap("MODIFIED", cm(BOMB, "2"), None)
    runner._on_configmap("MODIFIED", cm(BOMB, "3"), None)          # e.g. a label edit: same text
    assert metrics.RELOAD_ERRORS._value.get() == errors + 1
    runner._on_configmap("MODIFIED", cm((POLICIES / "karmada-fifo.yaml").read_text(), "4"), None)
    assert runner.controller.engine.pipeline.describe()["order"] == ["fifo"]


class _FakeKube:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        self.events.append((namespace, body))


def test_invalid_policy_at_start_posts_the_event_before_exiting() -> None:
    runner = Runner(Options(policy_configmap="atoll-system/atoll-policy"))
    errors = metrics.RELOAD_ERRORS._value.get()
    runner._on_configmap("ADDED", cm(BOMB, "1"), None)
    assert runner.policy is None and metrics.RELOAD_ERRORS._value.get() == errors + 1
    kube = _FakeKube()
    runner.kube = kube  # type: ignore[assignment]
    asyncio.run(runner._send_early_events())
    assert [(ns, body["reason"], body["involvedObject"]["name"]) for ns, body in kube.events] == \
        [("atoll-system", "PolicyRejected", "atoll-policy")]
    assert "no policy is running yet" in kube.events[0][1]["message"]


def test_rejection_before_the_first_cycle_reaches_the_controller() -> None:
    runner = Runner(Options(policy_configmap="atoll-system/atoll-policy"))
    runner._on_configmap("ADDED", cm((POLICIES / "default.yaml").read_text(), "1"), None)
    runner._on_configmap("MODIFIED", cm(BOMB, "2"), None)        # between the relist and lead()
    assert [e.reason for e in runner.early_events] == ["PolicyRejected"]
    controller = runner._start_controller()
    assert [e.reason for e in controller.pending if isinstance(e, Event)] == ["PolicyRejected"]
    assert runner.early_events == []
    with pytest.raises(InputError):
        policy_source.load(BOMB, "x")
