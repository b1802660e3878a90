"""One PNG a person would rather look at than read: backlog, cluster utilisation, queue shares over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.errors import InputError


def _window(report: dict[str, Any]) -> int:
    """Samples per minute of simulated time: enough to see trends, not status-tick jitter (a long run's samples
    are already means over ``timelineStep`` seconds, engine.sim.report.timeline)."""
    step = report.get("timelineStep") or report["statusPeriod"]
    return max(1, int(60 // max(step, 1e-9))) if len(report["timeline"]) > 120 else 1


def _smooth(values: list[float], window: int) -> list[float]:
    if window <= 1:
        return values
    out: list[float] = []
    total = 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def write_plot(report: dict[str, Any], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = report["timeline"]
    summary = report["summary"]
    times = [s["time"] / 60 for s in timeline]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(11, 10), sharex=True, constrained_layout=True)
    jobs = summary["jobs"]
    ratio = summary["makespanRatio"]
    fig.suptitle(
        f"{report['scenario']} — policy {report['policy']} — members {report['memberScheduler']}\n"
        f"{jobs['Succeeded']}/{jobs['total']} succeeded, {jobs['Failed']} failed, {jobs['Pending']} never ran; "
        f"makespan {summary['makespan']:.0f}s"
        + (f" = {ratio:.3f} x lower bound" if ratio else "")
        + f"; partial gangs {summary['partialGangs']}", fontsize=11)

    ax1.plot(times, [s["backlog"] for s in timeline], label="waiting for admission (engine)")
    ax1.plot(times, [s["waitingInMembers"] for s in timeline], label="admitted, gang not running (member)")
    ax1.plot(times, [s["running"] for s in timeline], label="running")
    ax1.set_ylabel("jobs")
    ax1.set_title("Backlog", loc="left", fontsize=10)
    ax1.legend(loc="upper right", fontsize=8)
    ax1.grid(alpha=0.3)

    clusters = sorted({c for s in timeline for c in s["clusterUtilisation"]})
    window = _window(report)
    series = {c: _smooth([100 * s["clusterUtilisation"].get(c, 0.0) for s in timeline], window) for c in clusters}
    for cluster in clusters:
        ax2.plot(times, series[cluster], label=cluster, linewidth=1, alpha=0.8)
    if len(clusters) > 1:
        mean = [sum(series[c][i] for c in clusters) / len(clusters) for i in range(len(times))]
        ax2.plot(times, mean, label="mean", color="black", linewidth=2)
    useful = _smooth([100 * s.get("usefulShare", 0.0) for s in timeline], window)
    ax2.plot(times, useful, label="fleet used by running jobs", color="black", linestyle=":", linewidth=2)
    ax2.set_ylabel("% (dominant resource)")
    ax2.set_ylim(0, 105)
    smoothing = f", {window * report['statusPeriod']:g}s moving average" if window > 1 else ""
    ax2.set_title(f"Utilisation: pods bound on nodes per cluster; dotted: fleet used by running jobs{smoothing}",
                  loc="left", fontsize=10)
    ax2.legend(loc="lower left", fontsize=8, ncol=min(len(clusters), 6))
    ax2.grid(alpha=0.3)

    queues = summary["queues"]
    for name, info in sorted(queues.items()):
        line, = ax3.plot(times, [100 * s["queueShare"].get(name, 0.0) for s in timeline],
                         label=f"{name} (weight {info['weight']})")
        if len(queues) > 1 and info["saturatedMeanShare"] is not None:
            total = sum(q["saturatedMeanShare"] or 0.0 for q in queues.values())
            ax3.axhline(100 * total * info["targetFraction"], color=line.get_color(), linestyle="--",
                        linewidth=0.8, alpha=0.7)
    ax3.set_ylabel("% of fleet (dominant)")
    ax3.set_xlabel("time (minutes)")
    title = "Per-queue dominant share (admitted)"
    if len(queues) > 1:
        title += "; dashed: weight-proportional split of the saturated total"
    ax3.set_title(title, loc="left", fontsize=10)
    ax3.legend(loc="upper right", fontsize=8)
    ax3.grid(alpha=0.3)
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise InputError(f"cannot write plot: {exc.strerror}", str(path)) from None
    finally:
        plt.close(fig)
