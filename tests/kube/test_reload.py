"""Policy hot reload from the ConfigMap: a valid edit switches the pipeline, an invalid one keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.kube import metrics
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
