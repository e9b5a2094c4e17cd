"""
### Test DAGs: lineage observed, not declared

`observed_lineage`: one plain PySpark script (no job report, nothing of the project's imported) that counts
`yellow_taxi_raw`'s trips by pickup zone into a new table, run twice: by Airflow's stock `SparkSubmitOperator` with
no `inlets`/`outlets`, then by the project's operator declaring a table it does not read. `evolving_job`: the
project's operator with no declaration, running a script the test rewrites between runs (the DAG unchanged).
Only `tests/integration/test_observed_lineage.py` loads this folder; it writes the scripts under `var/byo-jobs/`.
"""

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG
from lakehouse_notifier import LineageAlertNotifier
from lakehouse_operators import LakehouseSparkSubmitOperator

from include.airflow.schedules import START_DATE
from include.core import naming, settings
from include.spark import submit

JOBS = settings.Paths.current().var / "byo-jobs"  # a path only: the test writes the scripts before each run

with DAG(dag_id="observed_lineage", schedule=None, start_date=START_DATE, catchup=False, tags=["test"]):
    stock = SparkSubmitOperator(
        task_id="stock_plain_script",
        application=str(JOBS / "zone_trip_counts.py"),
        name="zone_trip_counts",
        **submit.spark_submit_kwargs(),
    )
    declared = LakehouseSparkSubmitOperator(
        task_id="declared_elsewhere",
        script=str(JOBS / "zone_trip_counts.py"),
        inputs=[naming.WEATHER_RAW],  # what the author believes; the script reads yellow_taxi_raw
        outputs=["zone_trip_counts"],
        on_success_callback=[LineageAlertNotifier(on="success")],  # the drift alert
    )
    stock >> declared

with DAG(dag_id="evolving_job", schedule=None, start_date=START_DATE, catchup=False, tags=["test"]):
    LakehouseSparkSubmitOperator(task_id="evolving", script=str(JOBS / "evolving.py"))
