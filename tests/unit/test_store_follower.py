"""The store follows the event files under ``var/lineage/`` from where it last stopped, across processes
(include/lineage/store/follower.py): what each new reader reads is what was appended since; a file that shrank or
was replaced is read again from its start; whatever the moments it is read at, every complete line is stored once."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from include.core import settings
from include.lineage.store import LineageStore
from include.lineage.store.follower import HEAD_BYTES, StoreFollower
from include.lineage.store.schema import events_table, file_cursors_table


def _line(job: str = "dag.task", run_id: str | None = None) -> bytes:
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2025-02-01T00:00:00Z",
        "producer": "test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "nyc_taxi_pipeline", "name": job, "facets": {}},
        "inputs": [],
        "outputs": [],
    }
    return (json.dumps(event) + "\n").encode()


@pytest.fixture()
def var_paths(tmp_path) -> settings.Paths:
    var_paths = settings.Paths(tmp_path / "var")
    var_paths.lineage.mkdir(parents=True)
    return var_paths


class Reader:
    """One process reading the store: a new store object and follower each time, so nothing is kept in memory."""

    def __init__(self, var_paths: settings.Paths):
        self.paths = var_paths
        self.url = f"sqlite:///{var_paths.lineage / 'store.db'}"
        self.read: list[int] = []

    def refresh(self) -> int:
        with LineageStore(self.url) as store:
            ingest = store.ingest
            store.ingest = lambda events, **kwargs: self.read.append(len(events)) or ingest(events, **kwargs)
            return StoreFollower(store, self.paths).refresh()

    def stored(self) -> int:
        with LineageStore(self.url) as store:
            return store.count(events_table)


def test_each_new_reader_reads_only_what_was_appended_since_the_last_one(var_paths):
    reader = Reader(var_paths)
    var_paths.lineage_events.write_bytes(b"".join(_line() for _ in range(30)))
    assert reader.refresh() == 30
    assert reader.refresh() == 0
    with var_paths.lineage_events.open("ab") as stream:
        stream.write(_line() + _line())
    assert reader.refresh() == 2
    assert reader.read == [30, 2], "the second and third readers read nothing old"
    with LineageStore(reader.url) as store, store.engine.connect() as conn:
        (cursor,) = conn.execute(file_cursors_table.select()).all()
    assert cursor.path == str(var_paths.lineage_events.resolve())
    assert cursor.read_bytes == var_paths.lineage_events.stat().st_size


@pytest.mark.parametrize(
    "change",
    [
        "truncated and rewritten shorter",
        "replaced by a longer file with another start",
        "replaced by a file of the same length",
    ],
)
def test_a_file_that_shrank_or_was_replaced_is_read_again_from_its_start(var_paths, change):
    reader = Reader(var_paths)
    var_paths.lineage_events.write_bytes(b"".join(_line() for _ in range(5)))
    reader.refresh()
    size = var_paths.lineage_events.stat().st_size
    if change == "truncated and rewritten shorter":
        replacement = _line()
    elif change == "replaced by a longer file with another start":
        replacement = b"".join(_line() for _ in range(8))
    else:
        replacement = b"".join(_line(run_id=str(uuid.uuid4())) for _ in range(5))
        assert len(replacement) == size
    var_paths.lineage_events.write_bytes(replacement)
    new = reader.refresh()
    assert reader.read[-1] == replacement.count(b"\n"), "the whole new file was read"
    assert new == replacement.count(b"\n"), "its events are new"
    assert reader.stored() == 5 + new


def test_a_line_being_written_waits_and_a_spooled_event_file_is_read_once(var_paths):
    reader = Reader(var_paths)
    line = _line()
    var_paths.lineage_events.write_bytes(_line() + line[:50])
    assert reader.refresh() == 1
    with var_paths.lineage_events.open("ab") as stream:
        stream.write(line[50:])
    assert reader.refresh() == 1
    var_paths.lineage_spool.mkdir(parents=True, exist_ok=True)
    (var_paths.lineage_spool / "one.json").write_bytes(_line())
    assert reader.refresh() == 1
    assert reader.refresh() == 0
    assert reader.stored() == 3


def test_a_file_longer_than_the_digested_head_keeps_its_cursor(var_paths):
    reader = Reader(var_paths)
    lines = [_line() for _ in range(2 * HEAD_BYTES // len(_line()) + 2)]
    var_paths.lineage_events.write_bytes(b"".join(lines))
    assert var_paths.lineage_events.stat().st_size > HEAD_BYTES
    reader.refresh()
    with var_paths.lineage_events.open("ab") as stream:
        stream.write(_line())
    assert reader.refresh() == 1 and reader.read[-1] == 1


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(min_value=1, max_value=12),
    cuts=st.lists(st.floats(min_value=0, max_value=1), max_size=6),
)
def test_read_at_any_moments_every_complete_line_is_stored_exactly_once(tmp_path_factory, count, cuts):
    """The file is written in pieces cut at arbitrary bytes (mid-line too); a new reader refreshes after each piece.
    At every moment the store holds exactly the lines complete so far, and no reader read a line twice."""
    var_paths = settings.Paths(tmp_path_factory.mktemp("var"))
    var_paths.lineage.mkdir(parents=True)
    content = b"".join(_line(job=f"dag.task{i}") for i in range(count))
    reader = Reader(var_paths)
    written = 0
    for cut in sorted({int(cut * len(content)) for cut in cuts} | {len(content)}):
        with var_paths.lineage_events.open("ab") as stream:
            stream.write(content[written:cut])
        written = cut
        reader.refresh()
        assert reader.stored() == content[:written].count(b"\n")
    assert sum(reader.read) == count, "each line read by one reader only"
