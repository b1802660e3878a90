"""Every shipped policy in policies/ validates with the built-in plugins, and runs a small fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.scheduler import Engine
from engine.errors import InputError
from engine.model import Cluster, Job, JobState, Queue, Task
from engine.policy import load_policy
from engine.resources import parse_resources

ROOT = Path(__file__).resolve().parents[1]
POLICIES = sorted((ROOT / "policies").glob("*.yaml"))
SHIPPED = {"default.yaml", "karmada-fifo.yaml", "no-preemption.yaml", "volcano-global.yaml"}


def test_the_three_shipped_policies_exist() -> None:
    assert SHIPPED <= {p.name for p in POLICIES}


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_file_validates(path: Path) -> None:
    policy = load_policy(path)
    assert policy.name == path.stem
    assert policy.placement_mode in ("gate", "bind")
    assert policy.pipeline.stages["order"] and policy.pipeline.stages["place"]


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_file_schedules_a_small_fleet(path: Path) -> None:
    """Two clusters of 8 cpu; three 4-cpu jobs in two queues: all are admitted and fully placed."""
    engine = Engine(load_policy(path).pipeline)
    for name in ("m1", "m2"):
        engine.upsert_cluster(Cluster(name, allocatable=parse_resources({"cpu": "8", "memory": "32Gi", "pods": "110"})))
    for name in ("a", "b"):
        engine.upsert_queue(Queue(name))
    for i, queue in enumerate(("a", "b", "a")):
        engine.submit(Job(id=f"j{i}", name=f"j{i}", queue=queue, submit_time=float(i),
                          labels={"volcano.sh/queue-name": queue},
                          tasks=[Task("w", 2, 2, parse_resources({"cpu": "2", "memory": "1Gi"}))]))
    admitted = {a.job_id for a in engine.cycle(10).admitted}
    assert admitted == {"j0", "j1", "j2"}
    for job_id in admitted:
        placement = engine.state.jobs[job_id].placement
        assert placement and sum(sum(tasks.values()) for tasks in placement.values()) == 2
    assert all(engine.state.jobs[j].state is JobState.ADMITTED for j in admitted)


def big_gang_outcome(policy_file: str) -> tuple[JobState, dict[str, dict[str, int]] | None, str]:
    engine = Engine(load_policy(ROOT / "policies" / policy_file).pipeline)
    for name in ("m1", "m2"):
        engine.upsert_cluster(Cluster(name, allocatable=parse_resources({"cpu": "8", "memory": "32Gi", "pods": "110"})))
    engine.upsert_queue(Queue("default"))
    engine.submit(Job(id="gang", name="gang", tasks=[Task("w", 6, 6, parse_resources({"cpu": "2"}))]))
    engine.cycle(0)
    job = engine.state.jobs["gang"]
    return job.state, job.placement, job.pending_reason


def test_default_keeps_a_gang_whole_while_the_karmada_baselines_split_it() -> None:
    state, placement, reason = big_gang_outcome("default.yaml")       # 12 cpu gang, no cluster has more than 8
    assert state is JobState.PENDING and placement is None and reason
    for baseline in ("karmada-fifo.yaml", "volcano-global.yaml"):
        state, placement, _ = big_gang_outcome(baseline)
        assert state is JobState.ADMITTED and placement is not None, baseline
        assert set(placement) == {"m1", "m2"} and sum(sum(t.values()) for t in placement.values()) == 6, placement


def test_builtin_plugin_cel_error_names_file_path_line_and_column(tmp_path: Path) -> None:
    text = (ROOT / "policies" / "default.yaml").read_text()
    start = text.index("      priority: ")
    line = text[:start].count("\n") + 1
    bad = text[:start] + "      priority: \"job.priority + (\"\n" + text[text.index("\n", start) + 1:]
    path = tmp_path / "default.yaml"
    path.write_text(bad)
    with pytest.raises(InputError) as info:
        load_policy(path)
    assert str(info.value).startswith(f"{path}: spec.plugins.job-priority.priority (line {line}): "
                                      "CEL syntax error at column 16 in 'job.priority + ('")


def test_validate_cli_accepts_a_directory(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    assert main(["policy", "validate", str(ROOT / "policies")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"OK {p}" for p in POLICIES]


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_show_prints_a_valid_fixed_point(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`atoll policy show` output is itself a valid policy whose effective form is the same."""
    from engine.cli import main
    from engine.commands.policy_cmd import effective
    from engine.policy import load_policy_text

    assert main(["policy", "show", str(path)]) == 0
    shown = capsys.readouterr().out
    again = load_policy_text(shown, "shown.yaml")
    assert effective(again) == effective(load_policy(path))
    assert again.pipeline.describe() == load_policy(path).pipeline.describe()
