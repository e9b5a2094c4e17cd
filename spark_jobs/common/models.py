"""Inputs, training and persistence of the two forecast models. The model artifact lives under var/models/, or on
the object store of ``PIPELINE_MODELS_URI`` (``naming.model_uri``), where a forecast task on another machine finds it."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import xxhash
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from include.core import naming, object_store
from spark_jobs.common import forecasting
from spark_jobs.common.tables import current_snapshot_id, qualified
from spark_jobs.common.weather import daily_nyc_weather

MODEL_PARAMS = {
    "seasonal_naive": {"season_hours": forecasting.SEASON_HOURS},
    "weather": {"features": forecasting.FEATURES + ["hour", "weekday"], "regParam": 0.01, "elasticNetParam": 0.0},
}


def model_version(model_name: str) -> str:
    """Changes with the model's code or parameters."""
    digest = xxhash.xxh64()
    for module in (forecasting, sys.modules[__name__]):
        digest.update(module.__loader__.get_data(module.__file__))  # also when imported from the shipped zip
    digest.update(json.dumps(MODEL_PARAMS[model_name], sort_keys=True).encode())
    return f"{model_name}-{digest.hexdigest()[:12]}"


@dataclass
class ForecastInputs:
    known: DataFrame  # dense (pulocationid, ts, y) over the whole actuals period, active zones only
    zones: DataFrame
    first_ts: datetime
    last_ts: datetime
    weather: DataFrame | None
    snapshots: dict


def load_inputs(spark, with_weather: bool) -> ForecastInputs:
    actuals = forecasting.with_hour_timestamp(spark.table(qualified(naming.HOURLY_ACTUALS))).cache()
    bounds = actuals.agg(F.min("ts").alias("first"), F.max("ts").alias("last")).first()
    if bounds.last is None:
        raise ValueError(f"{qualified(naming.HOURLY_ACTUALS)} is empty: ingest taxi data and compute actuals first")
    zones = forecasting.active_zones(actuals, bounds.last).cache()
    hours = forecasting.hour_range(spark, bounds.first, bounds.last)
    known = forecasting.dense_grid(actuals, zones, hours).cache()
    snapshots = {naming.HOURLY_ACTUALS: current_snapshot_id(spark, naming.HOURLY_ACTUALS)}
    weather = None
    if with_weather:
        weather = daily_nyc_weather(spark.table(qualified(naming.WEATHER_RAW))).cache()
        snapshots[naming.WEATHER_RAW] = current_snapshot_id(spark, naming.WEATHER_RAW)
    return ForecastInputs(known, zones, bounds.first, bounds.last, weather, snapshots)


def features(targets: DataFrame, known: DataFrame, weather: DataFrame | None) -> DataFrame:
    framed = forecasting.with_calendar(forecasting.with_lags(targets, known))
    if weather is not None:
        framed = forecasting.with_weather(framed, weather)
    return framed


def weather_pipeline():
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import OneHotEncoder, VectorAssembler
    from pyspark.ml.regression import LinearRegression

    params = MODEL_PARAMS["weather"]
    encoder = OneHotEncoder(inputCols=["hour", "weekday"], outputCols=["hour_vec", "weekday_vec"], dropLast=True)
    assembler = VectorAssembler(inputCols=forecasting.FEATURES + ["hour_vec", "weekday_vec"], outputCol="features")
    regression = LinearRegression(
        labelCol="y", featuresCol="features", regParam=params["regParam"], elasticNetParam=params["elasticNetParam"]
    )
    return Pipeline(stages=[encoder, assembler, regression])


@dataclass
class ModelRows:
    """Every known hour's features, computed once and cached; training, holdout and final fit are its slices."""

    every_hour: DataFrame
    earliest: datetime  # the first hour with a full season of lags before it

    def training(self, until: datetime) -> DataFrame:
        return self.every_hour.where((F.col("ts") >= F.lit(self.earliest)) & (F.col("ts") <= F.lit(until)))

    def holdout(self, since: datetime) -> DataFrame:
        return self.every_hour.where(F.col("ts") >= F.lit(since))


def model_rows(inputs: ForecastInputs) -> ModelRows:
    # One pass of the lag and weather joins, not one per slice: a model's fit and evaluation read these rows
    # several times each (the encoder's fit, the regression's passes, the errors).
    every_hour = features(inputs.known, inputs.known, inputs.weather).cache()
    return ModelRows(every_hour, inputs.first_ts + timedelta(hours=forecasting.SEASON_HOURS))


def fit_and_predict(model_name: str, train: DataFrame, score: DataFrame):
    """Fit on ``train``, predict ``score``. Returns (fitted model or None, predictions)."""
    if model_name == "seasonal_naive":
        return None, forecasting.seasonal_naive(score)
    fitted = weather_pipeline().fit(train)
    return fitted, fitted.transform(score)


def used_inputs(model_name: str, fitted) -> list[str]:
    """The model inputs (``forecasting.INPUT_SOURCES``' keys) a fitted model really uses, read off the model: the
    seasonal-naive forecast is the seasonal lag; a fitted pipeline's are its assembler's input columns, an encoded
    column traced back through its encoder to the column it encodes."""
    if fitted is None:
        return [f"lag_{forecasting.SEASON_HOURS}"]
    from pyspark.ml.feature import OneHotEncoderModel, VectorAssembler

    encoded = {}
    for stage in fitted.stages:
        if isinstance(stage, OneHotEncoderModel):
            encoded.update(zip(stage.getOutputCols(), stage.getInputCols(), strict=True))
    [assembler] = [stage for stage in fitted.stages if isinstance(stage, VectorAssembler)]
    return [encoded.get(column, column) for column in assembler.getInputCols()]


def save_model(model_name: str, fitted, metrics: dict) -> str:
    """Save the model to ``naming.model_uri``: staged beside it (``<name>.tmp``) and then put in its place, so the
    forecast never loads half a model; returns its location."""
    location = naming.model_uri(model_name)
    staging = location + naming.MODEL_STAGING_SUFFIX
    if object_store.is_remote(location):
        object_store.delete_tree(staging)
    else:
        shutil.rmtree(staging, ignore_errors=True)
        Path(staging).mkdir(parents=True)
    if fitted is not None:
        fitted.write().overwrite().save(f"{staging}/{naming.SPARK_MODEL_FOLDER}")
    description = json.dumps({**metrics, "params": MODEL_PARAMS[model_name]}, indent=2, default=str)
    object_store.write_bytes(f"{staging}/model.json", description.encode())
    if object_store.is_remote(location):
        object_store.replace_tree(staging, location)  # an object store has no rename: copied over, then deleted
    else:
        shutil.rmtree(location, ignore_errors=True)
        Path(staging).rename(location)
    return location


def load_model(model_name: str):
    location = naming.model_uri(model_name)
    metadata = json.loads(object_store.read_bytes(f"{location}/model.json"))
    fitted = None
    if object_store.exists(f"{location}/{naming.SPARK_MODEL_FOLDER}"):  # a folder, or objects under that prefix
        from pyspark.ml import PipelineModel

        fitted = PipelineModel.load(f"{location}/{naming.SPARK_MODEL_FOLDER}")
    return fitted, metadata
