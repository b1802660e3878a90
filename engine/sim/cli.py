"""``atoll simulate``: run a scenario with a policy (or compare several) and show what happened."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable, Optional

from rich.console import Console
from rich.table import Table

from engine._data import shipped
from engine.errors import InputError
from engine.policy import load_policy
from engine.pipeline import Pipeline
from engine.sim.driver import SimResult, simulate
from engine.sim.report import build_report
from engine.sim.scenario import Scenario, load_scenario

DEFAULT_POLICY = "policies/default.yaml"
_PROGRESS_MIN_JOBS = 200


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate", help="simulate a Karmada fleet with the same engine and policy as the controller",
        description="Run SCENARIO on a simulated Karmada fleet with the same engine and policy files as the "
                    "controller. With --compare, run several policies on the same scenario side by side.")
    p.add_argument("scenario", nargs="?", metavar="SCENARIO", help="scenario file (see schemas/scenario.schema.json)")
    p.add_argument("--policy", metavar="FILE", default=None, help=f"policy file (default {DEFAULT_POLICY})")
    p.add_argument("--compare", nargs="+", metavar="POLICY", help="policies to compare on SCENARIO (given last)")
    p.add_argument("--report", metavar="OUT.json", help="write the full JSON report (one per policy with --compare)")
    p.add_argument("--plot", metavar="OUT.png", help="write a PNG of backlog, utilisation and queue shares")
    p.add_argument("--seed", type=int, default=None, help="override spec.seed")
    p.set_defaults(func=run)


def resolve_policy(path: Optional[str]) -> Path:
    """The policy file; the default, or a shipped policy's name, is found in the package if not in the cwd."""
    return shipped(path or DEFAULT_POLICY, "policies")



def load_pipeline(path: Path) -> tuple[Pipeline, str]:
    """Load a policy file into its pipeline and name."""
    policy = load_policy(path)
    return policy.pipeline, str(policy.name)


PipelineLoader = Callable[[Path], tuple[Pipeline, str]]


def run(args: argparse.Namespace, loader: PipelineLoader = load_pipeline, console: Optional[Console] = None) -> int:
    console = console or Console()
    compare: list[str] = list(args.compare or [])
    scenario_path = args.scenario
    if scenario_path is None and compare:
        scenario_path = compare.pop()
    if scenario_path is None:
        raise InputError("give a SCENARIO file, e.g. atoll simulate scenarios/quickstart.yaml", "atoll simulate")
    if args.compare is not None and len(compare) < 2:
        raise InputError("--compare needs at least two policies and then the scenario", "atoll simulate")
    if compare and args.policy:
        raise InputError("use either --policy or --compare", "atoll simulate")
    scenario = load_scenario(shipped(scenario_path, "scenarios"), seed=args.seed)
    policies = [resolve_policy(p) for p in compare] if compare else [resolve_policy(args.policy)]
    pipelines = [loader(p) for p in policies]          # load (and validate) every policy before running any
    reports = []
    for index, (pipeline, name) in enumerate(pipelines):
        result = _simulate(scenario, pipeline, name, console)
        report = build_report(result)
        reports.append(report)
        if args.report:
            _write_json(report, _numbered(args.report, index, len(pipelines), name))
        if args.plot:
            from engine.sim.plot import write_plot
            write_plot(report, _numbered(args.plot, index, len(pipelines), name))
    if compare:
        console.print(compare_table(reports))
    else:
        print_summary(reports[0], console)
    return 0


def _numbered(path: str, index: int, count: int, name: str) -> str:
    if count == 1:
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}-{index + 1}-{name}{p.suffix}"))


