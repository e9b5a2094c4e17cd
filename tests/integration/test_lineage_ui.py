"""Lineage inside the Airflow UI, as a user sees it: `make airflow SAMPLE_DATA=1`, both ingest DAGs triggered, the
forecast started by its Assets, then a headless Chromium (Debian's package) logged into Airflow opens the Lineage
page (the plugin's view in Airflow's navigation) and the Lineage tab of the forecast DAG.

One running Airflow for the whole module (``pipeline ui --sample-data`` in a ``var/`` of its own); screenshots are
kept under that ``var/screenshots/``.
"""

from __future__ import annotations

import json
import re

import pytest
import requests

from include.core import settings
from tests.integration.running_airflow import FORECAST_DAG, RunningAirflow
from tests.support import chromium

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # airflow standalone and three DAG runs on 2 cores

RAW_TABLE = "nyc_taxi.yellow_taxi_raw"


@pytest.fixture(scope="module")
def airflow(user_runs):
    """The running Airflow and the runs a user started there, shared with test_airflow_ui (one set per session)."""
    for dag_id, run in user_runs.finished.items():
        assert run["state"] == "success", f"{dag_id}; log {user_runs.airflow.log_path}"
    assert user_runs.forecast["state"] == "success", f"forecast; log {user_runs.airflow.log_path}"
    return user_runs.airflow


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _airflow_nodes(airflow: RunningAirflow) -> set[str]:
    """Every job and dataset named by the Airflow events of the runs (independent of the store)."""
    nodes = set()
    for event in _events(airflow.paths.lineage_events):
        nodes.add(f"job:{event['job']['namespace']}:{event['job']['name']}")
        for dataset in (event.get("inputs") or []) + (event.get("outputs") or []):
            nodes.add(f"dataset:{dataset['namespace']}:{dataset['name']}")
    return nodes


def _spark_jobs(airflow: RunningAirflow) -> set[str]:
    return {f"job:{e['job']['namespace']}:{e['job']['name']}" for e in _events(airflow.paths.spark_lineage_events)}


def _current_snapshot(airflow: RunningAirflow, table: str) -> dict:
    """The table's current snapshot as Iceberg's own metadata says (the newest metadata file of its folder)."""
    folder = airflow.paths.warehouse / settings.ICEBERG_NAMESPACE / table / "metadata"
    newest = max(folder.glob("*.metadata.json"), key=lambda path: int(re.match(r"(\d+)", path.name).group(1)))
    metadata = json.loads(newest.read_text())
    return next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])


def test_lineage_is_not_served_to_anonymous_users(airflow):
    base = f"{airflow.base_url}/lineage"
    for path in (
        "/ui/graph",
        f"/ui/node?id={RAW_TABLE}",
        f"/api/v1/lineage?nodeId={RAW_TABLE}",
        "/api/v1/health",
        "/assets/cytoscape.min.js",
    ):
        assert requests.get(base + path, timeout=30).status_code == 401, path
    assert requests.post(base + "/api/v1/lineage", json={}, timeout=30).status_code == 401
    forged = requests.get(base + "/ui/graph", headers={"Authorization": "Bearer not-a-token"}, timeout=30)
    assert forged.status_code in (401, 403)
    page = requests.get(base + "/", allow_redirects=False, timeout=30)
    assert page.status_code == 303 and "/auth/login" in page.headers["location"]
    authorized = requests.get(
        base + "/api/v1/lineage",
        params={"nodeId": RAW_TABLE, "depth": 3},
        headers={"Authorization": f"Bearer {airflow.token()}"},
        timeout=60,
    )
    assert authorized.status_code == 200
    ids = {node["id"] for node in authorized.json()["graph"]}
    assert any(node.endswith("nyc_taxi/yellow_rides_hourly_actuals") for node in ids), ids


def test_plugin_registers_a_navigation_entry_and_a_dag_tab(airflow):
    plugins = airflow.api("GET", "plugins")["plugins"]
    views = {
        view["url_route"]: view
        for plugin in plugins
        if plugin["name"] == "lineage_ui"
        for view in plugin["external_views"]
    }
    assert views["lineage"]["destination"] == "nav" and views["lineage"]["href"] == "/lineage/"
    assert views["dag-lineage"]["destination"] == "dag" and "{DAG_ID}" in views["dag-lineage"]["href"]


@pytest.fixture(scope="module")
def browser_page(airflow):
    executable = chromium("the Lineage page inside Airflow's UI is checked in a real browser")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1700, "height": 1000})
            airflow.log_in(page, "/plugin/lineage", landed="**/plugin/lineage")
            yield page
        finally:
            browser.close()


def _lineage_frame(page, url_part: str = "/lineage/"):
    """The plugin's page, which Airflow shows in an iframe of its own UI, once its graph is drawn."""
    page.wait_for_selector("iframe", timeout=60_000)
    for _ in range(120):
        # the iframe's own document (the UI mirrors the iframe's path into its own URL, so skip the main frame)
        frame = next((f for f in page.frames if f is not page.main_frame and url_part in f.url), None)
        if frame is not None:
            frame.wait_for_function("document.body && document.body.dataset.ready", timeout=60_000)
            assert frame.evaluate("document.body.dataset.ready") == "true", frame.inner_text("#error")
            return frame
        page.wait_for_timeout(500)
    raise AssertionError(f"no frame with {url_part}: {[f.url for f in page.frames]}")


