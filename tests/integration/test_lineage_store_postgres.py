"""Concurrent writers on one PostgreSQL lineage store: two `lineage serve` processes and a `lineage consume`, all
started for real on loopback against a real PostgreSQL cluster (include/services/postgres.py) and Kafka broker.

10,000 events of a layered graph whose jobs change their inputs from run to run (so edges leave the current graph),
arriving interleaved through the three writers, some of them twice and through two different writers: every distinct
event is stored once, and the current graph, its closure and the edge history equal what networkx computes from the
events alone (the reference of tests/unit/test_store_closure.py).
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from sqlalchemy import func, select

from include.core.naming import KAFKA_EVENTS_TOPIC
from include.lineage.store import LineageStore
from include.lineage.store.schema import events_table
from tests.integration.test_kafka import consume, produce
from tests.support import start_lineage_serve, throwaway_postgres
from tests.unit.test_store_closure import _check

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

LINEAGE = str(Path(sys.executable).parent / "lineage")
EVENTS = 10_000
BATCH = 50


def _events(seed: int = 24) -> list[dict]:
    """START and COMPLETE of 5,000 runs of 200 jobs over 600 datasets in 6 layers: a job reads from lower layers and
    writes its own, and each run picks its inputs anew, so a job's latest version keeps changing."""
    rng = random.Random(seed)
    layers = [[f"/layer{layer}/d{index}" for index in range(100)] for layer in range(6)]
    jobs = []
    for index in range(200):
        layer = rng.randint(1, 5)
        jobs.append((f"job{index}", layer, rng.sample(layers[layer], 2)))
    events = []
    for run in range(EVENTS // 2):
        name, layer, outputs = jobs[run % len(jobs)]
        lower = [dataset for below in layers[:layer] for dataset in below]
        inputs = rng.sample(lower, rng.randint(1, 3))
        second = rng.randrange(86_400 * 30)
        run_id = f"01940000-0000-7000-8000-{run:012x}"
        for offset, event_type in ((0, "START"), (rng.randint(1, 600), "COMPLETE")):
            moment = second + offset
            events.append(
                {
                    "eventType": event_type,
                    "eventTime": f"2025-01-{1 + moment // 86_400:02d}T{moment // 3600 % 24:02d}:"
                    f"{moment // 60 % 60:02d}:{moment % 60:02d}Z",
                    "producer": "https://example.com/tests",
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                    "run": {"runId": run_id, "facets": {}},
                    "job": {"namespace": "tests", "name": name, "facets": {}},
                    "inputs": [{"namespace": "file", "name": dataset, "facets": {}} for dataset in inputs],
                    "outputs": [{"namespace": "file", "name": dataset, "facets": {}} for dataset in outputs],
                }
            )
    rng.shuffle(events)  # out of order: a COMPLETE may come before its START, an old run after a new one
    return events


@pytest.fixture(scope="module")
def postgres_store(paths):
    folder = paths.var / "postgres-lineage-store"
    with throwaway_postgres(folder, "lineage", ("lineage",), "the lineage store is checked on PostgreSQL") as made:
        urls, cluster, password = made
        yield urls["lineage"], cluster, password


@pytest.fixture
def store_url(postgres_store) -> str:
    return postgres_store[0]


def _database(postgres_store, name: str) -> str:
    """The URL of a database ``name`` of the module's cluster, made for the lineage role if it is not there."""
    url, cluster, _password = postgres_store
    cluster.ensure_database(name, "lineage")
    return url.rsplit("/", 1)[0] + f"/{name}"


def _post_all(url: str, events: list[dict]) -> None:
    session = requests.Session()
    for start in range(0, len(events), BATCH):
        batch = events[start : start + BATCH]
        response = session.post(f"{url}/api/v1/lineage/batch", json=batch, timeout=300)
        assert response.status_code < 300, f"{response.status_code}: {response.text[:500]}"


def test_two_servers_and_a_consumer_writing_one_postgres_store_keep_every_event_once_and_the_closure_exact(
    store_url, broker, tmp_path
):
    LineageStore(store_url).close()  # the schema, once, before three processes open it
    events = _events()
    rng = random.Random(7)
    streams: list[list[dict]] = [[], [], []]
    for event in events:
        streams[rng.randrange(3)].append(event)
    for event in rng.sample(events, 500):  # the same event again, through another writer
        streams[rng.randrange(3)].append(json.loads(json.dumps(event)))

    bootstrap = broker.bootstrap
    produce(bootstrap, KAFKA_EVENTS_TOPIC, [json.dumps(event) for event in streams[2]])
    servers = [
        start_lineage_serve(["--no-auth", "--store", store_url], log=tmp_path / f"serve-{index}.log")
        for index in range(2)
    ]
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(3) as pool:
            posted = [pool.submit(_post_all, url, stream) for (_, url), stream in zip(servers, streams, strict=False)]
            # the two servers hold the store's writer lock most of the time: on a loaded machine the consumer may
            # wait longer than consume's usual 20 s between two reads, and would stop before the end of the topic
            consumed = pool.submit(consume, bootstrap, store_url, "--idle-timeout", "180")
            for future in posted:
                future.result()
            result = consumed.result()
        seconds = time.monotonic() - started
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait(30)
    assert result.returncode == 0, result.stdout + result.stderr
    print(f"\n{len(events) + 500} events through 3 concurrent writers into PostgreSQL in {seconds:.1f} s")

    with LineageStore(store_url) as store:
        with store.engine.connect() as conn:
            stored = conn.execute(select(func.count()).select_from(events_table)).scalar_one()
        assert stored == len(events), "each distinct event stored once, duplicates from another writer not again"
        _check(store, events, dag=True)


def test_a_store_that_goes_away_is_answered_503_and_takes_the_event_once_it_is_back(postgres_store, tmp_path):
    """PostgreSQL stopped under a running `lineage serve`: a post is 503 with Retry-After (the client's spool keeps
    it), never 500 and never the driver's text (it may name the host, the user or values); back, the same post is
    stored."""
    url, cluster, password = postgres_store
    LineageStore(url).close()
    event = _events(seed=3)[0]
    process, base = start_lineage_serve(["--no-auth", "--store", url], log=tmp_path / "serve.log")
    try:
        cluster.stop()
        refused = requests.post(f"{base}/api/v1/lineage", json=event, timeout=60)
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["Retry-After"]) > 0
        assert password not in refused.text and "127.0.0.1" not in refused.text and "lineage@" not in refused.text
        cluster.start(durable=False)
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline:  # the pool drops its dead connections on the first failure
            status = requests.post(f"{base}/api/v1/lineage", json=event, timeout=60).status_code
            if status < 300:
                break
            assert status == 503
            time.sleep(1)
        assert status is not None and status < 300
    finally:
        process.terminate()
        process.wait(30)
    with LineageStore(url) as store, store.engine.connect() as conn:
        keys = conn.execute(select(events_table.c.dedup_key)).scalars().all()
    assert len(keys) == len(set(keys)) and len(keys) >= 1


