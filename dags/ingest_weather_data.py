"""
### Ingest NOAA nClimGrid daily weather

One run per day: download the month-to-date county files (precipitation, mean/min/max temperature) of the month
holding the run's day into `var/landing/noaa/` (skipped when unchanged since the last ingest), stage them into
`nyc_taxi.weather_staging`, then MERGE into `nyc_taxi.weather_raw` on (region, year, month, element): one row per
county, month and element, `-999.99` for days without an observation. A day's new observations update the row.
"""

from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable
from lakehouse_notifier import LineageAlertNotifier
from lakehouse_operators import LakehouseSparkSubmitOperator, LandSourceOperator

from include.airflow.schedules import MONTH, WEATHER_START_DATE, alerting_default_args, land_month
from include.core import naming

with DAG(
    dag_id="ingest_weather_data",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=WEATHER_START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=alerting_default_args(LineageAlertNotifier),  # plugins/lakehouse_notifier.py
    params={
        "force": Param(False, type="boolean", description="Re-ingest even if the files' fingerprints were ingested")
    },
    tags=["ingest", "weather", "iceberg", "openlineage"],
    doc_md=__doc__,
):
    download = LandSourceOperator(task_id="download_noaa_month", **land_month("noaa"))
    stage = LakehouseSparkSubmitOperator(
        task_id="stage_weather",
        script="stage_weather",
        job_args=["--month", MONTH],
        inputs=["{{ ti.xcom_pull(task_ids='download_noaa_month') | map(attribute='path') | join(',') }}"],
        outputs=[naming.WEATHER_STAGING],
    )
    merge = LakehouseSparkSubmitOperator(
        task_id="merge_weather_raw",
        script="merge_weather",
        job_args=["--month", MONTH],
        inputs=[naming.WEATHER_STAGING],
        outputs=[naming.WEATHER_RAW],
    )
    download >> stage >> merge
