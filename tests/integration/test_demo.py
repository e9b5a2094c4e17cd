"""`make demo` as a newcomer runs it (tests/integration/demo_run.py, one run per session): its outputs, and every
socket its processes listened on while it ran.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from tests.integration.demo_run import ROWS

pytestmark = [pytest.mark.integration]

STEPS = (
    "generate sources",
    "ingest_yellow_taxi_data",
    "ingest_weather_data",
    "forecast_yellow_rides (seasonal_naive)",
    "forecast_yellow_rides (weather)",
    "forecast query",
    "lineage store and page",
)


def test_the_demo_succeeds_and_prints_its_time_per_step(demo_run):
    assert demo_run.returncode == 0, demo_run.output[-4000:]
    timings = demo_run.timings()
    assert tuple(timings["steps"]) == STEPS
    assert all(seconds >= 0 for seconds in timings["steps"].values())
    assert sum(timings["steps"].values()) <= timings["total"] <= demo_run.seconds
    for step in STEPS:
        assert f"demo:   {step}" in demo_run.output
    print(f"\ndemo of {ROWS:,} trips: {timings}")


def test_the_three_dags_ran_with_both_models(demo_run):
    finished = [line for line in demo_run.output.splitlines() if line.startswith("demo:   success in")]
    assert len(finished) == 4, demo_run.output[-4000:]
    for model in ("seasonal_naive", "weather"):
        metrics = json.loads((demo_run.paths.models / model / "model.json").read_text())
        assert f"demo: model {metrics['model_version']}: holdout MAE" in demo_run.output


FORECAST_HOURS = 24  # the forecast's horizon (spark_jobs/write_forecast.py), as the seed's query shows it


def test_the_forecast_query_prints_zone_10(demo_run):
    """The seed's example query: 24 forecast hours of pickup zone 10 from the weather model. The demo's var/ is its
    own and ran one weather forecast, so the query (``LIMIT 50``) prints exactly its 24 hours, one after another."""
    lines = demo_run.output.splitlines()
    assert "WHERE pulocationid = 10 AND model_name = 'weather'" in demo_run.output
    header = lines.index("datetime_hour       | pulocationid | forecasted_total_rides")
    rows = [line for line in lines[header + 2 :] if "|" in line]
    assert len(rows) == FORECAST_HOURS, f"{len(rows)} rows, not {FORECAST_HOURS}: {rows}"
    assert all(line.split("|")[1].strip() == "10" for line in rows), rows
    hours = [datetime.strptime(line.split("|")[0].strip(), "%Y-%m-%d %H:%M:%S") for line in rows]
    steps = [later - earlier for earlier, later in zip(hours, hours[1:], strict=False)]
    assert steps == [timedelta(hours=1)] * (FORECAST_HOURS - 1), f"not {FORECAST_HOURS} consecutive hours: {hours}"
    assert all(float(line.split("|")[2]) >= 0 for line in rows), rows
    assert lines[header + 2 + len(rows)] == f"({FORECAST_HOURS} rows)"


def test_lineage_reached_the_store_and_the_page(demo_run):
    assert "demo: lineage ingest:" in demo_run.output
    page = demo_run.paths.lineage / "index.html"
    assert page.exists() and page.stat().st_size > 10_000
    runs = demo_run.lineage("runs", "ingest_yellow_taxi_data")["runs"]
    assert len(runs) == 1, runs
    upstream = demo_run.lineage("upstream", "nyc_taxi.yellow_rides_hourly_forecast")
    assert "yellow_taxi_raw" in json.dumps(upstream)


def test_every_process_of_the_demo_listened_on_loopback_only(demo_run):
    """Airflow's `dags test`, spark-submit and its driver JVM, the catalog server and the sample-file server:
    sampled from /proc/net/tcp while the demo ran."""
    assert demo_run.listeners, "no listening socket was seen: the sampling is broken"
    processes = {listener.process.split()[0].rsplit("/", 1)[-1] for listener in demo_run.listeners}
    assert "java" in processes, f"the Spark driver and the catalog server listen: {processes}"
    outside = sorted(
        f"{listener.process} on {listener.readable_address}:{listener.port}"
        for listener in demo_run.listeners
        if not listener.loopback
    )
    assert outside == [], "listening beyond loopback:\n" + "\n".join(outside)
