"""Forecast the next 24 hours for every active pickup zone with the trained model; MERGE into the forecast table."""

from __future__ import annotations

import argparse
from datetime import timedelta

from include.core import naming
from spark_jobs.common import audit, forecasting, models, wap
from spark_jobs.common.report import assertion, write_report
from spark_jobs.common.runner import PublishBlockedError, run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import current_snapshot_id, ensure_table, qualified, row_count

KEYS = ("year", "month", "day", "hour", "pulocationid", "model_name")


def load(spark, rows) -> None:
    ensure_table(spark, naming.HOURLY_FORECAST, rows.schema, partitioned_by="model_name")
    rows.createOrReplaceTempView("new_forecast")
    on = " AND ".join(f"t.{key} = s.{key}" for key in KEYS)
    spark.sql(
        f"""MERGE INTO {qualified(naming.HOURLY_FORECAST)} AS t USING new_forecast AS s ON {on}
        WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"""
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=forecasting.MODEL_NAMES, required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--report")
    args = parser.parse_args(argv)

    spark = spark_session(f"write_forecast_{args.model}")
    fitted, metadata = models.load_model(args.model)
    inputs = models.load_inputs(spark, with_weather=args.model == "weather")
    horizon = forecasting.hour_range(
        spark, inputs.last_ts + timedelta(hours=1), inputs.last_ts + timedelta(hours=forecasting.HORIZON_HOURS)
    )
    targets = models.features(inputs.zones.crossJoin(horizon), inputs.known, inputs.weather)
    predictions = forecasting.seasonal_naive(targets) if fitted is None else fitted.transform(targets)
    # Materialised: MERGE rejects a source whose plan holds the model's non-deterministic UDFs.
    rows = forecasting.forecast_rows(predictions, args.model, metadata["model_version"], args.run_id).localCheckpoint()
    # Write-audit-publish (spark_jobs/common/wap.py): main moves only if the forecast passes its expectations.
    ensure_table(spark, naming.HOURLY_FORECAST, rows.schema, partitioned_by="model_name")
    before = current_snapshot_id(spark, naming.HOURLY_FORECAST)
    branch = wap.branch_name(f"forecast_{args.model}")
    wap.open_branch(spark, naming.HOURLY_FORECAST, branch)
    load(spark, rows)
    zones, written = inputs.zones.count(), rows.count()
    negative = rows.where("forecasted_total_rides < 0").count()
    observations = audit.forecast_run(spark, args.model, args.run_id, zones, forecasting.HORIZON_HOURS)
    audited = wap.publish_or_block(
        spark, naming.HOURLY_FORECAST, branch, before, audit.judge(naming.HOURLY_FORECAST, *observations)
    )
    blocked = None if audited["published"] else wap.blocked_message(audited)
    write_report(
        args.report,
        {
            "audit": audited,
            **({"error": {"kind": "blocked", "message": blocked}} if blocked else {}),
            "assertions": {
                naming.HOURLY_FORECAST: [
                    assertion(
                        "covers_horizon_for_every_active_zone",
                        written == forecasting.HORIZON_HOURS * zones,
                        "forecasted_total_rides",
                        written,
                        forecasting.HORIZON_HOURS * zones,
                    ),
                    assertion("non_negative", negative == 0, "forecasted_total_rides", negative, 0),
                    *audited["results"],
                ]
            },
            "inputs": {
                **{table: {"snapshot_id": snapshot} for table, snapshot in inputs.snapshots.items()},
                naming.model_key(args.model): {},  # loaded by plain Python (models.load_model): Spark may not see it
            },
            # The forecast is a DataFrame built in the driver: Spark's plan, and the listener, map its columns to
            # themselves. What it is computed from is what the fitted model uses, read off the model.
            "column_lineage": {
                naming.HOURLY_FORECAST: forecasting.forecast_column_lineage(models.used_inputs(args.model, fitted))
            },
            "model": {"path": naming.model_uri(args.model), **metadata},
            "outputs": {
                naming.HOURLY_FORECAST: {
                    "previous_snapshot_id": before,
                    "snapshot_id": audited["main_snapshot_id"] if not blocked else audited["branch_snapshot_id"],
                    "rows": row_count(spark, naming.HOURLY_FORECAST),
                    "written_rows": written,
                    "zones": zones,
                }
            },
        },
        spark,
    )
    spark.stop()
    if blocked:
        raise PublishBlockedError(blocked)


if __name__ == "__main__":
    run(main)
