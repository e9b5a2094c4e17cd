"""The store follows the event files under ``var/lineage/`` from where it last stopped, across processes
(include/lineage/store/follower.py): what each new reader reads is what was appended since; a file that shrank or
was replaced is read again from its start; whatever the moments it is read at, every complete line is stored once.
A line that is not an event is set aside, named by file and line, and the follower goes on past it."""

from __future__ import annotations

import copy
import json
import logging
import uuid

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from include.core import settings
from include.lineage.events import read_event_file
from include.lineage.store import LineageStore
from include.lineage.store.follower import HEAD_BYTES, REJECTED_CONTENT_BYTES, StoreFollower, rejected_lines
from include.lineage.store.schema import events_table, file_cursors_table
from tests.unit.test_lineage_reads_survive_bad_events import JSON, good_event, paths_of, replaced


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


def written_in_pieces(path, content: bytes, cuts: list[float]):
    """Append ``content`` to ``path`` in pieces cut at the fractions ``cuts`` (mid-line too), yielding how many bytes
    are written after each piece; the last piece ends the content."""
    written = 0
    for cut in sorted({int(cut * len(content)) for cut in cuts} | {len(content)}):
        with path.open("ab") as stream:
            stream.write(content[written:cut])
        written = cut
        yield written


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
    for written in written_in_pieces(var_paths.lineage_events, content, cuts):
        reader.refresh()
        assert reader.stored() == content[:written].count(b"\n")
    assert sum(reader.read) == count, "each line read by one reader only"


# --- Lines that are not events ------------------------------------------------------------------------------------


def _event_line(**changes) -> bytes:
    event = json.loads(_line())
    event.update(changes)
    return (json.dumps(event) + "\n").encode()


def _column_lineage_with_a_number_for_a_name() -> bytes:
    event = json.loads(_line())
    column = {"namespace": "file", "name": float("nan"), "field": "a"}
    event["outputs"] = [
        {"namespace": "file", "name": "/out", "facets": {"columnLineage": {"fields": {"b": {"inputFields": [column]}}}}}
    ]
    return (json.dumps(event) + "\n").encode()


BAD_LINES = {
    # a writer killed mid-line, and the next writer's line appended to what it left
    "a torn line joined with the next": (_line()[:60] + _line(), "not valid JSON"),
    "not JSON": (b"hello, world\n", "not valid JSON"),
    "not UTF-8": (b'{"eventTime": "\xff\xfe"}\n', "not UTF-8"),
    "nested too deeply": (b"[" * 100_000 + b"\n", "nested too deeply"),
    "JSON that is not an object": (b'"an event"\n', "is a JSON object, not str"),
    "an object that is not an event": (b'{"a": 1}\n', "no eventTime"),
    "a NUL byte": (b'{"eventTime": "\x00"}\n', "not valid JSON"),
    "a time no calendar holds": (_event_line(eventTime="0001-01-01T00:00:00+14:00"), "outside the years 1 to 9999"),
    "a column lineage input named by a number": (
        _column_lineage_with_a_number_for_a_name(),
        "is a float, not a string",
    ),
    "a producer that is an object": (_event_line(producer={"name": "x"}), "producer is a dict, not a string"),
    "an oversized line": (b"x" * (3 * 1024 * 1024) + b"\n", "not valid JSON"),
}


def rejected(reader: Reader) -> list[dict]:
    with LineageStore(reader.url) as store:
        return rejected_lines(store)


@pytest.mark.parametrize("bad", list(BAD_LINES), ids=list(BAD_LINES))
def test_a_bad_line_is_set_aside_with_its_file_line_and_reason_and_the_lines_after_it_are_stored(
    var_paths, bad, caplog
):
    """Before: the follower raised on the bad line at every refresh, so nothing after it (nor the good line before
    it, in the same read) ever reached the store, and the lineage page answered 500."""
    content, reason = BAD_LINES[bad]
    first = _line()
    var_paths.lineage_events.write_bytes(first + content + _line())
    reader = Reader(var_paths)
    with caplog.at_level(logging.WARNING, logger="include.lineage.store.follower"):
        assert reader.refresh() == 2, "the good lines on both sides are stored"
        assert reader.refresh() == 0
        with var_paths.lineage_events.open("ab") as stream:
            stream.write(_line())
        assert reader.refresh() == 1, "and what is appended later"
    (kept,) = rejected(reader)
    assert kept["path"] == str(var_paths.lineage_events.resolve())
    assert (kept["line"], kept["byteOffset"]) == (2, len(first))
    assert reason in kept["error"]
    assert kept["length"] == len(content) - 1
    assert kept["truncated"] == (len(content) - 1 > REJECTED_CONTENT_BYTES)
    assert len(kept["content"]) <= REJECTED_CONTENT_BYTES
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "named once, not at every refresh"
    assert f"{var_paths.lineage_events}:2: not stored:" in warnings[0]
    with LineageStore(reader.url) as store, store.engine.connect() as conn:
        (cursor,) = conn.execute(file_cursors_table.select()).all()
    assert (cursor.read_bytes, cursor.read_lines) == (var_paths.lineage_events.stat().st_size, 4)


def test_a_line_with_json_line_separators_inside_a_string_is_one_event(var_paths):
    """JSON allows U+0085, U+2028 and U+2029 raw inside a string (Jackson writes them so); ``str.splitlines``, which
    the follower and ``lineage ingest`` used, breaks lines there and cut such an event in two bad halves."""
    event = json.loads(_line())
    event["job"]["facets"]["sql"] = {"query": "SELECT 1\u2028-- next\u0085line\u2029end"}
    var_paths.lineage_events.write_bytes((json.dumps(event, ensure_ascii=False) + "\n").encode() + _line())
    reader = Reader(var_paths)
    assert reader.refresh() == 2
    assert rejected(reader) == []
    first, _second = read_event_file(var_paths.lineage_events)  # `lineage ingest` reads it as one event too
    assert first.event["job"]["facets"]["sql"]["query"] == event["job"]["facets"]["sql"]["query"]


