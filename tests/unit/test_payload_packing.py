"""Events kept packed (``include/lineage/store/packing.py``, migration 0010): every text comes back as it went in,
with or without a dictionary; the store trains its first dictionary once it holds enough events and a new one as it
grows tenfold; a dictionary trained by another process is found; a training that fails never fails an ingest nor
takes an id already used; a damaged row is an error naming it. Real SQLite stores; the PostgreSQL path is
``tests/integration/test_lineage_queries_postgres.py``'s, which ingests and reads back through the same code."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, update

from include.lineage.errors import UnreadableStoredEventError
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore, iter_events, packing
from include.lineage.store.schema import events_table, payload_dictionaries_table


def event(index: int, pipeline: str = "packing") -> dict:
    """An event shaped like the project's: facets with their producer and schema URLs, which a dictionary learns."""
    producer = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.3"

    def facet(schema: str, **fields) -> dict:
        return {"_producer": producer, "_schemaURL": f"https://openlineage.io/spec/facets/{schema}", **fields}

    return {
        "eventType": "COMPLETE",
        "eventTime": f"2026-01-01T{index // 3600 % 24:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z",
        "producer": producer,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {
            "runId": str(uuid.UUID(int=index + 1, version=4)),
            "facets": {"nominalTime": facet("1-0-1/NominalTimeRunFacet.json", nominalStartTime="2026-01-01T00:00Z")},
        },
        "job": {
            "namespace": pipeline,
            "name": f"{pipeline}.task_{index % 9}",
            "facets": {"jobType": facet("2-0-3/JobTypeJobFacet.json", processingType="BATCH", jobType="TASK")},
        },
        "inputs": [{"namespace": "file", "name": f"/lake/{pipeline}/in_{index % 5}", "facets": {}}],
        "outputs": [
            {
                "namespace": "file",
                "name": f"/lake/{pipeline}/out_{index % 9}",
                "facets": {
                    "schema": facet(
                        "1-1-1/SchemaDatasetFacet.json",
                        fields=[{"name": f"column_{c}", "type": "string"} for c in range(12)],
                    )
                },
            }
        ],
    }


def stored_texts(store: LineageStore) -> list[tuple[int, bytes | None]]:
    e = events_table.c
    with store.engine.connect() as conn:
        return conn.execute(select(e.id, e.packed).order_by(e.id)).all()


def dictionaries(store: LineageStore) -> list[tuple[int, int]]:
    d = payload_dictionaries_table.c
    with store.engine.connect() as conn:
        return conn.execute(select(d.id, d.events).order_by(d.events)).all()


@pytest.fixture
def small_thresholds(monkeypatch):
    """Train after 40 events and look every 20, instead of after 1,000: the same rules at a test's size."""
    monkeypatch.setattr(packing, "FIRST_TRAINING", 40)
    monkeypatch.setattr(packing, "CHECK_EVERY", 20)


# ------------------------------------------------------------------------------------------------ round trips
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=3000), trained=st.booleans())
def test_every_text_comes_back_as_it_was_packed_with_or_without_a_dictionary(tmp_path_factory, text, trained):
    folder = tmp_path_factory.mktemp("roundtrip")
    with LineageStore(f"sqlite:///{folder / 's.db'}") as store, store.engine.begin() as conn:
        packer = store.packer
        if trained:
            samples = [json.dumps(event(i)).encode() for i in range(200)]
            data = zstandard.train_dictionary(4096, samples, dict_id=77, level=packing.LEVEL)
            conn.execute(
                payload_dictionaries_table.insert().values(
                    id=77, trained_at="t", events=1, samples=200, data=data.as_bytes()
                )
            )
        blob = packer.pack(conn, text)
        assert zstandard.get_frame_parameters(blob).dict_id == (77 if trained else 0)
        assert packer.text(conn, 1, "", blob) == text
        assert packer.text(conn, 1, text, None) == text  # a row stored before 0010: its payload as it is


