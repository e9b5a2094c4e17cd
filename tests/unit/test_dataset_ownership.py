"""Dataset ownership (issue 25 part 5): every Iceberg table the pipeline writes carries OpenLineage's ``ownership``
dataset facet with its owners from their one declaration (``include/core/contract.py``), valid against the vendored
OwnershipDatasetFacet schema; an alert lists the owners of each downstream dataset, read back from a real store."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.serde import Serde

from include.airflow.schedules import DEFAULT_ARGS
from include.core import contract, naming, settings
from include.lineage.emit.facets import input_dataset, output_dataset
from include.lineage.validation import EventValidator
from include.quality import alerts

TABLES = (
    naming.TAXI_RAW,
    naming.TAXI_QUARANTINE,
    naming.WEATHER_STAGING,
    naming.WEATHER_RAW,
    naming.HOURLY_ACTUALS,
    naming.HOURLY_FORECAST,
)


def _event(job: str, inputs: list[str], outputs: list[str], job_facets: dict | None = None) -> dict:
    event = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=datetime.now(UTC).isoformat(),
        producer="https://example.com/test",
        run=Run(runId=str(uuid.uuid4())),
        job=Job(namespace=settings.OPENLINEAGE_NAMESPACE, name=job),
        inputs=[input_dataset(key) for key in inputs],
        outputs=[output_dataset(key) for key in outputs],
    )
    emitted = json.loads(Serde.to_json(event))
    emitted["job"]["facets"] = job_facets or {}
    return emitted


@pytest.mark.parametrize("table", TABLES)
def test_every_iceberg_table_output_carries_its_declared_owners_in_a_valid_ownership_facet(table):
    event = _event("some_dag.some_task", [], [table])
    facet = event["outputs"][0]["facets"]["ownership"]
    assert [owner["name"] for owner in facet["owners"]] == list(contract.table_owners(table))
    assert all(owner["type"] == "MAINTAINER" for owner in facet["owners"])
    assert facet["_schemaURL"].endswith("OwnershipDatasetFacet.json#/$defs/OwnershipDatasetFacet")
    checked = EventValidator().validate([event])
    assert checked.errors == [] and checked.facets_checked.get("ownership") == 1
    assert "ownership" not in checked.facets_without_schema, "checked against the vendored schema"


@pytest.mark.parametrize(
    "key", [naming.model_key("weather"), "/work/var/landing/tlc/yellow_tripdata_2025-01.parquet", "https://x/y.csv"]
)
def test_outputs_that_are_not_iceberg_tables_and_inputs_carry_no_ownership(key):
    event = _event("some_dag.some_task", [naming.TAXI_RAW], [key])
    assert "ownership" not in event["outputs"][0]["facets"]
    assert "ownership" not in event["inputs"][0]["facets"], "a reader does not declare the table's owners"


def test_the_dags_owner_default_is_the_declared_default_owner():
    assert DEFAULT_ARGS["owner"] == contract.DEFAULT_OWNER
    assert set(contract.TABLE_OWNERS) <= set(TABLES), "owners are declared for tables the pipeline writes"


def test_an_alert_names_the_owners_of_each_downstream_dataset_from_the_store(tmp_path):
    paths = settings.Paths(tmp_path / "var")
    paths.lineage.mkdir(parents=True)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    dag_facets = {
        "jobType": {"jobType": "DAG", "integration": "AIRFLOW", "processingType": "BATCH"},
        "ownership": {"owners": [{"name": "data-platform"}]},  # as Airflow's provider emits a DAG's owner
    }
    events = [
        _event("ingest_yellow_taxi_data", [], [], dag_facets),
        _event("forecast_yellow_rides", [], [], dag_facets),
        _event("ingest_yellow_taxi_data.load_yellow_taxi_raw", [], [naming.TAXI_RAW, naming.TAXI_QUARANTINE]),
        _event("forecast_yellow_rides.compute_hourly_actuals", [naming.TAXI_RAW], [naming.HOURLY_ACTUALS]),
        _event("forecast_yellow_rides.write_forecast", [naming.HOURLY_ACTUALS], [naming.HOURLY_FORECAST]),
    ]
    # Airflow's event file, as the tasks left it: the alert catches the store up with it (not the store directly)
    paths.lineage_events.write_text("".join(json.dumps(event) + "\n" for event in events))
    impact = alerts.impact_of(naming.TAXI_RAW, store_url=url, paths=paths)
    owners = {item["name"]: item["owners"] for item in impact["datasets"]}
    assert owners == {
        f"{settings.ICEBERG_NAMESPACE}.{naming.HOURLY_ACTUALS}": ["data-platform", "forecasting"],
        f"{settings.ICEBERG_NAMESPACE}.{naming.HOURLY_FORECAST}": ["data-platform", "forecasting"],
    }
    text = alerts.compose(
        "blocked",
        dag_id="ingest_yellow_taxi_data",
        task_id="load_yellow_taxi_raw",
        run_id="manual__2025-03-01",
        table=naming.TAXI_RAW,
        failures=["daily_rows_vs_trailing_months: FAILED (block)"],
        impact=impact,
        branch="audit_taxi_202502_x",
    )["text"]
    assert "dataset nyc_taxi.yellow_rides_hourly_actuals (owners: data-platform, forecasting)" in text
    assert "dataset nyc_taxi.yellow_rides_hourly_forecast (owners: data-platform, forecasting)" in text
    assert "DAG forecast_yellow_rides (owners: data-platform)" in text
