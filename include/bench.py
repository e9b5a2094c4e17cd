"""``make bench``: the pipeline and the cost of lineage, measured side by side as ratios in one run.

Every figure is the median of ``BENCH_REPEATS`` (default 3) alternating runs, with its spread (min..max), written to
``var/bench/results.json`` and ``var/bench/results.md``. Nothing here asserts a timing.

1. Ingest efficiency: taxi stage + MERGE of one generated month (``BENCH_ROWS``, default 3,000,000 rows, about a
   real month) ÷ a bare Spark job doing the same read and a plain parquet write; first load and idempotent re-load.
2. Lineage overhead: the taxi DAG via ``airflow dags test`` with OpenLineage on ÷ with ``[openlineage] disabled``,
   and the extractor's own time per task (from its log line).
3. Scale: ingest time of 1, 2 and 4 generated months, and the ratio 4 ÷ 1.
4. Explorer: the lineage store on a generated 10^5-node lineage graph: ingest rate, upstream/downstream latency from
   the closure table beside a recursive CTE (``include/bench_explorer.py``; ``BENCH_EXPLORER_NODES``).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import statistics
import sys
import time
from datetime import UTC, datetime

from include import airflow_runs, bench_explorer, catalog_server, config, local_source, sample_data

EXTRACTED = re.compile(r"lineage: extracted (\w+) in ([0-9.]+)s")


def _progress(message: str) -> None:
    print(f"bench [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _spark_submit(script: str, args: list[str]) -> float:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    os.environ.update(config.spark_connection_outside_airflow())
    started = time.monotonic()
    SparkSubmitHook(**config.spark_submit_kwargs(), application_args=args).submit(str(script))
    return time.monotonic() - started


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def _reset_tables(paths: config.Paths) -> None:
    """Empty warehouse and catalog; the catalog server keeps its SQLite file open, so it restarts around it."""
    catalog_server.stop(paths)
    for folder in (paths.warehouse, paths.catalog_dir):
        shutil.rmtree(folder, ignore_errors=True)
    (paths.landing / "_ingested.jsonl").unlink(missing_ok=True)
    paths.ensure()
    catalog_server.ensure_running(paths)


def ingest_efficiency(paths: config.Paths, rows: int, repeats: int) -> dict:
    month = "2025-01"
    landed = paths.landing / "tlc" / sample_data.taxi_file_name(2025, 1)
    sample_data.write_taxi_month(landed.parent, 2025, 1, rows)
    size = landed.stat().st_size
    bare_script = config.PROJECT_ROOT / "spark_jobs" / "bench_bare_copy.py"
    first, reload, bare = [], [], []
    for i in range(repeats):
        _reset_tables(paths)
        _progress(f"ingest {i + 1}/{repeats}: bare read + parquet write")
        bare.append(_spark_submit(bare_script, [str(landed), str(paths.bench / "bare_copy")]))
        _progress(f"ingest {i + 1}/{repeats}: stage + MERGE, first load")
        first.append(
            _spark_submit(config.SPARK_JOBS_DIR / "stage_taxi.py", ["--month", month])
            + _spark_submit(config.SPARK_JOBS_DIR / "merge_taxi.py", ["--month", month])
        )
        _progress(f"ingest {i + 1}/{repeats}: stage + MERGE, idempotent re-load")
        reload.append(
            _spark_submit(config.SPARK_JOBS_DIR / "stage_taxi.py", ["--month", month])
            + _spark_submit(config.SPARK_JOBS_DIR / "merge_taxi.py", ["--month", month])
        )
    return {
        "rows": rows,
        "file_bytes": size,
        "bare_seconds": _summary(bare),
        "first_load_seconds": _summary(first),
        "reload_seconds": _summary(reload),
        "first_load_ratio": _summary([f / b for f, b in zip(first, bare, strict=True)]),
        "reload_ratio": _summary([r / b for r, b in zip(reload, bare, strict=True)]),
        "first_load_rows_per_second": rows / statistics.median(first),
        "bare_rows_per_second": rows / statistics.median(bare),
    }


def lineage_overhead(paths: config.Paths, rows: int, repeats: int) -> dict:
    source = paths.var / "bench-source"
    local_source.publish_months(source, [(2025, 1)], rows)
    on, off, extractor = [], [], {}
    with local_source.serve(source) as env:
        for i in range(repeats):
            for label, extra in (("on", {}), ("off", {"AIRFLOW__OPENLINEAGE__DISABLED": "True"})):
                _progress(f"lineage {i + 1}/{repeats}: taxi DAG with OpenLineage {label}")
                result = airflow_runs.dags_test(
                    "ingest_yellow_taxi_data", "2025-02-01", {"force": True}, env={**env, **extra}
                )
                if not result.succeeded:
                    raise RuntimeError(f"taxi DAG failed during the benchmark ({label})")
                (on if label == "on" else off).append(result.seconds)
                for task, seconds in EXTRACTED.findall(result.log):
                    extractor.setdefault(task, []).append(float(seconds))
    return {
        "dag_seconds_lineage_on": _summary(on),
        "dag_seconds_lineage_off": _summary(off),
        "overhead_ratio": _summary([a / b for a, b in zip(on, off, strict=True)]),
        "extractor_seconds_per_task": {task: _summary(values) for task, values in extractor.items()},
    }


def scale(paths: config.Paths, rows: int, repeats: int) -> dict:
    months = [(2025, m) for m in range(1, 5)]
    for year, month in months:
        sample_data.write_taxi_month(paths.landing / "tlc", year, month, rows)
    timings: dict[int, list[float]] = {1: [], 2: [], 4: []}
    for i in range(repeats):
        for count in (1, 2, 4):
            _reset_tables(paths)
            _progress(f"scale {i + 1}/{repeats}: {count} month(s)")
            started = time.monotonic()
            for year, month in months[:count]:
                label = f"{year}-{month:02d}"
                _spark_submit(config.SPARK_JOBS_DIR / "stage_taxi.py", ["--month", label])
                _spark_submit(config.SPARK_JOBS_DIR / "merge_taxi.py", ["--month", label])
            timings[count].append(time.monotonic() - started)
    return {
        "seconds": {str(k): _summary(v) for k, v in timings.items()},
        "ratio_4_to_1": _summary([four / one for four, one in zip(timings[4], timings[1], strict=True)]),
    }


def to_markdown(results: dict) -> str:
    ing, lin, sc = results["ingest"], results["lineage"], results["scale"]
    fmt = lambda s: f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"  # noqa: E731
    lines = [
        f"Machine: {results['machine']}. Ingest: {ing['rows']:,} rows ({ing['file_bytes'] / 2**20:.1f} MiB); "
        f"DAG runs: {results['lineage_rows']:,} rows; scale: {results['scale_rows']:,} rows per month. "
        f"Median (min–max) of {results['repeats']} alternating runs.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| bare Spark read + parquet write (s) | {fmt(ing['bare_seconds'])} |",
        f"| stage + MERGE, first load (s) | {fmt(ing['first_load_seconds'])} |",
        f"| stage + MERGE, idempotent re-load (s) | {fmt(ing['reload_seconds'])} |",
        f"| first load ÷ bare | {fmt(ing['first_load_ratio'])} |",
        f"| re-load ÷ bare | {fmt(ing['reload_ratio'])} |",
        f"| rows/s, first load (bare) | {ing['first_load_rows_per_second']:,.0f} ({ing['bare_rows_per_second']:,.0f}) |",
        f"| taxi DAG, OpenLineage on (s) | {fmt(lin['dag_seconds_lineage_on'])} |",
        f"| taxi DAG, OpenLineage disabled (s) | {fmt(lin['dag_seconds_lineage_off'])} |",
        f"| lineage on ÷ off | {fmt(lin['overhead_ratio'])} |",
        *[
            f"| extractor time, {task} (s) | {fmt(s)} |"
            for task, s in sorted(lin["extractor_seconds_per_task"].items())
        ],
        *[f"| ingest {k} month(s) (s) | {fmt(s)} |" for k, s in sc["seconds"].items()],
        f"| 4 months ÷ 1 month | {fmt(sc['ratio_4_to_1'])} |",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    rows = int(os.environ.get("BENCH_ROWS", "3000000"))
    lineage_rows = int(os.environ.get("BENCH_LINEAGE_ROWS", rows))
    scale_rows = int(os.environ.get("BENCH_SCALE_ROWS", rows))
    repeats = max(int(os.environ.get("BENCH_REPEATS", "3")), 1)
    out = config.Paths.current().bench
    paths = config.Paths(config.Paths.current().var / "bench-state").ensure()
    os.environ["PIPELINE_VAR_DIR"] = str(paths.var)
    os.environ["ICEBERG_REST_PORT"] = str(_free_port())  # beside the catalog server of the project's own var/
    os.environ.setdefault("SPARK_DRIVER_MEMORY", "6g")
    from include import bootstrap

    bootstrap.setup(paths)
    os.environ.update(config.airflow_env(paths))  # spark-submit on PATH, spark_default connection, AIRFLOW_HOME
    _progress(
        f"{rows:,} rows per month ({lineage_rows:,} for the DAG runs, {scale_rows:,} for scale), "
        f"{repeats} repeats, state in {paths.var}"
    )
    catalog_server.ensure_running(paths)
    try:
        results = {
            "started": datetime.now(UTC).isoformat(),
            "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "repeats": repeats,
            "lineage_rows": lineage_rows,
            "scale_rows": scale_rows,
            "ingest": ingest_efficiency(paths, rows, repeats),
            "lineage": lineage_overhead(paths, lineage_rows, repeats),
            "scale": scale(paths, scale_rows, repeats),
            "explorer": bench_explorer.explorer(paths.var / "explorer"),
        }
    finally:
        catalog_server.stop(paths)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    markdown = to_markdown(results) + bench_explorer.to_markdown(results["explorer"])
    (out / "results.md").write_text(markdown)
    print(markdown)
    _progress(f"results in {out / 'results.json'} and {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
