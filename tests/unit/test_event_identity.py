"""Identity: of an event (its canonical JSON, not its run id, type and time), of a node ((kind, namespace, name), not
a joined string), of a node id a user types (``parse_node_id``, split as Marquez's ``NodeId.parts()`` does), and of a
name several datasets' ``symlinks`` claim (ambiguous, never silently one of them)."""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from include.core import settings as project_settings
from include.lineage.errors import LineageError, UnknownNodeError
from include.lineage.events import FieldRef, NodeRef, event_dedup_key, parse_node_id
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore
from include.lineage.store.schema import aliases_table, events_table, nodes_table

OLD_STORE = project_settings.PROJECT_ROOT / "tests" / "fixtures" / "lineage-store-bdbe81a.db"
OLD_EVENTS = project_settings.PROJECT_ROOT / "tests" / "fixtures" / "lineage-store-bdbe81a.events.jsonl"


def _event(job: str, run_id: str, inputs=(), outputs=(), time="2025-02-01T00:00:00Z", event_type="COMPLETE") -> dict:
    return {
        "eventType": event_type,
        "eventTime": time,
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id, "facets": {}},
        "job": {"namespace": "tests", "name": job, "facets": {}},
        "inputs": [{"namespace": ns, "name": name, "facets": {}} for ns, name in inputs],
        "outputs": [{"namespace": ns, "name": name, "facets": {}} for ns, name in outputs],
    }


@pytest.fixture
def store(tmp_path):
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as lineage_store:
        yield lineage_store


# ----------------------------------------------------------------------------- parse_node_id, as Marquez splits
# Marquez's rule (api/src/main/java/marquez/service/models/NodeId.java, parts()): split on ":" or "#"; exactly the
# expected number of parts is the answer; more, and the value is split on the colons not followed by "//" or a digit.
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("dataset:s3://bucket:key", ("dataset", "s3://bucket", "key")),
        ("dataset:s3://bucket:path/to/key.parquet", ("dataset", "s3://bucket", "path/to/key.parquet")),
        ("dataset:postgres://host:5432:db.schema.table", ("dataset", "postgres://host:5432", "db.schema.table")),
        ("dataset:kafka://broker:9092:topic", ("dataset", "kafka://broker:9092", "topic")),
        ("dataset:file:/warehouse/forecast", ("dataset", "file", "/warehouse/forecast")),
        ("dataset:bigquery:project.dataset.table", ("dataset", "bigquery", "project.dataset.table")),
        ("job:ns:name", ("job", "ns", "name")),
        (
            "job:nyc_taxi_pipeline:taxi_pipeline.build_actuals",
            ("job", "nyc_taxi_pipeline", "taxi_pipeline.build_actuals"),
        ),
        ("datasetField:ns:name:field", ("datasetField", "ns", "name", "field")),
        ("datasetField:file:/warehouse/forecast:rides", ("datasetField", "file", "/warehouse/forecast", "rides")),
        ("datasetField:postgres://h:5432:db.t:col", ("datasetField", "postgres://h:5432", "db.t", "col")),
        # a colon followed by a digit never separates: the name keeps it
        ("dataset:file:/a:1b", ("dataset", "file", "/a:1b")),
        # Marquez's quirks, kept: "#" splits when the count is exact, and Java's split drops trailing empty parts
        ("dataset:ns#name", ("dataset", "ns", "name")),
        ("dataset:ns:a#", ("dataset", "ns", "a")),
        ("dataset:ns:name#v1", ("dataset", "ns", "name#v1")),  # more parts: only colons split, "#" stays
        # LIKE's wildcards are plain characters of a name
        ("dataset:%:_", ("dataset", "%", "_")),
    ],
)
def test_parse_node_id_splits_as_marquez_does(value, expected):
    parsed = parse_node_id(value)
    assert parsed == expected
    assert isinstance(parsed, FieldRef if expected[0] == "datasetField" else NodeRef)


