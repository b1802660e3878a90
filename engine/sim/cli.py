"""``atoll simulate``: run a scenario with a policy (or compare several) and show what happened."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Callable, Optional, Union

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from engine._data import shipped
from engine.commands.args import port
from engine.commands.output import console as output_console
from engine.errors import InputError, UsageError
from engine.policy import load_policy
from engine.pipeline import Pipeline
from engine.sim.compare import column_names, compare_rows
from engine.sim.driver import simulate
from engine.sim.outcome import SimResult
from engine.sim.report import build_report
from engine.sim.scenario import Scenario, load_scenario

DEFAULT_POLICY = "policies/default.yaml"
_PROGRESS_MIN_JOBS = 200


def _seed(text: str) -> int:
    """``--seed``: an integer, 0 or more (a scenario's ``spec.seed`` is refused below 0 too)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


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
    p.add_argument("--html", metavar="OUT.html", help="write one self-contained HTML report (charts, tables; "
                                                     "opens from file:// offline); with --compare, one for all")
    p.add_argument("--seed", type=_seed, default=None, help="override spec.seed (0 or more, as spec.seed)")
    p.add_argument("--placement-mode", choices=("policy", "gate", "bind"), default="policy",
                   help="gate: Atoll admits, the simulated karmada-scheduler places; bind: Atoll places; "
                        "policy (default): each policy's spec.placementMode")
    p.add_argument("--serve", action="store_true", help="run at --speed and serve the live dashboard meanwhile "
                                                        "(and after, until Ctrl-C)")
    p.add_argument("--speed", type=float, default=60.0, metavar="X",
                   help="with --serve: simulated seconds per wall second (default 60)")
    p.add_argument("--dashboard-port", type=port, default=8090, metavar="N", help="with --serve (default 8090; 0: any)")
    p.add_argument("--dashboard-address", default="127.0.0.1", metavar="ADDR",
                   help="with --serve: address to bind (default 127.0.0.1: this machine only)")
    p.set_defaults(func=run)


def resolve_policy(path: Optional[str]) -> Path:
    """The policy file; the default, or a shipped policy's name, is found in the package if not in the cwd."""
    return shipped(path or DEFAULT_POLICY, "policies")



def load_pipeline(path: Path) -> tuple[Pipeline, str, str]:
    """Load a policy file into its pipeline, name and placement mode."""
    policy = load_policy(path)
    return policy.pipeline, str(policy.name), str(policy.placement_mode or "gate")


PipelineLoader = Callable[[Path], Union[tuple[Pipeline, str], tuple[Pipeline, str, str]]]


def run(args: argparse.Namespace, loader: PipelineLoader = load_pipeline, console: Optional[Console] = None) -> int:
    console = console or output_console()
    prepare_outputs(getattr(args, "report", None), getattr(args, "plot", None))   # before minutes of simulation
    compare: list[str] = list(args.compare or [])
    scenario_path = args.scenario
    if scenario_path is None and compare:
        scenario_path = compare.pop()
    if scenario_path is None:
        raise UsageError("give a SCENARIO file, e.g. atoll simulate scenarios/quickstart.yaml", "atoll simulate")
    if args.compare is not None and len(compare) < 2:
        raise UsageError("--compare needs at least two policies and then the scenario", "atoll simulate")
    if compare and args.policy:
        raise UsageError("use either --policy or --compare", "atoll simulate")
    if getattr(args, "serve", False) and compare:
        raise UsageError("--serve runs one policy: use --policy, not --compare", "atoll simulate")
    if getattr(args, "serve", False) and not args.speed > 0:
        raise UsageError(f"--speed must be > 0, got {args.speed:g}", "atoll simulate --speed")
    scenario = load_scenario(shipped(scenario_path, "scenarios"), seed=args.seed)
    policies = [resolve_policy(p) for p in compare] if compare else [resolve_policy(args.policy)]
    pipelines = [loader(p) for p in policies]          # load (and validate) every policy before running any
    if getattr(args, "serve", False):
        return _serve(args, scenario, pipelines[0], policies[0], console)
    reports = []
    for index, loaded in enumerate(pipelines):
        pipeline, name = loaded[0], loaded[1]
        result = _simulate(scenario, pipeline, name, console, _mode(args, loaded))
        reports.append(_outputs(args, result, policies[index], index, len(pipelines)))
    if compare:
        console.print(compare_table(reports))
    else:
        print_summary(reports[0], console)
    if getattr(args, "html", None):
        _write_html(reports, args.html)
    return 0


def _outputs(args: argparse.Namespace, result: SimResult, policy: Path, index: int, count: int) -> dict[str, Any]:
    """The report of one run, written where asked (JSON, PNG)."""
    report = build_report(result, jobs=bool(args.report or getattr(args, "html", None)))
    report["policyFile"] = str(policy)
    if args.report:
        _write_json(report, _numbered(args.report, index, count, result.policy))
    if args.plot:
        from engine.sim.plot import write_plot
        write_plot(report, _numbered(args.plot, index, count, result.policy))
    return report


def _write_html(reports: list[dict[str, Any]], path: str) -> None:
    from engine.sim.html import write_html
    try:
        write_html(reports, path)
    except OSError as exc:
        raise InputError(f"cannot write HTML report: {exc.strerror}", path) from None


def _mode(args: argparse.Namespace, loaded: Any) -> str:
    """--placement-mode, or the policy's own spec.placementMode (a loader without it: bind)."""
    mode = getattr(args, "placement_mode", "policy") or "policy"
    if mode == "policy":
        mode = loaded[2] if len(loaded) > 2 else "bind"
    return str(mode)


def _serve(args: argparse.Namespace, scenario: Scenario, loaded: Any, policy: Path,
           console: Console) -> int:
    """Run the scenario paced at --speed with the live dashboard (engine/dashboard/simserve.py)."""
    import asyncio

    from engine.dashboard.simserve import policy_log, serve_simulation
    from engine.sim.driver import Simulation

    pipeline, name = loaded[0], loaded[1]
    sim = Simulation(scenario, pipeline, name, placement_mode=_mode(args, loaded))

    def announce(url: str) -> None:
        console.print(f"dashboard: {url} (simulating {scenario.name} at {args.speed:g}x; Ctrl-C to stop)")

    def done(result: SimResult) -> None:
        report = _outputs(args, result, policy, 0, 1)
        print_summary(report, console)
        if args.html:
            _write_html([report], args.html)
        console.print("simulation finished; the dashboard keeps serving its final state (Ctrl-C to stop)")

    try:
        asyncio.run(serve_simulation(sim, policy_log(policy, name), args.speed, args.dashboard_address,
                                     args.dashboard_port, announce, done))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise InputError(f"cannot serve the dashboard: {exc.strerror or exc}",
                         f"--dashboard-port {args.dashboard_port}") from None
    return 0


def prepare_outputs(*paths: Optional[str]) -> None:
    """Create the folders of output files and check they can be written, before any work is done."""
    for path in paths:
        if not path:
            continue
        target = Path(path)
        if target.is_dir():
            raise InputError("is a directory; give a file name", path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the folder {str(target.parent)!r}: {exc.strerror or exc}", path) from None
        if not os.access(target.parent, os.W_OK):
            raise InputError(f"cannot write to the folder {str(target.parent)!r}: permission denied", path)


def _numbered(path: str, index: int, count: int, name: str) -> str:
    if count == 1:
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}-{index + 1}-{name}{p.suffix}"))


def _write_json(report: dict[str, Any], path: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as out:     # streamed: no second copy of a large report
            json.dump(report, out, indent=1)
            out.write("\n")
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


def _simulate(scenario: Scenario, pipeline: Pipeline, name: str, console: Console, mode: str = "bind") -> SimResult:
    if len(scenario.jobs) < _PROGRESS_MIN_JOBS or not console.is_terminal:
        return simulate(scenario, pipeline, name, placement_mode=mode)
    bar = _ProgressBar(scenario, name, console)
    try:
        return simulate(scenario, pipeline, name, progress=bar, placement_mode=mode)
    finally:
        bar.stop()


UNDEFINED = "undefined"


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return UNDEFINED
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
    return UNDEFINED if value is None else f"{100 * value:.1f}%"


def print_summary(report: dict[str, Any], console: Console) -> None:
    s = report["summary"]
    jobs = s["jobs"]
    table = Table(title=f"atoll simulate: {report['scenario']} with policy {report['policy']} "
                        f"({report['placementMode']} mode, members: {report['memberScheduler']}, "
                        f"status every {report['statusPeriod']:g}s)",
                  show_header=False, title_justify="left")
    table.add_column("metric", style="bold")
    table.add_column("value")
    if not s["outcome"]["complete"]:
        table.add_row("[red]INCOMPLETE[/red]", "[red]" + ", ".join(s["outcome"]["problems"])
                      + ": the makespan covers only the jobs that finished[/red]")
    states = ", ".join(f"{jobs[k]} {k.lower()}" for k in ("Succeeded", "Failed", "Pending", "Running") if jobs[k])
    table.add_row("jobs", f"{jobs['total']}: {states}")
    ratio = f" = {s['makespanRatio']:.3f} x lower bound {s['lowerBound']:,.0f}s" if s["makespanRatio"] else ""
    table.add_row("makespan", f"{_fmt(s['makespan'], 's')}{ratio}")
    table.add_row("partial gangs", str(s["partialGangs"]))
    st = s["stalled"]
    # none stalled: no total and no "max undefined" to read
    stalled = (f"{st['attempts']} attempts ({st['beyondTwoStatusPeriods']} over two status periods), "
               f"{_fmt(st['seconds'], 's')} in all, max {_fmt(st['maxSeconds'], 's')}") if st["attempts"] else "0 attempts"
    table.add_row("stalled after admission", stalled + (f"; {st['neverPlaced']} never placed by karmada-scheduler"
                                                        if st["neverPlaced"] else ""))
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
    for name in held:
        table.add_row(f"{name} held / useful", f"{_pct(held[name])} / {_pct(useful.get(name))}")
    for item in s["pendingReasons"][:5]:
        table.add_row("waited because" if item is s["pendingReasons"][0] else "",
                      f"{item['jobs']} job{'' if item['jobs'] == 1 else 's'}: {escape(item['example'])}")
    sim = s["simulation"]
    table.add_row("simulation", f"{sim['wallSeconds']:.2f}s wall, {sim['cycles']} engine cycles, "
                                f"{sim['jobsExamined']} job examinations"
                                + (" (stopped at the horizon)" if sim["horizonReached"] else ""))
    if sim.get("pluginErrors"):
        table.add_row("[red]plugin errors[/red]", f"{sim['pluginErrors']} judgings of a job failed on a plugin's "
                                                  "exception (the jobs' reasons name it)")
    console.print(table)
    if len(s["queues"]) > 1:
        qt = Table(title="queues: dominant share of the fleet; target follows the queue hierarchy "
                         "(fraction and off-by are measured while every queue has a backlog)", title_justify="left")
        nested = any(q.get("parent") for q in s["queues"].values())
        for col in ("queue", "parent", "weight", "target", "mean share", "saturated share", "fraction", "off by",
                    "wait p50", "wait p95"):
            if col != "parent" or nested:
                qt.add_column(col, justify="right" if col not in ("queue", "parent") else "left")
        for name, q in s["queues"].items():
            parent = [escape(q.get("parent") or "")] if nested else []
            qt.add_row(escape(name), *parent, str(q["weight"]), _pct(q["targetFraction"]),
                       _pct(q["meanShare"]), _pct(q["saturatedMeanShare"]), _pct(q["saturatedFraction"]),
                       _pct(q["deviationFromWeight"]), _fmt(q["wait"]["p50"], "s"), _fmt(q["wait"]["p95"], "s"))
        console.print(qt)


def compare_table(reports: list[dict[str, Any]]) -> Table:
    """Metrics side by side (engine.sim.compare): the best of each row marked *, every later run
    also as a ratio to the first, in its cell."""
    base = reports[0]
    names = column_names(reports)
    table = Table(title=f"atoll simulate --compare: {base['scenario']} (members: {base['memberScheduler']}); "
                        f"ratios are to {names[0]}; * best (undefined never ranks; makespan only among "
                        f"runs that completed every job)", title_justify="left")
    table.add_column("metric", style="bold", no_wrap=True)
    for name in names:
        table.add_column(escape(name), justify="right", no_wrap=True)
    for row in compare_rows(reports):
        cells = []
        for cell in row["cells"]:
            text = _pct(cell["value"]) if row["percent"] else _fmt(cell["value"])
            if cell["ratio"] is not None:
                text += f" ({cell['ratio']:.2f}x)"
            if cell["note"]:
                text += f" [{cell['note']}]"
            cells.append(("[bold green]* " + escape(text) + "[/bold green]") if cell["best"] else escape(text))
        table.add_row(row["label"], *cells)
    return table
