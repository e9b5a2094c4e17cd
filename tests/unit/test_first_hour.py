"""The newcomer's first hour, in its parts that need no server: the demo's distinct runs, the metadata database's
choice, and local Spark bound to loopback (the running parts are in tests/integration/test_demo.py and
test_airflow_ui.py)."""

from __future__ import annotations

from datetime import datetime

import pytest

from include import demo
from include.core import settings
from include.spark import submit

DEMOS = range(4)


@pytest.fixture(scope="module")
def timetables():
    from airflow.dag_processing.dagbag import DagBag

    # The DAGs import the notifier from the plugins folder, on sys.path as the dag-processor has it: in a worker where
    # no earlier test loaded Airflow's plugins it is not (tests/test_dag_integrity.py says why), and this fixture
    # failed or passed with the suite's order.
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(settings.PLUGINS_DIR))
        bag = DagBag(dag_folder=str(settings.DAGS_DIR))
    assert not bag.import_errors, bag.import_errors
    return {dag_id: bag.dags[dag_id].timetable for dag_id in ("ingest_yellow_taxi_data", "ingest_weather_data")}


def test_four_demos_of_one_var_ingest_january_in_runs_of_their_own(timetables):
    """Every demo's ingest runs fall in the same data intervals (January for the monthly taxi DAG, January 31st for
    the daily weather DAG, as Airflow's own timetables infer them), yet no two demos share a logical date, so the
    provider's OpenLineage run ids differ: four demos are four runs in `lineage runs`, not one merged run."""
    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter

    expected = {
        "ingest_yellow_taxi_data": ("2025-01-01T00:00:00+00:00", "2025-02-01T00:00:00+00:00"),
        "ingest_weather_data": ("2025-01-31T00:00:00+00:00", "2025-02-01T00:00:00+00:00"),
    }
    seen: dict[str, set[str]] = {}
    for number in DEMOS:
        for dag_id, logical_date, _ in demo.dag_runs(number):
            when = datetime.fromisoformat(logical_date)
            if dag_id in timetables:
                interval = timetables[dag_id].infer_manual_data_interval(run_after=when)
                assert (interval.start.isoformat(), interval.end.isoformat()) == expected[dag_id], (number, dag_id)
            run_id = OpenLineageAdapter.build_dag_run_id(dag_id=dag_id, logical_date=when, clear_number=0)
            seen.setdefault(dag_id, set()).add(run_id)
    assert {dag_id: len(ids) for dag_id, ids in seen.items()} == {
        "ingest_yellow_taxi_data": len(DEMOS),
        "ingest_weather_data": len(DEMOS),
        "forecast_yellow_rides": 2 * len(DEMOS),
    }


def test_the_last_demo_a_var_can_hold_stays_in_the_interval_and_the_next_is_refused(tmp_path, timetables):
    last = demo.MAX_DEMOS_PER_VAR - 1
    weather = dict((dag_id, date) for dag_id, date, _ in demo.dag_runs(last))["ingest_weather_data"]
    interval = timetables["ingest_weather_data"].infer_manual_data_interval(run_after=datetime.fromisoformat(weather))
    assert interval.end.isoformat() == "2025-02-01T00:00:00+00:00"
    paths = settings.Paths(tmp_path / "var")
    (paths.var / "demo-logs").mkdir(parents=True)
    (paths.var / "demo-logs" / "demos").write_text(f"{demo.MAX_DEMOS_PER_VAR}\n")
    with pytest.raises(settings.ConfigurationError, match="ran 1440 demos"):
        demo.demo_number(paths)


def test_demo_numbers_count_up_per_var(tmp_path):
    paths = settings.Paths(tmp_path / "var")
    assert [demo.demo_number(paths) for _ in range(3)] == [0, 1, 2]
    assert demo.demo_number(settings.Paths(tmp_path / "other")) == 0


