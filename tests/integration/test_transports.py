"""Lineage destinations chosen in airflow.cfg: the README's composite example, against two real HTTP servers."""

from __future__ import annotations

import http.server
import json
import re
import threading

import pytest

from include import airflow_runs, config, local_source

pytestmark = pytest.mark.integration


class Recorder:
    def __init__(self):
        self.events: list[dict] = []
        handler = self._handler()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def _handler(self):
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                recorder.events.append({"path": self.path, "event": json.loads(body)})
                self.send_response(201)
                self.end_headers()

        return Handler


def readme_transport(title: str) -> str:
    readme = (config.PROJECT_ROOT / "README.md").read_text()
    section = readme.split(f"#### {title}", 1)[1]
    return re.search(r"^transport = (.+)$", section, re.MULTILINE).group(1)


def test_composite_transport_from_the_readme_delivers_every_event_to_both_backends(pipeline_run):
    marquez, datahub = Recorder(), Recorder()
    transport = readme_transport("Two backends at once (composite)")
    transport = transport.replace("http://datahub-gms:8080", datahub.url).replace("http://marquez:5000", marquez.url)
    lines_before = pipeline_run.paths.lineage_events.read_text().count("\n")
    with local_source.serve(pipeline_run.paths.var / "source") as env:
        result = airflow_runs.dags_test(
            "ingest_weather_data", "2025-02-01", {}, env={**env, "AIRFLOW__OPENLINEAGE__TRANSPORT": transport}
        )
    marquez.server.shutdown()
    datahub.server.shutdown()
    assert result.succeeded
    assert len(marquez.events) >= 3
    key = lambda r: (r["event"]["run"]["runId"], r["event"]["eventType"], r["event"]["eventTime"])  # noqa: E731
    assert sorted(map(key, marquez.events)) == sorted(map(key, datahub.events))
    assert {r["path"] for r in marquez.events} == {"/api/v1/lineage"}
    assert {r["path"] for r in datahub.events} == {"/openapi/openlineage/api/v1/lineage"}
    assert {r["event"]["job"]["name"] for r in marquez.events} >= {"ingest_weather_data", "ingest_weather_data.download_noaa_month"}
    assert pipeline_run.paths.lineage_events.read_text().count("\n") == lines_before, "the file transport was replaced"
