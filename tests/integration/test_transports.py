"""Lineage destinations chosen in airflow.cfg: the README's composite example, against two real HTTP servers."""

from __future__ import annotations

import os
import re

import pytest

from include.airflow import runs
from include.core import settings
from include.sources import sample_server
from tests.support import RecordingBackend

pytestmark = pytest.mark.integration


def readme_transport(title: str) -> str:
    readme = (settings.PROJECT_ROOT / "README.md").read_text()
    section = readme.split(f"#### {title}", 1)[1]
    return re.search(r"^transport = (.+)$", section, re.MULTILINE).group(1)


def test_composite_transport_from_the_readme_delivers_every_event_to_both_backends(paths, source_folder):
    marquez, datahub = RecordingBackend(), RecordingBackend()
    transport = readme_transport("Two backends at once (composite)")
    transport = transport.replace("http://datahub-gms:8080", datahub.url).replace("http://marquez:5000", marquez.url)
    lines_before = _lines(paths.lineage_events)
    with sample_server.serve(source_folder) as env:
        result = runs.dags_test(
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
    assert {e["job"]["name"] for e in marquez.received} >= {
        "ingest_weather_data",
        "ingest_weather_data.download_noaa_month",
    }
    assert _lines(paths.lineage_events) == lines_before, "the file transport was replaced"


def test_readme_marquez_transport_with_marquez_down_keeps_every_event_and_delivers_each_once(
    paths, source_folder, tmp_path
):
    """The README's Marquez line, Marquez down: the DAG succeeds, every event it emitted (recorded independently by a
    file transport beside it) waits in the default spool folder, and `lineage replay` delivers each of them exactly
    once when Marquez is back."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tests.support import free_port

    port = free_port()
    marquez_line = readme_transport("Marquez over HTTP").replace("http://marquez:5000", f"http://127.0.0.1:{port}")
    reference = tmp_path / "emitted.jsonl"
    recorded = {"type": "file", "log_file_path": str(reference), "append": True}
    transport = json.dumps(
        {"type": "composite", "continue_on_failure": True, "transports": [recorded, json.loads(marquez_line)]}
    )
    spool = paths.lineage_spool
    before = set(spool.glob("*.json"))
    with sample_server.serve(source_folder) as env:
        result = runs.dags_test(
            "ingest_weather_data", "2025-02-01", {}, env={**env, "AIRFLOW__OPENLINEAGE__TRANSPORT": transport}
        )
    assert result.succeeded

    def key(event: dict) -> tuple:
        return event["run"]["runId"], event["eventType"], event["eventTime"]

    emitted = sorted(key(json.loads(line)) for line in reference.read_text().splitlines() if line.strip())
    spooled = set(spool.glob("*.json")) - before
    assert len(emitted) >= 3 and sorted(key(json.loads(p.read_text())) for p in spooled) == emitted, (
        "every emitted event must be kept in the spool"
    )
    print(f"\nMarquez down: weather DAG {result.seconds:.1f} s, {len(emitted)} events spooled")

    marquez = RecordingBackend(port)
    replay = subprocess.run(
        [str(Path(sys.executable).parent / "lineage"), "replay"],
        env={**os.environ, **settings.airflow_env(paths), "AIRFLOW__OPENLINEAGE__TRANSPORT": marquez_line},
        capture_output=True,
        text=True,
        timeout=300,
    )
    marquez.stop()
    assert replay.returncode == 0, replay.stdout + replay.stderr
    delivered = sorted(key(e) for e in marquez.received if key(e) in set(emitted))  # older spooled events may go too
    assert delivered == emitted, "each event delivered once, none lost, none twice"
    assert not set(spool.glob("*.json")) - before


def _lines(path) -> int:
    """Lines of the file transport's output; none yet in a var/ whose first DAG run this is."""
    return path.read_text().count("\n") if path.exists() else 0
