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
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta

from include.airflow import runs
from include.core import naming, settings
from include.core.errors import ConfigurationError
from include.sources import sample_server
from include.spark import submit

DEMO_MONTH = (2025, 1)
# The monthly/daily runs whose data interval ends on Feb 1 ingest January. Each `make demo` of a var/ gets its own
# logical dates inside those intervals (n minutes later for the n-th demo), so its runs are new runs, not the last
# demo's run again: the provider's OpenLineage run id derives from DAG, logical date and clear number.
INGEST_DATE = datetime(2025, 2, 1, tzinfo=UTC)
FORECAST_DATE = datetime(2025, 2, 1, 1, tzinfo=UTC)
FORECAST_MODELS = ("seasonal_naive", "weather")
MAX_DEMOS_PER_VAR = 24 * 60  # the n-th demo's ingest date stays inside the daily weather run's interval


def demo_number(paths: settings.Paths) -> int:
    """How many demos this ``var/`` ran before (``var/demo-logs/demos``), counted up by this one."""
    counter = paths.var / "demo-logs" / "demos"
    counter.parent.mkdir(parents=True, exist_ok=True)
    try:
        number = int(counter.read_text().strip() or 0)
    except (OSError, ValueError):
        number = 0
    if number >= MAX_DEMOS_PER_VAR:
        raise ConfigurationError(
            f"{paths.var} ran {number} demos: their logical dates would leave January's intervals; use a new var/ "
            f"(PIPELINE_VAR_DIR) or delete {counter}"
        )
    counter.write_text(f"{number + 1}\n")
    return number


def dag_runs(number: int) -> list[tuple[str, str, dict]]:
    """(dag_id, logical date, conf) of the ``number``-th demo of a var/: ingest both sources, then both models."""
    ingest = (INGEST_DATE + timedelta(minutes=number)).isoformat()
    return [
        ("ingest_yellow_taxi_data", ingest, {"force": True}),
        ("ingest_weather_data", ingest, {"force": True}),
        *[
            (
                "forecast_yellow_rides",
                (FORECAST_DATE + timedelta(minutes=2 * number + index)).isoformat(),
                {"model": model},
            )
            for index, model in enumerate(FORECAST_MODELS)
        ],
    ]


class Steps:
    """Wall-clock time of each step, printed as it ends and as a table at the end (``var/demo-logs/timings.json``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - started, 1)

    def report(self, paths: settings.Paths, total: float) -> None:
        width = max(len(name) for name in self.seconds)
        print("demo: time per step")
        for name, seconds in self.seconds.items():
            print(f"demo:   {name:<{width}}  {seconds:7.1f} s")
        print(f"demo:   {'total':<{width}}  {total:7.1f} s")
        record = {"steps": self.seconds, "total": round(total, 1)}
        (paths.var / "demo-logs" / "timings.json").write_text(json.dumps(record, indent=2) + "\n")


def run(rows: int | None = None) -> int:
    """The demo; ``rows`` taxi trips for the month (default ``DEMO_ROWS_PER_MONTH``)."""
    started = time.monotonic()
    paths = settings.Paths.current().ensure()
    rows = rows or settings.DEMO_ROWS_PER_MONTH.integer()
    number = demo_number(paths)
    steps = Steps()
    source_root = paths.var / "demo-source"
    print(
        f"demo: generating {rows:,} taxi trips and NOAA county files for {DEMO_MONTH[0]}-{DEMO_MONTH[1]:02d}",
        flush=True,
    )
    with steps.step("generate sources"):
        sample_server.publish_months(source_root, [DEMO_MONTH], rows)

    tests = [
        runs.DagTest(
            dag_id, logical_date, conf, paths.var / "demo-logs" / f"{dag_id}-{conf.get('model', 'ingest')}.log"
        )
        for dag_id, logical_date, conf in dag_runs(number)
    ]
    # The four runs go one after another through `airflow dags test`'s own command in one Airflow process: its
    # start-up and the execution API its first task builds are paid once (include/airflow/runs.py).
    with (
        sample_server.serve(source_root, sample_server.stable_port()) as source_env,
        closing(runs.dags_test_in_one_process(tests, env=source_env)) as results,
    ):
        for test in tests:
            print(f"demo: airflow dags test {test.dag_id} {test.logical_date} -c '{json.dumps(test.conf)}'", flush=True)
            label = test.conf.get("model")
            with steps.step(f"{test.dag_id} ({label})" if label else test.dag_id):
                result = next(results)
            print(
                f"demo:   {result.state} in {result.seconds:.0f}s (run {result.run_id}; log {test.log_file})",
                flush=True,
            )
            if not result.succeeded:
                print(f"demo: {test.dag_id} did not succeed; see {test.log_file}", file=sys.stderr)
                return 1

        # Still inside the block: the Airflow process exits (flushing the provider's last lineage events, which the
        # lineage step below reads) while the query runs, not before it.
        for model in FORECAST_MODELS:
            metrics = json.loads((naming.model_dir(model, paths) / "model.json").read_text())
            print(
                f"demo: model {metrics['model_version']}: holdout MAE {metrics['mae']} (seasonal-naive baseline {metrics['baseline_mae']})"
            )

        # The query is a Spark job like the others, run in its own process (include never imports spark_jobs).
        query = [
            sys.executable,
            str(settings.SPARK_JOBS_DIR / "query_forecast.py"),
            "--zone",
            "10",
            "--model",
            "weather",
        ]
        with steps.step("forecast query"):
            subprocess.run(query, check=True, env={**os.environ, **submit.spark_submit_env(paths)})

    from include.lineage import render
    from include.lineage.api import report

    with steps.step("lineage store and page"):
        render.demo_summary(paths)
        report_path = report.write_report(paths)
    events = paths.lineage_events.read_text().count("\n")
    print(
        f"demo: {events} OpenLineage events in {paths.lineage_events}; Spark listener events in {paths.spark_lineage_events}"
    )
    print(f"demo: lineage report at {report_path}")
    steps.report(paths, time.monotonic() - started)
    print(f"demo: done in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(run())