def _visible_nodes(frame) -> set[str]:
    return set(frame.evaluate("window.lineageGraph.nodes().filter(n => n.visible()).map(n => n.id())"))


def _click_node(page, frame, node_id: str) -> None:
    """A real mouse click on the node where Cytoscape drew it."""
    x, y = frame.evaluate(
        """id => { const n = window.lineageGraph.getElementById(id); const p = n.renderedPosition();
                   const box = document.getElementById('graph').getBoundingClientRect(); return [p.x + box.left, p.y + box.top]; }""",
        node_id,
    )
    frame_box = page.locator("iframe").bounding_box()
    page.mouse.click(frame_box["x"] + x, frame_box["y"] + y)


def _node_id(frame, label: str) -> str:
    ids = frame.evaluate(
        "label => window.lineageGraph.nodes().filter(n => n.data('label') === label).map(n => n.id())", label
    )
    assert len(ids) == 1, (label, ids)
    return ids[0]


def test_page_shows_every_job_and_dataset_of_the_runs_as_a_node(airflow, browser_page):
    frame = _lineage_frame(browser_page)
    screenshot = airflow.paths.var / "screenshots" / "lineage-graph.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    browser_page.screenshot(path=str(screenshot))
    expected = _airflow_nodes(airflow)
    assert len(expected) > 20
    missing = expected - _visible_nodes(frame)
    assert not missing, f"jobs and datasets of the runs not drawn: {sorted(missing)}"
    kinds = frame.evaluate("window.lineageGraph.nodes().map(n => [n.id(), n.hasClass('dataset'), n.hasClass('job')])")
    for node_id, is_dataset, is_job in kinds:
        assert (is_dataset, is_job) == (node_id.startswith("dataset:"), node_id.startswith("job:")), node_id
    frame.check("#show-spark")
    spark = _spark_jobs(airflow)
    assert spark and not spark - _visible_nodes(frame), "the Spark applications and jobs must appear when asked for"
    frame.uncheck("#show-spark")


def test_a_click_on_the_raw_table_opens_its_iceberg_snapshot(airflow, browser_page):
    frame = _lineage_frame(browser_page)
    _click_node(browser_page, frame, _node_id(frame, RAW_TABLE))
    frame.wait_for_selector("#detail-title", timeout=30_000)
    assert frame.inner_text("#detail-title") == RAW_TABLE
    snapshot = _current_snapshot(airflow, "yellow_taxi_raw")
    newest = frame.inner_text(".snapshot-id >> nth=0")
    assert str(snapshot["snapshot-id"]) in newest and "(current)" in newest
    assert frame.inner_text("#stat-rows").replace(",", "") == snapshot["summary"]["added-records"]
    assert "tpep_pickup_datetime" in frame.inner_text("#detail-body")
    assert "COMPLETED" in frame.inner_text("#detail-body")
    browser_page.screenshot(path=str(airflow.paths.var / "screenshots" / "lineage-detail.png"))


def test_impact_of_the_raw_table_highlights_actuals_models_and_forecast(airflow, browser_page):
    frame = _lineage_frame(browser_page)
    _click_node(browser_page, frame, _node_id(frame, RAW_TABLE))
    frame.wait_for_selector("#impact-button")
    frame.click("#impact-button")
    frame.wait_for_function("window.lineageGraph.nodes('.impacted').length > 0")
    impacted = set(frame.evaluate("window.lineageGraph.nodes('.impacted').map(n => n.data('fullName'))"))
    browser_page.screenshot(path=str(airflow.paths.var / "screenshots" / "lineage-impact.png"))
    assert {"nyc_taxi.yellow_rides_hourly_actuals", "nyc_taxi.yellow_rides_hourly_forecast"} <= impacted, impacted
    assert any(name.endswith("/models/weather") or name.endswith("/models/seasonal_naive") for name in impacted), (
        impacted
    )
    assert not {"nyc_taxi.weather_raw", "nyc_taxi.weather_staging"} & impacted, "upstream tables are not impacted"


def test_dag_tab_shows_the_dags_tasks_and_their_datasets(airflow, browser_page):
    browser_page.goto(f"{airflow.base_url}/dags/{FORECAST_DAG}/plugin/dag-lineage")
    frame = _lineage_frame(browser_page, f"dag={FORECAST_DAG}")
    visible = _visible_nodes(frame)
    tasks = {
        f"job:{settings.OPENLINEAGE_NAMESPACE}:{FORECAST_DAG}.{task}"
        for task in ("compute_hourly_actuals", "train_model", "write_forecast")
    }
    assert tasks <= visible
    assert not any(".load_" in node or ".stage_" in node or ".download_" in node for node in visible), (
        "other DAGs' tasks are not in the tab"
    )
    browser_page.screenshot(path=str(airflow.paths.var / "screenshots" / "lineage-dag-tab.png"))
