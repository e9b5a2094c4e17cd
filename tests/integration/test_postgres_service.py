"""The metadata PostgreSQL of a ``var/`` (``include/services/postgres.py``), on Debian's real server: made once,
loopback only, a password only in ``var/secrets`` and required over TCP, reused while it runs, stopped cleanly."""

from __future__ import annotations

import json

import psycopg2
import pytest

from include.core import settings
from include.services import postgres
from tests.integration import listening
from tests.support import free_port, postgresql

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _postgresql_installed():
    """Debian's server (a failure under CI where it is missing, a listed skip elsewhere)."""
    postgresql("this module runs a var/'s metadata PostgreSQL")


@pytest.fixture
def metadata_db(paths, monkeypatch):
    var = settings.Paths(paths.var / "postgres-service").ensure()
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(var.var))
    monkeypatch.setenv("AIRFLOW_METADATA_DB_PORT", str(free_port()))
    database = postgres.ensure_metadata_db(var)
    yield var, database
    postgres.stop_metadata_db(var)


def test_a_var_gets_its_own_cluster_on_loopback_with_a_generated_password(metadata_db):
    var, database = metadata_db
    assert database.created and database.started_seconds > 0
    url = database.url_file.read_text()
    password = json.loads(postgres.secrets_file(var).read_text())["airflow_password"]
    assert url == f"postgresql+psycopg2://airflow:{password}@127.0.0.1:{database.port}/airflow"
    for secret in (database.url_file, postgres.secrets_file(var)):
        assert oct(secret.stat().st_mode & 0o777) == "0o600"
    assert oct(postgres.folder(var).stat().st_mode & 0o777) == "0o700"
    with psycopg2.connect(url.replace("+psycopg2", "")) as db, db.cursor() as cursor:
        cursor.execute("SELECT current_user, current_database()")
        assert cursor.fetchone() == ("airflow", "airflow")
    for wrong in ({"password": "not-the-password"}, {"password": ""}):
        with pytest.raises(psycopg2.OperationalError):
            psycopg2.connect(host="127.0.0.1", port=database.port, dbname="airflow", user="airflow", **wrong).close()
    listeners = {item for item in listening.listeners_of(var.var) if item.port == database.port}
    assert listeners and all(item.loopback for item in listeners), listeners


def test_a_running_cluster_is_reused_and_a_stopped_one_restarts_with_its_data(metadata_db):
    var, database = metadata_db
    again = postgres.ensure_metadata_db(var)
    assert (again.port, again.started_seconds, again.created) == (database.port, 0.0, False)
    url = database.url_file.read_text().replace("+psycopg2", "")
    with psycopg2.connect(url) as db, db.cursor() as cursor:
        cursor.execute("CREATE TABLE kept (id int)")
    assert postgres.stop_metadata_db(var) is True
    assert postgres.stop_metadata_db(var) is False
    restarted = postgres.ensure_metadata_db(var)
    assert not restarted.created and restarted.port == database.port
    with psycopg2.connect(url) as db, db.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM kept")
        assert cursor.fetchone() == (0,)


def test_a_port_held_by_another_process_is_a_clear_error(paths, monkeypatch):
    import socket

    var = settings.Paths(paths.var / "postgres-squatted").ensure()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        monkeypatch.setenv("AIRFLOW_METADATA_DB_PORT", str(squatter.getsockname()[1]))
        with pytest.raises(postgres.PostgresError, match="already in use by another process"):
            postgres.ensure_metadata_db(var)


@pytest.mark.parametrize("value", ["0", "70000", "-1", "port"])
def test_a_bad_port_setting_is_refused_naming_the_variable(paths, monkeypatch, value):
    monkeypatch.setenv("AIRFLOW_METADATA_DB_PORT", value)
    with pytest.raises(settings.SettingError, match="AIRFLOW_METADATA_DB_PORT"):
        postgres.metadata_cluster(settings.Paths(paths.var / "postgres-bad-port"))