def _write_json(report: dict[str, Any], path: str) -> None:
    try:
        Path(path).write_text(json.dumps(report, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write report: {exc.strerror}", path) from None


class _ProgressBar:
    """A rich progress bar over jobs done, only when a person is watching (a TTY) a long run."""

    def __init__(self, scenario: Scenario, policy: str, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

        self.bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("jobs done"), TextColumn("sim t={task.fields[t]}"), TimeElapsedColumn(),
                       console=console, transient=True)
        self.task = self.bar.add_task(f"{scenario.name} / {policy}", total=len(scenario.jobs), t="0s")
        self.bar.start()

    def __call__(self, now: float, done: int, total: int) -> None:
        self.bar.update(self.task, completed=done, t=f"{now:.0f}s")

    def stop(self) -> None:
        self.bar.stop()


def _simulate(scenario: Scenario, pipeline: Pipeline, name: str, console: Console) -> SimResult:
    if len(scenario.jobs) < _PROGRESS_MIN_JOBS or not console.is_terminal:
        return simulate(scenario, pipeline, name)
    bar = _ProgressBar(scenario, name, console)
    try:
        return simulate(scenario, pipeline, name, progress=bar)
    finally:
        bar.stop()


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}" if abs(value) >= 10 else f"{value:.3g}{unit}"
    return f"{value}{unit}"


def _work(resource: str, amount: float) -> str:
    """Resource-seconds in the resource's own units: cpu in core-seconds, memory in GiB-seconds."""
    if resource == "cpu":
        return f"{amount / 1000:,.0f} core-s"
    if resource == "memory":
        return f"{amount / 2**30:,.0f} GiB-s"
    return f"{amount:,.0f} unit-s"


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def print_summary(report: dict[str, Any], console: Console) -> None:
    s = report["summary"]
    jobs = s["jobs"]
    table = Table(title=f"atoll simulate: {report['scenario']} with policy {report['policy']} "
                        f"(members: {report['memberScheduler']}, status every {report['statusPeriod']:g}s)",
                  show_header=False, title_justify="left")
    table.add_column("metric", style="bold")
    table.add_column("value")
    states = ", ".join(f"{jobs[k]} {k.lower()}" for k in ("Succeeded", "Failed", "Pending", "Running") if jobs[k])
    table.add_row("jobs", f"{jobs['total']}: {states}")
    ratio = f" = {s['makespanRatio']:.3f} x lower bound {s['lowerBound']:,.0f}s" if s["makespanRatio"] else ""
    table.add_row("makespan", f"{_fmt(s['makespan'], 's')}{ratio}")
    table.add_row("partial gangs", str(s["partialGangs"]))
    table.add_row("attempts", ", ".join(f"{n} {k}" for k, n in s["attempts"]["byOutcome"].items()) or "0")
    table.add_row("wait (submit to start)", f"p50 {_fmt(s['wait']['p50'], 's')}, p95 {_fmt(s['wait']['p95'], 's')}, "
                                            f"max {_fmt(s['wait']['max'], 's')}")
    pre = s["preemption"]
    if pre["preemptions"]:
        lost = ", ".join(f"{k} {_work(k, v)}" for k, v in pre["workLost"].items())
        table.add_row("preemption", f"{pre['preemptions']} preemptions, {pre['jobsEvicted']} jobs evicted "
                                    f"(at most {pre['mostPerJob']} times one job); work lost: {lost or 'none'}, "
                                    f"{pre['gpuHoursLost']:g} GPU-hours")
    held, useful = s["utilisation"]["held"], s["utilisation"]["useful"]
    table.add_row("utilisation (held / useful)",
                  ", ".join(f"{name} {_pct(held[name])} / {_pct(useful[name])}" for name in held))
    sim = s["simulation"]
    table.add_row("simulation", f"{sim['wallSeconds']:.2f}s wall, {sim['cycles']} engine cycles, "
                                f"{sim['jobsExamined']} job examinations"
                                + (" (stopped at the horizon)" if sim["horizonReached"] else ""))
    console.print(table)
    if len(s["queues"]) > 1:
        qt = Table(title="queues: dominant share of the fleet", title_justify="left")
        for col in ("queue", "weight", "target", "mean share", "saturated share", "fraction", "off by"):
            qt.add_column(col, justify="right" if col != "queue" else "left")
        for name, q in s["queues"].items():
            qt.add_row(name, str(q["weight"]), _pct(q["targetFraction"]), _pct(q["meanShare"]),
                       _pct(q["saturatedMeanShare"]), _pct(q["saturatedFraction"]), _pct(q["deviationFromWeight"]))
        console.print(qt)


COMPARE_METRICS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("jobs succeeded", lambda s: s["jobs"]["Succeeded"]),
    ("jobs failed", lambda s: s["jobs"]["Failed"]),
    ("jobs never ran", lambda s: s["jobs"]["Pending"]),
    ("makespan (s)", lambda s: s["makespan"]),
    ("makespan / lower bound", lambda s: s["makespanRatio"]),
    ("partial gangs", lambda s: s["partialGangs"]),
    ("preemptions", lambda s: s["preemption"]["preemptions"]),
    ("jobs evicted", lambda s: s["preemption"]["jobsEvicted"]),
    ("cpu work lost (core-s)", lambda s: round(s["preemption"]["workLost"].get("cpu", 0.0) / 1000, 1)),
    ("GPU-hours lost", lambda s: s["preemption"]["gpuHoursLost"]),
    ("attempts", lambda s: s["attempts"]["total"]),
    ("wait p50 (s)", lambda s: s["wait"]["p50"]),
    ("wait p95 (s)", lambda s: s["wait"]["p95"]),
    ("cpu held", lambda s: s["utilisation"]["held"].get("cpu")),
    ("cpu useful", lambda s: s["utilisation"]["useful"].get("cpu")),
    ("worst queue off weight", lambda s: max((q["deviationFromWeight"] or 0.0 for q in s["queues"].values()),
                                                 default=None) if len(s["queues"]) > 1 else None),
    ("wall time (s)", lambda s: s["simulation"]["wallSeconds"]),
]


def compare_table(reports: list[dict[str, Any]]) -> Table:
    """Metrics side by side; every later policy also as a ratio to the first, in its cell."""
    base = reports[0]
    table = Table(title=f"atoll simulate --compare: {base['scenario']} (members: {base['memberScheduler']}); "
                        f"ratios are to {base['policy']}", title_justify="left")
    table.add_column("metric", style="bold", no_wrap=True)
    for r in reports:
        table.add_column(r["policy"], justify="right", no_wrap=True)
    for label, get in COMPARE_METRICS:
        values = [get(r["summary"]) for r in reports]
        cells = [_fmt(values[0])]
        for v in values[1:]:
            ratio = ""
            if isinstance(v, (int, float)) and isinstance(values[0], (int, float)) and values[0]:
                ratio = f" ({v / values[0]:.2f}x)"
            cells.append(_fmt(v) + ratio)
        table.add_row(label, *cells)
    return table
