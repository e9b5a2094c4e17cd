"""A forced re-load of an unchanged month is recognised before any Spark session starts, from the tables' own
Iceberg histories (spark_jobs/common/loaded_source.py), and a changed file or a rolled-back table never is.

The taxi jobs run as the operator runs them (spark-submit of the job script with the project's code zip, jars and
settings) in a var/ of their own, so the shared run's tables are untouched."""

from __future__ import annotations

import pytest
from airflow.exceptions import AirflowException

from include.core import naming, settings
from include.core.contract import JobReport
from include.services import catalog_server
from include.sources import sample_data
from include.spark import submit
from spark_jobs.common import loaded_source
from tests.integration.isolated_var import IsolatedVar

pytestmark = pytest.mark.spark

MONTH = "2025-01"
TABLES = (naming.TAXI_STAGING, naming.TAXI_QUARANTINE, naming.TAXI_RAW)


@pytest.fixture(scope="module")
def own_var(paths):
    run = IsolatedVar(paths.var / "unchanged-reload").setup()
    with run.activated():
        catalog_server.ensure_running(run.paths)
        try:
            yield run
        finally:
            catalog_server.stop(run.paths)


def _job(run: IsolatedVar, script: str, step: str, *extra: str) -> JobReport:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    report = run.paths.var / "reports" / f"{step}-{script}.json"
    SparkSubmitHook(
        **submit.spark_submit_kwargs(run.paths), application_args=["--month", MONTH, "--report", str(report), *extra]
    ).submit(str(settings.SPARK_JOBS_DIR / f"{script}.py"))
    return JobReport.read(report)


def _ingest(run: IsolatedVar, step: str, *extra: str) -> tuple[JobReport, JobReport]:
    return _job(run, "stage_taxi", step, *extra), _job(run, "merge_taxi", step, *extra)


def _snapshots(catalog) -> dict[str, int | None]:
    return {table: loaded_source.month_state(catalog, table, MONTH).snapshot_id for table in TABLES}


def _land(run: IsolatedVar, rows: int, seed: int) -> None:
    sample_data.write_taxi_month(run.paths.landing / "tlc", 2025, 1, rows, seed=seed)


def test_an_unchanged_month_is_recognised_and_a_changed_or_rolled_back_one_is_loaded(own_var):
    import os

    os.environ.update(submit.spark_connection_outside_airflow())
    catalog = settings.pyiceberg_catalog()
    _land(own_var, 3000, seed=1)

    stage, merge = _ingest(own_var, "first")
    assert stage.unchanged is None and merge.unchanged is None
    first = _snapshots(catalog)
    assert all(first.values()), first
    raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
    tags = raw.current_snapshot().summary
    assert tags.get(loaded_source.SOURCE_MONTH) == MONTH
    identity = tags.get(loaded_source.SOURCE_IDENTITY)
    assert identity and identity.startswith("xxhash64:"), tags

    # The same file again (what the DAG's `force` does): nothing staged or merged, every snapshot where it was.
    stage, merge = _ingest(own_var, "again")
    assert stage.unchanged and "nothing staged" in stage.unchanged, stage
    assert merge.unchanged and "nothing merged" in merge.unchanged, merge
    assert _snapshots(catalog) == first
    for table in (naming.TAXI_STAGING, naming.TAXI_QUARANTINE):
        assert stage.outputs[table]["snapshot_id"] == stage.outputs[table]["previous_snapshot_id"] == first[table]
    assert merge.outputs[naming.TAXI_RAW]["snapshot_id"] == first[naming.TAXI_RAW]

    # The DAG's `reprocess` param: stage again although the tables hold this file (the merge then finds every id).
    stage, merge = _ingest(own_var, "reprocessed", "--reprocess=True")
    assert stage.unchanged is None and merge.unchanged is None
    assert _snapshots(catalog)[naming.TAXI_STAGING] != first[naming.TAXI_STAGING]
    assert _snapshots(catalog)[naming.TAXI_RAW] == first[naming.TAXI_RAW], "no row added"
    first = _snapshots(catalog)

    # A changed file for the month: staged and merged again, raw gains the new rows.
    rows_before = int(raw.current_snapshot().summary["total-records"])
    _land(own_var, 3000, seed=2)
    stage, merge = _ingest(own_var, "changed")
    assert stage.unchanged is None and merge.unchanged is None
    changed = _snapshots(catalog)
    assert all(changed[table] != first[table] for table in TABLES), (first, changed)
    raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
    assert int(raw.current_snapshot().summary["total-records"]) > rows_before
    assert raw.current_snapshot().summary.get(loaded_source.SOURCE_IDENTITY) not in (None, identity)

    # Raw rolled back to the first file's load: staging still holds the changed file, so only the merge runs, and
    # the month's changed rows are back in raw.
    raw.manage_snapshots().rollback_to_snapshot(first[naming.TAXI_RAW]).commit()
    stage, merge = _ingest(own_var, "after-rollback")
    assert stage.unchanged, "staging and quarantine still hold the changed file"
    assert merge.unchanged is None, "raw's history no longer holds the changed file: merged again"
    raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
    assert raw.current_snapshot().snapshot_id != first[naming.TAXI_RAW]
    assert int(raw.current_snapshot().summary["total-records"]) > rows_before


