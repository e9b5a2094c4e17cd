"""Lineage destinations chosen in airflow.cfg: the README's composite example, against two real HTTP servers."""

from __future__ import annotations

import re

import pytest

from include import airflow_runs, config, local_source
from tests.support import RecordingBackend

pytestmark = pytest.mark.integration


def readme_transport(title: str) -> str:
    readme = (config.PROJECT_ROOT / "README.md").read_text()
    section = readme.split(f"#### {title}", 1)[1]
    return re.search(r"^transport = (.+)$", section, re.MULTILINE).group(1)


def test_composite_transport_from_the_readme_delivers_every_event_to_both_backends(pipeline_run):
    marquez, datahub = RecordingBackend(), RecordingBackend()
    transport = readme_transport("Two backends at once (composite)")
    transport = transport.replace("http://datahub-gms:8080", datahub.url).replace("http://marquez:5000", marquez.url)
    lines_before = pipeline_run.paths.lineage_events.read_text().count("\n")
    with local_source.serve(pipeline_run.paths.var / "source") as env:
        result = airflow_runs.dags_test(
            "ingest_weather_data", "2025-02-01", {}, env={**env, "AIRFLOW__OPENLINEAGE__TRANSPORT": transport}
        )
    marquez.stop()
    datahub.stop()
    assert result.succeeded
    assert len(marquez.received) >= 3
    key = lambda e: (e["run"]["runId"], e["eventType"], e["eventTime"])  # noqa: E731
    assert sorted(map(key, marquez.received)) == sorted(map(key, datahub.received))
    assert {path for path, _ in marquez.posts} == {"/api/v1/lineage"}
    assert {path for path, _ in datahub.posts} == {"/openapi/openlineage/api/v1/lineage"}
    assert {e["job"]["name"] for e in marquez.received} >= {"ingest_weather_data", "ingest_weather_data.download_noaa_month"}
    assert pipeline_run.paths.lineage_events.read_text().count("\n") == lines_before, "the file transport was replaced"
