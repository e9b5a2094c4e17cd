"""Issue 23's three answers on the project's own runs (the shared ``pipeline_run``: taxi, weather, the seasonal-naive
forecast, January re-ingested with ``force``, the weather forecast), through the installed ``lineage`` command:

- ``lineage diff --upstream`` of the two forecast runs names the weather input the weather model added;
- ``lineage upstream --run`` of the forecast made after the re-ingest reaches the raw snapshot it read and the run
  that committed it (the re-ingest adds no row: it is recognised and commits no snapshot, so that is still the first
  ingest's), ``--run`` of the raw table's load reaches the landed file the re-ingest's download wrote, and
  ``--as-of`` a time before the re-ingest reaches the first ingest's.

The store is filled with the events of the shared run only (event time up to its end): later modules run more DAGs
into the same ``var/`` (a rerun at the same logical date, a bad re-ingest), which are not what these answers are about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from include.core import naming
from include.lineage.events import load_events, utc_time
from include.sources import downloads
from tests.integration.conftest import INGEST_DATE, REINGEST_DATE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]  # it may set up the shared run, under load

LINEAGE = str(Path(sys.executable).parent / "lineage")
FORECAST = "nyc_taxi.yellow_rides_hourly_forecast"
DAG_TAXI = "ingest_yellow_taxi_data"


def _lineage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LINEAGE, *args], capture_output=True, text=True, env=os.environ.copy(), timeout=300)


def _ok(*args: str) -> str:
    completed = _lineage(*args)
    assert completed.returncode == 0, f"lineage {' '.join(args)} ({completed.returncode}): {completed.stderr}"
    return completed.stdout


def _instant(value: str) -> datetime:
    """A logical date as Airflow means it: a date alone (INGEST_DATE) is its midnight UTC."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@pytest.fixture(scope="module")
def answers(pipeline_run, tmp_path_factory) -> dict:
    """A store of the shared run's events (Airflow's and the Spark listener's), and the task run ids of its DAG runs
    read from the event files (by the DAG run's logical date and conf, as Airflow's facets carry them)."""
    folder = tmp_path_factory.mktemp("run-answers")
    until = utc_time(pipeline_run.finished_at)
    files = []
    events = []
    for index, path in enumerate((pipeline_run.paths.lineage_events, pipeline_run.paths.spark_lineage_events)):
        kept = [event for event in load_events(path) if utc_time(event["eventTime"]) <= until]
        events += kept if index == 0 else []
        files.append(folder / f"events{index}.jsonl")
        files[-1].write_text("".join(json.dumps(event) + "\n" for event in kept))
    store = f"sqlite:///{folder / 'store.db'}"
    ingested = _lineage("ingest", *map(str, files), "--store", store)
    assert ingested.returncode == 0, ingested.stderr

    def task_run(task: str, logical_date: str | None = None, model: str | None = None) -> str:
        found = set()
        for event in events:
            dag_run = ((event["run"].get("facets") or {}).get("airflow") or {}).get("dagRun") or {}
            if event["job"]["name"] != task or not dag_run:
                continue
            if logical_date is not None and _instant(dag_run["logical_date"]) != _instant(logical_date):
                continue
            if model is not None and (dag_run.get("conf") or {}).get("model") != model:
                continue
            found.add(event["run"]["runId"])
        assert len(found) == 1, (task, logical_date, model, found)
        return found.pop()

    ids = {
        "naive": task_run("forecast_yellow_rides.write_forecast", model="seasonal_naive"),
        "weather": task_run("forecast_yellow_rides.write_forecast", model="weather"),
    }
    for key, date in (("first", INGEST_DATE), ("again", REINGEST_DATE)):
        for task in ("download_tlc_month", "load_yellow_taxi_raw"):
            ids[f"{key}.{task}"] = task_run(f"{DAG_TAXI}.{task}", date)
    return {"store": store, "ids": ids, "ingest": ingested}


def _provenance(answers: dict, *args: str) -> dict:
    return json.loads(_ok("upstream", "--run", *args, "--json", "--store", answers["store"]))


def _reads(result: dict) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    """(reading job, dataset name) -> (version, producedByRunId) over the whole provenance."""
    return {
        (entry["job"]["name"], item["name"]): (item["version"], item["producedByRunId"])
        for entry in result["runs"]
        for item in entry["inputs"]
    }