def test_readers_of_a_postgres_store_go_on_where_the_last_one_stopped(store_url, tmp_path):
    """The follower's cursor (``lineage_file_cursors``) is written with PostgreSQL's upsert: a second and a third
    reader, each with a store object of its own as separate processes would have, read only what was appended."""
    from include.core import settings
    from include.lineage.store.follower import StoreFollower
    from include.lineage.store.schema import file_cursors_table

    paths = settings.Paths(tmp_path / "var")
    paths.lineage.mkdir(parents=True)
    events = _events(seed=44)[:12]
    paths.lineage_events.write_text("".join(json.dumps(event) + "\n" for event in events[:10]))
    read: list[int] = []

    def follow() -> int:
        with LineageStore(store_url) as store:
            ingest = store.ingest
            store.ingest = lambda batch, **kwargs: read.append(len(batch)) or ingest(batch, **kwargs)
            return StoreFollower(store, paths).refresh()

    assert follow() == 10
    assert follow() == 0
    with paths.lineage_events.open("a") as stream:
        stream.write("".join(json.dumps(event) + "\n" for event in events[10:]))
    assert follow() == 2
    assert read == [10, 2], "the second reader read nothing, the third the two appended events only"
    with LineageStore(store_url) as store, store.engine.connect() as conn:
        cursor = conn.execute(
            select(file_cursors_table.c.read_bytes).where(
                file_cursors_table.c.path == str(paths.lineage_events.resolve())
            )
        ).scalar_one()
    assert cursor == paths.lineage_events.stat().st_size