def test_a_field_id_names_its_dataset():
    ref = parse_node_id("datasetField:postgres://h:5432:db.t:col")
    assert (ref.field, ref.dataset) == ("col", ("dataset", "postgres://h:5432", "db.t"))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "empty"),
        ("%", "is not dataset:"),
        ("_", "is not dataset:"),
        ("%:ns:name", "is not dataset:"),
        ("dataset%ns%name", "is not dataset:"),
        ("nyc_taxi.yellow_rides_raw", "is not dataset:"),
        ("table:ns:name", "is not dataset:"),
        ("Dataset:ns:name", "is not dataset:"),
        ("dataset", "is not dataset:"),
        ("dataset:", "fewer than the 3 parts"),
        ("dataset:ns", "fewer than the 3 parts"),
        ("dataset:ns:", "fewer than the 3 parts"),
        ("datasetField:ns:name", "fewer than the 4 parts"),
        ("dataset::name", "cannot be empty"),
        ("job:ns:name\nmore", "is not dataset:"),  # Java's "." matches no line terminator
        ("run:01937a3c-0000-7000-8000-000000000001", "names a run"),
        ("dataset:postgres://host:5432:1table", "cannot be split into 3 parts"),  # Marquez fails on it too
        ("dataset:5ns:a:b", "starts with a digit"),
        ("dataset:ns:" + "x" * 60_000, "60,011 characters long"),
        ("x" * 60_000, "characters long"),
    ],
)
def test_parse_node_id_refuses_what_is_not_a_node_id_saying_why(value, says):
    with pytest.raises(LineageError) as refused:
        parse_node_id(value)
    assert says in str(refused.value)
    assert len(str(refused.value)) < 400  # a 60,000-character id is not echoed back whole


_SCHEME = st.from_regex(r"[a-z][a-z0-9+.\-]{0,9}", fullmatch=True)
_HOST = st.from_regex(r"[a-z0-9][a-z0-9.\-]{0,19}", fullmatch=True)
_PORT = st.integers(min_value=0, max_value=65535)
_NAME_CHARACTERS = st.characters(blacklist_characters="\n\r\x85\u2028\u2029", blacklist_categories=("Cs",))


@st.composite
def _namespaces(draw) -> str:
    """A namespace as the OpenLineage naming spec has them: ``scheme://authority`` with an optional port."""
    port = draw(st.none() | _PORT)
    return f"{draw(_SCHEME)}://{draw(_HOST)}" + ("" if port is None else f":{port}")


@st.composite
def _names(draw) -> str:
    """A name: any characters (colons and "#" too), not starting with a digit or "//" (after the namespace's colon
    Marquez could not tell it from a port or a scheme), not only colons and "#" (Java's split drops empty parts)."""
    name = draw(st.text(_NAME_CHARACTERS, min_size=1, max_size=40))
    assume(not name[0].isdigit() and not name.startswith("//") and name.strip(":#"))
    return name


@settings(max_examples=300, deadline=None)
@given(namespace=_namespaces(), name=_names())
def test_parse_node_id_gives_back_the_namespace_and_name_of_any_url_namespaced_dataset(namespace, name):
    assert parse_node_id(f"dataset:{namespace}:{name}") == ("dataset", namespace, name)
    assert parse_node_id(f"job:{namespace}:{name}") == ("job", namespace, name)


# ----------------------------------------------------------------------------- an event's identity
def test_an_events_key_is_the_sha256_of_its_canonical_json():
    event = _event("job", str(uuid.uuid4()), [("file", "/a")], time="2025-02-01T00:00:00Z")
    event["job"]["facets"] = {"documentation": {"description": "Fahrgäste je Stunde"}}
    canonical = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert event_dedup_key(event) == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    assert event_dedup_key(json.loads(json.dumps(dict(reversed(list(event.items())))))) == event_dedup_key(event)
    other = json.loads(json.dumps(event))
    other["inputs"].append({"namespace": "file", "name": "/b", "facets": {}})
    assert event_dedup_key(other) != event_dedup_key(event)


def test_two_different_events_of_one_run_type_and_time_are_both_kept_and_both_count(store):
    run_id = str(uuid.uuid4())
    first = _event("job", run_id, [("file", "/a")], [("file", "/out")])
    second = _event("job", run_id, [("file", "/b")], [("file", "/out")])
    assert store.ingest([first]).new == 1
    assert store.ingest([second]).new == 1  # was 0: dropped silently, /b never appeared
    assert store.ingest([first, second]).new == 0
    assert {n.key for n in LineageQueries(store).upstream("dataset:file:/out").datasets()} == {
        "dataset:file:/a",
        "dataset:file:/b",
    }