def test_the_two_taxi_ingests_are_two_runs_and_the_store_says_of_no_merged_run(answers):
    ids = answers["ids"]
    assert ids["first.load_yellow_taxi_raw"] != ids["again.load_yellow_taxi_raw"]
    warned = answers["ingest"].stderr
    for key in ("first", "again"):
        for task in ("download_tlc_month", "load_yellow_taxi_raw"):
            assert ids[f"{key}.{task}"] not in warned, warned


def _load_under(pipeline_run, ingest: str) -> str:
    """Which ingest's raw snapshot a forecast after ``ingest`` reads: a forced re-ingest of the unchanged file is
    recognised before loading (spark_jobs/common/loaded_source.py) and commits nothing (test_pipeline: "re-ingesting
    changes nothing in raw"); then the raw snapshot read is still the first ingest's, written by its load run."""
    if (
        ingest == "again"
        and pipeline_run.raw_after_reingest.snapshot_id == pipeline_run.raw_after_first_ingest.snapshot_id
    ):
        return "first"
    return ingest


def test_diff_upstream_of_the_two_forecast_runs_names_the_added_weather_input(answers, pipeline_run):
    ids = answers["ids"]
    result = json.loads(_ok("diff", ids["naive"], ids["weather"], "--upstream", "--json", "--store", answers["store"]))
    jobs = {item["job"]: item for item in result["upstream"]["jobs"]}
    train = jobs["forecast_yellow_rides.train_model"]
    assert train["change"] == "other runs", train
    assert "nyc_taxi.weather_raw" in train["jobVersion"]["inputsAdded"], train
    assert train["parameters"]["conf.model"] == ["seasonal_naive", "weather"]
    assert jobs["ingest_weather_data.merge_weather_raw"]["change"] == "only in B"  # weather reached through the model
    load = ids[f"{_load_under(pipeline_run, 'again')}.load_yellow_taxi_raw"]
    assert jobs[f"{DAG_TAXI}.load_yellow_taxi_raw"]["runs"] == [[ids["first.load_yellow_taxi_raw"]], [load]]
    text = _ok("diff", ids["naive"], ids["weather"], "--upstream", "--store", answers["store"])
    assert "+ input nyc_taxi.weather_raw" in text, text


def test_upstream_run_after_the_reingest_reaches_what_it_wrote_and_as_of_before_it_the_first_ingest(
    answers, pipeline_run
):
    ids = answers["ids"]
    raw = naming.table_id(naming.TAXI_RAW).name
    landed = str(downloads.tlc_landed_path("2025-01", pipeline_run.paths))
    load = f"{DAG_TAXI}.load_yellow_taxi_raw"
    under_weather = _load_under(pipeline_run, "again")
    cases = (
        # the forecast run after the re-ingest; the forecast table's writer as of the end of that run, and before
        ((ids["weather"],), ids["weather"], pipeline_run.raw_after_reingest, under_weather),
        ((FORECAST, "--as-of", pipeline_run.times["forecast_weather"][1]), ids["weather"], None, under_weather),
        ((FORECAST, "--as-of", pipeline_run.times["taxi_again"][0]), ids["naive"], None, "first"),
        # the raw table's load as of then: the re-ingest's, which read the file its own download landed
        ((load, "--as-of", pipeline_run.times["taxi_again"][1]), ids["again.load_yellow_taxi_raw"], None, "again"),
        ((load, "--as-of", pipeline_run.times["taxi_again"][0]), ids["first.load_yellow_taxi_raw"], None, "first"),
    )
    for args, root, raw_state, ingest in cases:
        result = _provenance(answers, *args)
        assert result["runs"][0]["run"]["id"] == root, args
        reads = _reads(result)
        if raw_state is not None:
            read_raw = reads[("forecast_yellow_rides.compute_hourly_actuals", raw)]
            assert read_raw == (str(raw_state.snapshot_id), ids[f"{ingest}.load_yellow_taxi_raw"]), args
        assert reads[(load, landed)][1] == ids[f"{ingest}.download_tlc_month"], (args, reads[(load, landed)])
    tree = _ok("upstream", "--run", ids["again.load_yellow_taxi_raw"], "--store", answers["store"])
    assert f"written by run {ids['again.download_tlc_month']}" in tree, tree
    assert ids["first.download_tlc_month"] not in tree
