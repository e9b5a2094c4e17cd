"""A real DAG run sending its lineage to ``lineage serve`` through the ``http`` transport of airflow.cfg: the merge's
run is stored COMPLETED with its output, and the served graph reaches NOAA's source URL. Its own source files, not
the shared run's, so that any worker can take it."""

from __future__ import annotations

import json

import pytest
import requests

from include.airflow import runs
from include.core import naming
from include.sources import downloads, sample_server
from tests.integration.test_lineage_queries import MONTH, _dataset_node, _ok

pytestmark = pytest.mark.integration


def test_a_real_dag_run_sends_its_lineage_to_lineage_serve(lineage_server, paths, source_folder, monkeypatch):
    transport = {"type": "http", "url": lineage_server["url"], "endpoint": "api/v1/lineage", "timeout": 5}
    with sample_server.serve(source_folder) as source_env:
        result = runs.dags_test(
            "ingest_weather_data",
            "2025-02-01",
            {"force": True},
            env={**source_env, "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)},
            log_file=paths.var / "test-logs" / "weather_to_lineage_serve.log",
        )
        monkeypatch.setenv("NOAA_BASE_URL", source_env["NOAA_BASE_URL"])
        noaa = naming.source_url_id(downloads.noaa_url("tavg", MONTH))
    assert result.succeeded, result.log[-3000:]
    merge_runs = json.loads(
        _ok("runs", "ingest_weather_data.merge_weather_raw", "--json", "--store", lineage_server["store"])
    )["runs"]
    assert [run["state"] for run in merge_runs] == ["COMPLETED"]
    assert "nyc_taxi.weather_raw" in {output["label"] for output in merge_runs[0]["outputs"]}
    weather_raw = naming.table_id(naming.WEATHER_RAW)
    response = requests.get(
        f"{lineage_server['url']}/api/v1/lineage",
        params={"nodeId": f"dataset:{weather_raw.namespace}:{weather_raw.name}"},
        timeout=30,
    )
    assert _dataset_node(noaa) in {node["id"] for node in response.json()["graph"]}
