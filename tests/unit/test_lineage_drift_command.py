"""`lineage drift`: the tasks whose newest run did not read and write what their DAG declares, from the
``lineageDrift`` run facet the extractor emits (include/lineage/emit/extraction.py), through the installed command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

LINEAGE = str(Path(sys.executable).parent / "lineage")


def _complete(job: str, time: str, drift: dict | None) -> dict:
    facets = {} if drift is None else {"lineageDrift": drift}
    return {
        "eventType": "COMPLETE",
        "eventTime": time,
        "producer": "https://example.com/test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4()), "facets": facets},
        "job": {"namespace": "nyc_taxi_pipeline", "name": job},
        "inputs": [],
        "outputs": [],
    }


def _drift(drifted: bool) -> dict:
    refs = [{"namespace": "file", "name": "/w/nyc_taxi/weather_raw"}] if drifted else []
    return {
        "_producer": "https://example.com/test",
        "_schemaURL": "https://example.com/LineageDriftRunFacet.json#/$defs/LineageDriftRunFacet",
        "declaredInputs": [{"namespace": "file", "name": "/w/nyc_taxi/weather_raw"}],
        "declaredOutputs": [],
        "observed": True,
        "drifted": drifted,
        "declaredNotRead": refs,
        "declaredNotWritten": [],
        "readNotDeclared": [],
        "writtenNotDeclared": [],
    }


def _run(store: str, *args: str) -> subprocess.CompletedProcess:
    # A var/ of its own: the command first catches the store up with var/'s event files, and the session's may hold
    # an integration test's drifted task (tests/dags/observed_lineage.py)
    var = Path(store.removeprefix("sqlite:///")).parent / "var"
    env = {**os.environ, "PIPELINE_VAR_DIR": str(var)}
    return subprocess.run([LINEAGE, *args, "--store", store], capture_output=True, text=True, timeout=120, env=env)


def test_lineage_drift_lists_the_tasks_whose_newest_run_drifted(tmp_path):
    events = [
        _complete("dag.kept_its_word", "2026-01-01T00:00:00Z", _drift(False)),
        _complete("dag.drifted", "2026-01-01T00:00:00Z", _drift(False)),
        _complete("dag.drifted", "2026-01-02T00:00:00Z", _drift(True)),
        _complete("dag.drifted_then_fixed", "2026-01-01T00:00:00Z", _drift(True)),
        _complete("dag.drifted_then_fixed", "2026-01-02T00:00:00Z", _drift(False)),
        _complete("dag.declares_nothing", "2026-01-02T00:00:00Z", None),
    ]
    file = tmp_path / "events.jsonl"
    file.write_text("".join(json.dumps(e) + "\n" for e in events))
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert _run(store, "ingest", str(file)).returncode == 0
    completed = _run(store, "drift", "--json")
    assert completed.returncode == 1, completed.stderr
    found = json.loads(completed.stdout)
    assert [item["job"] for item in found] == ["dag.drifted"]
    assert found[0]["declaredNotRead"] == ["file:/w/nyc_taxi/weather_raw"]
    assert found[0]["runId"] == events[2]["run"]["runId"]
    text = _run(store, "drift")
    assert "dag.drifted" in text.stdout and "declared, not read: file:/w/nyc_taxi/weather_raw" in text.stdout


def test_lineage_drift_says_so_when_nothing_drifted(tmp_path):
    file = tmp_path / "events.jsonl"
    file.write_text(json.dumps(_complete("dag.t", "2026-01-01T00:00:00Z", _drift(False))) + "\n")
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert _run(store, "ingest", str(file)).returncode == 0
    completed = _run(store, "drift")
    assert completed.returncode == 0 and "no drift" in completed.stdout