# ----------------------------------------------------------------------------- a node's identity
def test_two_datasets_whose_joined_ids_are_equal_are_two_nodes_and_their_events_are_stored(store):
    """(pg://h:5432, db.t) and (pg://h, 5432:db.t) both join to dataset:pg://h:5432:db.t: the key was unique, and
    every event of the second dataset failed."""
    first = _event("load_first", str(uuid.uuid4()), outputs=[("pg://h:5432", "db.t")])
    second = _event("load_second", str(uuid.uuid4()), outputs=[("pg://h", "5432:db.t")])
    assert store.ingest([first]).new == 1
    assert store.ingest([second]).new == 1
    assert store.ingest([first, second]).new == 0
    with store.engine.connect() as conn:
        nodes = conn.execute(
            select(nodes_table.c.key, nodes_table.c.namespace, nodes_table.c.name).where(
                nodes_table.c.kind == "dataset"
            )
        ).all()
    assert sorted(nodes) == [
        ("dataset:pg://h:5432:db.t", "pg://h", "5432:db.t"),
        ("dataset:pg://h:5432:db.t", "pg://h:5432", "db.t"),
    ]
    # Marquez's reading of that id is the first dataset
    assert parse_node_id("dataset:pg://h:5432:db.t") == ("dataset", "pg://h:5432", "db.t")


def test_a_name_two_datasets_symlinks_claim_names_both_and_resolving_it_is_ambiguous(store):
    def event(name: str, job: str) -> dict:
        lineage_event = _event(job, str(uuid.uuid4()), outputs=[("file", name)])
        lineage_event["outputs"][0]["facets"] = {
            "symlinks": {"identifiers": [{"namespace": "file:///warehouse", "name": "nyc.trips", "type": "TABLE"}]}
        }
        return lineage_event

    store.ingest([event("/warehouse/trips", "load")])
    store.ingest([event("/archive/trips", "archive")])  # claims the same table name afterwards
    with store.engine.connect() as conn:
        claimed = conn.execute(
            select(nodes_table.c.name)
            .join(aliases_table, aliases_table.c.node_id == nodes_table.c.id)
            .where(aliases_table.c.alias == "nyc.trips")
        ).scalars()
        assert sorted(claimed) == ["/archive/trips", "/warehouse/trips"]  # added to the second, not moved to it
    queries = LineageQueries(store)
    with pytest.raises(LineageError) as ambiguous:
        queries.resolve("nyc.trips")
    assert not isinstance(ambiguous.value, UnknownNodeError)
    assert "dataset:file:/warehouse/trips" in str(ambiguous.value)
    assert "dataset:file:/archive/trips" in str(ambiguous.value)
    assert queries.resolve("dataset:file:/archive/trips").name == "/archive/trips"  # each by its own id


def test_a_nodes_own_key_wins_over_the_same_text_another_dataset_claims_as_a_name(store):
    """A key and the aliases are asked in one statement (``names._NODE_BY_KEY_OR_ALIAS``), the key's match first: a
    dataset whose symlink claims another's key as its table name does not make that key ambiguous, and its own
    names still find it."""
    keyed = _event("write", str(uuid.uuid4()), outputs=[("pg://h", "5432:db.t")])  # its key: dataset:pg://h:5432:db.t
    claiming = _event("copy", str(uuid.uuid4()), outputs=[("file", "/y")])
    claiming["outputs"][0]["facets"] = {
        "symlinks": {"identifiers": [{"namespace": "x", "name": "dataset:pg://h:5432:db.t", "type": "TABLE"}]}
    }
    store.ingest([keyed, claiming])
    queries = LineageQueries(store)
    # no dataset (pg://h:5432, db.t): the id is read as a key, which the claiming dataset's alias also spells
    assert queries.resolve("dataset:pg://h:5432:db.t")[3:5] == ("pg://h", "5432:db.t")
    assert queries.resolve("/y")[3:5] == ("file", "/y")  # an alias alone
    with pytest.raises(UnknownNodeError):
        queries.resolve("dataset:pg://nowhere:db.t")


# ----------------------------------------------------------------------------- a store of the previous release
def test_upgrading_a_store_of_the_previous_release_recomputes_every_events_key_from_its_payload(tmp_path):
    old = tmp_path / "old.db"
    shutil.copy(OLD_STORE, old)
    with LineageStore(f"sqlite:///{old}") as store:
        e = events_table.c
        with store.engine.connect() as conn:
            rows = [
                (row.dedup_key, store.packer.text(conn, row.id, row.payload, row.packed))
                for row in conn.execute(select(e.dedup_key, e.id, e.payload, e.packed))
            ]
        assert len(rows) == 8
        assert all(key == event_dedup_key(json.loads(payload)) for key, payload in rows)
        assert store.ingest_files([OLD_EVENTS]).new == 0  # the files again: every event known
        # an event the old key would have dropped: the fixture's first event, one more input
        first = json.loads(OLD_EVENTS.read_text().splitlines()[1])
        first["inputs"] = [*first.get("inputs", []), {"namespace": "file", "name": "/opt/extra", "facets": {}}]
        assert store.ingest([first]).new == 1
