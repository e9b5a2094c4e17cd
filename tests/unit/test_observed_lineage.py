"""A task's lineage is what its Spark applications did (include/lineage/emit/observed.py): the roll-up rules, pinned
on the listener's own events (a fixture openlineage-spark wrote) and on table-driven edge cases."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from include.core import naming, settings
from include.core.contract import JobReport
from include.lineage.emit import column_lineage, observed

FIXTURE = settings.PROJECT_ROOT / "tests" / "fixtures" / "listener" / "compute_actuals.ndjson"
TASK_RUN_ID = "0194bf05-8e80-7017-86fc-0371712feade"  # the Airflow task run the fixture's application ran under


def _fixture_events(paths) -> list[dict]:
    catalog = settings.CatalogSettings.current()
    text = FIXTURE.read_text().replace("@VAR@", str(paths.var)).replace("@CATALOG_URI@", catalog.uri)
    return [json.loads(line) for line in text.splitlines()]


def _warehouse(paths) -> str:
    return settings.CatalogSettings.current().warehouse.removeprefix("file://").rstrip("/")


def test_the_listeners_events_of_a_task_roll_up_to_what_it_read_and_wrote(paths):
    seen = observed.roll_up(_fixture_events(paths), TASK_RUN_ID, paths)
    assert seen.applications == 1
    assert seen.input_keys() == [naming.TAXI_RAW]
    assert seen.output_keys() == [naming.HOURLY_ACTUALS]
    columns = seen.columns[naming.HOURLY_ACTUALS]
    # compute_actuals groups raw trips by pickup hour and zone (spark_jobs/common/taxi.py hourly_actuals)
    for part in ("year", "month", "day", "hour"):
        assert {(s[0], s[1]) for s in columns[part]} == {(naming.TAXI_RAW, "tpep_pickup_datetime")}
    assert columns["pulocationid"] == [(naming.TAXI_RAW, "PULocationID", "DIRECT", "IDENTITY")]
    # count(*) names no input field: it depends on what the whole dataset depends on (its GROUP BY)
    assert (naming.TAXI_RAW, "PULocationID", "INDIRECT", "GROUP_BY") in columns["total_rides"]


def test_events_of_other_tasks_are_not_this_tasks(paths):
    events = _fixture_events(paths)
    assert observed.roll_up(events, str(uuid.uuid4()), paths).output_keys() == []
    assert observed.roll_up(events, None, paths).output_keys() == [naming.HOURLY_ACTUALS]


def _event(run_id: str, parent: str, inputs=(), outputs=(), event_type="COMPLETE") -> dict:
    return {
        "eventType": event_type,
        "run": {
            "runId": run_id,
            "facets": {"parent": {"run": {"runId": parent}, "job": {"namespace": "n", "name": "p"}}},
        },
        "job": {"namespace": "n", "name": "j"},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def _file(path: str, facets: dict | None = None) -> dict:
    return {"namespace": "file", "name": path, "facets": {"dataSource": {}} if facets is None else facets}


def _rules(paths) -> list[tuple[str, list[dict], list[str], list[str]]]:
    warehouse, landing = _warehouse(paths), str(paths.var / "landing")
    raw = f"{warehouse}/{settings.ICEBERG_NAMESPACE}/{naming.TAXI_RAW}"
    forecast = f"{warehouse}/{settings.ICEBERG_NAMESPACE}/{naming.HOURLY_FORECAST}"
    model = str(paths.models / "weather")
    return [
        (
            "a folder named bare (Spark's listing before a read) is not an input; the file it lists is",
            [_event("a", "T", [_file(landing, {}), _file(f"{landing}/x.parquet")])],
            [f"{landing}/x.parquet"],
            [],
        ),
        (
            "Iceberg's own files are not datasets",
            [_event("a", "T", [_file(f"{raw}/metadata/v3.metadata.json")], [_file(f"{raw}/data/part-0.parquet")])],
            [],
            [],
        ),
        (
            "a table the task writes is not its input (a MERGE's target scan)",
            [_event("a", "T", [_file(forecast)], [_file(forecast)])],
            [],
            [naming.HOURLY_FORECAST],
        ),
        (
            "a model folder is the model's key",
            [_event("a", "T", [], [_file(model)])],
            [],
            [naming.model_key("weather")],
        ),
        (
            "a table of the catalog's namespace is its name; another's is its location",
            [_event("a", "T", [_file(raw), _file(f"{warehouse}/other_ns/t")])],
            [f"{warehouse}/other_ns/t", naming.TAXI_RAW],
            [],
        ),
        (
            "an SQL execution of the task's application counts; one of another application does not",
            [
                _event("app", "T", event_type="START"),
                _event("sql", "app", [_file(raw)]),
                _event("other-sql", "other-app", [_file(forecast)]),
            ],
            [naming.TAXI_RAW],
            [],
        ),
    ]


@pytest.mark.parametrize("index", range(6))
def test_roll_up_rules(paths, index):
    reason, events, inputs, outputs = _rules(paths)[index]
    seen = observed.with_report(observed.roll_up(events, "T", paths), JobReport())
    assert (sorted(seen.input_keys()), sorted(seen.output_keys())) == (sorted(inputs), sorted(outputs)), reason


def test_what_the_job_reports_joins_the_observation_and_its_column_lineage_wins(paths):
    forecast = f"{_warehouse(paths)}/{settings.ICEBERG_NAMESPACE}/{naming.HOURLY_FORECAST}"
    self_mapped = {
        "namespace": "file",
        "name": forecast,
        "facets": {
            "dataSource": {},
            "columnLineage": {
                "fields": {
                    "forecasted_total_rides": {
                        "inputFields": [{"namespace": "file", "name": forecast, "field": "forecasted_total_rides"}]
                    }
                }
            },
        },
    }
    report = JobReport(
        inputs={naming.HOURLY_ACTUALS: {}, naming.model_key("seasonal_naive"): {}},
        column_lineage={
            naming.HOURLY_FORECAST: {
                "forecasted_total_rides": [[naming.HOURLY_ACTUALS, "total_rides", "DIRECT", "TRANSFORMATION"]]
            }
        },
    )
    seen = observed.with_report(observed.roll_up([_event("a", "T", [self_mapped], [self_mapped])], "T", paths), report)
    assert sorted(seen.input_keys()) == sorted([naming.HOURLY_ACTUALS, naming.model_key("seasonal_naive")])
    assert seen.columns == {
        naming.HOURLY_FORECAST: {
            "forecasted_total_rides": [(naming.HOURLY_ACTUALS, "total_rides", "DIRECT", "TRANSFORMATION")]
        }
    }
    facet = column_lineage.facet_of(seen.columns[naming.HOURLY_FORECAST])
    [field] = facet.fields["forecasted_total_rides"].inputFields
    actuals = naming.table_id(naming.HOURLY_ACTUALS)
    assert (field.namespace, field.name, field.field) == (actuals.namespace, actuals.name, "total_rides")


def test_drift_compares_declared_with_observed_by_identity(paths):
    seen = observed.Observed(inputs={naming.TAXI_RAW: {}}, outputs={"zone_counts": {}})
    found = observed.drift([naming.WEATHER_RAW], ["zone_counts"], seen)
    assert found.declared_not_read == [naming.WEATHER_RAW]
    assert found.read_not_declared == [naming.TAXI_RAW]
    assert (found.declared_not_written, found.written_not_declared) == ([], [])
    assert found
    # the same file declared by path and observed by the listener's name is the same dataset
    landed = str(paths.var / "landing" / "tlc" / "f.parquet")
    assert not observed.drift([landed], [], observed.Observed(inputs={landed: {}}))


def test_a_torn_or_broken_line_is_left_out_not_fatal(paths, tmp_path):
    events = _fixture_events(paths)
    file = tmp_path / "events.jsonl"
    file.write_text("not json\n" + "".join(json.dumps(e) + "\n" for e in events) + '{"torn": ')
    assert len(observed.events_after(file, 0)) == len(events)
    assert len(observed.events_after(file, file.stat().st_size)) == 0


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4), st.lists(st.sampled_from(["a", "b", "c"]), max_size=3)
)
def test_no_output_is_ever_an_input_and_every_column_source_is_an_input(inputs, outputs):
    seen = observed.Observed(
        inputs={key: {} for key in inputs},
        outputs={key: {} for key in outputs},
        columns={key: {"c": [(source, "x", "DIRECT", "IDENTITY") for source in inputs]} for key in outputs},
    )
    seen = observed.with_report(seen, JobReport())
    assert not set(seen.inputs) & set(seen.outputs)
    for columns in seen.columns.values():
        assert all(source[0] in seen.inputs for sources in columns.values() for source in sources)


def _written(paths, fields: dict, dataset_level: list[tuple[str, str]], schema: list[str]) -> dict:
    raw = f"{_warehouse(paths)}/{settings.ICEBERG_NAMESPACE}/{naming.TAXI_RAW}"
    out = f"{_warehouse(paths)}/{settings.ICEBERG_NAMESPACE}/out"

    def field(column, subtype):
        kind = "DIRECT" if subtype in ("IDENTITY", "TRANSFORMATION") else "INDIRECT"
        return {
            "namespace": "file",
            "name": raw,
            "field": column,
            "transformations": [{"type": kind, "subtype": subtype}],
        }

    facets = {
        "schema": {"fields": [{"name": c, "type": "string"} for c in schema]},
        "columnLineage": {
            "fields": {c: {"inputFields": [field(*source)]} for c, source in fields.items()},
            "dataset": [field(*source) for source in dataset_level],
        },
    }
    return _event("a", "T", [_file(raw)], [{"namespace": "file", "name": out, "facets": facets}])


def test_a_count_in_an_aggregation_depends_on_the_grouping_and_a_literal_on_nothing(paths):
    """count(*) has no input field: in an aggregation it depends on the grouping (the dataset-level GROUP_BY); a
    literal column of a plain select depends on nothing, though the dataset-level list holds the select's filter."""
    grouped = _written(paths, {"zone": ("PULocationID", "IDENTITY")}, [("PULocationID", "GROUP_BY")], ["zone", "n"])
    seen = observed.with_report(observed.roll_up([grouped], "T", paths), JobReport())
    assert seen.columns["out"]["n"] == [(naming.TAXI_RAW, "PULocationID", "INDIRECT", "GROUP_BY")]
    filtered = _written(paths, {"zone": ("PULocationID", "IDENTITY")}, [("total_amount", "FILTER")], ["zone", "file"])
    seen = observed.with_report(observed.roll_up([filtered], "T", paths), JobReport())
    assert "file" not in seen.columns["out"]


def test_a_file_the_job_fingerprinted_or_measured_is_an_input_though_spark_read_no_row(paths):
    landed = str(paths.var / "landing" / "tlc" / "yellow_tripdata_2025-01.parquet")
    seen = observed.with_report(observed.Observed(), JobReport(source_fingerprints={landed: "abc"}))
    assert seen.input_keys() == [landed]
    seen = observed.with_report(
        observed.Observed(), JobReport(input_metrics={landed: {"rowCount": 1, "columnMetrics": {}}})
    )
    assert seen.input_keys() == [landed]


def test_outputs_keep_the_order_the_listener_first_named_them(paths):
    warehouse = f"{_warehouse(paths)}/{settings.ICEBERG_NAMESPACE}"
    events = [
        _event("a", "T", [], [_file(f"{warehouse}/{name}")]) for name in (naming.TAXI_RAW, naming.TAXI_QUARANTINE)
    ]
    assert observed.roll_up(events, "T", paths).output_keys() == [naming.TAXI_RAW, naming.TAXI_QUARANTINE]