# ---------------------------------------------------------------------------------------------------- training
def test_the_first_dictionary_is_trained_once_the_store_holds_enough_events_and_again_at_ten_times(
    tmp_path, small_thresholds
):
    with LineageStore(f"sqlite:///{tmp_path / 's.db'}") as store:
        store.ingest([event(i) for i in range(39)])
        assert dictionaries(store) == []  # 39 events: not enough
        store.ingest([event(i) for i in range(39, 60)])
        (first,) = dictionaries(store)
        assert first[1] == 60
        store.ingest([event(i) for i in range(60, 560)])  # 560 < 600 = 10 x 60: not yet
        assert len(dictionaries(store)) == 1
        store.ingest([event(i) for i in range(560, 640)])
        assert [events for _, events in dictionaries(store)] == [60, 640]
        store.ingest([event(640)])
        rows = stored_texts(store)
        used = [zstandard.get_frame_parameters(bytes(blob)).dict_id for _, blob in rows]
        # each event packed with the newest dictionary its ingest knew (a dictionary is trained after the batch that
        # made it due): none, the first, then the second
        assert used[0] == used[59] == 0 and used[60] == used[639] == first[0] and used[640] == dictionaries(store)[1][0]
        assert [e["run"]["runId"] for e in iter_events(store)] == [event(i)["run"]["runId"] for i in range(641)]
        # what the dictionary is for: the same events packed smaller with it than alone
        with_dictionary = sum(len(blob) for _, blob in rows[100:560])
        alone = sum(
            len(zstandard.ZstdCompressor(level=packing.LEVEL).compress(bytes(_text(e)))) for e in range(100, 560)
        )
        assert with_dictionary < 0.5 * alone, (with_dictionary, alone)


def _text(index: int) -> bytes:
    from include.lineage.events import canonical_json

    return canonical_json(event(index)).encode()


def test_a_dictionary_trained_by_another_process_is_found_when_a_row_names_it(tmp_path, small_thresholds):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with LineageStore(url) as reader, LineageStore(url) as writer:
        assert list(iter_events(reader)) == []  # the reader has looked at the store before the dictionary existed
        writer.ingest([event(i) for i in range(80)])
        writer.ingest([event(80)])  # packed with the dictionary the writer trained
        assert dictionaries(writer)
        assert list(iter_events(reader))[-1] == event(80)
        assert LineageQueries(reader).merged_runs() == []  # reads every packed row too


def test_a_training_that_fails_leaves_the_events_stored_and_packing_goes_on(
    tmp_path, small_thresholds, monkeypatch, caplog
):
    def refuse(*_args, **_kwargs):
        raise zstandard.ZstdError("cannot train dict: Src size is incorrect")

    monkeypatch.setattr(zstandard, "train_dictionary", refuse)
    with LineageStore(f"sqlite:///{tmp_path / 's.db'}") as store, caplog.at_level(logging.WARNING):
        result = store.ingest([event(i) for i in range(60)])
        assert result.new == 60 and dictionaries(store) == []
        assert "training a payload dictionary failed" in caplog.text and "Src size is incorrect" in caplog.text
        assert len(list(iter_events(store))) == 60


def test_a_drawn_id_already_taken_keeps_the_old_dictionary_and_never_packs_with_the_new_one(
    tmp_path, small_thresholds, monkeypatch
):
    with LineageStore(f"sqlite:///{tmp_path / 's.db'}") as store:
        store.ingest([event(i) for i in range(60)])
        ((taken, _),) = dictionaries(store)
        assert taken in packing.PRIVATE_IDS
        monkeypatch.setattr(
            packing.secrets, "randbelow", lambda _bound: taken - packing.PRIVATE_IDS.start
        )  # the same id
        store.ingest([event(i) for i in range(60, 620)])
        assert dictionaries(store) == [(taken, 60)]
        store.ingest([event(620)])
        (_, last) = stored_texts(store)[-1]
        assert zstandard.get_frame_parameters(bytes(last)).dict_id == taken
        assert len(list(iter_events(store))) == 621


# ---------------------------------------------------------------------------------------------- damaged rows
@pytest.mark.parametrize(
    "damage",
    ["truncated frame", "not zstd at all", "dictionary row deleted"],
)
def test_a_damaged_row_is_an_error_naming_it(tmp_path, small_thresholds, damage):
    with LineageStore(f"sqlite:///{tmp_path / 's.db'}") as store:
        store.ingest([event(i) for i in range(60)])
        store.ingest([event(60)])
        (event_id, blob) = stored_texts(store)[-1]
        with store.engine.begin() as conn:
            if damage == "truncated frame":
                conn.execute(update(events_table).where(events_table.c.id == event_id).values(packed=blob[:-9]))
            elif damage == "not zstd at all":
                conn.execute(update(events_table).where(events_table.c.id == event_id).values(packed=b"\x00" * 40))
            else:
                conn.execute(payload_dictionaries_table.delete())
    with LineageStore(f"sqlite:///{tmp_path / 's.db'}") as reopened:  # nothing of the dictionary kept in memory
        with pytest.raises(UnreadableStoredEventError, match=f"lineage_events row {event_id}: ") as raised:
            list(iter_events(reopened))
        assert raised.value.event_id == event_id and raised.value.http_status == 500
        with reopened.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(events_table)).scalar() == 61  # nothing deleted
