"""The lineage store's migrations (``include/lineage/store/migrate.py``, ``include/lineage/store/migrations/``): a
store of the previous release opens and answers like a new one; a new store has exactly ``schema.py``'s tables; a
store of a newer release is refused; two processes creating one store create it once; an up-to-date store opens with
one query; every revision goes down and up again."""

from __future__ import annotations

import ast
import json
import multiprocessing
import shutil
from unittest import mock

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, Integer, MetaData, create_engine, event, select, text
from sqlalchemy import inspect as inspect_database
from sqlalchemy.engine import Connection, Engine

from include.core import settings
from include.lineage.errors import LineageError
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore, migrate, packing, schema
from include.lineage.store.marquez_view import CompactEvent
from include.lineage.store.schema import events_table, metadata, payload_dictionaries_table, runs_table
from tests.unit.test_payload_packing import event as generated_event

OLD_STORE = settings.PROJECT_ROOT / "tests" / "fixtures" / "lineage-store-bdbe81a.db"
OLD_EVENTS = "tests/fixtures/lineage-store-bdbe81a.events.jsonl"  # relative to the project, as the store has it
RUN = {  # the run ids of the fixture's events
    "dag": "01937a3c-0000-7000-8000-000000000001",
    "actuals": "01937a3c-0000-7000-8000-000000000002",
    "spark": "01937a3c-0000-7000-8000-000000000003",
    "forecast": "01937a3c-0000-7000-8000-000000000004",
}


def _url(path) -> str:
    return f"sqlite:///{path}"


def _version(engine: Engine) -> tuple[str, ...]:
    with engine.connect() as conn:
        return tuple(conn.execute(text(f"SELECT version_num FROM {migrate.VERSION_TABLE}")).scalars())


def _shape(conn: Connection) -> dict:
    """Every lineage table as the database describes it: columns (type, nullable, primary key), indexes, unique
    constraints."""
    inspector = inspect_database(conn)
    return {
        table: {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], c.get("primary_key", 0))
                for c in inspector.get_columns(table)
            ],
            "primary key": inspector.get_pk_constraint(table)["constrained_columns"],
            "indexes": sorted((i["name"], tuple(i["column_names"]), i["unique"]) for i in inspector.get_indexes(table)),
            "unique": sorted(tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)),
            # SQLAlchemy's inspector leaves out an index on an expression (ix_lineage_runs_job_start): SQLite's own
            # record of each index's statement has them all
            "index statements": sorted(
                conn.exec_driver_sql(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                    (table,),
                ).all()
            ),
        }
        for table in sorted(migrate.lineage_tables(conn))
    }


def _contents(store: LineageStore) -> dict:
    """Every row; a JSON text column (an event's payload, facets) as what it holds: a release may spell it otherwise
    (the raw event was ``json.dumps(sort_keys=True)`` before it was the canonical JSON of its dedup key)."""

    def read(value):
        if isinstance(value, str) and value[:1] in "{[":
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    with store.engine.connect() as conn:
        return {
            table.name: [tuple(map(read, row)) for row in conn.execute(select(*_compared(table)))]
            for table in metadata.sorted_tables
        }


UNCOMPARED = {"marquez", "payload", "packed"}  # of lineage_events: see _compared


def _compared(table) -> list:
    """The columns compared row for row: all but ``lineage_events.marquez``, which a row stored before 0009 lacks by
    design (``_marquez_views`` compares what it reads as), and the event's text, in ``payload`` before 0010 and
    packed since (``_event_texts`` compares what it reads as); and when a snapshot of Marquez's model was taken."""
    if table.name == "lineage_model_snapshots":  # when each store took its snapshot: the rest must be the same
        return [column for column in table.columns if column.name != "taken_at"]
    return [column for column in table.columns if table.name != "lineage_events" or column.name not in UNCOMPARED]


def _event_texts(store: LineageStore) -> tuple[list, list]:
    """Each stored event as the store reads it back (JSON), and whether its row is packed."""
    e = events_table.c
    with store.engine.connect() as conn:
        rows = conn.execute(select(e.id, e.payload, e.packed).order_by(e.id)).all()
        return [json.loads(store.packer.text(conn, *row)) for row in rows], [row.packed is not None for row in rows]


