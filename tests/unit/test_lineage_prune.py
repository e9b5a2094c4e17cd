"""``lineage prune``: on a generated store of 300 days of daily runs (three chained jobs, one whose inputs changed,
one that stopped running, Spark-like child runs, runless job events), pruning 90 days deletes the old events, runs,
run edges and versions, keeps every current version and answers every graph query exactly as before; the closure
equals networkx's on the current graph, before and after, and after more events arrive."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import networkx as nx
import pytest
from sqlalchemy import func, select

from include.lineage.errors import LineageError
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore
from include.lineage.store.retention import parse_horizon, prune_store
from include.lineage.store.schema import (
    closure_table,
    dataset_versions_table,
    datasets_table,
    edge_history_table,
    edges_table,
    events_table,
    job_versions_table,
    jobs_table,
    nodes_table,
    run_datasets_table,
    runs_table,
)
from tests.lineage_graph import build_graph

NOW = datetime(2025, 11, 1, tzinfo=UTC)
DAYS = 300
PRODUCER = "https://example.com/tests"
LINEAGE = str(Path(sys.executable).with_name("lineage"))


def _version(name: str, version: str) -> dict:
    return {
        "version": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json",
            "datasetVersion": version,
        }
    }


def _run_events(job: str, day: int, inputs: list[str], outputs: list[str], parent: tuple[str, str] | None = None):
    run_id = str(uuid.uuid4())
    at = NOW - timedelta(days=DAYS - day)
    facets = {}
    if parent is not None:
        facets["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
            "run": {"runId": parent[0]},
            "job": {"namespace": "ns", "name": parent[1]},
        }
    events = []
    for offset, event_type in ((0, "START"), (600, "COMPLETE")):
        events.append(
            {
                "eventType": event_type,
                "eventTime": (at + timedelta(seconds=offset)).isoformat(),
                "producer": PRODUCER,
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                "run": {"runId": run_id, "facets": facets},
                "job": {"namespace": "ns", "name": job, "facets": {}},
                "inputs": [{"namespace": "file", "name": name, "facets": {}} for name in inputs],
                "outputs": [
                    {"namespace": "file", "name": name, "facets": _version(name, f"{name}@{day}")} for name in outputs
                ],
            }
        )
    return run_id, events


def generated_events() -> list[dict]:
    events = []
    for day in range(DAYS):
        dag_run, dag_events = _run_events("dag", day, [], [])
        events += dag_events
        events += _run_events("stage", day, ["/raw"], ["/staged"], parent=(dag_run, "dag"))[1]
        events += _run_events("stage.spark", day, ["/raw"], ["/staged"], parent=(dag_run, "dag"))[1]
        merge_inputs = ["/staged", "/lookup"] if day < 150 else ["/staged"]  # stopped reading /lookup
        events += _run_events("merge", day, merge_inputs, ["/merged"], parent=(dag_run, "dag"))[1]
        if day < 100:  # stopped running 200 days ago: its latest run and versions must stay
            events += _run_events("legacy_report", day, ["/merged"], ["/legacy"])[1]
        events += _run_events("report", day, ["/merged"], ["/report"])[1]
        if day in (100, 290):  # a rare job: its old run stays (it wrote /rare's current version) and is its latest
            # run as of any instant between them, past the horizon too, with edges its later run no longer has
            events += _run_events("rare", day, ["/merged"], ["/rare"] if day == 100 else ["/rare_summary"])[1]
    old_declaration = {  # a runless job event, long ago: a job that never ran keeps its edges
        "eventTime": (NOW - timedelta(days=250)).isoformat(),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "ns", "name": "declared", "facets": {}},
        "inputs": [{"namespace": "file", "name": "/report", "facets": {}}],
        "outputs": [{"namespace": "file", "name": "/declared", "facets": {}}],
    }
    return [*events, old_declaration]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prune") / "template.db"
    with LineageStore(f"sqlite:///{path}") as store:
        store.ingest(generated_events())
    return path


@pytest.fixture
def store(template, tmp_path):
    path = tmp_path / "store.db"
    path.write_bytes(template.read_bytes())
    with LineageStore(f"sqlite:///{path}") as opened:
        yield opened


def counts(store) -> dict[str, int]:
    tables = (events_table, runs_table, run_datasets_table, dataset_versions_table, job_versions_table)
    return {table.name: store.count(table) for table in (*tables, edge_history_table, edges_table, closure_table)}


def graphs(store) -> dict[str, dict]:
    queries = LineageQueries(store)
    with store.engine.connect() as conn:
        keys = sorted(conn.execute(select(nodes_table.c.key)).scalars())
    return {key: queries.marquez_lineage(key, 20) for key in keys}


def check_closure(store) -> nx.DiGraph:
    """The closure table is the shortest distances of the current graph's edges, networkx's way."""
    with store.engine.connect() as conn:
        names = dict(conn.execute(select(nodes_table.c.id, nodes_table.c.key)).all())
        graph = nx.DiGraph()
        graph.add_nodes_from(names.values())
        graph.add_edges_from((names[s], names[t]) for s, t in conn.execute(select(edges_table)))
        stored = {(names[a], names[d]): depth for a, d, depth in conn.execute(select(closure_table))}
    expected = {
        (a, d): depth for a, reached in nx.all_pairs_shortest_path_length(graph) for d, depth in reached.items()
    }
    assert stored == expected
    return graph


def latest_runs_graph(store) -> nx.DiGraph:
    """The reference graph (tests/lineage_graph.py) of the events of each job's latest run."""
    with store.engine.connect() as conn:
        latest = set(conn.execute(select(jobs_table.c.latest_run_id)).scalars()) - {None}
        e = events_table.c
        payloads = [
            (store.packer.text(conn, row.id, row.payload, row.packed), row.run_id)
            for row in conn.execute(select(e.id, e.payload, e.packed, e.run_id))
        ]
    return build_graph([json.loads(payload) for payload, run_id in payloads if run_id in latest])


