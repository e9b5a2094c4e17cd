"""`pipeline fleet`'s machines, without starting them: what each one's environment names, that no secret is in it
(they are files of mode 600 in the machine's own var/), where its lineage goes; and the queue a run's conf gives a
task (Airflow's task_instance_mutation_hook, registered by airflow_local_settings.py)."""

from __future__ import annotations

import json
import stat
from types import SimpleNamespace

import pytest

import airflow_local_settings
from include.airflow import queues
from include.core import settings
from include.services import fleet_config


@pytest.fixture()
def fleet(tmp_path):
    fleet_root = tmp_path / "fleet"
    topology = fleet_config.Topology.load(fleet_root)
    metadata_url = "postgresql+psycopg2://airflow:metadata-secret@127.0.0.1:5999/airflow"
    shared = {"jwt_secret": "jwt-secret-x", "fernet_key": "fernet-secret-x", "api_secret_key": "api-secret-x"}
    for name in (fleet_config.CONTROL, *fleet_config.WORKERS):
        fleet_config.provision(
            fleet_config.machine(fleet_root, name).ensure(), topology, metadata_url, "writer-token-x", shared
        )
    return fleet_root, topology


def test_each_machine_has_its_own_var_and_airflow_home_and_the_same_shared_services(fleet):
    fleet_root, topology = fleet
    a, b = (fleet_config.environment(fleet_config.machine(fleet_root, w), topology) for w in fleet_config.WORKERS)
    assert a["PIPELINE_VAR_DIR"] != b["PIPELINE_VAR_DIR"] and a["AIRFLOW_HOME"] != b["AIRFLOW_HOME"]
    assert a["AIRFLOW_HOME"].startswith(a["PIPELINE_VAR_DIR"]) and b["AIRFLOW_HOME"].startswith(b["PIPELINE_VAR_DIR"])
    for name in (
        "ICEBERG_CATALOG_URI",
        "ICEBERG_WAREHOUSE",
        "S3_ENDPOINT",
        "PIPELINE_LANDING_URI",
        "PIPELINE_MODELS_URI",
    ):
        assert a[name] == b[name], name
    assert a["PIPELINE_LANDING_URI"].startswith("s3://") and a["PIPELINE_MODELS_URI"].startswith("s3://")
    assert a["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert a["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == f"{topology.url('api')}/execution/"
    # each machine reads the database and broker URLs from its own files
    assert a["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD"] != b["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD"]
    assert a["PIPELINE_VAR_DIR"] in a["AIRFLOW__CELERY__BROKER_URL_CMD"]


def test_no_secret_is_in_an_environment_and_each_is_a_private_file_of_the_machine(fleet):
    fleet_root, topology = fleet
    planted = ("metadata-secret", topology.redis_password, "jwt-secret-x", "fernet-secret-x", "writer-token-x")
    for name in (fleet_config.CONTROL, *fleet_config.WORKERS):
        paths = fleet_config.machine(fleet_root, name)
        env = fleet_config.environment(paths, topology)
        assert not [key for key, value in env.items() for secret in planted if secret in value], name
        for secret_file in paths.secrets.iterdir():
            assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600, secret_file
        assert stat.S_IMODE(paths.secrets.stat().st_mode) == 0o700
    worker = fleet_config.machine(fleet_root, fleet_config.WORKERS[0])
    tokens = json.loads((worker.secrets / "lineage-tokens.json").read_text())["tokens"]
    assert tokens == [{"name": "writer", "scopes": ["write"], "token": "writer-token-x"}]
    assert (fleet_config.secret_file(worker, "broker")).read_text() == topology.broker_url
    assert settings.metadata_db_url_file(worker).read_text().endswith("/airflow")


def test_lineage_goes_to_lineage_serve_through_the_spool_and_a_copy_stays_on_the_machine(fleet):
    fleet_root, topology = fleet
    paths = fleet_config.machine(fleet_root, "worker-b")
    transport = json.loads(fleet_config.environment(paths, topology)["AIRFLOW__OPENLINEAGE__TRANSPORT"])
    copy, spooled = transport["transports"]
    assert copy == {"type": "file", "log_file_path": str(paths.lineage_events), "append": True}
    assert spooled["type"] == "include.lineage.emit.spool.SpoolingTransport"
    assert spooled["inner"]["url"] == topology.url("lineage")
    assert spooled["inner"]["auth"] == {"type": "include.lineage.emit.tokens.LineageServeTokenProvider"}


def test_ports_and_secrets_are_chosen_once_and_kept(fleet):
    fleet_root, topology = fleet
    again = fleet_config.Topology.load(fleet_root)
    assert again.ports == topology.ports and again.redis_password == topology.redis_password
    assert len(set(topology.ports.values())) == len(topology.ports)


def test_a_run_conf_sends_the_tasks_it_names_to_their_queues_and_leaves_the_others():
    conf = {"queues": {"download_tlc_month": "worker-a", "load_yellow_taxi_raw": "worker-b"}}
    download, other = SimpleNamespace(task_id="download_tlc_month", queue="default"), SimpleNamespace(task_id="x")
    other.queue = "default"
    queues.task_instance_mutation_hook(download, SimpleNamespace(conf=conf))
    queues.task_instance_mutation_hook(other, SimpleNamespace(conf=conf))
    assert (download.queue, other.queue) == ("worker-a", "default")
    for conf in (None, {}, {"queues": "worker-a"}, {"queues": {"x": ""}}, {"queues": {"x": 3}}):
        task = SimpleNamespace(task_id="x", queue="default")
        queues.task_instance_mutation_hook(task, SimpleNamespace(conf=conf))
        assert task.queue == "default", conf
    queues.task_instance_mutation_hook(SimpleNamespace(task_id="x", queue="default"), None)  # no run yet: nothing
    assert airflow_local_settings.task_instance_mutation_hook is queues.task_instance_mutation_hook
    assert "task_instance_mutation_hook" in airflow_local_settings.__all__