def _marquez_views(store: LineageStore) -> tuple[list, list]:
    """Each event as Marquez's model reads it (from its ``marquez`` column, else its payload), and the column."""
    e = events_table.c
    with store.engine.connect() as conn:
        rows = conn.execute(select(e.id, e.event_time, e.marquez, e.payload, e.packed).order_by(e.id)).all()
        views = [
            CompactEvent.of_row(*row[:3], store.packer.text(conn, row.id, row.payload, row.packed)) for row in rows
        ]
    return views, [row.marquez for row in rows]


def _answers(store: LineageStore) -> dict:
    """Today's questions, asked of the fixture's graph: lineage both ways, runs, a run's details, columns, impact."""
    queries = LineageQueries(store)
    answers = {}
    for ref in ("nyc_taxi.yellow_rides_raw", "nyc_taxi.yellow_rides_hourly_actuals", "taxi_pipeline.forecast"):
        answers[f"upstream {ref}"] = queries.marquez_graph(queries.upstream(ref))
        answers[f"downstream {ref}"] = queries.marquez_graph(queries.downstream(ref))
    for ref in ("taxi_pipeline", "taxi_pipeline.build_actuals", "build_actuals.append_data", "taxi_pipeline.forecast"):
        answers[f"runs {ref}"] = queries.runs(ref)
    answers["runs of a dataset"] = queries.runs("nyc_taxi.yellow_rides_hourly_actuals")
    answers["spark run"] = queries.run_details(RUN["spark"])
    answers["failed run"] = queries.run_details(RUN["forecast"])
    answers["columns"] = queries.columns("nyc_taxi.yellow_rides_hourly_forecast.predicted_rides")
    answers["impact of the task run"] = queries.impact_of_run(RUN["actuals"])
    answers["marquez lineage"] = queries.marquez_lineage("nyc_taxi.yellow_rides_hourly_actuals")
    return answers


# ----------------------------------------------------------------------------- a store of the previous release
def test_a_store_of_the_previous_release_is_stamped_upgraded_and_answers_like_a_new_one(tmp_path, monkeypatch):
    monkeypatch.chdir(settings.PROJECT_ROOT)  # the events' sources are the file's relative path, as in the fixture
    old = tmp_path / "old.db"
    shutil.copy(OLD_STORE, old)
    with LineageStore(_url(old)) as upgraded, LineageStore(_url(tmp_path / "new.db")) as new:
        assert new.ingest_files([OLD_EVENTS]).new == 8
        assert _version(upgraded.engine) == (migrate.HEAD,)
        answers = _answers(upgraded)
        assert answers == _answers(new)
        assert _contents(upgraded) == _contents(new)
        # the rows stored before 0009 have no compact Marquez view and are read from their payload, as the same
        # events stored today are from theirs
        (old_views, old_columns), (new_views, new_columns) = _marquez_views(upgraded), _marquez_views(new)
        assert old_views == new_views and set(old_columns) == {None} and None not in new_columns
        # the rows stored before 0010 keep their text unpacked and read as the same events packed today
        (old_texts, old_packed), (new_texts, new_packed) = _event_texts(upgraded), _event_texts(new)
        assert old_texts == new_texts and set(old_packed) == {False} and set(new_packed) == {True}
        assert answers["marquez lineage"]["graph"]
        # the answers are not empty ones: the fixture holds the graph, the Spark child run, the column lineage
        assert answers["spark run"]["parentRunId"] == RUN["actuals"]
        assert answers["failed run"]["errorMessage"] == "model did not converge"
        assert [output["schema"][0] for output in answers["spark run"]["outputs"]] == [["hour", "timestamp"]]
        assert len(answers["columns"]["edges"]) == 2
        assert upgraded.ingest_files([OLD_EVENTS]).new == 0  # the same events again: all known
    assert OLD_STORE.stat().st_size < 200_000


def test_a_store_made_before_migrations_whose_tables_are_not_the_first_revisions_is_refused(tmp_path):
    url = _url(tmp_path / "odd.db")
    with create_engine(url).begin() as conn:
        conn.execute(text("CREATE TABLE lineage_events (id INTEGER PRIMARY KEY, payload TEXT)"))
    with pytest.raises(LineageError) as refused:
        LineageStore(url)
    message = str(refused.value)
    assert url in message and "no lineage_alembic_version table" in message
    assert "no table lineage_nodes" in message and "no column lineage_events.dedup_key" in message


