"""``--html``: one self-contained, offline, escaped page whose inline code is pinned by its CSP."""

from __future__ import annotations

import base64
import html as markup
import hashlib
import json
import re
from pathlib import Path

from engine.sim.driver import simulate
from engine.sim.html import render
from engine.sim.report import build_report
from tests.sim.helpers import PlaceAnywhere, pipeline, scenario
from tests.sim.test_report_cli import SCENARIO, args, loader, scenario_file

HOSTILE = "<script>alert('x')</script>\"é🙂"


def reports() -> list[dict]:
    a = build_report(simulate(scenario(SCENARIO), pipeline(), "plain"))
    b = build_report(simulate(scenario(SCENARIO), pipeline(PlaceAnywhere({}, None)), "plain"))
    a["jobs"][0]["name"] = HOSTILE
    a["jobs"][0]["reason"] = HOSTILE
    return [a, b]


def test_one_file_offline_escaped_and_its_inline_code_pinned_by_csp() -> None:
    html = render(reports())
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&#34;é🙂" in html
    assert re.search(r"""(?:src|href)=["']?(?:https?:)?//""", html) is None          # nothing fetched
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp is not None
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert len(scripts) == 1 and len(styles) == 1 and "uPlot" in scripts[0]
    for code in scripts + styles:
        digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in markup.unescape(csp.group(1))
    assert "unsafe-inline" not in markup.unescape(csp.group(1))
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert blob is not None
    data = json.loads(blob.group(1))
    assert [r["name"] for r in data["runs"]] == ["plain #1", "plain #2"]        # same policy name twice
    assert set(data["runs"][0]["charts"]["queues"]) == {"a", "b"}
    assert data["runs"][0]["charts"]["targets"] == {"a": 0.3333, "b": 0.6667}


def test_cli_writes_one_html_for_a_compare(tmp_path: Path) -> None:
    from engine.sim import cli
    out = tmp_path / "r.html"
    code = cli.run(args("--compare", "plain.yaml", "anywhere.yaml", str(scenario_file(tmp_path)), "--html", str(out)),
                   loader=loader)
    html = out.read_text()
    assert code == 0 and 'id="compare"' in html and 'data-policy="plain"' in html and 'data-policy="anywhere"' in html
    assert html.count('class="chart"') == 4 and 'id="jobs-1"' in html
    first = re.search(r'<tr data-job="default/ja-0">(.*?)</tr>', html, re.S)
    assert first is not None and first.group(1).count('data-v="0.0">0.0<') == 2   # submitted 0, started 0: wait 0