def test_an_event_postgresql_refuses_is_set_aside_and_the_rest_of_its_batch_stored(store_url, tmp_path):
    """A run id longer than the store's column (64 characters) passes the store's shape check; SQLite keeps it,
    PostgreSQL refuses it (a DataError), and with it the whole batch's transaction. The follower then stores the
    batch's events one by one: the refused one is set aside with PostgreSQL's reason, every other one is stored, and
    the insert of the rejected line and the cursor go through PostgreSQL's upserts (a second reader adds no row)."""
    from include.core import settings
    from include.lineage.store.follower import StoreFollower, rejected_lines

    paths = settings.Paths(tmp_path / "var")
    paths.lineage.mkdir(parents=True)
    events = _events(seed=45)[:5]
    refused = dict(events[2], run={"runId": "r" * 65, "facets": {}})
    lines = [json.dumps(event) + "\n" for event in (*events[:2], refused, *events[3:])]
    paths.lineage_events.write_text("".join(lines))
    with LineageStore(store_url) as store:
        assert StoreFollower(store, paths).refresh() == 4
    with LineageStore(store_url) as store:
        assert StoreFollower(store, paths).refresh() == 0
        mine = [item for item in rejected_lines(store) if item["path"] == str(paths.lineage_events.resolve())]
        with store.engine.connect() as conn:
            stored = set(conn.execute(select(events_table.c.run_id)).scalars())
    assert [(item["line"], item["byteOffset"]) for item in mine] == [(3, len(lines[0]) + len(lines[1]))]
    assert "DataError" in mine[0]["error"] and "too long" in mine[0]["error"], mine[0]["error"]
    assert {event["run"]["runId"] for event in (*events[:2], *events[3:])} <= stored


def test_a_refused_event_past_the_first_batch_leaves_the_new_event_count_exact(store_url, tmp_path):
    """A file read in several batches, the refused event in the second: the follower counts every event it stored.
    Before, the first batch committed in the store's own transaction, the second was refused whole, and storing
    every event again one by one found the first batch's already there: 1,200 new events were reported as 700."""
    from include.core import settings
    from include.lineage.store.follower import StoreFollower, rejected_lines
    from include.lineage.store.store import INGEST_BATCH_SIZE

    paths = settings.Paths(tmp_path / "var")
    paths.lineage.mkdir(parents=True)
    events = _events(seed=48)[:1201]
    refused_at = INGEST_BATCH_SIZE + 50
    events[refused_at] = dict(events[refused_at], run={"runId": "r" * 65, "facets": {}})
    paths.lineage_events.write_text("".join(json.dumps(event) + "\n" for event in events))
    with LineageStore(store_url) as store:
        assert StoreFollower(store, paths).refresh() == len(events) - 1
        mine = [item for item in rejected_lines(store) if item["path"] == str(paths.lineage_events.resolve())]
    assert [item["line"] for item in mine] == [refused_at + 1]


def test_a_value_postgresql_refuses_in_a_deferred_row_names_its_event_and_stores_nothing(postgres_store, tmp_path):
    """A parent run id longer than the runs table's column reaches PostgreSQL only when the transaction's runs are
    written, at its end (include/lineage/store/pending.py), where which event it came from is no longer known: the
    store takes the batch again, writing each event's rows with it, and the error names the file and line."""
    from include.lineage.errors import InvalidEventError

    url = _database(postgres_store, "deferred_refused")
    events = _events(seed=52)[:6]
    events[4] = dict(
        events[4],
        run={
            "runId": events[4]["run"]["runId"],
            "facets": {"parent": {"run": {"runId": "p" * 80}, "job": {"namespace": "tests", "name": "parent"}}},
        },
    )
    file = tmp_path / "day.jsonl"
    file.write_text("".join(json.dumps(event) + "\n" for event in events))
    with LineageStore(url) as store:
        with pytest.raises(InvalidEventError) as raised:
            store.ingest_files([file])
        assert f"{file}:5" in str(raised.value) and "too long" in str(raised.value), str(raised.value)
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(events_table)).scalar_one() == 0
        events[4]["run"]["facets"] = {}
        file.write_text("".join(json.dumps(event) + "\n" for event in events))
        assert store.ingest_files([file]).new == len(events)


