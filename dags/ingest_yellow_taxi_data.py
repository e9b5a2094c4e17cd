"""
### Ingest NYC yellow-taxi trips

One run per month (its data interval): download the TLC parquet file of that month into `var/landing/tlc/`
(skipped when not yet published, or already ingested with the same xxhash64 fingerprint unless `force`), then load
it into `nyc_taxi.yellow_taxi_raw` in one Spark task, its rows written once: schema drift across years normalised
explicitly, rows with a null pickup zone, a negative total, a pickup outside the file's month or a dropoff before
pickup to `nyc_taxi.yellow_taxi_quarantine` with their reason, the good ones to an audit branch of raw (on
`unique_row_id`, so re-running a month changes nothing), published to `main` only when the audit passes.

Months from 2011-01 are ingested; a run of an earlier month fails at once saying why (TLC's 2009-2010 files have no
pickup zone). Pickup and dropoff times are New York wall-clock times, as TLC publishes them (docs/pipeline.md "Time zone").

The raw table's Asset schedules `forecast_yellow_rides`.
"""

from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable
from lakehouse_notifier import LineageAlertNotifier
from lakehouse_operators import LakehouseSparkSubmitOperator, LandSourceOperator

from include.airflow.schedules import MONTH, TAXI_START_DATE, alerting_default_args, land_month
from include.core import naming

with DAG(
    dag_id="ingest_yellow_taxi_data",
    schedule=CronDataIntervalTimetable("@monthly", timezone="UTC"),
    start_date=TAXI_START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=alerting_default_args(LineageAlertNotifier),  # plugins/lakehouse_notifier.py
    params={
        "force": Param(
            False,
            type="boolean",
            description="Re-ingest even if the file's fingerprint was ingested (tables that already hold this very file are recognised and left as they are)",
        ),
        "reprocess": Param(
            False,
            type="boolean",
            description="With force: load again even when the tables already hold this very file",
        ),
    },
    tags=["ingest", "taxi", "iceberg", "openlineage"],
    doc_md=__doc__,
):
    download = LandSourceOperator(task_id="download_tlc_month", **land_month("tlc"))
    load = LakehouseSparkSubmitOperator(
        task_id="load_yellow_taxi_raw",
        script="load_taxi",
        job_args=["--month", MONTH, "--reprocess={{ params.reprocess }}"],
        inputs=["{{ ti.xcom_pull(task_ids='download_tlc_month')[0]['path'] }}"],
        outputs=[naming.TAXI_RAW, naming.TAXI_QUARANTINE],
    )
    download >> load