# ----------------------------------------------------------------------------- a new store
def test_a_new_store_is_created_at_head_with_exactly_the_tables_of_schema_py(tmp_path):
    """Fails when schema.py changed without a revision: ``python -m include.lineage.store.migrations revision "..."``."""
    reference = create_engine(_url(tmp_path / "create_all.db"))
    metadata.create_all(reference)
    with LineageStore(_url(tmp_path / "new.db")) as store, store.engine.connect() as migrated:
        assert _version(store.engine) == (migrate.HEAD,)
        with reference.connect() as made:
            assert _shape(migrated) == _shape(made), (
                'schema.py and the revisions differ: python -m include.lineage.store.migrations revision "what changed"'
            )
        context = MigrationContext.configure(migrated, opts={"version_table": migrate.VERSION_TABLE})
        assert compare_metadata(context, metadata) == []
        assert sorted(_shape(migrated)) == sorted(metadata.tables)


def test_an_in_memory_store_is_created_too():
    with LineageStore("sqlite://") as store:
        assert _version(store.engine) == (migrate.HEAD,)
        store.ingest_files([settings.PROJECT_ROOT / OLD_EVENTS])
        assert store.count(runs_table) == 4


def test_head_is_alembics_head_and_no_revision_imports_the_live_schema():
    script = ScriptDirectory(str(migrate.MIGRATIONS))
    assert script.get_heads() == [migrate.HEAD], "a new revision: set HEAD in include/lineage/store/migrate.py"
    assert migrate.FIRST in {revision.revision for revision in script.walk_revisions()}
    for path in (migrate.MIGRATIONS / "versions").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        assert not [module for module in imported if module and module.startswith("include")], path


