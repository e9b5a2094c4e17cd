"""
### Forecast hourly yellow-taxi rides

Runs when both raw tables have new data (their Assets). Computes hourly actuals per pickup zone (MERGE, idempotent),
trains the model chosen by the `model` param and evaluates it against the seasonal-naive baseline on a 24-hour
holdout (MAE), then writes the next 24 hours for every active zone into `nyc_taxi.yellow_rides_hourly_forecast`.

- `seasonal_naive`: the same zone and hour 7 days earlier; reads only the taxi side.
- `weather`: Spark MLlib linear regression on lags (24 h, 7 days), hour, weekday and the day's NYC weather; reads
  `nyc_taxi.weather_raw` too.

The model is saved under `var/models/<model>/`, a dataset in the lineage between actuals and forecast.
"""

from airflow.sdk import DAG, Param
from lakehouse_notifier import LineageAlertNotifier
from lakehouse_operators import LakehouseSparkSubmitOperator

from include.airflow.schedules import START_DATE, alerting_default_args
from include.core import naming

MODEL = "{{ params.model }}"
WEATHER_IF_USED = "{{ '" + naming.WEATHER_RAW + "' if params.model == 'weather' else '' }}"

with DAG(
    dag_id="forecast_yellow_rides",
    schedule=(naming.table_asset(naming.TAXI_RAW) & naming.table_asset(naming.WEATHER_RAW)),
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=alerting_default_args(LineageAlertNotifier),  # plugins/lakehouse_notifier.py
    params={"model": Param("seasonal_naive", enum=["seasonal_naive", "weather"], description="Forecast model")},
    tags=["forecast", "ml", "iceberg", "openlineage"],
    doc_md=__doc__,
):
    actuals = LakehouseSparkSubmitOperator(
        task_id="compute_hourly_actuals",
        script="compute_actuals",
        inputs=[naming.TAXI_RAW],
        outputs=[naming.HOURLY_ACTUALS],
    )
    train = LakehouseSparkSubmitOperator(
        task_id="train_model",
        script="train_model",
        job_args=["--model", MODEL],
        inputs=[naming.HOURLY_ACTUALS, WEATHER_IF_USED],
        outputs=[naming.model_key(MODEL)],
    )
    forecast = LakehouseSparkSubmitOperator(
        task_id="write_forecast",
        script="write_forecast",
        job_args=["--model", MODEL, "--run-id", "{{ run_id }}"],
        inputs=[naming.model_key(MODEL), naming.HOURLY_ACTUALS, WEATHER_IF_USED],
        outputs=[naming.HOURLY_FORECAST],
    )
    actuals >> train >> forecast
