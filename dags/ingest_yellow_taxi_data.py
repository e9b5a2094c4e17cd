"""
### Ingest NYC yellow-taxi trips

One run per month (its data interval): download the TLC parquet file of that month into `var/landing/tlc/`
(skipped when not yet published, or already ingested with the same xxhash64 fingerprint unless `force`), stage it
into `nyc_taxi.yellow_taxi_staging` (schema drift across years normalised explicitly; rows with a null pickup zone, a
negative total, a pickup outside the file's month or a dropoff before pickup go to `nyc_taxi.yellow_taxi_quarantine`
with their reason), then MERGE it into
`nyc_taxi.yellow_taxi_raw` on `unique_row_id`, so re-running a month changes nothing.

Months from 2011-01 are ingested; a run of an earlier month fails at once saying why (TLC's 2009-2010 files have no
pickup zone). Pickup and dropoff times are New York wall-clock times, as TLC publishes them (docs/pipeline.md "Time zone").

The raw table's Asset schedules `forecast_yellow_rides`.
"""

from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable
from lakehouse_notifier import LineageAlertNotifier
from lakehouse_operators import LakehouseSparkSubmitOperator, LandSourceOperator

from include.airflow.schedules import DEFAULT_ARGS, MONTH, TAXI_START_DATE, refuse_unsupported_month
from include.core import naming

with DAG(
    dag_id="ingest_yellow_taxi_data",
    schedule=CronDataIntervalTimetable("@monthly", timezone="UTC"),
    start_date=TAXI_START_DATE,
    catchup=False,
    max_active_runs=1,
    # A failed task, a blocked publish, a publish with failed warn expectations: one alert (plugins/lakehouse_notifier.py)
    default_args={
        **DEFAULT_ARGS,
        "on_failure_callback": [LineageAlertNotifier()],
        "on_success_callback": [LineageAlertNotifier(on="success")],
    },
    params={
        "force": Param(
            False,
            type="boolean",
            description="Re-ingest even if the file's fingerprint was ingested (tables that already hold this very file are recognised and left as they are)",
        ),
        "reprocess": Param(
            False,
            type="boolean",
            description="With force: stage and merge again even when the tables already hold this very file",
        ),
    },
    tags=["ingest", "taxi", "iceberg", "openlineage"],
    doc_md=__doc__,
):
    download = LandSourceOperator(
        task_id="download_tlc_month",
        source="tlc",
        month=MONTH,
        force="{{ params.force }}",
        pre_execute=refuse_unsupported_month("tlc"),
    )
    stage = LakehouseSparkSubmitOperator(
        task_id="stage_yellow_taxi",
        script="stage_taxi",
        job_args=["--month", MONTH, "--reprocess={{ params.reprocess }}"],
        inputs=["{{ ti.xcom_pull(task_ids='download_tlc_month')[0]['path'] }}"],
        outputs=[naming.TAXI_STAGING, naming.TAXI_QUARANTINE],
    )
    merge = LakehouseSparkSubmitOperator(
        task_id="merge_yellow_taxi_raw",
        script="merge_taxi",
        job_args=["--month", MONTH, "--reprocess={{ params.reprocess }}"],
        inputs=[naming.TAXI_STAGING],
        outputs=[naming.TAXI_RAW],
    )
    download >> stage >> merge
