"""Ingest throughput of ``lineage serve``, one event per request and in batches (``python -m bench.ingest_throughput``;
part of ``make bench``).

A real ``lineage serve`` (the ``lineage`` command on loopback, its bearer tokens, every event checked against the
OpenLineage schemas) over a fresh SQLite store each time receives ``BENCH_INGEST_EVENTS`` generated events
(START and COMPLETE of runs of a few dozen jobs, with schema, version and column-lineage facets):

- ``lineage_serve.single_post_events_per_second``: one ``POST /api/v1/lineage`` per event, through
  openlineage-python's ``HttpTransport`` with ``api_key`` auth, as Airflow's transport sends them;
- ``lineage_serve.batch_post_events_per_second``: ``POST /api/v1/lineage/batch`` of 100 events at a time, as the
  spooling transport's replay sends them;
- ``lineage_serve.schema_check_events_per_second``: the schema check alone (in this process), for scale.

The figures merge into ``var/bench/results.json`` under ``lineage_serve``, a section of their own (the explorer's
``explorer.store_ingest_events_per_second`` is another figure: events into the store directly, no server), and are
printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from include.core import ports, settings
from include.lineage.emit import tokens

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
BATCH = 100
JOBS = 40
# Where the figures go in results.json: a section no other bench section writes, and its keys.
SECTION = "lineage_serve"
SINGLE = "single_post_events_per_second"
BATCHED = "batch_post_events_per_second"
SCHEMA_CHECK = "schema_check_events_per_second"


def _facet(name: str, **fields) -> dict:
    return {"_producer": PRODUCER, "_schemaURL": f"https://openlineage.io/spec/facets/1-0-0/{name}.json", **fields}


def generate(count: int) -> list[dict]:
    """``count`` events: START and COMPLETE of runs of ``JOBS`` jobs in a chain, each output with its schema,
    version and column lineage."""
    events = []
    runs = max(count // 2, 1)
    for run in range(runs):
        job = run % JOBS
        run_id = str(uuid.uuid4())
        columns = [{"name": f"c{index}", "type": "BIGINT"} for index in range(12)]
        lineage = {
            column["name"]: {
                "inputFields": [
                    {"namespace": "file", "name": f"/d/{job}", "field": column["name"], "transformations": []}
                ]
            }
            for column in columns
        }
        for event_type, second in (("START", 0), ("COMPLETE", 30)):
            events.append(
                {
                    "eventType": event_type,
                    "eventTime": f"2025-02-01T{run // 3600 % 24:02d}:{run // 60 % 60:02d}:{second + run % 30:02d}Z",
                    "producer": PRODUCER,
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                    "run": {
                        "runId": run_id,
                        "facets": {"nominalTime": _facet("NominalTimeRunFacet", nominalStartTime="2025-02-01T00:00Z")},
                    },
                    "job": {"namespace": "bench", "name": f"job_{job}", "facets": {}},
                    "inputs": [{"namespace": "file", "name": f"/d/{job}", "facets": {}}],
                    "outputs": [
                        {
                            "namespace": "file",
                            "name": f"/d/{job + 1}",
                            "facets": {
                                "schema": _facet("SchemaDatasetFacet", fields=columns),
                                "version": _facet("DatasetVersionDatasetFacet", datasetVersion=str(run)),
                                "columnLineage": _facet("ColumnLineageDatasetFacet", fields=lineage),
                            },
                        }
                    ],
                }
            )
    return events[:count]


def with_store(env: dict, store_url: str) -> dict:
    """``env`` naming the lineage store (``LINEAGE_STORE_URL``) for a ``lineage`` command: in its environment, not on
    its command line, where ``ps`` shows the URL's password to every user of the machine (a kept bench cluster lives for
    days)."""
    return {**env, settings.LINEAGE_STORE_URL.name: store_url}


def serve(store_url: str, env: dict, timeout: float = 120) -> tuple[subprocess.Popen, str]:
    """A real ``lineage serve`` on a free loopback port over ``store_url``, once its health answers: (process, URL)."""
    port = ports.free_port()
    lineage = str(Path(sys.executable).with_name("lineage"))
    process = subprocess.Popen(
        [lineage, "serve", "--port", str(port)],
        env=with_store(env, store_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(f"{url}/api/v1/health", timeout=5).ok:
                return process, url
        except requests.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("lineage serve did not start")
        time.sleep(0.2)


@contextmanager
def _served(folder: Path, env: dict, expected: int) -> Iterator[str]:
    """A ``lineage serve`` over a fresh store in ``folder``, for one measurement: its URL; once the measurement is
    done, the store must hold ``expected`` events, and the server is stopped."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "store.db").unlink(missing_ok=True)
    process, url = serve(f"sqlite:///{folder / 'store.db'}", env)
    try:
        yield url
        assert requests.get(f"{url}/api/v1/health", timeout=10).json()["events"] == expected
    finally:
        process.terminate()
        process.wait(timeout=30)


def throughput(work_dir: Path, count: int) -> dict:
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    from include.lineage.validation import IngestValidator

    events = generate(count)
    var = work_dir / "var"
    file = tokens.ensure_tokens(var / "secrets" / tokens.TOKENS_FILE_NAME)
    writer = next(token.value for token in tokens.load_tokens(file) if "write" in token.scopes)
    env = {**os.environ, "PIPELINE_VAR_DIR": str(var)}
    figures: dict = {"events": len(events), "batch_size": BATCH}

    with _served(work_dir / "single", env, len(events)) as url:
        transport = HttpTransport(
            HttpConfig.from_dict(
                {
                    "type": "http",
                    "url": url,
                    "endpoint": "api/v1/lineage",
                    "auth": {"type": "api_key", "apiKey": writer},
                }
            )
        )
        started = time.perf_counter()
        for event in events:
            transport.emit(event)
        seconds = time.perf_counter() - started
    figures[SINGLE] = len(events) / seconds

    with _served(work_dir / "batch", env, len(events)) as url, requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {writer}"
        started = time.perf_counter()
        for start in range(0, len(events), BATCH):
            answer = session.post(f"{url}/api/v1/lineage/batch", json=events[start : start + BATCH], timeout=300)
            answer.raise_for_status()
        seconds = time.perf_counter() - started
    figures[BATCHED] = len(events) / seconds

    validator = IngestValidator()
    started = time.perf_counter()
    for event in events:
        validator.check(event, 1000, 1 << 20)
    figures[SCHEMA_CHECK] = len(events) / (time.perf_counter() - started)
    return figures


def main(project: settings.Paths | None = None) -> int:
    project = project or settings.Paths.current()
    figures = throughput(project.var / "bench-state-ingest", settings.BENCH_INGEST_EVENTS.integer())
    out = project.bench
    out.mkdir(parents=True, exist_ok=True)
    combined = out / "results.json"
    results = json.loads(combined.read_text()) if combined.exists() else {}
    results[SECTION] = figures
    combined.write_text(json.dumps(results, indent=2))
    print(
        f"{SECTION}.{SINGLE} = {figures[SINGLE]:,.0f}, {SECTION}.{BATCHED} = {figures[BATCHED]:,.0f} "
        f"({figures['events']:,} events, batches of {BATCH}; {SECTION}.{SCHEMA_CHECK} = {figures[SCHEMA_CHECK]:,.0f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
