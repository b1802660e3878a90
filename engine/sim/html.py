"""``atoll simulate ... --html report.html``: one self-contained page for one run or a ``--compare``.

Everything is inside the file: the vendored chart library (uPlot, shipped as package data of
``engine.dashboard``), the CSS, the report's own script and the data (a non-executed
``application/json`` block, escaped by Jinja's ``tojson``). It opens from ``file://`` with no
network. Tables (summary, compare, waits per queue, reasons, jobs and attempts) are rendered here
from the same report dicts as the terminal table (``engine.sim.report``/``compare``), so they read
without JavaScript; the script draws the charts and makes the jobs table sortable.

The page carries a Content-Security-Policy ``<meta>`` that allows exactly its own inline scripts
and styles (by sha256), so nothing else can run even if a job name were to smuggle markup.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from engine.sim.compare import column_names, compare_rows

STATIC = Path(__file__).resolve().parents[1] / "dashboard" / "static"


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def chart_data(report: dict[str, Any]) -> dict[str, Any]:
    """What the charts need, column-wise (smaller than the timeline's dicts)."""
    timeline = report["timeline"]
    clusters = sorted({c for s in timeline for c in s["clusterUtilisation"]})
    queues = report["summary"]["queues"]
    return {
        "time": [s["time"] for s in timeline],
        "backlog": [s["backlog"] for s in timeline],
        "running": [s["running"] for s in timeline],
        "clusters": {c: [s["clusterUtilisation"].get(c) for s in timeline] for c in clusters},
        "queues": {q: [s["queueShare"].get(q) for s in timeline] for q in queues},
        "targets": {q: v["targetFraction"] for q, v in queues.items()},
    }


def render(reports: list[dict[str, Any]]) -> str:
    from engine.dashboard.app import duration, environment

    env = environment()
    env.filters["dur"] = duration
    names = column_names(reports)
    script = (STATIC / "vendor" / "uPlot.iife.min.js").read_text(encoding="utf-8") + "\n" + \
        (STATIC / "report.js").read_text(encoding="utf-8")
    style = (STATIC / "vendor" / "uPlot.min.css").read_text(encoding="utf-8") + "\n" + \
        (STATIC / "report.css").read_text(encoding="utf-8")
    runs = [{"name": name, "report": r, "summary": r["summary"]} for name, r in zip(names, reports)]
    data = {"runs": [{"name": name, "charts": chart_data(r)} for name, r in zip(names, reports)]}
    csp = (f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return env.get_template("report.html").render(
        runs=runs, compare=compare_rows(reports) if len(reports) > 1 else None, names=names, data=data,
        script=script, style=style, csp=csp, scenario=reports[0]["scenario"])


def write_html(reports: list[dict[str, Any]], path: str | Path) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(reports), encoding="utf-8")
