"""Train the selected model on hourly actuals, evaluate it and the seasonal-naive baseline on a 24-hour holdout."""

from __future__ import annotations

import argparse
import logging
from datetime import timedelta

from include.core import naming
from spark_jobs.common import forecasting, models
from spark_jobs.common.report import column_metrics, write_report
from spark_jobs.common.runner import run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import qualified

log = logging.getLogger("train_model")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=forecasting.MODEL_NAMES, required=True)
    parser.add_argument("--report")
    args = parser.parse_args(argv)

    spark = spark_session(f"train_model_{args.model}")
    inputs = models.load_inputs(spark, with_weather=args.model == "weather")
    holdout_start = inputs.last_ts - timedelta(hours=forecasting.HORIZON_HOURS - 1)
    rows = models.model_rows(inputs)
    train = rows.training(until=holdout_start - timedelta(hours=1))
    holdout = rows.holdout(since=holdout_start)

    _, evaluated = models.fit_and_predict(args.model, train, holdout)
    mae = forecasting.mean_absolute_error(evaluated)
    # The seasonal-naive model is its own baseline: its holdout error is not computed twice.
    baseline_mae = (
        mae if args.model == "seasonal_naive" else forecasting.mean_absolute_error(forecasting.seasonal_naive(holdout))
    )
    fitted, _ = models.fit_and_predict(args.model, rows.training(until=inputs.last_ts), holdout)

    version = models.model_version(args.model)
    metrics = {
        "model_name": args.model,
        "model_version": version,
        "mae": round(mae, 4),
        "baseline_mae": round(baseline_mae, 4),
        "holdout_start": holdout_start,
        "holdout_end": inputs.last_ts,
        "holdout_rows": holdout.count(),
        "training_rows": train.count(),
        "trained_until": inputs.last_ts,
        "input_snapshots": inputs.snapshots,
    }
    folder = models.save_model(args.model, fitted, metrics)
    print(f"model {version}: holdout MAE {mae:.3f} (seasonal-naive baseline {baseline_mae:.3f}), saved to {folder}")
    write_report(
        args.report,
        {
            "input_metrics": {
                naming.HOURLY_ACTUALS: column_metrics(
                    spark.table(qualified(naming.HOURLY_ACTUALS)), ["pulocationid", "total_rides"]
                )
            },
            "inputs": {table: {"snapshot_id": snapshot} for table, snapshot in inputs.snapshots.items()},
            # Saved by plain Python as well as Spark ML (models.save_model): the job says it wrote the model
            "outputs": {naming.model_key(args.model): {}},
            "model": {"path": str(folder), **metrics},
        },
        spark,
    )
    spark.stop()


if __name__ == "__main__":
    run(main)
