"""A transaction writes once what its events merge (jobs' and datasets' facets, edge history, run -> dataset rows,
column edges: include/lineage/store/ingest.py ``FacetRow``, ``LineageStore._flush``); the store it leaves is the one
an event per transaction leaves, row for row, on a generated platform history (bench/history.py)."""

from __future__ import annotations

import random
from contextlib import contextmanager

from sqlalchemy import func, select

from bench.history import History
from include.lineage.store import LineageStore
from include.lineage.store.schema import events_table, jobs_table, metadata, runs_table

# what depends on when a row was written, not on what the events say: and the payload dictionaries, trained when
# the store has packed a thousand events, which falls in another transaction when transactions are larger
_SKIPPED = {"lineage_file_cursors", "lineage_rejected_lines", "lineage_dead_letters", "lineage_payload_dictionaries"}


def _tables(store: LineageStore) -> dict[str, list[tuple]]:
    """Every row; an event's packed frame as the text it holds (the frames of two stores differ by dictionary)."""
    with store.engine.connect() as conn:
        tables = {
            table.name: sorted(map(tuple, conn.execute(select(table))), key=repr)
            for table in metadata.sorted_tables
            if table.name not in _SKIPPED and table is not events_table
        }
        e = events_table.c
        columns = [column for column in events_table.columns if column.name != "packed"]
        tables[events_table.name] = sorted(
            (
                (*row[:-1], store.packer.text(conn, row.id, row.payload, row[-1]))
                for row in conn.execute(select(*columns, e.packed))
            ),
            key=repr,
        )
    return tables


