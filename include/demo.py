"""``make demo``: the whole chain on generated data, through ``airflow dags test``, then the forecast query.

Generates one month of taxi trips and weather (``DEMO_ROWS_PER_MONTH``, default 300,000 trips), serves them on
loopback with the real URL layout, runs the two ingest DAGs and the forecast DAG with both models, prints the seed's
example query for pickup zone 10 and writes the lineage report. Exits non-zero if any of it did not happen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from include.airflow import runs
from include.core import naming, settings
from include.sources import sample_server
from include.spark import submit

DEMO_MONTH = (2025, 1)
INGEST_LOGICAL_DATE = "2025-02-01"  # the monthly/daily runs whose data interval ends on Feb 1 ingest January
FORECAST_RUNS = [("seasonal_naive", "2025-02-01T01:00:00+00:00"), ("weather", "2025-02-01T02:00:00+00:00")]


def run(rows: int | None = None) -> int:
    """The demo; ``rows`` taxi trips for the month (default ``DEMO_ROWS_PER_MONTH``)."""
    started = time.monotonic()
    paths = settings.Paths.current().ensure()
    rows = rows or settings.DEMO_ROWS_PER_MONTH.integer()
    source_root = paths.var / "demo-source"
    print(
        f"demo: generating {rows:,} taxi trips and NOAA county files for {DEMO_MONTH[0]}-{DEMO_MONTH[1]:02d}",
        flush=True,
    )
    sample_server.publish_months(source_root, [DEMO_MONTH], rows)

    dag_runs = [
        ("ingest_yellow_taxi_data", INGEST_LOGICAL_DATE, {"force": True}),
        ("ingest_weather_data", INGEST_LOGICAL_DATE, {"force": True}),
        *[("forecast_yellow_rides", date, {"model": model}) for model, date in FORECAST_RUNS],
    ]
    with sample_server.serve(source_root, sample_server.stable_port()) as source_env:
        for dag_id, logical_date, conf in dag_runs:
            print(f"demo: airflow dags test {dag_id} {logical_date} -c '{json.dumps(conf)}'", flush=True)
            log_file = paths.var / "demo-logs" / f"{dag_id}-{conf.get('model', 'ingest')}.log"
            result = runs.dags_test(dag_id, logical_date, conf, env=source_env, log_file=log_file)
            print(f"demo:   {result.state} in {result.seconds:.0f}s (run {result.run_id}; log {log_file})", flush=True)
            if not result.succeeded:
                print(f"demo: {dag_id} did not succeed; see {log_file}", file=sys.stderr)
                return 1

    for model, _ in FORECAST_RUNS:
        metrics = json.loads((naming.model_dir(model, paths) / "model.json").read_text())
        print(
            f"demo: model {metrics['model_version']}: holdout MAE {metrics['mae']} (seasonal-naive baseline {metrics['baseline_mae']})"
        )

    # The query is a Spark job like the others, run in its own process (include never imports spark_jobs).
    query = [sys.executable, str(settings.SPARK_JOBS_DIR / "query_forecast.py"), "--zone", "10", "--model", "weather"]
    subprocess.run(query, check=True, env={**os.environ, **submit.spark_submit_env(paths)})

    from include.lineage import render
    from include.lineage.api import report

    render.demo_summary(paths)
    report_path = report.write_report(paths)
    events = paths.lineage_events.read_text().count("\n")
    print(
        f"demo: {events} OpenLineage events in {paths.lineage_events}; Spark listener events in {paths.spark_lineage_events}"
    )
    print(f"demo: lineage report at {report_path}")
    print(f"demo: done in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(run())