def test_pruning_keeps_every_current_version_and_answers_every_graph_query_as_before(store, capsys):
    before_counts, before_graphs = counts(store), graphs(store)
    check_closure(store)
    dry = prune_store(store, parse_horizon("90d"), dry_run=True, now=NOW)
    assert counts(store) == before_counts, "a dry run changes nothing"
    report = prune_store(store, parse_horizon("90d"), now=NOW, vacuum=True)
    assert report.counts == dry.counts, "the dry run counted what the real one deleted"
    after = counts(store)
    print(
        f"\nprune 90d of {DAYS} days: {report.line('90d')}; rows {before_counts} -> {after}",
        file=sys.stderr,
    )
    for table, deleted in (
        ("lineage_events", report.counts["events"]),
        ("lineage_runs", report.counts["runs"]),
        ("lineage_run_datasets", report.counts["run edges"]),
        ("lineage_dataset_versions", report.counts["dataset versions"]),
    ):
        assert deleted > 0 and after[table] == before_counts[table] - deleted, table
    assert after["lineage_edges"] == before_counts["lineage_edges"]
    assert report.bytes_after < report.bytes_before / 2, "the file shrank"
    assert set(report.seconds) == {"planning", "deleting", "vacuuming"} and report.free_bytes is None
    assert graphs(store) == before_graphs, "every graph query answers as before"
    graph = check_closure(store)
    assert set(graph.edges) == set(latest_runs_graph(store).edges) | {
        ("dataset:file:/report", "job:ns:declared"),
        ("job:ns:declared", "dataset:file:/declared"),
    }
    assert ("dataset:file:/lookup", "job:ns:merge") not in graph.edges

    horizon = report.horizon
    with store.engine.connect() as conn:
        runs = {row.id: row for row in conn.execute(select(runs_table))}
        jobs = conn.execute(select(jobs_table)).all()
        datasets = conn.execute(select(datasets_table)).all()
        job_versions = set(conn.execute(select(job_versions_table.c.id)).scalars())
        dataset_versions = set(conn.execute(select(dataset_versions_table.c.id)).scalars())
        read_versions = set(conn.execute(select(run_datasets_table.c.dataset_version_id)).scalars()) - {None}
        oldest_event = conn.execute(
            select(func.min(events_table.c.event_time)).where(events_table.c.run_id.is_not(None))
        ).scalar()
    assert all(job.latest_run_id is None or job.latest_run_id in runs for job in jobs), "latest runs stay"
    assert all(job.current_version_id in job_versions for job in jobs if job.current_version_id)
    assert all(dataset.current_version_id in dataset_versions for dataset in datasets if dataset.current_version_id)
    assert {run.job_version_id for run in runs.values()} - {None} <= job_versions
    assert read_versions <= dataset_versions, "what a remaining run read or wrote stays"
    legacy = next(job for job in jobs if job.name == "legacy_report")
    assert runs[legacy.latest_run_id].first_event_time < horizon, "a job that stopped keeps its latest run"
    protected = {job.latest_run_id for job in jobs} | {run.parent_run_id for run in runs.values()}
    old = [run for run in runs.values() if run.first_event_time < horizon and run.id not in protected]
    creators = {row for row in (d.current_version_id for d in datasets)}
    assert len(old) <= len(creators), "no other old run stays"
    assert oldest_event < horizon  # the kept latest runs of stopped jobs
    assert LineageQueries(store).marquez_lineage("job:ns:declared", 5)["graph"], "the runless job keeps its edges"