def _late(count: int, seed: int) -> list[dict]:
    """A generated history with one event in twenty arriving late, out of order: merges that must not win."""
    events = list(History(count, seed=seed).events())
    late = random.Random(seed).sample(range(len(events)), len(events) // 20)
    for index in late:
        events.append(events[index])
    for index in sorted(late, reverse=True):
        del events[index]
    return events


def test_one_transaction_per_batch_leaves_the_store_one_per_event_leaves(tmp_path):
    events = _late(1_200, seed=8)
    with (
        LineageStore(f"sqlite:///{tmp_path / 'one.db'}") as one,
        LineageStore(f"sqlite:///{tmp_path / 'all.db'}") as batch,
    ):
        one.ingest(events, batch_size=1)
        batch.ingest(events, batch_size=400)
        expected, actual = _tables(one), _tables(batch)
    assert expected.keys() == actual.keys()
    for name in expected:
        assert actual[name] == expected[name], name
    assert expected["lineage_column_edges"] and expected["lineage_edge_history"]


def test_a_transaction_writes_each_run_link_job_and_dataset_row_once_at_its_end(tmp_path):
    """The rows a day of events changes again and again (runs, run -> dataset links, jobs' latest runs, datasets'
    current versions, column edges: include/lineage/store/pending.py) cost one multi-row statement per table a
    transaction, not one per change; the raw events one insert; the batch's stored jobs (their facets, latest runs
    and graph edges) one read, not three per job. Counted from the statements the store sends, not timed."""
    from sqlalchemy import event

    events = list(History(2_400, seed=9).events())
    first, second = events[: len(events) // 2], events[len(events) // 2 :]
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(first, batch_size=len(first))
        with store.engine.connect() as conn:
            known_jobs = set(conn.execute(select(jobs_table.c.name)).scalars())
        sent: list[str] = []
        event.listen(store.engine, "before_cursor_execute", lambda *args: sent.append(" ".join(args[2].split()[:3])))
        store.ingest(second, batch_size=len(second))
        with store.engine.connect() as conn:
            runs = conn.execute(select(func.count()).select_from(runs_table)).scalar_one()
    assert runs > 300, "the history has runs enough for per-change writes to show"
    writes = {
        table: sum(1 for statement in sent if statement.startswith(("INSERT INTO " + table, "UPDATE " + table)))
        for table in ("lineage_runs", "lineage_run_datasets", "lineage_events", "lineage_column_edges", "lineage_jobs")
    }
    pages = -(-len(second) // 1_000)  # SQLAlchemy sends a multi-row insert in pages of 1,000 rows
    assert writes["lineage_runs"] <= 2, writes  # one insert of the new runs, one update of the stored
    # one upsert of the links, one update of the write times of outputs stored for runs whose times moved
    assert writes["lineage_run_datasets"] <= 2, writes
    assert sum(1 for statement in sent if statement.startswith("INSERT INTO lineage_run_datasets")) == 1, writes
    assert writes["lineage_column_edges"] == 1, writes
    assert writes["lineage_events"] == pages, writes
    new_jobs = {e["job"]["name"] for e in second} - known_jobs
    # new jobs are inserted one by one (their ids are needed at once); facets and latest runs updated once at the end
    assert writes["lineage_jobs"] <= 2 + len(new_jobs), writes
    job_reads = sum(1 for statement in sent if statement.startswith("SELECT lineage_jobs."))
    assert job_reads <= 1 + len(new_jobs), f"{job_reads} reads of jobs; {len(new_jobs)} new"
    assert len(sent) < len(second) / 2, f"{len(sent)} statements for {len(second)} events"


def _job_event(namespace: str, name: str, run: int, event_type: str, owner: str | None = None) -> dict:
    facets = {}
    if owner:
        facets["ownership"] = {
            "_producer": "https://example.com/tests",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/OwnershipJobFacet.json",
            "owners": [{"name": owner}],
        }
    return {
        "eventType": event_type,
        "eventTime": f"2025-03-0{run}T00:00:00Z",
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": f"0195{run:04d}-0000-7000-8000-{hash((namespace, name)) % 10**12:012d}"},
        "job": {"namespace": namespace, "name": name, "facets": facets},
        "inputs": [],
        "outputs": [],
    }


@contextmanager
def _second_batch_beside_one_per_event(tmp_path, first: list[dict], second: list[dict]):
    """``first`` then ``second`` into a store a batch each, checked row for row against the store an event per
    transaction leaves; yields that store and the statements the second batch sent."""
    from sqlalchemy import event

    with (
        LineageStore(f"sqlite:///{tmp_path / 'one.db'}") as one,
        LineageStore(f"sqlite:///{tmp_path / 'batch.db'}") as batch,
    ):
        one.ingest(first + second, batch_size=1)
        batch.ingest(first, batch_size=len(first))
        sent: list[str] = []
        event.listen(batch.engine, "before_cursor_execute", lambda *args: sent.append(" ".join(args[2].split())))
        batch.ingest(second, batch_size=len(second))
        during = list(sent)
        assert _tables(batch) == _tables(one)
        yield batch, during


def test_the_batchs_jobs_are_read_by_two_value_lists_and_only_the_asked_pairs_are_taken(tmp_path):
    """The stored jobs a batch names are read with ``namespace IN (..) AND name IN (..)``, never a row-value list
    (PostgreSQL plans ``(a, b) IN ((..), ..)`` in time growing with the square of its length); the rows of the other
    combinations that read brings (here ``team_a.load`` and ``team_b.clean``) are not taken for the asked ones: the
    store is the one an event per transaction leaves."""
    jobs = [("team_a", "clean"), ("team_a", "load"), ("team_b", "clean"), ("team_b", "load")]
    first = [_job_event(ns, name, 1, "COMPLETE", owner=f"{ns}-owner") for ns, name in jobs]
    second = [_job_event(ns, name, 2, "COMPLETE", owner="new-owner") for ns, name in (jobs[0], jobs[3])]
    with _second_batch_beside_one_per_event(tmp_path, first, second) as (batch, sent):
        with batch.engine.connect() as conn:
            j = jobs_table.c
            owners = dict(conn.execute(select(j.namespace + "." + j.name, j.facets)).all())
    reads = [statement for statement in sent if statement.startswith("SELECT lineage_jobs.id")]
    assert reads and not any("(lineage_jobs.namespace, lineage_jobs.name) IN" in read for read in reads), reads
    assert "new-owner" in owners["team_a.clean"] and "new-owner" in owners["team_b.load"]
    assert "new-owner" not in owners["team_a.load"] and "new-owner" not in owners["team_b.clean"]


def _dataset(namespace: str, name: str, version: str, schema: list[str] | None = None) -> dict:
    facets: dict = {"version": {"_producer": "https://example.com/tests", "datasetVersion": version}}
    if schema:
        facets["schema"] = {"_producer": "https://example.com/tests", "fields": [{"name": f} for f in schema]}
    return {"namespace": namespace, "name": name, "facets": facets}


def _run_event(run: int, inputs: list[dict], outputs: list[dict]) -> dict:
    return _job_event("tests", f"job_{run}", run, "COMPLETE") | {"inputs": inputs, "outputs": outputs}


def test_the_batchs_datasets_and_versions_are_read_at_once_and_stored_versions_keep_what_they_hold(tmp_path):
    """The stored datasets a batch names (their facets) and the stored versions it names are read by two value lists
    a 500, not one query each (``batch_reads.read_datasets``); a version not stored is inserted without being asked
    for again. What a stored version holds is kept as before: a version first seen as an input (no schema, no creating
    run) takes the schema and run of a later output of it; one stored with a schema keeps it. The other combinations
    the value lists bring (``b.t1``; ``a.t2``'s version ``v2``) are not taken for the asked ones."""

    from include.lineage.store.schema import dataset_versions_table, datasets_table

    first = [_run_event(1, [_dataset("a", "t1", "v1"), _dataset("b", "t2", "v2")], [_dataset("a", "t2", "v9", ["x"])])]
    second = [
        _run_event(
            2, [_dataset("a", "t2", "v9", ["y"]), _dataset("b", "t1", "v1")], [_dataset("a", "t1", "v1", ["z"])]
        ),
        _run_event(3, [_dataset("b", "t2", "v9"), _dataset("a", "t2", "v2")], [_dataset("b", "t2", "v3", ["w"])]),
    ]
    with _second_batch_beside_one_per_event(tmp_path, first, second) as (batch, during):
        with batch.engine.connect() as conn:
            d, v = datasets_table.c, dataset_versions_table.c
            versions = {
                (row.namespace + "." + row.name, row.version): (row.schema, row.created_by_run_id)
                for row in conn.execute(
                    select(d.namespace, d.name, v.version, v.schema, v.created_by_run_id).join(
                        datasets_table, d.id == v.dataset_id
                    )
                )
            }
    run = {number: _run_event(number, [], [])["run"]["runId"] for number in (1, 2, 3)}
    assert versions[("a.t1", "v1")] == ('[["z", null]]', run[2])  # filled by the later output
    assert versions[("a.t2", "v9")] == ('[["x", null]]', run[1])  # kept: an input's schema does not replace it
    assert versions[("a.t2", "v2")] == (None, None) and versions[("b.t2", "v9")] == (None, None)  # new, read
    assert versions[("b.t2", "v3")] == ('[["w", null]]', run[3])
    dataset_reads = [s for s in during if s.startswith("SELECT lineage_datasets.")]
    version_reads = [s for s in during if s.startswith("SELECT lineage_dataset_versions.")]
    # one read of the three stored datasets, one of their four versions; b.t1 is new: its row and version read alone
    assert len(dataset_reads) == 2 and len(version_reads) == 2, (dataset_reads, version_reads)
    assert not any(") IN ((" in read for read in dataset_reads + version_reads)


def test_a_runs_facets_are_turned_into_json_once_a_transaction_not_once_an_event(tmp_path, monkeypatch):
    """A run's facets are merged in memory event by event (``pending.MergedFacets``) and written as JSON once, with the
    run's row: each event of a run re-read and re-wrote the JSON of all its facets (11 % of a 10^7 build command)."""
    from collections import Counter

    from include.lineage.store.pending import MergedFacets

    events = list(History(1_200, seed=5).events())
    with_facets = Counter(e["run"]["runId"] for e in events if e["run"].get("facets"))
    assert max(with_facets.values()) >= 3, "runs of several events with facets, or nothing is shown"
    from include.lineage.store.pending import PendingWrites

    written: list[int] = []  # the merged facets turned into JSON as run rows are written (jobs' and datasets' aside)
    writing_runs = []
    texts, flush_runs = MergedFacets.texts, PendingWrites.flush_runs

    def flushing(self, conn):
        writing_runs.append(True)
        try:
            return flush_runs(self, conn)
        finally:
            writing_runs.pop()

    monkeypatch.setattr(PendingWrites, "flush_runs", flushing)
    monkeypatch.setattr(MergedFacets, "texts", lambda self: (writing_runs and written.append(id(self))) or texts(self))
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(events, batch_size=len(events))
    assert len(written) == len(set(written)) == len(with_facets), "each run's facets turned into JSON once"


def test_a_new_process_reads_the_jobs_current_versions_and_the_datasets_names_with_the_batch(tmp_path):
    """A ``lineage ingest`` command is a new process, which knows nothing of the store. A job's current version (the
    one its next run most likely has) is read with the job, and the names of the batch's stored datasets by one query
    a 500 nodes (``batch_reads.read_aliases``): not one read per job version and per dataset, each a round trip to
    PostgreSQL (before: 3,599 and 1,390 of 9,603 statements for 8,000 events of a 10^7 history's second day). The
    store left is the one an event per transaction leaves."""
    from sqlalchemy import event

    events = list(History(3_000, seed=21).events())
    first, second = events[: len(events) // 2], events[len(events) // 2 :]
    with LineageStore(f"sqlite:///{tmp_path / 'one.db'}") as one:
        one.ingest(events, batch_size=1)
        expected = _tables(one)
    with LineageStore(f"sqlite:///{tmp_path / 'batch.db'}") as earlier:
        earlier.ingest(first, batch_size=len(first))
    with LineageStore(f"sqlite:///{tmp_path / 'batch.db'}") as new_process:
        sent: list[str] = []
        event.listen(new_process.engine, "before_cursor_execute", lambda *args: sent.append(" ".join(args[2].split())))
        new_process.ingest(second, batch_size=len(second))
        assert _tables(new_process) == expected
    assert [s for s in sent if s.startswith("SELECT lineage_job_versions.id FROM")] == []
    assert [s for s in sent if s.startswith("SELECT lineage_node_aliases.alias FROM")] == []
    assert any(s.startswith("SELECT lineage_node_aliases.node_id, lineage_node_aliases.alias") for s in sent)


# Every output link's write time against its run as it stands: what the provenance's latest write reads
WRITE_TIME_MISMATCHES = (
    "SELECT rd.run_id, rd.direction, rd.written_at, COALESCE(r.ended_at, r.state_time, r.started_at)"
    " FROM lineage_run_datasets rd LEFT JOIN lineage_runs r ON r.id = rd.run_id"
    " WHERE (rd.direction = 'output'"
    " AND rd.written_at IS DISTINCT FROM COALESCE(r.ended_at, r.state_time, r.started_at))"
    " OR (rd.direction = 'input' AND rd.written_at IS NOT NULL)"
)


def test_an_outputs_write_time_is_its_runs_whatever_the_batches_and_the_order_of_events(tmp_path):
    """``lineage_run_datasets.written_at`` (``pending.written_at``) follows the run's end, state time and start as its
    events arrive, in the transaction that wrote the link or a later one (``RETIME_OUTPUTS``), late events included;
    inputs have none."""
    from sqlalchemy import event, text

    events = _late(1_200, seed=11)
    for size in (1, 7, 400):
        with LineageStore(f"sqlite:///{tmp_path / f'store-{size}.db'}") as store:
            sent: list[str] = []
            event.listen(store.engine, "before_cursor_execute", lambda *args, sent=sent: sent.append(args[2]))
            store.ingest(events, batch_size=size)
            with store.engine.connect() as conn:
                assert conn.execute(text(WRITE_TIME_MISMATCHES)).all() == [], size
                outputs = conn.execute(
                    text("SELECT count(*) FROM lineage_run_datasets WHERE written_at IS NOT NULL")
                ).scalar_one()
            assert outputs > 100, size  # the history's runs write
            retimed = [sql for sql in sent if sql.startswith("UPDATE lineage_run_datasets SET written_at")]
            assert retimed, f"batches of {size}: no run's stored outputs were retimed (its runs span transactions)"


def test_a_run_that_ends_in_a_later_transaction_moves_its_stored_outputs_write_time(tmp_path):
    from sqlalchemy import text

    start, running, complete = (_job_event("ns", "writer", 1, kind) for kind in ("START", "RUNNING", "COMPLETE"))
    start["outputs"] = [{"namespace": "file", "name": "/out"}]
    running["eventTime"], complete["eventTime"] = "2025-03-01T00:05:00Z", "2025-03-01T00:09:00Z"
    read = "SELECT written_at FROM lineage_run_datasets WHERE direction = 'output'"
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest([start])
        with store.engine.connect() as conn:
            assert conn.execute(text(read)).scalars().all() == [
                "2025-03-01T00:00:00.000000Z"
            ]  # started: its state's time
        store.ingest([complete])
        store.ingest([running])  # late: the run's end still wins
        with store.engine.connect() as conn:
            assert conn.execute(text(read)).scalars().all() == ["2025-03-01T00:09:00.000000Z"]


def test_an_output_written_early_in_a_transaction_gets_its_runs_end_from_later_in_it(tmp_path):
    """A link can be written before its transaction ends (the job's links read again when its latest run changes:
    ``EventIngest._run_edges``); the run's end arriving after that in the same transaction moves it too."""
    from sqlalchemy import text

    def at(run: int, kind: str, minute: int) -> dict:
        made = _job_event("ns", "job", run, kind)
        made["eventTime"] = f"2025-03-01T00:{minute:02d}:00Z"
        made["outputs"] = [{"namespace": "file", "name": f"/out-{run}"}]
        return made

    # run 1 is the latest, run 2 becomes it, then run 2's START makes it older: the job's latest is run 1 again and
    # its links are read (written first); run 1 then completes
    events = [at(1, "RUNNING", 5), at(2, "RUNNING", 6), at(2, "START", 2), at(1, "COMPLETE", 9)]
    read = "SELECT written_at FROM lineage_run_datasets WHERE dataset_id = (SELECT id FROM lineage_datasets WHERE name = '/out-1')"
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(events, batch_size=len(events))
        with store.engine.connect() as conn:
            assert conn.execute(text(read)).scalars().all() == ["2025-03-01T00:09:00.000000Z"]
            assert conn.execute(text(WRITE_TIME_MISMATCHES)).all() == []