def test_a_refused_deferred_row_written_while_a_later_event_is_read_still_names_its_own_event(postgres_store, tmp_path):
    """The runs written so far are flushed while a later event is read (a run whose inputs grew changes its job
    version, and whether the old version is still used is asked of the runs table): the refusal of the first event's
    run must not be blamed on the event being read."""
    from include.lineage.errors import InvalidEventError

    url = _database(postgres_store, "deferred_mid_batch")

    def run_event(kind: str, run_id: str, job: str, inputs: list[str], facets: dict | None = None) -> dict:
        return {
            "eventType": kind,
            "eventTime": f"2025-01-01T00:00:0{len(inputs)}Z",
            "producer": "https://example.com/tests",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id, "facets": facets or {}},
            "job": {"namespace": "tests", "name": job, "facets": {}},
            "inputs": [{"namespace": "file", "name": name, "facets": {}} for name in inputs],
            "outputs": [],
        }

    parent = {"parent": {"run": {"runId": "p" * 80}, "job": {"namespace": "tests", "name": "parent"}}}
    events = [
        run_event("START", "01940000-0000-7000-8000-000000000001", "child", ["/a"], parent),
        run_event("START", "01940000-0000-7000-8000-000000000002", "other", ["/a"]),
        run_event("COMPLETE", "01940000-0000-7000-8000-000000000002", "other", ["/a", "/b"]),
    ]
    file = tmp_path / "day.jsonl"
    file.write_text("".join(json.dumps(event) + "\n" for event in events))
    with LineageStore(url) as store, pytest.raises(InvalidEventError) as raised:
        store.ingest_files([file])
    assert f"{file}:1:" in str(raised.value) and "too long" in str(raised.value), str(raised.value)


@pytest.mark.parametrize(
    "where",
    ["an input dataset's name", "an output dataset's namespace", "the job's name", "the run id"],
)
def test_a_nul_postgresql_refuses_in_what_a_batch_reads_at_once_names_its_event_and_stores_nothing(
    postgres_store, tmp_path, where
):
    """A batch reads its stored runs, jobs and datasets before its first event is ingested
    (``LineageStore._read_batch``); PostgreSQL refuses a NUL in a text value there, when no one event is being read.
    The batch is taken again event by event: the error names the file and the line of the event with the NUL, and
    nothing of the file is stored. Before, a NUL in a job's name or a run id escaped as a bare ValueError."""
    from include.lineage.errors import InvalidEventError

    url = _database(postgres_store, "nul_" + where.split()[-2].strip("'s"))
    events = _events(seed=53)[:6]
    with LineageStore(url) as store:
        store.ingest(events[:3])  # what the next batch names is stored: its reads find rows
        bad = json.loads(json.dumps(events[4]))
        if where == "an input dataset's name":
            bad["inputs"][0]["name"] += "\x00"
        elif where == "an output dataset's namespace":
            bad["outputs"][0]["namespace"] = "fi\x00le"
        elif where == "the job's name":
            bad["job"]["name"] += "\x00"
        else:
            bad["run"]["runId"] = bad["run"]["runId"][:-1] + "\x00"
        file = tmp_path / "day.jsonl"
        file.write_text("".join(json.dumps(event) + "\n" for event in (*events[3:4], bad, *events[5:])))
        with pytest.raises(InvalidEventError) as raised:
            store.ingest_files([file])
        assert f"{file}:2:" in str(raised.value) and "NUL" in str(raised.value), str(raised.value)
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(events_table)).scalar_one() == 3


def test_a_batch_leaves_a_postgresql_store_as_an_event_per_transaction_leaves_it(postgres_store):
    """The rows one transaction defers and writes at its end (runs, links, jobs' latest runs, current versions)
    leave PostgreSQL, row for row, as an event per transaction does, on a generated platform history with late
    events (the SQLite twin: tests/unit/test_store_batch_writes.py)."""
    from tests.unit.test_store_batch_writes import _late, _tables

    urls = [_database(postgres_store, name) for name in ("per_event", "per_batch")]
    events = _late(600, seed=12)
    with LineageStore(urls[0]) as one, LineageStore(urls[1]) as batch:
        one.ingest(events, batch_size=1)
        batch.ingest(events, batch_size=250)
        expected, actual = _tables(one), _tables(batch)
    for name in expected:
        assert actual[name] == expected[name], name
    assert expected["lineage_runs"] and expected["lineage_run_datasets"]