def test_after_pruning_the_graph_as_of_any_instant_past_the_horizon_is_the_one_of_the_runs_that_stay(store):
    """``--as-of`` walks find a dataset's writers and readers among every edge ever seen (lineage_edge_history): the
    prune keeps the edges of the runs that stay, though their last sighting is older than the horizon and they left
    the current graph (the rare job's run of day 100 is its latest until day 290)."""
    from include.lineage.queries.walks import as_of_edges, as_of_walk, directed_depths

    report = prune_store(store, parse_horizon("90d"), now=NOW)
    queries = LineageQueries(store)
    with store.engine.connect() as conn:
        keys = sorted(conn.execute(select(nodes_table.c.key)).scalars())
        nodes = [queries.resolve(key, conn) for key in keys]
        for day in (DAYS - 89, 250, DAYS - 5):
            as_of = (NOW - timedelta(days=DAYS - day)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            assert as_of >= report.horizon
            whole = as_of_edges(conn, as_of)[0]
            for node in nodes:
                for direction in ("upstream", "downstream"):
                    expected = directed_depths(whole, node.id, direction == "downstream", 20)
                    among = sorted(e for e in whole if e[0] in expected and e[1] in expected)
                    assert as_of_walk(conn, node, direction, 20, as_of) == (expected, among), (node.key, day)
    upstream = LineageQueries(store).upstream("dataset:file:/rare", as_of=(NOW - timedelta(days=40)).isoformat())
    assert "job:ns:rare" in {node.key for node in upstream.nodes.values()}


def test_after_pruning_new_and_late_events_keep_the_closure_exact(store):
    prune_store(store, parse_horizon("90d"), now=NOW)
    later = []
    for day in range(DAYS, DAYS + 5):
        later += _run_events("merge", day, ["/staged", "/lookup2"], ["/merged"])[1]
        later += _run_events("report", day, ["/merged", "/lookup2"], ["/report"])[1]
    late_old_run = _run_events("stage", 10, ["/raw_old"], ["/staged"])[1]  # an event of pruned history, again
    store.ingest([*later, *late_old_run])
    graph = check_closure(store)
    assert ("dataset:file:/lookup2", "job:ns:report") in graph.edges
    assert ("dataset:file:/raw_old", "job:ns:stage") not in graph.edges, "an old run never becomes current"


@pytest.mark.parametrize(
    "age, parsed",
    [
        ("90d", timedelta(days=90)),
        ("12h", timedelta(hours=12)),
        ("2w", timedelta(weeks=2)),
        ("30m", timedelta(30 / 1440)),
    ],
)
def test_ages(age, parsed):
    assert parse_horizon(age) == parsed


@pytest.mark.parametrize("age", ["", "90", "d", "-1d", "1y", "90 days", "1.5d"])
def test_bad_ages_are_refused(age):
    with pytest.raises(LineageError, match="expected a number and a unit"):
        parse_horizon(age)


def test_the_command(store, tmp_path):
    url = store.url
    store.close()
    dry = subprocess.run(
        [LINEAGE, "prune", "--older-than", "90d", "--dry-run", "--store", url], capture_output=True, text=True
    )
    assert dry.returncode == 0 and "would delete" in dry.stdout and "0 runs" not in dry.stdout, dry.stderr
    default = subprocess.run([LINEAGE, "prune", "--dry-run", "--store", url], capture_output=True, text=True)
    assert default.returncode == 0 and "older than 395d" in default.stdout
    bad = subprocess.run([LINEAGE, "prune", "--older-than", "ninety", "--store", url], capture_output=True, text=True)
    assert bad.returncode == 2 and "expected a number and a unit" in bad.stderr
    for batch in ("0", "-3", "many", ""):
        refused = subprocess.run(
            [LINEAGE, "prune", "--batch-runs", batch, "--store", url], capture_output=True, text=True
        )
        assert refused.returncode == 2 and "--batch-runs" in refused.stderr and "1 or more" in refused.stderr, batch
    done = subprocess.run(
        [LINEAGE, "prune", "--older-than", "90d", "--batch-runs", "100", "--store", url], capture_output=True, text=True
    )
    transactions = int(re.search(r"in (\d+) transactions", done.stdout).group(1))
    assert done.returncode == 0 and transactions > 12, done.stdout  # over 1,200 old runs, 100 at a time
    assert "free for new events" in done.stdout, done.stdout
    vacuumed = subprocess.run([LINEAGE, "prune", "--vacuum", "--store", url], capture_output=True, text=True)
    assert vacuumed.returncode == 0 and re.search(r"store [\d.]+ MB -> [\d.]+ MB", vacuumed.stdout), vacuumed.stdout


# ----------------------------------------------------------------------------- bounded transactions


def contents(store) -> dict[str, set]:
    """Every row the prune may delete, by table, and the current graph."""
    tables = (events_table, runs_table, run_datasets_table, dataset_versions_table, job_versions_table)
    with store.engine.connect() as conn:
        return {
            table.name: set(conn.execute(select(table)).all()) for table in (*tables, edge_history_table, edges_table)
        }


def check_references(store) -> None:
    """What stays points only at rows that stay: latest runs, current versions, read and written versions, the
    versions of runs, parents."""
    with store.engine.connect() as conn:
        runs = {row.id: row for row in conn.execute(select(runs_table))}
        job_versions = set(conn.execute(select(job_versions_table.c.id)).scalars())
        dataset_versions = set(conn.execute(select(dataset_versions_table.c.id)).scalars())
        jobs = conn.execute(select(jobs_table)).all()
        datasets = conn.execute(select(datasets_table)).all()
        read = set(conn.execute(select(run_datasets_table.c.dataset_version_id)).scalars()) - {None}
        linked_runs = set(conn.execute(select(run_datasets_table.c.run_id)).scalars())
        event_runs = set(conn.execute(select(events_table.c.run_id)).scalars()) - {None}
    assert all(job.latest_run_id in runs for job in jobs if job.latest_run_id)
    assert all(job.current_version_id in job_versions for job in jobs if job.current_version_id)
    assert all(d.current_version_id in dataset_versions for d in datasets if d.current_version_id)
    assert read <= dataset_versions and linked_runs <= runs.keys() and event_runs <= runs.keys()
    assert {run.job_version_id for run in runs.values()} - {None} <= job_versions
    assert {run.parent_run_id for run in runs.values()} - {None} <= runs.keys(), "the parents of what stays stay"


@pytest.mark.parametrize("batch_runs", [1, 7])
def test_a_prune_in_small_transactions_deletes_exactly_what_one_large_one_deletes(template, tmp_path, batch_runs):
    stores = {}
    for name, size in (("one", 10**9), ("small", batch_runs)):
        path = tmp_path / f"{name}.db"
        path.write_bytes(template.read_bytes())
        with LineageStore(f"sqlite:///{path}") as store:
            stores[name] = prune_store(store, parse_horizon("90d"), now=NOW, batch_runs=size), contents(store)
    (one, one_rows), (small, small_rows) = stores["one"], stores["small"]
    assert small_rows == one_rows and small.counts == one.counts and small.counts["runs"] > 100
    assert small.transactions >= small.counts["runs"] / batch_runs > one.transactions
    assert small.spared == 0 and "transactions (the longest" in small.line("90d")


def test_what_is_written_between_the_prune_s_transactions_is_kept_and_the_rest_goes(store):
    prune_with_a_writer_in_between(store)


def prune_with_a_writer_in_between(store) -> None:
    """A writer (another store object on the same file, as another process) comes in after the prune's first
    transaction: it sends an event of an old run the prune has not reached yet, a new child of another old run, and
    a new run reading a dataset version the prune planned to delete. Those runs, their parents and the version stay;
    everything else old goes; what stays points only at what stays; the closure stays exact. The ids of events the
    prune has just deleted are given again by SQLite: what it looks at is what was written after its own deletes.
    (Also run on PostgreSQL: tests/integration/test_lineage_prune_postgres.py.)"""
    with store.engine.connect() as conn:
        r, j = runs_table.c, jobs_table.c
        old = conn.execute(
            select(r.id, r.parent_run_id, j.name)
            .join(jobs_table, j.id == r.job_id)
            .where(r.first_event_time < "2025-06-01", j.name.in_(["stage", "merge"]))
            .order_by(r.first_event_time.desc())
            .limit(2)
        ).all()
    revived, adopter = old
    late = NOW - timedelta(days=1)
    revived_events = [  # the old run's job and inputs, a late event of it
        {**event, "eventTime": late.isoformat(), "eventType": "RUNNING"}
        for event in _run_events(revived.name, DAYS - 1, ["/raw"], [])[1][:1]
    ]
    for event in revived_events:
        event["run"] = {**event["run"], "runId": revived.id}
    child = _run_events("adopted.spark", DAYS - 1, ["/raw"], [], parent=(adopter.id, adopter.name))
    reader_run, reader = _run_events("auditor", DAYS - 1, ["/staged"], [])
    for event in reader:  # reads /staged as it was on day 10, a version no run that stays read
        event["inputs"][0]["facets"] = _version("/staged", "/staged@10")
    # the newest ids are of the oldest run, arrived late: deleted by the first transaction, then given again by
    # SQLite (greatest id plus one) to what the writer sends
    store.ingest(_run_events("stage", -1, ["/raw"], ["/staged"])[1])
    written = []

    def write_once(report):
        if not written:
            with LineageStore(store.url) as writer:
                writer.ingest(revived_events)
                writer.ingest([*child[1], *reader])
            written.append(report.transactions)

    report = prune_store(store, parse_horizon("90d"), now=NOW, batch_runs=5, progress=write_once)
    assert written == [1] and report.transactions > 10
    with store.engine.connect() as conn:
        runs = set(conn.execute(select(runs_table.c.id)).scalars())
        staged_10 = conn.execute(
            select(dataset_versions_table.c.id).where(dataset_versions_table.c.version == "/staged@10")
        ).scalar()
        still_old = conn.execute(
            select(func.count()).select_from(runs_table).where(runs_table.c.first_event_time < "2025-06-01")
        ).scalar()
    assert {revived.id, adopter.id, revived.parent_run_id, adopter.parent_run_id, child[0], reader_run} <= runs
    assert staged_10 is not None, "a version read by a run written during the prune stays"
    assert report.spared >= 2 and "old runs spared" in report.line("90d")
    assert still_old <= 20, "the rest of the old runs went"
    check_references(store)
    check_closure(store)


def test_a_prune_stopped_half_way_leaves_a_consistent_store_and_running_it_again_finishes_it(template, tmp_path):
    whole = tmp_path / "whole.db"
    whole.write_bytes(template.read_bytes())
    with LineageStore(f"sqlite:///{whole}") as store:
        prune_store(store, parse_horizon("90d"), now=NOW, batch_runs=50)
        expected = contents(store)

    def stop_after_three(report):
        if report.transactions == 3:
            raise KeyboardInterrupt

    halted = tmp_path / "halted.db"
    halted.write_bytes(template.read_bytes())
    with LineageStore(f"sqlite:///{halted}") as store:
        before = counts(store)["lineage_runs"]
        with pytest.raises(KeyboardInterrupt):
            prune_store(store, parse_horizon("90d"), now=NOW, batch_runs=50, progress=stop_after_three)
        assert before - 150 <= counts(store)["lineage_runs"] < before, "three transactions' runs went, no more"
        check_references(store)
        check_closure(store)
        prune_store(store, parse_horizon("90d"), now=NOW, batch_runs=50)
        assert contents(store) == expected


def test_without_vacuum_the_freed_pages_are_counted_and_new_events_fill_them_before_the_file_grows(store):
    path = Path(store.url.removeprefix("sqlite:///"))
    report = prune_store(store, parse_horizon("90d"), now=NOW)
    assert report.bytes_after is None and "vacuuming" not in report.seconds
    assert report.free_bytes > report.bytes_before / 2, "most of the store is free pages"
    assert "free for new events (--vacuum gives it back)" in report.line("90d")
    store.engine.dispose()
    size = path.stat().st_size
    later = [
        event for day in range(DAYS, DAYS + 30) for event in _run_events("merge", day, ["/staged"], ["/merged"])[1]
    ]
    store.ingest(later)
    with store.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        free_after = conn.exec_driver_sql("PRAGMA freelist_count").scalar()
    assert path.stat().st_size == size, "the new events went into freed pages"
    assert free_after * 4096 < report.free_bytes


@pytest.mark.parametrize("step, every_transaction", [(11, True), (0, False)])
def test_the_command_says_how_far_it_is_at_most_every_ten_seconds(
    template, tmp_path, capsys, monkeypatch, step, every_transaction
):
    """A clock moving 11 s a look: a line on stderr after every transaction; a clock standing still: none."""
    from include.lineage import cli

    clock = itertools.count(0, step)
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    path = tmp_path / "store.db"
    path.write_bytes(template.read_bytes())
    assert cli.main(["prune", "--older-than", "90d", "--batch-runs", "100", "--store", f"sqlite:///{path}"]) == 0
    out, err = capsys.readouterr()
    transactions = int(re.search(r"in (\d+) transactions", out).group(1))
    lines = [line for line in err.splitlines() if line.startswith("lineage prune: ")]
    assert all(re.fullmatch(r"lineage prune: [\d,]+ events, .* deleted so far", line) for line in lines), lines
    assert len(lines) == (transactions if every_transaction else 0) and transactions > 12
