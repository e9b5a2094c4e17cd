"""The configuration module and the generated Airflow home."""

from __future__ import annotations

import configparser
import json

import pytest

from include.core import settings
from include.setup import bootstrap
from include.spark import submit


@pytest.fixture()
def tmp_paths(tmp_path):
    return settings.Paths(tmp_path / "var").ensure()


def test_generated_airflow_cfg_has_the_project_settings(tmp_paths, monkeypatch):
    bootstrap.write_airflow_cfg(tmp_paths)
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(tmp_paths.airflow_home / "airflow.cfg")
    assert cfg["core"]["dags_folder"] == str(settings.DAGS_DIR)
    assert cfg["core"]["plugins_folder"] == str(settings.PLUGINS_DIR)
    assert cfg["core"]["executor"] == "LocalExecutor" and cfg["core"]["parallelism"] == "4"
    assert cfg["core"]["load_examples"] == "False"
    assert cfg["database"]["sql_alchemy_conn"] == f"sqlite:///{tmp_paths.airflow_home}/airflow.db"
    transport = json.loads(cfg["openlineage"]["transport"])
    assert transport == {"type": "file", "log_file_path": str(tmp_paths.lineage_events), "append": True}
    assert cfg["openlineage"]["extractors"] == "lakehouse_extractor.LakehouseSparkExtractor"
    assert cfg["openlineage"]["spark_inject_parent_job_info"] == "True"
    # Read as the provider reads it (its option name, its boolean parsing): a misspelt option would silently fall
    # back to forking a child per event.
    from airflow.providers.openlineage import conf as openlineage_conf

    for option, value in cfg["openlineage"].items():
        monkeypatch.setenv(f"AIRFLOW__OPENLINEAGE__{option.upper()}", value)
    assert openlineage_conf.execute_in_thread() is True
    assert "AIRFLOW_CONN_SPARK_DEFAULT" not in settings.airflow_env(tmp_paths), (
        "spark_default is a default, not an override"
    )
    stored = json.loads((tmp_paths.secrets / "airflow.json").read_text())
    assert cfg["api_auth"]["jwt_secret"] == stored["jwt_secret"] and len(stored["jwt_secret"]) >= 32
    assert cfg["core"]["fernet_key"] == stored["fernet_key"] and cfg["api"]["secret_key"] == stored["api_secret_key"]
    assert oct((tmp_paths.secrets / "airflow.json").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_paths.airflow_home / "airflow.cfg").stat().st_mode & 0o777) == "0o600"


def test_secrets_are_made_once_per_var_and_kept(tmp_paths):
    first = bootstrap.airflow_secrets(tmp_paths)
    (tmp_paths.airflow_home / "airflow.cfg").unlink(missing_ok=True)
    bootstrap.write_airflow_cfg(tmp_paths)
    assert bootstrap.airflow_secrets(tmp_paths) == first
    from cryptography.fernet import Fernet

    Fernet(first["fernet_key"].encode())  # a valid Fernet key, or Airflow cannot encrypt connections
    other = settings.Paths(tmp_paths.var.parent / "other-var").ensure()
    assert bootstrap.airflow_secrets(other)["jwt_secret"] != first["jwt_secret"], "each var/ has its own secrets"


def test_setup_refreshes_its_own_file_but_keeps_a_file_the_user_edited(tmp_paths):
    target = tmp_paths.airflow_home / "airflow.cfg"
    assert bootstrap.write_airflow_cfg(tmp_paths) is True
    assert bootstrap.write_airflow_cfg(tmp_paths) is False
    target.write_text(target.read_text().replace('{"type": "file"', '{"type": "console", "x": "file"'))
    edited = target.read_text()
    assert bootstrap.write_airflow_cfg(tmp_paths) is False
    assert target.read_text() == edited


def test_default_catalog_is_the_local_rest_server_seen_alike_by_spark_and_pyiceberg(tmp_paths, monkeypatch):
    for name in ("ICEBERG_CATALOG_TYPE", "ICEBERG_CATALOG_URI", "ICEBERG_WAREHOUSE", "ICEBERG_CATALOG_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ICEBERG_REST_PORT", "18999")
    catalog = settings.CatalogSettings.current(tmp_paths)
    assert catalog.is_local_rest_server and catalog.uri == "http://127.0.0.1:18999"
    spark = submit.spark_conf(tmp_paths, catalog)
    assert spark["spark.sql.catalog.lakehouse.type"] == "rest" == catalog.pyiceberg_properties()["type"]
    assert spark["spark.sql.catalog.lakehouse.uri"] == catalog.pyiceberg_properties()["uri"] == "http://127.0.0.1:18999"
    monkeypatch.setenv("ICEBERG_REST_PORT", "http")
    with pytest.raises(ValueError, match="ICEBERG_REST_PORT='http' is not a TCP port"):
        settings.CatalogSettings.current(tmp_paths)


def test_serverless_jdbc_fallback_is_shared_by_spark_and_pyiceberg(tmp_paths, monkeypatch):
    for name in ("ICEBERG_CATALOG_URI", "ICEBERG_WAREHOUSE", "ICEBERG_CATALOG_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ICEBERG_CATALOG_TYPE", "jdbc")
    catalog = settings.CatalogSettings.current(tmp_paths)
    assert not catalog.is_local_rest_server
    spark = submit.spark_conf(tmp_paths, catalog)
    assert spark["spark.sql.catalog.lakehouse.uri"] == f"jdbc:sqlite:{tmp_paths.catalog_dir / 'iceberg_catalog.db'}"
    assert catalog.pyiceberg_properties()["uri"] == f"sqlite:///{tmp_paths.catalog_dir / 'iceberg_catalog.db'}"
    assert (
        spark["spark.sql.catalog.lakehouse.warehouse"]
        == catalog.pyiceberg_properties()["warehouse"]
        == tmp_paths.warehouse.as_uri()
    )
    assert spark["spark.sql.catalog.lakehouse.jdbc.journal_mode"] == "WAL"