def test_a_post_postgresql_refuses_in_a_group_is_refused_alone_and_the_others_stored(postgres_store):
    """``lineage serve``'s worker stores the large posts queued together in one transaction (group commit,
    ``include/lineage/api/posts.py``). A NUL in a job's name passes the admission (Marquez admits it) and PostgreSQL
    refuses it: the group's transaction is rolled back, and each post stored again alone, so that only the post
    holding it is refused (400, kept as a dead letter) and the others are stored and answered 201."""
    from include.lineage.api import posts
    from include.lineage.store.schema import dead_letters_table

    url = _database(postgres_store, "group_commit")
    events = _events(seed=54)[:30]
    bad = json.loads(json.dumps(events[12]))
    bad["job"]["name"] += "\x00"
    batches = [events[:10], [*events[10:12], bad, *events[13:20]], events[20:30]]
    bodies = [
        posts.Body(json.dumps(batch).encode(), False, True, "/api/v1/lineage/batch", "client") for batch in batches
    ]
    answers = posts.ingest_in_worker(url, bodies)
    assert [status for status, _ in answers] == [201, 400, 201]
    assert answers[0][1] == answers[2][1] == {"received": 10, "new": 10}
    assert "NUL" in answers[1][1]["message"]
    assert "POST /api/v1/lineage/batch, event 2: the store cannot keep this event" in answers[1][1]["message"]
    with LineageStore(url) as store, store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(events_table)).scalar_one() == 20
        assert conn.execute(select(func.count()).select_from(dead_letters_table)).scalar_one() == 1


def test_the_lineage_page_answers_503_not_500_while_its_store_is_away(postgres_store, tmp_path):
    """The page's app (inside Airflow) catches the store up with the event files before a graph read, in a
    middleware: there an unreachable store passed the app's error handlers and was answered 500. PostgreSQL stopped
    under the served app: the graph and health are 503 with Retry-After; back, they answer 200 with the events."""
    from include.core import settings
    from include.lineage.api.app import create_ui_app
    from tests.support import app_served

    url, cluster, _password = postgres_store
    paths = settings.Paths(tmp_path / "var")
    paths.lineage.mkdir(parents=True)
    paths.lineage_events.write_text("".join(json.dumps(event) + "\n" for event in _events(seed=46)[:3]))
    store = LineageStore(url)
    try:
        with app_served(create_ui_app(store, paths)) as base:
            assert requests.get(f"{base}/ui/graph", timeout=60).status_code == 200
            cluster.stop()
            try:
                with paths.lineage_events.open("a") as stream:
                    stream.write(json.dumps(_events(seed=47)[0]) + "\n")  # something to catch up with
                for route in ("/ui/graph", "/api/v1/health"):
                    away = requests.get(f"{base}{route}", timeout=60)
                    assert away.status_code == 503, (route, away.status_code, away.text)
                    assert int(away.headers["Retry-After"]) > 0
            finally:
                cluster.start(durable=False)
            deadline, status = time.monotonic() + 60, None
            while time.monotonic() < deadline:  # the pool drops its dead connections on the first failure
                status = requests.get(f"{base}/api/v1/health", timeout=60).status_code
                if status == 200:
                    break
                time.sleep(1)
            assert status == 200
            assert requests.get(f"{base}/ui/graph", timeout=60).status_code == 200
    finally:
        store.close()


def _plan_nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


