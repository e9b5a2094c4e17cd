"""Hostile input to ``lineage serve`` is answered with a 4xx and a message, never a 500, and never grows the server:
a table of malformed, oversized and adversarial bodies, through the real app (FastAPI's TestClient), plus property
tests of the body reader's rules."""

from __future__ import annotations

import gzip
import json
import uuid

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import select

from include.lineage.api import body
from include.lineage.api.server import create_app
from include.lineage.store import LineageStore
from include.lineage.store.schema import events_table

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def event(job: str = "job", **changes) -> dict:
    base = {
        "eventType": "COMPLETE",
        "eventTime": "2025-02-01T00:00:00+00:00",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "ns", "name": job, "facets": {}},
        "inputs": [],
        "outputs": [{"namespace": "file", "name": f"/out/{job}", "facets": {}}],
        "producer": PRODUCER,
        "schemaURL": SCHEMA,
    }
    base.update(changes)
    return base


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.setenv("LINEAGE_MAX_BODY_BYTES", str(64 * 1024))
    monkeypatch.setenv("LINEAGE_MAX_DECOMPRESSED_BYTES", str(256 * 1024))
    monkeypatch.setenv("LINEAGE_MAX_JSON_DEPTH", "32")
    monkeypatch.setenv("LINEAGE_MAX_BATCH_EVENTS", "10")
    store = LineageStore(f"sqlite:///{tmp_path / 'store.db'}")
    with TestClient(create_app(store=store), raise_server_exceptions=False) as test_client:
        test_client.store = store
        yield test_client
    store.close()


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data)


