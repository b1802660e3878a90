"""Report schema fields, the CLI's summary and --compare output, plot and report files."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from engine.errors import InputError
from engine.pipeline import Pipeline
from engine.sim import cli
from engine.sim.driver import simulate
from engine.sim.report import build_report, percentile
from tests.sim.helpers import PlaceAnywhere, nodes, pipeline, scenario

SCENARIO = f"""
clusters: [{{name: m1, nodes: {nodes(4)}}}, {{name: m2, nodes: {nodes(4)}}}]
queues: [{{name: a, weight: 1}}, {{name: b, weight: 2}}]
generators:
  - {{count: 10, namePrefix: ja, queue: a, duration: 60s, tasks: [{{name: w, replicas: 4, resources: {{cpu: "2"}}}}]}}
  - {{count: 10, namePrefix: jb, queue: b, duration: 60s, tasks: [{{name: w, replicas: 4, resources: {{cpu: "2"}}}}]}}
"""


def test_report_has_every_required_field() -> None:
    report = build_report(simulate(scenario(SCENARIO), pipeline(), "plain"))
    assert {"scenario", "policy", "makespan", "jobs", "summary"} <= set(report)
    assert report["policy"] == "plain" and report["scenario"] == "t"
    assert len(report["jobs"]) == 20
    job = report["jobs"][0]
    assert {"name", "queue", "state", "submitTime", "finishTime", "attempts"} <= set(job)
    attempt = job["attempts"][0]
    assert {"admitTime", "startTime", "endTime", "outcome", "placement"} <= set(attempt)
    assert attempt["placement"] == {"m1": {"w": 4}} and attempt["outcome"] == "Succeeded"
    s = report["summary"]
    for key in ("jobs", "makespan", "lowerBound", "makespanRatio", "partialGangs", "wait", "utilisation", "queues"):
        assert key in s
    assert s["jobs"]["Succeeded"] == 20 and s["partialGangs"] == 0
    assert set(s["wait"]) == {"p50", "p95", "max"}
    assert s["makespan"] >= s["lowerBound"] > 0 and s["makespanRatio"] >= 1
    assert set(s["queues"]) == {"a", "b"} and s["queues"]["b"]["targetFraction"] == pytest.approx(2 / 3, abs=1e-3)
    json.dumps(report)                                # serialisable


def test_reports_validate_against_the_published_schema() -> None:
    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "sim-report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for pipe in (pipeline(), pipeline(PlaceAnywhere({}, None))):
        report = json.loads(json.dumps(build_report(simulate(scenario(SCENARIO), pipe, "p"))))
        errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(report)]
        assert errors == []
    broken = json.loads(json.dumps(build_report(simulate(scenario(SCENARIO), pipeline(), "p"))))
    broken["jobs"][0]["state"] = "Lost"
    assert not validator.is_valid(broken)


def test_percentile_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    return parser.parse_args(["simulate", *argv])


def scenario_file(tmp_path: Path) -> Path:
    indented = "\n".join("  " + line for line in SCENARIO.strip("\n").splitlines())
    path = tmp_path / "s.yaml"
    path.write_text(f"apiVersion: atoll.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: cli-test}}\nspec:\n{indented}\n")
    return path


def loader(path: Path) -> tuple[Pipeline, str]:
    if path.stem == "anywhere":
        return pipeline(PlaceAnywhere({}, None)), "anywhere"
    return pipeline(), path.stem


def test_simulate_prints_a_summary_and_writes_report_and_plot(tmp_path: Path) -> None:
    console = Console(record=True, width=160)
    out, png = tmp_path / "r.json", tmp_path / "p.png"
    code = cli.run(args(str(scenario_file(tmp_path)), "--policy", "mine.yaml", "--report", str(out),
                        "--plot", str(png)), loader=loader, console=console)
    text = console.export_text()
    assert code == 0
    assert "cli-test with policy mine" in text and "20 succeeded" in text and "partial gangs" in text
    assert json.loads(out.read_text())["policy"] == "mine"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_prints_policies_side_by_side_with_ratios(tmp_path: Path) -> None:
    console = Console(record=True, width=200)
    code = cli.run(args("--compare", "plain.yaml", "anywhere.yaml", str(scenario_file(tmp_path)),
                        "--report", str(tmp_path / "r.json")), loader=loader, console=console)
    text = console.export_text()
    assert code == 0
    assert "plain" in text and "anywhere" in text and "ratios are to plain" in text
    row = next(line for line in text.splitlines() if "makespan / lower bound" in line)
    assert re.search(r"\(\d+\.\d\dx\)", row)                       # the ratio to the first policy
    assert (tmp_path / "r-1-plain.json").exists() and (tmp_path / "r-2-anywhere.json").exists()


def test_cli_usage_errors_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="at least two policies"):
        cli.run(args("--compare", "a.yaml", str(scenario_file(tmp_path))), loader=loader)
    with pytest.raises(InputError, match="give a SCENARIO"):
        cli.run(args(), loader=loader)


def test_missing_policy_loader_or_file_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        cli.run(args(str(scenario_file(tmp_path)), "--policy", str(tmp_path / "absent.yaml")))


def test_a_long_run_s_timeline_is_averaged_in_buckets_and_still_plots(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ``TIMELINE_MAX`` status ticks the report's timeline holds bucket means at an even step (a 40-day run
    wrote 65 MB of JSON): each sample is the mean of its ticks, the step says how far apart they are, the report
    still validates, and the plot and HTML page are still written from it."""
    from engine.sim import report as report_module
    from engine.sim.html import write_html
    from engine.sim.plot import write_plot

    result = simulate(scenario(SCENARIO), pipeline(), "p")
    ticks = result.timeline
    full = build_report(result)
    assert full["timelineStep"] == 10 and len(full["timeline"]) == len(ticks) > 7
    monkeypatch.setattr(report_module, "TIMELINE_MAX", 4)
    short = json.loads(json.dumps(build_report(result)))
    k = -(-len(ticks) // 4)
    assert k > 1 and short["timelineStep"] == 10 * k and len(short["timeline"]) == -(-len(ticks) // k) <= 4
    for i, sample in enumerate(short["timeline"]):
        bucket = ticks[i * k:(i + 1) * k]
        assert sample["time"] == bucket[0].time
        assert sample["running"] == round(sum(s.running for s in bucket) / len(bucket), 2)
        assert sample["queueShare"]["b"] == round(sum(s.queue_share["b"] for s in bucket) / len(bucket), 4)
    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "sim-report.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(short)) == []
    write_plot(short, tmp_path / "p.png")
    write_html([short], tmp_path / "r.html")
    assert (tmp_path / "p.png").stat().st_size > 0 and "<html" in (tmp_path / "r.html").read_text()


def test_a_negative_seed_is_a_usage_error_as_in_a_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["simulate", "scenarios/quickstart.yaml", "--seed", "-1"])
    assert exc.value.code == 2 and "--seed: must be 0 or more, got -1" in capsys.readouterr().err


def test_summary_stalled_row_reads_without_undefined(tmp_path: Path) -> None:
    """No attempt stalled: the row says so, not "0s in all, max undefined"; stalled attempts show their total and max."""
    out = tmp_path / "r.json"
    assert cli.run(args(str(scenario_file(tmp_path)), "--policy", "mine.yaml", "--report", str(out)),
                   loader=loader, console=Console(record=True, width=160)) == 0
    report = json.loads(out.read_text())

    def row(stalled: dict) -> str:
        report["summary"]["stalled"].update(stalled)
        console = Console(record=True, width=200)
        cli.print_summary(report, console)
        return next(line for line in console.export_text().splitlines() if "stalled after admission" in line)

    none = row({"attempts": 0, "beyondTwoStatusPeriods": 0, "seconds": 0.0, "maxSeconds": None, "neverPlaced": 0})
    assert "0 attempts" in none and "undefined" not in none and "in all" not in none
    some = row({"attempts": 3, "beyondTwoStatusPeriods": 1, "seconds": 42.0, "maxSeconds": 30.0, "neverPlaced": 2})
    assert "3 attempts (1 over two status periods), 42.0s in all, max 30.0s; 2 never placed" in some