@pytest.mark.parametrize(
    ("choice", "url_file_exists", "for_ui", "kind"),
    [
        (None, False, False, "sqlite"),  # airflow dags test, the demo, a fresh var/
        (None, False, True, "postgres"),  # make airflow
        (None, True, False, "postgres"),  # any Airflow command of a var/ make airflow ran in
        ("auto", True, False, "postgres"),
        ("sqlite", True, True, "sqlite"),
        ("SQLite", False, True, "sqlite"),
        ("postgres", False, False, "postgres"),
    ],
)
def test_the_metadata_database_chosen(tmp_path, monkeypatch, choice, url_file_exists, for_ui, kind):
    paths = settings.Paths(tmp_path / "var")
    if choice is None:
        monkeypatch.delenv("AIRFLOW_METADATA_DB", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW_METADATA_DB", choice)
    if url_file_exists:
        settings.metadata_db_url_file(paths).parent.mkdir(parents=True)
        settings.metadata_db_url_file(paths).write_text("postgresql+psycopg2://airflow:pw-7f3a9c@127.0.0.1:1/airflow")
    assert settings.metadata_db_kind(paths, for_ui=for_ui) == kind
    env = settings.airflow_metadata_db_env(paths)
    if settings.metadata_db_kind(paths) == "sqlite":
        assert env == {}
    else:
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD"] == f"cat {settings.metadata_db_url_file(paths)}"
        assert not any("pw-7f3a9c" in value for value in env.values()), "the password is read from its file only"


@pytest.mark.parametrize("value", ["mysql", "postgresql", "", "  sqlite3 "])
def test_an_unknown_metadata_database_is_refused_naming_the_variable(tmp_path, monkeypatch, value):
    monkeypatch.setenv("AIRFLOW_METADATA_DB", value)
    if not value.strip():
        assert settings.metadata_db_kind(settings.Paths(tmp_path)) == "sqlite"  # blank is unset: auto
        return
    with pytest.raises(settings.SettingError, match="AIRFLOW_METADATA_DB must be one of auto, postgres, sqlite, not "):
        settings.metadata_db_kind(settings.Paths(tmp_path))


def test_postgres_connect_arguments_are_what_each_driver_accepts():
    """Airflow passes them to psycopg2 (libpq keywords) and asyncpg (connect()'s arguments) as they are."""
    import inspect

    import asyncpg
    import psycopg2.extensions

    from include.airflow import metadata_db

    psycopg2.extensions.parse_dsn(psycopg2.extensions.make_dsn(**metadata_db.POSTGRES_CONNECT_ARGS))
    assert set(metadata_db.POSTGRES_CONNECT_ARGS_ASYNC) <= set(inspect.signature(asyncpg.connect).parameters)


@pytest.mark.parametrize(
    ("master", "pinned"),
    [
        (None, True),
        ("local", True),
        ("local[*]", True),
        ("local[2]", True),
        (" local[2,3]", True),
        ("spark://127.0.0.1:7077", False),
        ("spark://spark-master:7077", False),
        ("yarn", False),
        ("k8s://https://kubernetes:443", False),
    ],
)
def test_local_spark_binds_its_driver_to_loopback_and_a_cluster_keeps_its_own(master, pinned):
    conf = submit.spark_conf(master=master)
    if pinned:
        assert (conf["spark.driver.host"], conf["spark.driver.bindAddress"]) == ("127.0.0.1", "127.0.0.1")
    else:
        assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf
    assert submit.spark_submit_kwargs(master=master)["conf"].get("spark.driver.host") == conf.get("spark.driver.host")


@pytest.mark.parametrize(
    ("argv", "api_host", "patched"),
    [
        (["airflow", "scheduler"], "127.0.0.1", True),
        (["airflow", "triggerer"], "localhost", True),
        (["airflow", "triggerer"], "0.0.0.0", False),  # docker-compose: containers reach each other by name
        (["airflow", "dags", "test"], "127.0.0.1", False),
        (["airflow"], "127.0.0.1", False),
    ],
)
def test_airflow_log_servers_are_handed_loopback(monkeypatch, argv, api_host, patched):
    """Airflow 3.3 starts its log servers with ``uvicorn.run(..., host="")`` (every interface): under the project's
    settings the scheduler's and triggerer's get 127.0.0.1 whatever host they ask for."""
    import inspect

    from airflow.utils.serve_logs import core

    from include.airflow import loopback

    assert 'host=""' in inspect.getsource(core.serve_logs), "Airflow changed how its log server binds: re-check"
    calls: list[dict] = []

    class Recorder:
        def run(self, app, **kwargs):
            calls.append(kwargs)

    monkeypatch.setattr(core, "uvicorn", Recorder())
    monkeypatch.setenv("AIRFLOW__API__HOST", api_host)
    assert loopback.serve_logs_on_loopback(argv) is patched
    core.uvicorn.run("app", host="", port=8793)
    assert calls == [{"host": "127.0.0.1" if patched else "", "port": 8793}]
    assert loopback.hostname() == ("127.0.0.1" if api_host != "0.0.0.0" else __import__("socket").getfqdn())