# ----------------------------------------------------------------------------- a newer store
def test_a_store_of_a_newer_release_is_refused_naming_the_store_and_both_revisions(tmp_path):
    url = _url(tmp_path / "newer.db")
    LineageStore(url).close()
    with create_engine(url).begin() as conn:
        conn.execute(text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999'"))
    with pytest.raises(LineageError) as refused:
        LineageStore(url)
    message = str(refused.value)
    assert url in message and "9999" in message and migrate.HEAD in message and "newer release" in message


# ----------------------------------------------------------------------------- opening: cheap, and once
def _open_at_the_same_moment(url, barrier, results) -> None:
    """In a spawned process: wait for the other one, open the store, report what the slow path did."""
    real = migrate.upgrade_to_head
    done = ["fast path"]

    def recorded(engine):
        done[0] = real(engine) or "waited for the lock: already at head"
        return done[0]

    migrate.upgrade_to_head = recorded
    barrier.wait(timeout=60)
    with LineageStore(url) as store:
        results.put((done[0], store.count(runs_table)))


def test_two_processes_opening_one_new_store_at_once_both_succeed_and_create_it_once(tmp_path):
    url = _url(tmp_path / "shared.db")
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(2), spawn.Queue()
    processes = [spawn.Process(target=_open_at_the_same_moment, args=(url, barrier, results)) for _ in range(2)]
    for process in processes:
        process.start()
    reports = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert [process.exitcode for process in processes] == [0, 0]
    assert [done for done, _ in reports].count(f"created at {migrate.HEAD}") == 1, reports
    assert [count for _, count in reports] == [0, 0]
    with LineageStore(url) as store:
        assert _version(store.engine) == (migrate.HEAD,)
    assert (tmp_path / "shared.db.migrate.lock").exists()


def test_an_up_to_date_store_opens_with_one_query_and_without_alembic(tmp_path):
    url = _url(tmp_path / "store.db")
    LineageStore(url).close()
    statements = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        with mock.patch.object(migrate, "upgrade_to_head", side_effect=AssertionError("Alembic ran")) as slow:
            LineageStore(url).close()
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    slow.assert_not_called()
    assert statements == [f"SELECT version_num FROM {migrate.VERSION_TABLE}"]


# ----------------------------------------------------------------------------- the revisions themselves
def test_0010s_downgrade_unpacks_every_packed_event_into_its_payload_first(tmp_path, monkeypatch):
    """Packed rows, some with a trained dictionary and some without, go back to 0009 with every event's text in
    ``payload``, and up again read the same (the rows then unpacked)."""
    monkeypatch.setattr(packing, "FIRST_TRAINING", 20)
    monkeypatch.setattr(packing, "CHECK_EVERY", 20)
    url = _url(tmp_path / "packed.db")
    with LineageStore(url) as store:
        for batch in range(3):
            store.ingest([generated_event(batch * 20 + i) for i in range(20)])
        texts, packed = _event_texts(store)
        with store.engine.connect() as conn:
            dictionaries = conn.execute(select(payload_dictionaries_table.c.id)).scalars().all()
    assert len(texts) == 60 and all(packed) and len(dictionaries) == 1  # trained after the first 20, not again
    engine = create_engine(url)
    with migrate.migration_lock(engine) as conn:
        command.downgrade(migrate.alembic_config(conn), "0009")
        payloads = conn.execute(text("SELECT payload FROM lineage_events ORDER BY id")).scalars().all()
        assert [json.loads(payload) for payload in payloads] == texts
    engine.dispose()
    with LineageStore(url) as store:  # upgraded again: the rows are 0009's, read from their payload
        assert _event_texts(store) == (texts, [False] * 60)


def test_every_revision_downgrades_and_upgrades_again_on_sqlite(tmp_path):
    engine = create_engine(_url(tmp_path / "roundtrip.db"))
    revisions = list(reversed(list(ScriptDirectory(str(migrate.MIGRATIONS)).walk_revisions())))
    with migrate.migration_lock(engine) as conn:
        config = migrate.alembic_config(conn)
        for revision in revisions:
            before = _shape(conn)
            command.upgrade(config, revision.revision)
            after = _shape(conn)
            # a revision of PostgreSQL's storage alone (0016: pages' fill) leaves SQLite's tables as they were
            postgresql_only = getattr(revision.module, "POSTGRESQL_ONLY", False)
            assert (after == before) if postgresql_only else (after != before), revision.revision
            command.downgrade(config, revision.down_revision or "base")
            assert _shape(conn) == before, f"{revision.revision}'s downgrade does not undo its upgrade"
            command.upgrade(config, revision.revision)
            assert _shape(conn) == after, f"{revision.revision} upgrades differently the second time"
        assert revision.revision == migrate.HEAD and migrate.lineage_tables(conn).keys() == metadata.tables.keys()
        command.downgrade(config, "base")
        assert migrate.lineage_tables(conn) == {}
        command.upgrade(config, "head")
        assert migrate.lineage_tables(conn).keys() == metadata.tables.keys()


def test_a_new_revision_is_written_from_what_schema_py_has_that_the_revisions_do_not(tmp_path, monkeypatch):
    migrations = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    changed = MetaData()
    for table in metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["lineage_runs"].append_column(Column("priority", Integer))
    monkeypatch.setattr(schema, "metadata", changed)  # what env.py gives autogenerate

    written = migrate.new_revision("runs have a priority", migrations)
    assert written.name == f"{int(migrate.HEAD) + 1:04d}_runs_have_a_priority.py"
    source = written.read_text()
    assert f"down_revision = {migrate.HEAD!r}" in source and "batch_op.add_column" in source and "priority" in source
    with create_engine("sqlite://").connect() as conn, conn.begin():
        command.upgrade(migrate.alembic_config(conn, migrations), "head")
        assert "priority" in migrate.lineage_tables(conn)["lineage_runs"]


def test_0014_fills_the_audits_from_the_runs_facets_as_ingest_writes_them(tmp_path):
    """A store of 0013 has its audits found among its runs' facets by 0014: the rows ingest writes, by the rule of
    ``store/run_audits.py`` (a facet without a table of text is no audit; the branch kept as text). On PostgreSQL:
    tests/integration/test_lineage_store_postgres.py."""
    check_0014_fills_the_audits(_url(tmp_path / "audits.db"))


def check_0014_fills_the_audits(url: str) -> None:
    from include.lineage.store.schema import run_audits_table
    from tests.unit.test_blocked_on_page import BASE, BLOCKED, _run

    odd = _run("dag.odd", 9, "ветка-ü", False)  # a branch not in ASCII
    bad = _run("dag.bad", 8, "audit_bad", True)
    bad[0]["run"]["facets"]["writeAuditPublish"]["table"] = ["not", "text"]  # no audit
    late = _run("dag.late", 10, "audit_late", True)
    late[1]["run"] = {**late[1]["run"], "facets": {"writeAuditPublish": {"table": "t" * 1025}}}  # too long a name
    with LineageStore(url) as store:
        store.ingest(BASE + BLOCKED + odd + bad + late)
    engine = create_engine(url)
    read = lambda conn: sorted(map(tuple, conn.execute(select(run_audits_table)).all()))  # noqa: E731
    with engine.connect() as conn:
        written = read(conn)
    assert len(written) == 3 and {row[2] for row in written} >= {"ветка-ü"}
    with migrate.migration_lock(engine) as conn:
        config = migrate.alembic_config(conn)
        command.downgrade(config, "0013")
        assert "lineage_run_audits" not in migrate.lineage_tables(conn)
        command.upgrade(config, "head")
        assert read(conn) == written
    engine.dispose()


def test_0015_fills_each_outputs_write_time_from_its_run(tmp_path):
    """A store of 0014 has each output's ``written_at`` set by 0015 to what ingest keeps there (its run's end, else
    its state's time, else its start) and its inputs' left empty. On PostgreSQL:
    tests/integration/test_lineage_store_postgres.py."""
    check_0015_fills_the_write_times(_url(tmp_path / "write-times.db"))


def check_0015_fills_the_write_times(url: str) -> None:
    from sqlalchemy import text

    from bench.history import History
    from tests.unit.test_store_batch_writes import WRITE_TIME_MISMATCHES

    read = text("SELECT run_id, dataset_id, direction, written_at FROM lineage_run_datasets ORDER BY 1, 2, 3")
    with LineageStore(url) as store:
        store.ingest(list(History(600, seed=15).events()), batch_size=50)
    engine = create_engine(url)
    with engine.connect() as conn:
        written = conn.execute(read).all()
    assert sum(1 for row in written if row.written_at) > 50
    with migrate.migration_lock(engine) as conn:
        config = migrate.alembic_config(conn)
        command.downgrade(config, "0014")
        assert "written_at" not in migrate.lineage_tables(conn)["lineage_run_datasets"]
        command.upgrade(config, "head")
        assert conn.execute(read).all() == written
        assert conn.execute(text(WRITE_TIME_MISMATCHES)).all() == []
    engine.dispose()


def check_0016_leaves_room_for_hot_rows(url: str) -> None:
    """On PostgreSQL (tests/integration/test_lineage_store_postgres.py): a new store's jobs and datasets, and a store
    of 0015 upgraded, are filled to 30 %; the rows stay what they were through the rewrite."""
    from sqlalchemy import text

    from bench.history import History
    from include.lineage.store.schema import HOT_ROWS_FILLFACTOR

    options = text(
        "SELECT relname, reloptions FROM pg_class WHERE relname IN ('lineage_jobs', 'lineage_datasets') ORDER BY 1"
    )
    rows = text("SELECT id, name, facets, latest_run_id FROM lineage_jobs ORDER BY id")
    with LineageStore(url) as store:
        store.ingest(list(History(300, seed=16).events()), batch_size=30)
    engine = create_engine(url)
    filled = [f"fillfactor={HOT_ROWS_FILLFACTOR}"]
    with engine.connect() as conn:
        assert conn.execute(options).all() == [("lineage_datasets", filled), ("lineage_jobs", filled)]
        jobs = conn.execute(rows).all()
    assert len(jobs) > 5
    with migrate.migration_lock(engine) as conn:
        config = migrate.alembic_config(conn)
        command.downgrade(config, "0015")
        assert conn.execute(options).all() == [("lineage_datasets", None), ("lineage_jobs", None)]
        command.upgrade(config, "head")
        assert conn.execute(options).all() == [("lineage_datasets", filled), ("lineage_jobs", filled)]
        assert conn.execute(rows).all() == jobs
    engine.dispose()


def check_0017_holds_run_starts_in_the_version_index(url: str) -> None:
    """On PostgreSQL (tests/integration/test_lineage_store_postgres.py): a new store's ``ix_lineage_runs_version_start``
    includes the columns a run's start is computed from; 0016's has only its key, and 0017 adds them again."""
    from sqlalchemy import text

    from bench.history import History
    from include.lineage.store.schema import RUN_START_COLUMNS

    definition = text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_lineage_runs_version_start'")
    included = f"INCLUDE ({', '.join(RUN_START_COLUMNS)})"
    with LineageStore(url) as store:
        store.ingest(list(History(300, seed=17).events()), batch_size=30)
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(definition).scalar_one().endswith(included)
        runs = conn.execute(text("SELECT count(*) FROM lineage_runs")).scalar_one()
    assert runs > 10
    with migrate.migration_lock(engine) as conn:
        config = migrate.alembic_config(conn)
        command.downgrade(config, "0016")
        assert "INCLUDE" not in conn.execute(definition).scalar_one()
        command.upgrade(config, "head")
        assert conn.execute(definition).scalar_one().endswith(included)
        assert conn.execute(text("SELECT count(*) FROM lineage_runs")).scalar_one() == runs
    engine.dispose()