def test_a_spooled_file_that_is_not_an_event_is_set_aside_and_one_gone_since_it_was_listed_is_skipped(var_paths):
    reader = Reader(var_paths)
    var_paths.lineage_spool.mkdir(parents=True, exist_ok=True)
    (var_paths.lineage_spool / "bad.json").write_bytes(b'{"not": "an event"}')
    (var_paths.lineage_spool / "good.json").write_bytes(_line())
    assert reader.refresh() == 1
    (kept,) = rejected(reader)
    assert kept["path"].endswith("bad.json") and kept["line"] is None and "no eventTime" in kept["error"]

    class Vanished(type(var_paths.lineage_events)):
        """A spooled event that `lineage replay` sent and removed after the follower listed it."""

        def exists(self, **_kwargs) -> bool:
            return True

    with LineageStore(reader.url) as store:
        assert StoreFollower(store, var_paths).refresh([Vanished(var_paths.lineage_spool / "sent.json")]) == 0


def test_a_cursor_written_before_line_counts_names_a_later_bad_line_by_its_byte_offset(var_paths, capsys):
    """A store upgraded to revision 0006 has cursors without a line count: the follower does not read the file again
    from its start to count lines; it names a bad line by its offset, and `lineage rejected` prints it."""
    reader = Reader(var_paths)
    var_paths.lineage_events.write_bytes(_line() + _line())
    reader.refresh()
    with LineageStore(reader.url) as store, store.engine.begin() as conn:
        conn.execute(file_cursors_table.update().values(read_lines=None))
    offset = var_paths.lineage_events.stat().st_size
    with var_paths.lineage_events.open("ab") as stream:
        stream.write(b"not json\n" + _line())
    assert reader.refresh() == 1
    (kept,) = rejected(reader)
    assert (kept["line"], kept["byteOffset"]) == (None, offset)

    from include.lineage import cli

    assert cli.main(["rejected", "--store", reader.url]) == 0
    printed = capsys.readouterr().out
    assert f"{var_paths.lineage_events.resolve()} (byte {offset}, 8 bytes" in printed
    assert "not valid JSON" in printed and "'not json'" in printed
    assert "1 line(s) not stored" in printed
    assert cli.main(["rejected", "--store", reader.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["byteOffset"] == offset


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(st.sampled_from(["good", *BAD_LINES]), min_size=1, max_size=10),
    cuts=st.lists(st.floats(min_value=0, max_value=1), max_size=6),
)
def test_read_at_any_moments_every_good_line_is_stored_once_and_every_bad_one_set_aside_once(
    tmp_path_factory, kinds, cuts
):
    """Good and bad lines in any order, the file written in pieces cut at arbitrary bytes, a new reader after each:
    at every moment the store holds exactly the good lines complete so far, and the rejected lines are exactly the
    bad ones complete so far, each once, each under its own line number."""
    var_paths = settings.Paths(tmp_path_factory.mktemp("var"))
    var_paths.lineage.mkdir(parents=True)
    lines = [_line(job=f"dag.task{i}") if kind == "good" else BAD_LINES[kind][0] for i, kind in enumerate(kinds)]
    if any(kind == "an oversized line" for kind in kinds):
        lines = [line if len(line) < 1_000_000 else b"y" * 70_000 + b"\n" for line in lines]  # keep examples quick
    content = b"".join(lines)
    ends = [sum(map(len, lines[: i + 1])) for i in range(len(lines))]
    reader = Reader(var_paths)
    for written in written_in_pieces(var_paths.lineage_events, content, cuts):
        reader.refresh()
        complete = [kind for kind, end in zip(kinds, ends, strict=True) if end <= written]
        assert reader.stored() == complete.count("good")
        assert sorted(item["line"] for item in rejected(reader)) == [
            number for number, kind in enumerate(complete, start=1) if kind != "good"
        ]


@pytest.fixture(scope="module")
def long_lived(tmp_path_factory):
    """One store and var/ for every example, as a long-lived `lineage serve` has (no migration per example)."""
    var_paths = settings.Paths(tmp_path_factory.mktemp("long-lived"))
    var_paths.lineage.mkdir(parents=True)
    with LineageStore(f"sqlite:///{var_paths.lineage / 'store.db'}") as store:
        yield StoreFollower(store, var_paths)


@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_any_line_of_an_event_file_is_stored_or_set_aside_and_never_stops_the_follower(long_lived, data):
    """An event with up to three random parts replaced by random JSON (``lineage serve`` checks posts against the
    OpenLineage schemas first; event files get only the store's own check): the follower never raises, the good
    lines around it are stored, and the bad event is either stored or set aside with a reason."""
    bad = good_event("2025-02-01T00:00:00Z", str(uuid.uuid4()), uuid.uuid4().hex[:8])
    for _ in range(data.draw(st.integers(1, 3))):
        every = list(paths_of(bad))
        if not every:
            break
        bad = replaced(copy.deepcopy(bad), data.draw(st.sampled_from(every)), data.draw(JSON))
    file = long_lived.paths.lineage / f"{uuid.uuid4().hex}.jsonl"
    file.write_bytes(_line() + (json.dumps(bad) + "\n").encode() + _line())
    new = long_lived.refresh([file])
    set_aside = [item for item in rejected_lines(long_lived.store) if item["path"] == str(file.resolve())]
    assert new + len(set_aside) == 3 and new >= 2, (bad, set_aside)
    assert all(item["line"] == 2 and item["error"] for item in set_aside)
