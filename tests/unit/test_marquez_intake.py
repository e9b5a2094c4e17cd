"""Intake as liberal as Marquez, interpretation as strict as the spec: borderline events, each with Marquez 0.51's
answer and the rule of its source it comes from (MarquezProject/marquez 0.51.x, under ``api/src/main/java/marquez/``,
read for this table; a real Marquez could not be run here), and what ``lineage serve`` answers and keeps.

Marquez answers 201, 4xx or 500; ``lineage serve`` answers 201 where Marquez does (storing the event whole, what the
spec refuses in it named and left out of what the store reads), the same 4xx where Marquez refuses with one, and 400
where Marquez answers 500. A refused event is kept as a dead letter with why.
"""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import select

from include.lineage.api.intake import Admitted, admit
from include.lineage.api.marquez_intake import java_uri_problem, marquez_answer, marquez_time
from include.lineage.api.server import create_app
from include.lineage.store import LineageStore, dead_letters, iter_events
from include.lineage.store.schema import events_table, facet_problems_table

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
JOB_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
DATASET_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
BASE = {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/X.json"}
M = "service/models/LineageEvent.java"


def event(**changes) -> dict:
    base = {
        "eventType": "COMPLETE",
        "eventTime": "2025-02-01T00:00:00+00:00",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "ns", "name": "borderline", "facets": {}},
        "inputs": [],
        "outputs": [{"namespace": "file", "name": "/out/borderline", "facets": {}}],
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT,
    }
    base.update(changes)
    return {key: value for key, value in base.items() if value is not _GONE}


_GONE = object()


def output_facets(**facets) -> dict:
    return event(outputs=[{"namespace": "file", "name": "/out/borderline", "facets": facets}])


