"""The dashboard and the HTML report in a real headless Chromium: rendered after JS ran, right rows and
numbers for a known engine state, live updates, escaped hostile input, no browser errors; screenshots."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest

from engine.dashboard.app import make_app
from engine.sim.driver import simulate
from engine.sim.html import write_html
from engine.sim.report import build_report
from tests.dashboard.browser import Server, full_screenshot, open_browser, require_browser, screenshot_dir, serve, \
    severe
from tests.dashboard.state import HOSTILE, job, known_source
from tests.sim.helpers import PlaceAnywhere, pipeline, scenario
from tests.sim.test_report_cli import SCENARIO


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshot_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    with open_browser() as driver:
        yield driver


@pytest.fixture()
def live() -> Iterator[tuple[Server, Any]]:
    source, engine, _ = known_source(hostile=True)
    for server in serve(make_app(source)):
        yield server, engine


def wait_for(browser: Any, condition: Any, timeout: float = 10.0) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(browser, timeout).until(condition)


def open_live(browser: Any, url: str) -> None:
    """Load a page and wait until its script connected the live stream (so the JS ran)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    browser.get(url)
    wait_for(browser, EC.text_to_be_present_in_element((By.ID, "status"), "live"))


def test_queues_page_rows_numbers_chart_and_live_update(browser: Any, live: tuple[Server, Any], shots: Path) -> None:
    from selenium.webdriver.common.by import By

    server, engine = live
    severe(browser)
    open_live(browser, server.url + "/queues")
    rows = browser.find_elements(By.CSS_SELECTOR, "#queues tbody tr")
    assert [r.get_attribute("data-queue") for r in rows] == ["prod", "research", "team-a", "team-b", "nowhere"]
    prod = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="prod"]')
    assert prod.find_element(By.CSS_SELECTOR, "span.share").text == "75.0%"
    assert prod.find_element(By.CSS_SELECTOR, "span.target").text == "66.7%"
    team_b = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="team-b"]')
    assert "starved" in team_b.text and "job requests cpu N, more than the fleet has free" in team_b.text
    wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#share-chart canvas"))
    assert browser.execute_script("return typeof uPlot") == "function"
    full_screenshot(browser, shots / "queues.png")

    server.call(lambda: engine.submit(job("late", "team-b", "2", at=60)))         # the fleet changes
    wait_for(browser, lambda b: b.find_element(By.CSS_SELECTOR, 'tr[data-queue="team-b"]')
             .get_attribute("data-pending") == "2")                              # the page follows, no reload
    assert browser.find_element(By.ID, "status").text.startswith("live")
    assert browser.find_elements(By.CSS_SELECTOR, "#share-chart canvas")        # chart redrawn after the swap
    assert severe(browser) == []