def test_postgres_and_rest_catalogs_and_s3_warehouse_by_environment(tmp_paths, monkeypatch):
    monkeypatch.setenv("ICEBERG_CATALOG_TYPE", "jdbc")
    monkeypatch.setenv("ICEBERG_CATALOG_URI", "jdbc:postgresql://db:5432/iceberg")
    monkeypatch.setenv("ICEBERG_CATALOG_USER", "ice")
    monkeypatch.setenv("ICEBERG_CATALOG_PASSWORD", "pw")
    monkeypatch.setenv("ICEBERG_WAREHOUSE", "s3://bucket/warehouse")
    catalog = settings.CatalogSettings.current(tmp_paths)
    assert catalog.pyiceberg_properties()["uri"] == "postgresql+psycopg2://ice:pw@db:5432/iceberg"
    props = catalog.spark_properties()
    assert props["spark.sql.catalog.lakehouse.jdbc.user"] == "ice"
    assert props["spark.sql.catalog.lakehouse.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert "spark.sql.catalog.lakehouse.clients" not in props
    monkeypatch.setenv("ICEBERG_CATALOG_TYPE", "rest")
    monkeypatch.setenv("ICEBERG_CATALOG_URI", "http://rest:8181")
    remote = settings.CatalogSettings.current(tmp_paths)
    assert remote.pyiceberg_properties()["type"] == "rest" and remote.uri == "http://rest:8181"
    assert not remote.is_local_rest_server, "a remote REST catalog must not start the local server"
    monkeypatch.setenv("ICEBERG_CATALOG_TYPE", "hive")
    with pytest.raises(ValueError, match="ICEBERG_CATALOG_TYPE must be one of rest, jdbc, not 'hive'"):
        settings.CatalogSettings.current(tmp_paths)


def test_lineage_switch_removes_the_spark_listener_and_extra_conf_is_merged(tmp_paths, monkeypatch):
    monkeypatch.setenv("SPARK_CONF_EXTRA", '{"spark.executor.memory": "3g"}')
    on, off = submit.spark_conf(tmp_paths), submit.spark_conf(tmp_paths, lineage=False)
    assert on["spark.extraListeners"] == "io.openlineage.spark.agent.OpenLineageSparkListener"
    assert not any(key.startswith("spark.openlineage") or key == "spark.extraListeners" for key in off)
    assert on["spark.executor.memory"] == off["spark.executor.memory"] == "3g"
    monkeypatch.setenv("SPARK_CONF_EXTRA", "[1, 2]")
    with pytest.raises(ValueError, match="SPARK_CONF_EXTRA must be a JSON object"):
        submit.spark_conf(tmp_paths)


def test_setup_twice_keeps_the_same_secrets(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PIPELINE_VAR_DIR": str(tmp_path / "var")}
    secrets_file = tmp_path / "var" / "secrets" / "airflow.json"
    runs = []
    for _ in range(2):
        subprocess.run(
            [sys.executable, "-m", "include.setup.bootstrap", "--no-db"],
            env=env,
            check=True,
            cwd=settings.PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
        )
        cfg = configparser.ConfigParser(interpolation=None)
        cfg.read(tmp_path / "var" / "airflow" / "airflow.cfg")
        runs.append((secrets_file.read_text(), cfg["api_auth"]["jwt_secret"], cfg["core"]["fernet_key"]))
    assert runs[0] == runs[1]
    assert json.loads(runs[0][0])["jwt_secret"] == runs[0][1]


@pytest.mark.parametrize(
    "damage",
    [
        lambda key: b"{not json",
        lambda key: json.dumps([key]).encode(),
        lambda key: json.dumps({key: 42}).encode(),
        lambda key: b'{"' + key.encode() + b'": "\xff"}',
    ],
    ids=["torn", "a list", "a number for a secret", "not UTF-8"],
)
def test_a_damaged_secrets_file_is_refused_naming_it_and_left_as_it_is(tmp_paths, damage):
    """Set-up made new secrets over a secrets file it could not read: a new ``fernet_key`` makes every connection
    password stored with the old one unreadable, and a new metadata-database password locks Airflow out of the
    database made with the old one. Now the file is named, kept, and the choice left to the user."""
    from include.core.errors import ConfigurationError
    from include.services import postgres

    for path, key, read in (
        (tmp_paths.secrets / "airflow.json", "fernet_key", lambda: bootstrap.airflow_secrets(tmp_paths)),
        (postgres.secrets_file(tmp_paths), "airflow_password", lambda: postgres._password(tmp_paths)),
    ):
        content = damage(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        with pytest.raises(ConfigurationError, match="not the secrets file it should be") as refused:
            read()
        assert str(path) in str(refused.value) and "delete it to make new secrets" in str(refused.value)
        assert path.read_bytes() == content, "left for the user to restore"
        path.unlink()
        assert read(), "a missing file is made anew, as at the first set-up"