# name: (event, Marquez's answer, the rule it comes from, lineage serve's answer, the path named in the answer)
BORDERLINE = {
    # ------------------------------------------------------------------ the four kinds of the issue
    "no schemaURL": (
        event(schemaURL=_GONE),
        201,
        "service/models/BaseEvent.java:18 (defaultImpl LineageEvent); EventTypeResolver.java:65-66 (no id: RunEvent)",
        201,
        "schemaURL",
    ),
    "eventType outside the enum": (
        event(eventType="DONE"),
        201,
        f"{M}:45 (String eventType); db/OpenLineageDao.java:1103-1118 (unknown: RUNNING)",
        201,
        "eventType",
    ),
    "dataQualityMetrics without columnMetrics": (
        output_facets(dataQualityMetrics={**BASE, "rowCount": 3}),
        201,
        f"{M}:420-425 (DatasetFacets' any-setter: an untyped facet is any JSON)",
        201,
        "outputs[0].facets.dataQualityMetrics",
    ),
    "job but no run, declared a RunEvent": (
        event(run=_GONE),
        422,
        f"{M}:48 (@Valid @NotNull run); api/OpenLineageResource.java:68",
        422,
        "run",
    ),
    # ------------------------------------------------------------------ where Marquez answers 500
    "an unparsable eventTime": (
        event(eventTime="yesterday"),
        500,
        "common/models/FlexibleDateTimeDeserializer.java:28-35; api/exceptions/JsonProcessingExceptionMapper.java:23",
        400,
        "eventTime",
    ),
    "inputs as an object": (
        event(inputs={"namespace": "file", "name": "/in"}),
        500,
        f"{M}:50 (List<Dataset> inputs); JsonProcessingExceptionMapper.java:23",
        400,
        "inputs",
    ),
    "a schema facet whose fields is a string": (
        output_facets(schema={**BASE, "fields": "id INT"}),
        500,
        f"{M}:485 (List<SchemaField> fields); JsonProcessingExceptionMapper.java:23",
        400,
        "outputs[0].facets.schema.fields",
    ),
    "columnLineage.fields as a list": (
        output_facets(columnLineage={**BASE, "fields": []}),
        500,
        f"{M}:582 (ColumnLineageDatasetFacetFields fields); JsonProcessingExceptionMapper.java:23",
        400,
        "outputs[0].facets.columnLineage.fields",
    ),
    # ------------------------------------------------------------------ more of Marquez's rules
    "a job event without schemaURL": (
        event(run=_GONE, eventType=_GONE, schemaURL=_GONE),
        422,
        f"EventTypeResolver.java:65-66 (no id: a RunEvent); {M}:48 (@NotNull run)",
        422,
        "run",
    ),
    "a job event declared a JobEvent": (
        event(run=_GONE, eventType=_GONE, schemaURL=JOB_EVENT),
        201,
        "EventTypeResolver.java:75-82 (/JobEvent); service/models/JobEvent.java:27-33",
        201,
        None,
    ),
    "a dataset event declared a DatasetEvent": (
        {
            "eventTime": "2025-02-01T00:00:00Z",
            "producer": PRODUCER,
            "schemaURL": DATASET_EVENT,
            "dataset": {"namespace": "file", "name": "/static", "facets": {}},
        },
        201,
        "EventTypeResolver.java:75-82 (/DatasetEvent); service/models/DatasetEvent.java:26-30",
        201,
        None,
    ),
    "a runId that is a number": (
        event(run={"runId": 42, "facets": {}}),
        201,
        f"{M}:78 (String runId: Jackson reads 42 as '42'); OpenLineageDao.java:1143-1150 (any runId)",
        201,
        "run.runId",
    ),
    "an eventTime in seconds since 1970": (
        event(eventTime=1738368000),
        201,
        "FlexibleDateTimeDeserializer.java:43 (InstantDeserializer: a number is epoch seconds)",
        201,
        "eventTime",
    ),
    "an eventTime of 30 February": (
        event(eventTime="2025-02-30T00:00:00Z"),
        201,
        "FlexibleDateTimeDeserializer.java:28-35 (DateTimeFormatterBuilder.toFormatter: SMART, day clamped)",
        201,
        "eventTime",
    ),
    "an eventTime without its time": (
        event(eventTime="2025-02-01"),
        500,
        "FlexibleDateTimeDeserializer.java:31 (ISO_LOCAL_DATE_TIME); JsonProcessingExceptionMapper.java:23",
        400,
        "eventTime",
    ),
    "a lowercase eventType": (
        event(eventType="complete"),
        201,
        "db/OpenLineageDao.java:1107 (eventType.toLowerCase())",
        201,
        "eventType",
    ),
    "no producer": (
        event(producer=_GONE),
        422,
        f"{M}:52 (@Valid @NotNull producer)",
        422,
        "producer",
    ),
    "a typed facet without _producer": (
        output_facets(symlinks={"identifiers": []}),
        422,
        f"{M}:122 (BaseFacet's @NotNull _producer), {M}:418 (@Valid symlinks)",
        422,
        "outputs[0].facets.symlinks._producer",
    ),
    "nominalTime without nominalStartTime": (
        event(run={"runId": str(uuid.uuid4()), "facets": {"nominalTime": {**BASE}}}),
        422,
        f"{M}:151 (@NotNull nominalStartTime), {M}:91 (@Valid nominalTime)",
        422,
        "run.facets.nominalTime.nominalStartTime",
    ),
    "a custom run facet that is a string": (
        event(run={"runId": str(uuid.uuid4()), "facets": {"mine": "x"}}),
        201,
        f"{M}:98-103 (RunFacet's any-setter takes any JSON)",
        201,
        "run.facets.mine",
    ),
    "a column-lineage entry without inputFields": (
        output_facets(columnLineage={**BASE, "fields": {"b": {"transformationType": "IDENTITY"}}}),
        201,
        f"{M}:600-602 (the entries are a @JsonIgnore map without @Valid: @NotNull inputFields, line 628, unchecked)",
        201,
        "outputs[0].facets.columnLineage",
    ),
    "a dataset facet named description that is an object": (
        output_facets(description={**BASE, "text": "x"}),
        500,
        f"{M}:419 (String description); JsonProcessingExceptionMapper.java:23",
        400,
        "outputs[0].facets.description",
    ),
    "job facets null": (
        event(job={"namespace": "ns", "name": "borderline", "facets": None}),
        201,
        f"{M}:224 (@Valid JobFacet facets, nullable)",
        201,
        "job.facets",
    ),
    "an input namespace with a comma": (
        event(inputs=[{"namespace": "kafka://b1:9092,b2:9092", "name": "topic"}]),
        400,
        "common/models/NamespaceName.java:26-37; db/OpenLineageDao.java:578, 754; api/OpenLineageResource.java:105",
        400,
        "inputs[0]",
    ),
    "a COMPLETE of a blank job name": (
        event(job={"namespace": "ns", "name": " ", "facets": {}}),
        400,
        "service/OpenLineageService.java:193-198 (JobName.of: checkNotBlank); OpenLineageResource.java:105",
        400,
        "job.name",
    ),
    "a START of a blank job name without datasets": (
        event(eventType="START", job={"namespace": "ns", "name": " ", "facets": {}}, outputs=[]),
        201,
        "service/OpenLineageService.java:193 (no job version before the run is done), :246 (no inputs)",
        201,
        None,
    ),
    "a schemaURL that is no URI": (
        event(schemaURL="https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/Run Event"),
        500,
        f"{M}:53 (java.net.URI schemaURL: a space is illegal); JsonProcessingExceptionMapper.java:23",
        400,
        "schemaURL",
    ),
    "a null among the inputs": (
        event(inputs=[None]),
        500,
        "db/OpenLineageDao.java:746-757 (toDatasetId dereferences each input: NullPointerException)",
        400,
        "inputs[0]",
    ),
}