def test_jobs_page_filters_sorts_and_shows_hostile_names_as_text(browser: Any, live: tuple[Server, Any],
                                                                 shots: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    server, _ = live
    severe(browser)
    open_live(browser, server.url + "/jobs?state=pending&sort=submitted")
    ids = [r.get_attribute("data-job") for r in browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")]
    assert ids == ["default/b1", "default/lost", f"default/{HOSTILE}"]
    cells = browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")[0].find_elements(By.TAG_NAME, "td")
    assert cells[7].text == "1" and cells[9].text == "job requests cpu 4, more than the fleet has free"   # position, reason
    hostile = browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")[2].find_element(By.TAG_NAME, "a")
    assert hostile.text == f"default/{HOSTILE}"                                  # shown as text, not run
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text
    assert browser.execute_script("return document.querySelectorAll('#main script').length") == 0
    full_screenshot(browser, shots / "jobs.png")
    browser.find_element(By.LINK_TEXT, "priority").click()                       # sort by a header link
    wait_for(browser, lambda b: "sort=priority" in b.current_url)
    hostile_url = server.url + "/jobs/" + quote(f"default/{HOSTILE}", safe="/")
    open_live(browser, hostile_url)
    assert browser.find_element(By.ID, "job-id").text == f"default/{HOSTILE}"
    assert f"x<y={HOSTILE}" in browser.find_element(By.ID, "job").text
    assert severe(browser) == []


def test_job_detail_clusters_and_policy_pages(browser: Any, live: tuple[Server, Any], shots: Path) -> None:
    from selenium.webdriver.common.by import By

    server, _ = live
    severe(browser)
    open_live(browser, server.url + "/jobs/default/b1")
    verdicts = {r.get_attribute("data-cluster"): r.get_attribute("data-verdict")
                for r in browser.find_elements(By.CSS_SELECTOR, "#verdicts tbody tr")}
    assert verdicts == {"m1": "refused", "m2": "refused"}
    assert "free now: fleet cpu=0" in browser.find_element(By.ID, "explain").text
    full_screenshot(browser, shots / "job.png")
    open_live(browser, server.url + "/clusters")
    m2 = browser.find_element(By.CSS_SELECTOR, 'section[data-cluster="m2"]')
    assert m2.get_attribute("data-jobs") == "2"
    assert m2.find_element(By.CSS_SELECTOR, 'tr[data-resource="cpu"]').get_attribute("data-free") == "0"
    full_screenshot(browser, shots / "clusters.png")
    open_live(browser, server.url + "/policy")
    assert browser.find_element(By.ID, "policy-name").text == "default"
    assert "kind: SchedulingPolicy" in browser.find_element(By.ID, "policy-text").text
    full_screenshot(browser, shots / "policy.png")
    assert severe(browser) == []


def test_html_report_opens_from_file_and_draws_its_charts(browser: Any, tmp_path: Path, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    reports = [build_report(simulate(scenario(SCENARIO), pipeline(), "plain")),
               build_report(simulate(scenario(SCENARIO), pipeline(PlaceAnywhere({}, None)), "anywhere"))]
    reports[0]["jobs"][0]["name"] = HOSTILE
    path = tmp_path / "report.html"
    write_html(reports, path)
    severe(browser)
    browser.get(path.as_uri())
    wait_for(browser, lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-charts") == "4")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".chart canvas")) == 4
    assert browser.find_element(By.ID, "chart-status").text == "4 charts drawn."
    compare = {r.get_attribute("data-metric"): r.text for r in browser.find_elements(By.CSS_SELECTOR, "#compare tr")
               if r.get_attribute("data-metric")}
    assert compare["jobs succeeded"] == "jobs succeeded 20 20 (1.00x)"
    assert compare["all jobs completed"].endswith("yes yes")
    browser.find_elements(By.CSS_SELECTOR, "details.jobs summary")[0].click()      # closed when comparing
    assert browser.find_element(By.CSS_SELECTOR, "#jobs-0 tbody tr td").text == HOSTILE       # as text
    table = "#jobs-0"
    header = browser.find_elements(By.CSS_SELECTOR, f"{table} thead th")[4]                  # wait
    header.click()
    waits = [float(r.get_attribute("data-v") or "inf")
             for r in browser.find_elements(By.CSS_SELECTOR, f"{table} tbody tr td:nth-child(5)")]
    assert waits == sorted(waits)
    header.click()
    waits = [float(r.get_attribute("data-v") or "inf")
             for r in browser.find_elements(By.CSS_SELECTOR, f"{table} tbody tr td:nth-child(5)")]
    assert waits == sorted(waits, reverse=True)
    full_screenshot(browser, shots / "report.png")
    assert severe(browser) == []                                               # no CSP violation, no JS error


def test_bench_first_jobs_page_with_10000_pending(browser: Any, shots: Path) -> None:
    """A bench, not a timed assert: prints how long the first page of 10,000 pending jobs takes to load
    (server build + render + browser parse + JS), from the browser's navigation timing."""
    from selenium.webdriver.common.by import By

    from engine.dashboard.bench import backlog_source
    for server in serve(make_app(backlog_source(10_000))):
        open_live(browser, server.url + "/jobs?state=pending")
        timing = browser.execute_script(
            "const t = performance.getEntriesByType('navigation')[0]; return [t.responseEnd, t.domContentLoadedEventEnd]")
        rows = browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")
        assert len(rows) == 50 and "of 10000 matching" in browser.find_element(By.ID, "count").text
        print(f"\n10,000 pending jobs: first /jobs page response {timing[0]:.0f} ms, DOM ready {timing[1]:.0f} ms")
        start = time.perf_counter()
        open_live(browser, server.url + "/queues")
        print(f"10,000 pending jobs: /queues live in {1000 * (time.perf_counter() - start):.0f} ms")