HOSTILE = {
    "not json": (b"{not json", {}, 400, "not JSON"),
    "empty": (b"", {}, 422, "no event"),  # Marquez: 422 (@NotNull BaseEvent), as tests/unit/test_marquez_intake.py pins
    "truncated gzip": (_gzip(json.dumps(event()).encode())[:-12], {"content-encoding": "gzip"}, 400, "truncated"),
    "not gzip sent as gzip": (json.dumps(event()).encode(), {"content-encoding": "gzip"}, 400, "not valid gzip"),
    "gzip bomb": (_gzip(b" " * (2 * 1024 * 1024)), {"content-encoding": "gzip"}, 413, "decompresses past"),
    "too large as sent": (b" " * (65 * 1024), {}, 413, "limit"),
    "nesting 1,000 deep": (b"[" * 1000 + b"]" * 1000, {}, 400, "nests 1000 levels"),
    "nesting in an event": (
        json.dumps(event(run={"runId": str(uuid.uuid4()), "facets": {"deep": {"x": []}}}))
        .encode()
        .replace(b'"x": []', b'"x": ' + b"[" * 40 + b"]" * 40),
        {},
        400,
        "nests",
    ),
    "eventType a list": (json.dumps(event(eventType=["COMPLETE"])).encode(), {}, 400, "eventType"),
    "run facets a list": (
        json.dumps(event(run={"runId": str(uuid.uuid4()), "facets": []})).encode(),
        {},
        400,
        "facets",
    ),
    "a number": (b"42", {}, 400, "not an event object"),
    "an input's facets a string": (
        json.dumps(event(inputs=[{"namespace": "file", "name": "/in", "facets": "schema"}])).encode(),
        {},
        400,
        "inputs[0].facets",
    ),
    "an output's outputFacets a list": (
        json.dumps(event(outputs=[{"namespace": "file", "name": "/o", "outputFacets": []}])).encode(),
        {},
        400,
        "outputFacets",
    ),
    # facets null, a runId that is a number and an eventType outside the spec's values: Marquez 201, and lineage
    # serve stores them with the problem named (tests/unit/test_marquez_intake.py)
    "no job": (json.dumps({k: v for k, v in event().items() if k != "job"}).encode(), {}, 422, "job"),
    "no producer": (json.dumps({k: v for k, v in event().items() if k != "producer"}).encode(), {}, 422, "producer"),
    "eventTime not a time": (json.dumps(event(eventTime="yesterday")).encode(), {}, 400, "eventTime"),
    # a valid ISO-8601 time before the year 1 in UTC: converting it raised OverflowError, answered 500
    "eventTime before the year 1 in UTC": (
        json.dumps(event(eventTime="0001-01-01T00:00:00+14:00")).encode(),
        {},
        400,
        "outside the years 1 to 9999",
    ),
    "inputs an object": (json.dumps(event(inputs={"namespace": "file"})).encode(), {}, 400, "inputs"),
    "a dataset without a name": (json.dumps(event(inputs=[{"namespace": "file"}])).encode(), {}, 422, "name"),
    "an array of a number": (b"[42]", {}, 400, "not an event object"),
    "invalid UTF-8": (b'{"eventType": "\xff\xfe"}', {}, 400, "not JSON"),
    "a NaN": (json.dumps(event()).encode().replace(b'"facets": {}}', b'"facets": {}, "x": NaN}', 1), {}, 400, "NaN"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_bodies_are_answered_with_a_4xx_and_store_nothing(client, name):
    payload, headers, status, message = HOSTILE[name]
    answer = client.post("/api/v1/lineage", content=payload, headers={"content-type": "application/json", **headers})
    assert answer.status_code == status, answer.text
    assert message in answer.text
    assert client.store.count(events_table) == 0
    assert client.get("/api/v1/health").status_code == 200, "the server is still up"


def test_a_gzip_event_within_the_limits_is_stored(client):
    answer = client.post(
        "/api/v1/lineage",
        content=_gzip(json.dumps(event()).encode()),
        headers={"content-encoding": "gzip", "content-type": "application/json"},
    )
    assert answer.status_code == 201 and answer.json() == {"received": 1, "new": 1}


def test_a_batch_is_stored_whole_and_a_bad_event_stores_none_naming_each_bad_one(client):
    good = [event(f"job_{i}") for i in range(3)]
    stored = client.post("/api/v1/lineage/batch", json=good)
    assert stored.status_code == 201 and stored.json() == {"received": 3, "new": 3}
    mixed = [event("a"), {"eventType": "START"}, event("b"), event("c", run={"runId": "x", "facets": []})]
    refused = client.post("/api/v1/lineage/batch", json=mixed)
    assert refused.status_code == 400
    assert [error["index"] for error in refused.json()["errors"]] == [1, 3]
    assert client.store.count(events_table) == 3, "none of the refused batch was stored"
    assert client.post("/api/v1/lineage/batch", json=event()).status_code == 400, "a batch is an array"
    too_many = client.post("/api/v1/lineage/batch", json=[event(f"j{i}") for i in range(11)])
    assert too_many.status_code == 413
    assert client.post("/api/v1/lineage/batch", json=good).json()["new"] == 0, "re-posting stays idempotent"


def _scan_reference(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_scan_reference(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_scan_reference(v) for v in value), default=0)
    return 0


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=30,
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_the_depth_scan_equals_the_parsed_nesting_whatever_the_strings_hold(value):
    text = json.dumps(value, ensure_ascii=False).encode()
    assert body.nesting_depth(text) == _scan_reference(value)


@hypothesis_settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_raise_anything_but_a_4xx(data):
    for decode in (lambda: body.parse_json(data, 32), lambda: body.parse_json(body.gunzip_limited(data, 4096), 32)):
        try:
            decode()
        except body.HTTPException as error:
            assert 400 <= error.status_code < 500


BASE_FACET = {"_producer": PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/X.json"}


def _with_output_facets(**facets) -> dict:
    return event(outputs=[{"namespace": "file", "name": "/out/poisoned", "facets": facets}])


def _column_lineage(transformations) -> dict:
    field = {"namespace": "file", "name": "/in", "field": "a", "transformations": transformations}
    return {**BASE_FACET, "fields": {"b": {"inputFields": [field]}}}


POISONED = {  # facets of the wrong shape that made every read of their graph answer 500 (issue 24)
    # (event, status: Marquez's answer where it is 4xx, else 400 where Marquez answers 500, else 201 kept and named,
    #  the facet's path, what the message says)
    "schema.fields a string": (
        _with_output_facets(schema={**BASE_FACET, "fields": "id INT"}),
        400,
        "outputs[0].facets.schema.fields",
        "reads a list",
    ),
    "a schema field's type a list": (
        _with_output_facets(schema={**BASE_FACET, "fields": [{"name": "id", "type": ["INT"]}]}),
        400,
        "outputs[0].facets.schema.fields[0].type",
        "reads a string",
    ),
    "lifecycleStateChange a string": (
        _with_output_facets(lifecycleStateChange="DROP"),
        400,
        "outputs[0].facets.lifecycleStateChange",
        "reads an object",
    ),
    "lifecycleStateChange not one of its values": (
        _with_output_facets(lifecycleStateChange={**BASE_FACET, "lifecycleStateChange": "EXPLODE"}),
        201,
        "outputs[0].facets.lifecycleStateChange",
        "$.lifecycleStateChange",
    ),
    "job documentation a string": (
        {**event(), "job": {"namespace": "ns", "name": "j", "facets": {"documentation": "read me"}}},
        400,
        "job.facets.documentation",
        "reads an object",
    ),
    "job documentation's description a list": (
        {
            **event(),
            "job": {"namespace": "ns", "name": "j", "facets": {"documentation": {**BASE_FACET, "description": []}}},
        },
        400,
        "job.facets.documentation.description",
        "reads a string",
    ),
    "a column's transformations a string": (
        _with_output_facets(columnLineage=_column_lineage("IDENTITY")),
        201,
        "outputs[0].facets.columnLineage",
        "$.fields.b.inputFields[0].transformations",
    ),
    "a standard facet without _producer": (
        _with_output_facets(symlinks={"identifiers": []}),
        422,
        "outputs[0].facets.symlinks._producer",
        "required",
    ),
    "a custom facet a string": (
        event(run={"runId": str(uuid.uuid4()), "facets": {"mine": "x"}}),
        201,
        "run.facets.mine",
        "not a facet object",
    ),
    "nominalTime's start not a string": (
        event(run={"runId": str(uuid.uuid4()), "facets": {"nominalTime": {**BASE_FACET, "nominalStartTime": 5}}}),
        201,
        "run.facets.nominalTime",
        "$.nominalStartTime",
    ),
}


@pytest.mark.parametrize("name", list(POISONED))
def test_a_facet_of_the_wrong_shape_is_refused_where_marquez_refuses_it_else_kept_named_and_not_read(client, name):
    """Refused (and kept as a dead letter) where Marquez refuses the event, with the path; otherwise stored whole
    with the facet named as invalid and left out of what the store reads. Either way, no read breaks."""
    payload, status, path, says = POISONED[name]
    answer = client.post("/api/v1/lineage", json=payload)
    assert answer.status_code == status, answer.text
    if status == 201:
        problem = next(p for p in answer.json()["problems"] if p["path"] == path)
        assert says in problem["rule"] and "left out" in problem["rule"], problem
        with client.store.engine.connect() as conn:
            e = events_table.c
            row = conn.execute(select(e.id, e.payload, e.packed, e.received)).one()
            read, received = client.store.packer.text(conn, *row[:3]), row.received
        assert json.loads(received) == payload, "stored whole, as received"
        assert path.rsplit(".", 1)[1] not in read, "the invalid facet is not read"
    else:
        assert path in answer.json()["message"] and says in answer.json()["message"], answer.json()["message"]
        batch = client.post("/api/v1/lineage/batch", json=[event("fine"), payload])
        assert batch.status_code == 400 and [e["index"] for e in batch.json()["errors"]] == [1]
        assert client.store.count(events_table) == 0
    for node in ("job:ns:j", "job:ns:job", "dataset:file:/out/poisoned"):
        assert client.get(f"/api/v1/lineage?nodeId={node}").status_code in (200, 400, 404)  # 400: an empty store


def test_custom_facets_need_only_be_objects_and_a_deleted_facet_only_a_base_facet(client):
    custom = event(run={"runId": str(uuid.uuid4()), "facets": {"mine": {"anything": [1, {"x": None}]}}})
    assert client.post("/api/v1/lineage", json=custom).status_code == 201
    deleted = _with_output_facets(schema={**BASE_FACET, "_deleted": True})
    assert client.post("/api/v1/lineage", json=deleted).status_code == 201
    good = _with_output_facets(
        schema={**BASE_FACET, "fields": [{"name": "id", "type": "INT"}]},
        columnLineage=_column_lineage([{"type": "DIRECT", "subtype": "IDENTITY"}]),
    )
    assert client.post("/api/v1/lineage", json=good).status_code == 201


def test_the_limits_of_datasets_per_event_and_facet_size(client, monkeypatch):
    monkeypatch.setenv("LINEAGE_MAX_EVENT_DATASETS", "5")
    monkeypatch.setenv("LINEAGE_MAX_FACET_BYTES", "2000")
    outputs = [{"namespace": "file", "name": f"/o{i}", "facets": {}} for i in range(6)]
    wide = client.post("/api/v1/lineage", json=event(outputs=outputs))
    assert wide.status_code == 400 and "LINEAGE_MAX_EVENT_DATASETS" in wide.json()["message"]
    assert client.post("/api/v1/lineage", json=event(outputs=outputs[:5])).status_code == 201
    big = event(run={"runId": str(uuid.uuid4()), "facets": {"mine": {"blob": "x" * 2000}}})
    refused = client.post("/api/v1/lineage", json=big)
    assert refused.status_code == 400 and "facet 'mine'" in refused.json()["message"]
    assert "LINEAGE_MAX_FACET_BYTES" in refused.json()["message"]


def test_bad_node_and_run_ids_are_answered_with_a_4xx_and_wildcards_are_literal(client):
    assert client.post("/api/v1/lineage", json=event("some_job")).status_code == 201
    cases = {
        "/api/v1/lineage?nodeId=dataset:file:/" + "a" * 60_000: 400,
        "/api/v1/lineage?nodeId=" + "a" * 60_000: 400,
        "/api/v1/lineage?nodeId=" + "a" * 4_000: 404,  # within the limit: the suggestions' LIKE copes
        "/api/v1/column-lineage?nodeId=" + "a" * 60_000: 400,
        "/api/v1/runlineage/upstream?runId=" + "r" * 60_000: 400,
        "/api/v1/runlineage/upstream?runId=" + "r" * 4_000: 404,
        "/api/v1/lineage?nodeId=dataset:file:%25": 404,
        "/api/v1/lineage?nodeId=job:ns:%25": 404,
        "/api/v1/runlineage/upstream?runId=____": 404,  # a LIKE pattern: it matched the one run
        "/api/v1/runlineage/upstream?runId=%25%25%25%25": 404,
        "/api/v1/lineage?nodeId=job:ns:some_job&depth=-1": 422,
    }
    for path, status in cases.items():
        answer = client.get(path)
        assert answer.status_code in (status if isinstance(status, tuple) else (status,)), (path[:80], answer.text)
        assert len(answer.text) < 2_000, "the message shows a long id shortened"
    suggestion = client.get("/api/v1/lineage?nodeId=job:ns:%25").json()["message"]
    assert "did you mean" not in suggestion, "% matched every node's name"
