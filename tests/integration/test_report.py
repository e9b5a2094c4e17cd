"""The lineage page exported as one file (`lineage report`, written by `make demo`), opened from disk by a real
headless Chromium (Debian's package) with the network off."""

from __future__ import annotations

import json

import pytest

from include.lineage.api import report
from tests.support import chromium, tap_node

pytestmark = pytest.mark.integration


def _events_nodes(paths) -> tuple[set[str], set[str]]:
    """Jobs and datasets of the Airflow events, and the Spark jobs of the listener's (independent of the store)."""
    airflow, spark = set(), set()
    for path, found in ((paths.lineage_events, airflow), (paths.spark_lineage_events, spark)):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            event = json.loads(line)
            found.add(f"job:{event['job']['namespace']}:{event['job']['name']}")
            if found is airflow:
                for dataset in (event.get("inputs") or []) + (event.get("outputs") or []):
                    found.add(f"dataset:{dataset['namespace']}:{dataset['name']}")
    return airflow, spark


def test_exported_page_opens_from_disk_offline_and_shows_every_node(pipeline_run, tmp_path):
    executable = chromium("the exported page is opened from disk in a real browser")
    from playwright.sync_api import sync_playwright

    path = report.write_report(pipeline_run.paths, tmp_path / "lineage.html")
    assert "<script src=" not in path.read_text(), "every script must be inlined"
    requested: list[str] = []
    screenshot = pipeline_run.paths.var / "screenshots" / "lineage-report.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(offline=True, viewport={"width": 1600, "height": 900})
            page = context.new_page()
            page.on("request", lambda request: requested.append(request.url))
            page.goto(path.as_uri())
            page.wait_for_function("document.body.dataset.ready", timeout=60_000)
            assert page.evaluate("document.body.dataset.ready") == "true", page.inner_text("#error")
            visible = set(page.evaluate("window.lineageGraph.nodes().filter(n => n.visible()).map(n => n.id())"))
            page.check("#show-spark")
            with_spark = set(page.evaluate("window.lineageGraph.nodes().filter(n => n.visible()).map(n => n.id())"))
            raw = page.evaluate(
                "window.lineageGraph.nodes().filter(n => n.data('label') === 'nyc_taxi.yellow_taxi_raw').map(n => n.id())"
            )
            tap_node(page, raw[0])
            page.wait_for_selector("#detail-title")
            page.click("#impact-button")
            page.wait_for_function("window.lineageGraph.nodes('.impacted').length > 0")
            impacted = set(page.evaluate("window.lineageGraph.nodes('.impacted').map(n => n.data('fullName'))"))
            page.screenshot(path=str(screenshot))
        finally:
            browser.close()
    airflow_nodes, spark_jobs = _events_nodes(pipeline_run.paths)
    assert not airflow_nodes - visible, f"not drawn: {sorted(airflow_nodes - visible)}"
    assert spark_jobs and not spark_jobs - with_spark
    assert {"nyc_taxi.yellow_rides_hourly_actuals", "nyc_taxi.yellow_rides_hourly_forecast"} <= impacted
    assert [url for url in requested if not url.startswith("file://")] == [], "the exported page must need no network"
    assert screenshot.stat().st_size > 10_000


def test_exported_page_carries_the_run_comparison_of_the_two_forecast_models(pipeline_run, tmp_path):
    """The diff of the seasonal-naive and the weather forecast runs is in the file, naming weather_raw as new input."""
    html = report.write_report(pipeline_run.paths, tmp_path / "lineage.html").read_text()
    bundle = json.loads(html.split("window.LINEAGE_BUNDLE = ", 1)[1].split(";</script>", 1)[0].replace("<\\/", "</"))
    dag = next(n["id"] for n in bundle["graph"]["nodes"] if n["kind"] == "job" and n["name"] == "forecast_yellow_rides")
    runs = bundle["details"][dag]["runs"]
    assert len(runs) >= 2
    newer, older = runs[0]["id"], runs[1]["id"]
    diff = bundle["diffs"][f"{older}|{newer}"]
    added = {item["dataset"] for item in diff["changes"]["inputs"]["added"]}
    assert "nyc_taxi.weather_raw" in added, diff["changes"]["inputs"]
