"""
### Test DAG: the extractor on a stock SparkSubmitOperator

The same Spark job twice: once through the project's `LakehouseSparkSubmitOperator` (datasets declared as lineage
keys), once through Airflow's stock `SparkSubmitOperator` with `inlets`/`outlets` Assets. The custom extractor must
give both the same datasets and Iceberg facets. Only `tests/integration/test_stock_operator.py` loads this folder.
"""

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG
from lakehouse_operators import LakehouseSparkSubmitOperator

from include.airflow.schedules import START_DATE
from include.core import naming, settings
from include.spark import submit

MONTH = "2025-01"  # the month the session's pipeline run ingested: the MERGE changes no row of weather_raw

with DAG(
    dag_id="stock_spark_submit",
    schedule=None,
    start_date=START_DATE,
    catchup=False,
    tags=["test", "openlineage"],
    doc_md=__doc__,
):
    project = LakehouseSparkSubmitOperator(
        task_id="project_operator",
        script="merge_weather",
        job_args=["--month", MONTH],
        inputs=[naming.WEATHER_STAGING],
        outputs=[naming.WEATHER_RAW],
    )
    stock = SparkSubmitOperator(
        task_id="stock_operator",
        application=str(settings.SPARK_JOBS_DIR / "merge_weather.py"),
        application_args=["--month", MONTH],
        inlets=[naming.table_asset(naming.WEATHER_STAGING)],
        outlets=[naming.table_asset(naming.WEATHER_RAW)],
        name="stock_operator",
        **submit.spark_submit_kwargs(),
    )
    project >> stock
