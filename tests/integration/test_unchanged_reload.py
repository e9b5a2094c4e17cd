"""A forced re-load of an unchanged month is recognised before any Spark session starts, from the tables' own
Iceberg histories (spark_jobs/common/loaded_source.py), and a changed file or a rolled-back table never is.

The taxi jobs run as the operator runs them (spark-submit of the job script with the project's code zip, jars and
settings) in a var/ of their own, so the shared run's tables are untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from include.core import naming, settings
from include.core.contract import JobReport
from include.services import catalog_server
from include.sources import sample_data
from include.spark import submit
from spark_jobs.common import loaded_source
from tests.integration.isolated_var import IsolatedVar

pytestmark = pytest.mark.spark

MONTH = "2025-01"
REPEAT_ROWS = Path(__file__).resolve().parents[1] / "jobs" / "repeat_rows.py"
TABLES = (naming.TAXI_QUARANTINE, naming.TAXI_RAW)


@pytest.fixture(scope="module")
def own_var(paths):
    run = IsolatedVar(paths.var / "unchanged-reload").setup()
    with run.activated():
        catalog_server.ensure_running(run.paths)
        try:
            yield run
        finally:
            catalog_server.stop(run.paths)


def _submit(run: IsolatedVar, script: Path, args: list[str]) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    SparkSubmitHook(**submit.spark_submit_kwargs(run.paths), application_args=args).submit(str(script))


def _load(run: IsolatedVar, step: str, *extra: str) -> JobReport:
    report = run.paths.var / "reports" / f"{step}-load_taxi.json"
    _submit(run, settings.SPARK_JOBS_DIR / "load_taxi.py", ["--month", MONTH, "--report", str(report), *extra])
    return JobReport.read(report)


def _snapshots(catalog) -> dict[str, int | None]:
    return {table: loaded_source.month_state(catalog, table, MONTH).snapshot_id for table in TABLES}


def _land(run: IsolatedVar, rows: int, seed: int) -> None:
    sample_data.write_taxi_month(run.paths.landing / "tlc", 2025, 1, rows, seed=seed)


def _raw_rows_and_ids(catalog) -> tuple[int, int]:
    raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
    ids = raw.scan(selected_fields=("unique_row_id",)).to_arrow()
    return ids.num_rows, len(set(ids.column("unique_row_id").to_pylist()))


def test_an_unchanged_month_is_recognised_and_a_changed_or_rolled_back_one_is_loaded(own_var):
    import os

    os.environ.update(submit.spark_connection_outside_airflow())
    catalog = settings.pyiceberg_catalog()
    _land(own_var, 3000, seed=1)

    load = _load(own_var, "first")
    assert load.unchanged is None and load.audit["published"], load
    rows, ids = _raw_rows_and_ids(catalog)
    unique = next(a for a in load.assertions[naming.TAXI_RAW] if a["assertion"] == "unique")
    assert load.staged_rows == rows == ids > 0 and unique["actual"] == str(rows), (load.staged_rows, rows, unique)
    first = _snapshots(catalog)
    assert all(first.values()), first
    raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
    tags = raw.current_snapshot().summary
    assert tags.get(loaded_source.SOURCE_MONTH) == MONTH
    identity = tags.get(loaded_source.SOURCE_IDENTITY)
    assert identity and identity.startswith("xxhash64:"), tags
    quarantine = loaded_source.month_state(catalog, naming.TAXI_QUARANTINE, MONTH)
    load_id = loaded_source.month_load_id(loaded_source.month_state(catalog, naming.TAXI_RAW, MONTH))
    assert load_id and loaded_source.month_load_id(quarantine) == load_id, "both tables hold one load's commits"

    # The same file again (what the DAG's `force` does): nothing loaded, every snapshot where it was.
    load = _load(own_var, "again")
    assert load.unchanged and "nothing loaded" in load.unchanged, load
    assert _snapshots(catalog) == first
    for table in TABLES:
        assert load.outputs[table]["snapshot_id"] == load.outputs[table]["previous_snapshot_id"] == first[table]

    # The DAG's `reprocess` param: load again although the tables hold this file (raw then has every id already).
    load = _load(own_var, "reprocessed", "--reprocess=True")
    assert load.unchanged is None
    assert _snapshots(catalog)[naming.TAXI_QUARANTINE] != first[naming.TAXI_QUARANTINE]
    assert _snapshots(catalog)[naming.TAXI_RAW] == first[naming.TAXI_RAW], "no row added"
    first = _snapshots(catalog)
    assert _load(own_var, "recognised-after-reprocess").unchanged, "a reprocessed month completes as a load does"

    # A changed file for the month: loaded again, raw gains the new rows.
    rows_before = int(raw.current_snapshot().summary["total-records"])
    _land(own_var, 3000, seed=2)
    load = _load(own_var, "changed")
    assert load.unchanged is None
    changed = _snapshots(catalog)
    assert all(changed[table] != first[table] for table in TABLES), (first, changed)
    raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
    assert int(raw.current_snapshot().summary["total-records"]) > rows_before
    assert raw.current_snapshot().summary.get(loaded_source.SOURCE_IDENTITY) not in (None, identity)

    # Raw rolled back to the first file's load: the quarantine's commit names a raw commit raw no longer holds, so
    # the month is loaded again and the changed file's new rows are back in raw.
    raw.manage_snapshots().rollback_to_snapshot(first[naming.TAXI_RAW]).commit()
    load = _load(own_var, "after-rollback")
    assert load.unchanged is None, "raw's history no longer holds the changed file: loaded again"
    raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
    assert raw.current_snapshot().snapshot_id != first[naming.TAXI_RAW]
    assert int(raw.current_snapshot().summary["total-records"]) > rows_before
    assert _raw_rows_and_ids(catalog)[0] == _raw_rows_and_ids(catalog)[1]


def test_a_load_stopped_before_its_last_commit_is_loaded_again_not_taken_as_loaded(own_var):
    """Every commit of a load carries its id; only the audit's publish moves raw's main. A load whose raw commit
    reached main but whose quarantine commit never followed (a load straight into main stopped in between: killed,
    out of memory, a lost node) leaves raw tagged with the month's source and maybe repeated rows in it; its retry
    must load again. The stopped load is reproduced by its effect (not by killing a JVM at the right moment): rows of
    raw's month appended to it again, in a commit tagged as a new load tags its own."""
    import os

    os.environ.update(submit.spark_connection_outside_airflow())
    catalog = settings.pyiceberg_catalog()
    _land(own_var, 3000, seed=3)
    assert _load(own_var, "complete").unchanged is None
    rows, ids = _raw_rows_and_ids(catalog)
    assert rows == ids

    identity = loaded_source.month_state(catalog, naming.TAXI_RAW, MONTH).identity
    assert identity
    table = f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}"
    _submit(own_var, REPEAT_ROWS, ["--table", table, "--month", MONTH, "--identity", identity, "--rows", "5"])
    assert _raw_rows_and_ids(catalog) == (rows + 5, ids)
    assert loaded_source.month_state(catalog, naming.TAXI_RAW, MONTH).identity == identity

    load = _load(own_var, "retried")
    assert load.unchanged is None, "a raw commit of a load the quarantine does not hold was taken as loaded"
    assert _raw_rows_and_ids(catalog) == (rows, ids), "the retry removed the repeated rows"
    assert _load(own_var, "recognised").unchanged, "completed again: the next run recognises the month"