def test_every_ingest_statement_seeks_by_an_index_on_postgresql_too(store_url):
    """``tests/unit/test_store_plans.py`` on PostgreSQL: each statement prepared with its parameters unknown and
    planned generically (the plan a statement of any values gets), sequential scans priced out so that one is chosen
    only where no index can answer the predicate. An index scan counts as a seek only when its condition names the
    index's first column: PostgreSQL also walks a whole index by a later column (what reading a node's aliases by
    ``node_id`` through the ``(alias, node_id)`` key did, 3.6 ms a node two days into a 10^7-event year)."""
    from sqlalchemy import create_engine
    from sqlalchemy.dialects import postgresql as postgresql_dialect

    from tests.unit.test_store_plans import ingest_statements

    LineageStore(store_url).close()  # the tables at the code's revision
    engine = create_engine(store_url)
    scans = {}
    try:
        with engine.connect() as conn:
            cursor = conn.connection.dbapi_connection.cursor()
            # merge and hash joins priced out too: with rows in the tables (the module's other tests) the planner
            # joined run_datasets to datasets by a merge join walking the datasets key, which hides whether the join's
            # inner side has an index to seek by; a nested loop shows it as the inner scan's condition
            cursor.execute(
                "SET enable_seqscan = off; SET enable_mergejoin = off; SET enable_hashjoin = off;"
                " SET plan_cache_mode = force_generic_plan"
            )
            cursor.execute(
                "SELECT i.indexrelid::regclass::text, a.attname FROM pg_index i"
                " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            )
            first_column = dict(cursor.fetchall())  # an index on an expression first has none: not checked
            for name, statement in sorted(ingest_statements("postgresql").items()):
                compiled = statement.compile(dialect=postgresql_dialect.psycopg2.dialect())
                order = list(compiled.params)
                sql = str(compiled)
                for position, parameter in enumerate(order, start=1):
                    sql = sql.replace(f"%({parameter})s", f"${position}")
                cursor.execute(f"PREPARE checked AS {sql}")
                arguments = f"({', '.join(['NULL'] * len(order))})" if order else ""
                cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE checked{arguments}")
                plan = cursor.fetchone()[0][0]["Plan"]
                cursor.execute("DEALLOCATE checked")
                for node in _plan_nodes(plan):
                    column = first_column.get(node.get("Index Name", ""))
                    seeks = re.search(
                        rf"\b{column}\b\)?(::[a-z ]+)? =", node.get("Index Cond", "")
                    )  # (name)::text = $1
                    walks_index = column is not None and not seeks
                    if node["Node Type"] == "Seq Scan" or walks_index:
                        scans.setdefault(name, []).append(
                            (
                                node["Node Type"],
                                node.get("Relation Name"),
                                node.get("Index Name"),
                                node.get("Index Cond"),
                            )
                        )
            conn.rollback()
    finally:
        engine.dispose()
    assert not scans, scans


def test_0014_fills_the_audits_on_postgresql_as_ingest_writes_them(postgres_store):
    """0014's fill reads the runs through a server-side cursor on PostgreSQL (a year's store holds hundreds of
    thousands of audits) and writes what ingest writes (tests/unit/test_store_migrations.py on SQLite)."""
    from tests.unit.test_store_migrations import check_0014_fills_the_audits

    check_0014_fills_the_audits(_database(postgres_store, "audits_filled"))


def test_0015_fills_the_write_times_on_postgresql_as_ingest_keeps_them(postgres_store):
    from tests.unit.test_store_migrations import check_0015_fills_the_write_times

    check_0015_fills_the_write_times(_database(postgres_store, "write_times_filled"))


def test_a_runs_provenance_finds_each_latest_write_as_one_index_entry_on_postgresql(store_url):
    """``tests/unit/test_store_plans.py``'s provenance plan on PostgreSQL: each latest write is a backward read of
    ``ix_lineage_run_datasets_dataset`` (dataset, direction, written_at, run) that the LIMIT stops, with no sort."""
    from sqlalchemy import create_engine

    from include.lineage.queries import provenance

    LineageStore(store_url).close()
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            cursor = conn.connection.dbapi_connection.cursor()
            cursor.execute("SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan")
            cursor.execute(f"PREPARE provenance AS {provenance._RUN_PROVENANCE.replace(':run', '$1::text')}")
            cursor.execute("EXPLAIN (FORMAT JSON) EXECUTE provenance('a run')")
            plan = cursor.fetchone()[0][0]["Plan"]
            conn.rollback()
    finally:
        engine.dispose()
    subplans = [node for node in _plan_nodes(plan) if node.get("Subplan Name", "").startswith("SubPlan")]
    assert len(subplans) == 2, plan  # in the walk, and for the inputs listed
    for subplan in subplans:
        nodes = list(_plan_nodes(subplan))
        reads = [node for node in nodes if node.get("Relation Name") == "lineage_run_datasets"]
        assert [(node["Node Type"], node.get("Index Name"), node.get("Scan Direction")) for node in reads] == [
            ("Index Only Scan", "ix_lineage_run_datasets_dataset", "Backward")
        ], subplan
        assert "written_at <=" in reads[0]["Index Cond"], subplan  # the range, not a filter of every write
        assert not [node for node in nodes if node["Node Type"] == "Sort"], subplan


def test_0016_leaves_room_for_hot_rows_on_postgresql(postgres_store):
    from tests.unit.test_store_migrations import check_0016_leaves_room_for_hot_rows

    check_0016_leaves_room_for_hot_rows(_database(postgres_store, "hot_rows"))


def test_0017_holds_run_starts_in_the_version_index_on_postgresql(postgres_store):
    from tests.unit.test_store_migrations import check_0017_holds_run_starts_in_the_version_index

    check_0017_holds_run_starts_in_the_version_index(_database(postgres_store, "run_starts"))