def _staged_rows_and_ids(catalog) -> tuple[int, int]:
    staging = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_STAGING}")
    ids = staging.scan(row_filter=f"source_month == '{MONTH}'", selected_fields=("unique_row_id",)).to_arrow()
    return ids.num_rows, len(set(ids.column("unique_row_id").to_pylist()))


def test_a_stage_stopped_before_its_last_commit_is_staged_again_not_taken_as_loaded(own_var):
    """A stage writes staging, removes its repeated rows, then writes the quarantine. Stopped in between (killed,
    out of memory, a lost node), it leaves staging tagged with the month's source but repeated rows maybe still in
    it; its retry must stage again. The stopped stage is reproduced here by its effect (not by killing a JVM at the
    right moment): rows of staging appended to it again, in a commit tagged as the stage tags its own."""
    import os

    os.environ.update(submit.spark_connection_outside_airflow())
    catalog = settings.pyiceberg_catalog()
    _land(own_var, 3000, seed=3)
    stage = _job(own_var, "stage_taxi", "complete")
    assert stage.unchanged is None
    rows, ids = _staged_rows_and_ids(catalog)
    assert rows == ids

    staging = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_STAGING}")
    identity = loaded_source.month_state(catalog, naming.TAXI_STAGING, MONTH).identity
    assert identity
    repeated = staging.scan(row_filter=f"source_month == '{MONTH}'", limit=5).to_arrow()
    staging.append(
        repeated, snapshot_properties={loaded_source.SOURCE_MONTH: MONTH, loaded_source.SOURCE_IDENTITY: identity}
    )
    assert _staged_rows_and_ids(catalog) == (rows + 5, ids)

    # The merge refuses such a staging (its repeated rows would go to raw), saying what to do.
    raw_before = loaded_source.month_state(catalog, naming.TAXI_RAW, MONTH).snapshot_id
    report = own_var.paths.var / "reports" / "half-staged-merge_taxi.json"
    with pytest.raises(AirflowException):
        _job(own_var, "merge_taxi", "half-staged")
    error = JobReport.read(report).error
    assert error["kind"] == "bad_input", error
    assert "did not complete" in error["message"] and "run the stage of 2025-01 again" in error["message"], error
    assert loaded_source.month_state(catalog, naming.TAXI_RAW, MONTH).snapshot_id == raw_before

    stage = _job(own_var, "stage_taxi", "retried")
    assert stage.unchanged is None, "a staging the quarantine's commit does not complete was taken as loaded"
    assert _staged_rows_and_ids(catalog) == (rows, ids)
    # Completed again: the next run recognises the month, and the merge takes it.
    assert _job(own_var, "stage_taxi", "recognised").unchanged
    assert _job(own_var, "merge_taxi", "after-retry").error is None