@pytest.fixture
def client(tmp_path):
    store = LineageStore(f"sqlite:///{tmp_path / 'store.db'}")
    with TestClient(create_app(store=store), raise_server_exceptions=False) as test_client:
        test_client.store = store
        yield test_client
    store.close()


@pytest.mark.parametrize("name", list(BORDERLINE))
def test_marquez_answers_each_borderline_event_as_its_source_says(name):
    """The model of Marquez's intake (include/lineage/api/marquez_intake.py) gives the answer its source gives."""
    payload, marquez, rule, _serve, _path = BORDERLINE[name]
    refusal = marquez_answer(payload)
    assert (refusal.status if refusal else 201) == marquez, (refusal, rule)


@pytest.mark.parametrize("name", list(BORDERLINE))
def test_lineage_serve_answers_as_marquez_and_keeps_what_it_refuses(client, name):
    payload, marquez, _rule, serve, path = BORDERLINE[name]
    answer = client.post("/api/v1/lineage", json=payload)
    assert answer.status_code == serve, answer.text
    assert serve == (marquez if marquez < 500 else 400), "4xx where Marquez answers 4xx or 5xx, 201 where it does"
    if serve == 201:
        with client.store.engine.connect() as conn:
            row = conn.execute(select(events_table)).one()
        received = json.loads(row.received) if row.received else next(iter_events(client.store))
        assert received == payload, "stored whole, as received"
        named = {problem["path"] for problem in answer.json().get("problems", [])}
        assert (path in named) if path else not named, answer.json()
    else:
        assert client.store.count(events_table) == 0
        assert path in answer.json()["message"], answer.json()["message"]
        letters = dead_letters.letters(client.store)
        assert len(letters) == 1 and json.loads(letters[0]["content"]) == payload
        assert letters[0]["status"] == serve and path in letters[0]["reason"]


def test_a_missing_schema_url_is_inferred_and_the_event_kept_as_received(client):
    payload = event(schemaURL=_GONE)
    assert client.post("/api/v1/lineage", json=payload).status_code == 201
    with client.store.engine.connect() as conn:
        row = conn.execute(select(events_table)).one()
    (read,) = iter_events(client.store)
    assert read["schemaURL"] == RUN_EVENT and "schemaURL" not in json.loads(row.received)
    assert json.loads(row.problems) == [
        {
            "path": "schemaURL",
            "facet": None,
            "rule": "missing; a RunEvent inferred (Marquez reads an event without it as one)",
        }
    ]


def test_an_invalid_facet_feeds_no_typed_column_and_is_filed_under_its_node(client):
    """A version facet, a schema and column lineage that do not match their schemas are kept with the event, filed
    under the dataset with their rule, and neither make a dataset version, a schema nor a column edge."""
    facets = {
        "version": {**BASE, "datasetVersion": {"snapshot": 1}},
        "schema": {**BASE, "fields": [{"name": "id", "type": "INT", "fields": "nested"}]},
        "columnLineage": {**BASE, "fields": {"id": {"inputFields": [{"namespace": "file", "name": "/in"}]}}},
    }
    answer = client.post("/api/v1/lineage", json=output_facets(**facets))
    assert answer.status_code == 201, answer.text
    assert {p["facet"] for p in answer.json()["problems"]} == {"version", "schema", "columnLineage"}
    with client.store.engine.connect() as conn:
        rows = conn.execute(select(facet_problems_table.c.facet, facet_problems_table.c.rule)).all()
    (stored,) = iter_events(client.store)
    assert {facet for facet, _ in rows} == {"version", "schema", "columnLineage"}
    assert all("left out of what the store reads" in rule for _, rule in rows)
    assert stored["outputs"][0]["facets"] == {}, "none of them is read"
    graph = client.get("/api/v1/lineage", params={"nodeId": "dataset:file:/out/borderline"})
    assert graph.status_code == 200
    columns = client.get("/api/v1/column-lineage", params={"nodeId": "datasetField:file:/out/borderline:id"})
    assert columns.status_code in (200, 404)


