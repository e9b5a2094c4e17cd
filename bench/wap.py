"""``ingest.wap_overhead_ratio``: the taxi load published through an audit branch ÷ the same load straight into
main, measured side by side (alternating, ``BENCH_REPEATS`` times each), each a new month of ``BENCH_SCALE_ROWS``
rows into a raw table that already holds a month. Each figure is a whole spark-submit of the job (what a task costs). Nothing here
asserts a timing; the target of issue 25 is ≤ 1.1.

Run alone with ``python -m bench.wap`` (state in ``var/bench-state-wap/``); ``make bench`` runs it after the other
sections and adds the figure to ``var/bench/results.json`` under ``ingest``.
"""

from __future__ import annotations

import json
import os
import sys

from bench.pipeline import DIRECT_LOAD_JOB, _progress, _spark_submit, _summary
from include.core import ports, settings
from include.services import catalog_server
from include.sources import sample_data


def wap_overhead(paths: settings.Paths, rows: int, repeats: int) -> dict:
    """Raw starts with one month (untimed); then each repeat loads a new month straight into main and the next one
    through its audit branch (alternating which goes first): each an append into an empty month of a table with
    history, as a monthly run is. (The bench once dropped and re-created raw before each merge, and a run through the
    branch audited an empty snapshot; not reproducible since: docs/pipeline.md#write-audit-publish, "What it costs".)"""
    months = [(2024, number) for number in range(1, 2 * repeats + 2)]
    for year, number in months:
        landed = paths.landing / "tlc" / sample_data.taxi_file_name(year, number)
        sample_data.write_taxi_month(landed.parent, year, number, rows)
    _spark_submit(DIRECT_LOAD_JOB, ["--month", "2024-01"])
    through_branch: list[float] = []
    direct: list[float] = []
    pending = [f"{year:04d}-{number:02d}" for year, number in months[1:]]
    for repeat in range(repeats):
        order = [("direct", DIRECT_LOAD_JOB), ("branch", settings.SPARK_JOBS_DIR / "load_taxi.py")]
        for label, script in order if repeat % 2 == 0 else reversed(order):
            month = pending.pop(0)
            seconds = _spark_submit(script, ["--month", month])
            (direct if label == "direct" else through_branch).append(seconds)
            _progress(f"wap: {label} load of {rows:,} rows ({month}) in {seconds:.1f}s")
    result = {
        "rows": rows,
        "direct_seconds": _summary(direct),
        "through_branch_seconds": _summary(through_branch),
    }
    result["wap_overhead_ratio"] = result["through_branch_seconds"]["median"] / result["direct_seconds"]["median"]
    return result


def main(project: settings.Paths | None = None) -> int:
    """``project``: the var/ the bench writes its results into (the other sections point the environment at their
    own state folder)."""
    project = project or settings.Paths.current()
    rows = settings.BENCH_SCALE_ROWS.integer()
    repeats = settings.BENCH_REPEATS.integer()
    out = project.bench
    paths = settings.Paths(project.var / "bench-state-wap").ensure()
    os.environ["PIPELINE_VAR_DIR"] = str(paths.var)
    os.environ["ICEBERG_REST_PORT"] = str(ports.free_port())
    from include.setup import bootstrap

    bootstrap.setup(paths)
    os.environ.update(settings.airflow_env(paths))
    catalog_server.ensure_running(paths)
    try:
        result = wap_overhead(paths, rows, repeats)
    finally:
        catalog_server.stop(paths)
    out.mkdir(parents=True, exist_ok=True)
    (out / "wap.json").write_text(json.dumps(result, indent=2))
    combined = out / "results.json"
    if combined.exists():
        results = json.loads(combined.read_text())
        results.setdefault("ingest", {})["wap_overhead_ratio"] = result["wap_overhead_ratio"]
        results["ingest"]["wap"] = result
        combined.write_text(json.dumps(results, indent=2))
    print(
        f"ingest.wap_overhead_ratio = {result['wap_overhead_ratio']:.3f} (through the branch "
        f"{result['through_branch_seconds']['median']:.1f}s ÷ direct {result['direct_seconds']['median']:.1f}s, "
        f"{rows:,} rows, median of {repeats})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