@pytest.mark.parametrize(
    "text, read",
    [
        ("2025-02-01T10:00:00Z", "2025-02-01T10:00:00+00:00"),
        ("2025-02-01t10:00:00z", "2025-02-01T10:00:00+00:00"),  # parseCaseInsensitive
        ("2025-02-01T10:00", "2025-02-01T10:00:00+00:00"),  # seconds optional, no offset: the JVM's zone (UTC)
        ("2025-02-01T10:00:00.123456789+0100", "2025-02-01T10:00:00.123456+01:00"),  # lenient offset, 9 digits
        ("2025-02-01T10:00:00+01", "2025-02-01T10:00:00+01:00"),
        ("2024-02-31T00:00:00Z", "2024-02-29T00:00:00+00:00"),  # SMART: the month's last day
        ("2025-01-31T24:00:00Z", "2025-02-01T00:00:00+00:00"),  # SMART: 24:00 is the next midnight
        ("2025-02-01", None),  # no time
        ("2025-02-01 10:00:00Z", None),  # not a T
        ("20250201T100000Z", None),  # basic format
        ("2025-13-01T00:00:00Z", None),
        ("2025-02-01T10:00:00+19:00", None),  # past ZoneOffset's 18 hours
        ("2025-02-01T10:00:00.1234567890Z", None),  # ten digits
    ],
)
def test_eventtime_is_read_as_marquez_flexible_deserializer_reads_it(text, read):
    moment = marquez_time(text)
    assert (moment.isoformat() if moment else None) == read


@pytest.mark.parametrize(
    "text, legal",
    [
        ("https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent", True),
        ("", True),  # Jackson reads "" as the empty URI
        ("relative/path", True),
        ("urn:x", True),
        ("http://[::1]:5000/a", True),
        ("has space", False),
        ("http:", False),  # expected a scheme-specific part
        ("http://", False),  # expected an authority
        ("a#b#c", False),
        ("100%", False),
        ("1abc:x", False),  # a scheme starts with a letter
        ("a[b]", False),
    ],
)
def test_schema_urls_and_facet_producers_are_java_uris(text, legal):
    assert (java_uri_problem(text) is None) is legal


# ----------------------------------------------------------------------------- properties, for any input
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_paths = st.sampled_from(
    [
        ("eventType",),
        ("eventTime",),
        ("producer",),
        ("schemaURL",),
        ("run",),
        ("run", "runId"),
        ("run", "facets"),
        ("run", "facets", "parent"),
        ("run", "facets", "nominalTime"),
        ("run", "facets", "custom"),
        ("job",),
        ("job", "name"),
        ("job", "facets", "sql"),
        ("inputs",),
        ("outputs", 0, "name"),
        ("outputs", 0, "facets"),
        ("outputs", 0, "facets", "schema"),
        ("outputs", 0, "facets", "columnLineage"),
        ("outputs", 0, "facets", "version"),
        ("outputs", 0, "facets", "symlinks"),
        ("outputs", 0, "outputFacets"),
    ]
)


def _mutated(path: tuple, value) -> dict:
    payload = event()
    owner = payload
    for key in path[:-1]:
        owner = owner.setdefault(key, {}) if isinstance(key, str) else owner[key]
    owner[path[-1]] = value
    return payload


@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_paths, value=_json)
def test_any_json_object_is_stored_whole_or_dead_lettered_with_a_reason_never_a_500(client, path, value):
    payload = _mutated(path, value)
    before = client.store.count(events_table), len(dead_letters.letters(client.store))
    answer = client.post("/api/v1/lineage", json=payload)
    assert answer.status_code in (201, 400, 422), answer.text
    verdict = admit(payload)
    if answer.status_code == 201:
        assert isinstance(verdict, Admitted) and verdict.received == payload
        duplicate = answer.json()["new"] == 0
        assert client.store.count(events_table) == before[0] + (0 if duplicate else 1)
    else:
        assert verdict.status == answer.status_code and answer.json()["message"]
        letters = dead_letters.letters(client.store)
        assert any(json.loads(letter["content"]) == payload for letter in letters) and letters[0]["reason"]
    assert client.get("/api/v1/lineage", params={"nodeId": "job:ns:borderline"}).status_code in (200, 400, 404)


def test_lineage_show_says_which_facets_of_a_node_were_invalid_and_why(client, capsys):
    from include.lineage import cli

    payload = output_facets(dataQualityMetrics={**BASE, "rowCount": 3})
    payload["job"]["facets"] = {"sql": {**BASE, "query": ["SELECT 1"]}}
    assert client.post("/api/v1/lineage", json=payload).status_code == 400, "Marquez: a list where it reads a string"
    payload["job"]["facets"] = {"ownership": {**BASE, "owners": "me"}}
    assert client.post("/api/v1/lineage", json=payload).status_code == 201
    assert cli.main(["show", "dataset:file:/out/borderline", "--store", client.store.url]) == 0
    printed = capsys.readouterr().out
    assert "invalid facets (1: kept with their events as received, not read by the store)" in printed
    assert "facet dataQualityMetrics at outputs[0].facets.dataQualityMetrics" in printed
    assert '"columnMetrics" is a required property' in printed
    assert cli.main(["show", "job:ns:borderline", "--store", client.store.url, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(p["facet"], p["path"]) for p in shown["invalidFacets"]] == [("ownership", "job.facets.ownership")]
