"""docker-compose's `celery` profile and docker-compose.celery.yml, validated statically: the fleet of
`pipeline fleet` in containers, with the same settings (tests/test_docker_compose.py checks the rest of the file)."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import yaml
from jsonschema import Draft7Validator

from include.core import settings
from include.services import fleet_config
from include.setup import vendored_specs

COMPOSE = settings.PROJECT_ROOT / "docker-compose.yml"
OVERRIDE = settings.PROJECT_ROOT / "docker-compose.celery.yml"
CONTROL = ("airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
WORKERS = {"airflow-worker-a": "worker-a", "airflow-worker-b": "worker-b"}
CELERY_PROFILE = {"redis", "object-store", "fleet-init", "lineage-serve", *WORKERS}


@pytest.fixture(scope="module")
def files() -> tuple[dict, dict]:
    return yaml.safe_load(COMPOSE.read_text()), yaml.safe_load(OVERRIDE.read_text())


def merged(base: dict, override: dict) -> dict[str, dict]:
    """The services as `docker compose -f docker-compose.yml -f docker-compose.celery.yml` merges them: an
    override's environment and depends_on entries over the base's."""
    services = {name: dict(service) for name, service in base["services"].items()}
    for name, service in override["services"].items():
        for key in ("environment", "depends_on"):
            if key in service:
                services[name][key] = {**(services[name].get(key) or {}), **service[key]}
    return services


def _option(key: str) -> str:
    """An Airflow option whatever form sets it (``AIRFLOW__CELERY__BROKER_URL`` or its ``_CMD``)."""
    return key.removesuffix("_CMD")


def test_both_files_validate_against_the_compose_spec(files):
    schema = json.loads(vendored_specs.COMPOSE_SPEC.read_text())
    for document in files:
        assert [e.message for e in Draft7Validator(schema).iter_errors(document)] == []


def test_the_profile_holds_the_broker_the_object_store_lineage_serve_and_two_workers(files):
    base, _ = files
    in_profile = {name for name, s in base["services"].items() if "celery" in (s.get("profiles") or [])}
    assert in_profile == CELERY_PROFILE
    assert not any(s.get("profiles") for name, s in base["services"].items() if name not in CELERY_PROFILE), (
        "`docker compose up` without the profile starts what it always did"
    )


def test_the_override_repeats_the_celery_settings_of_the_compose_file_exactly(files):
    base, override = files
    assert override["x-celery-env"] == base["x-celery-env"]


def test_every_airflow_component_and_worker_runs_the_fleet_settings_of_pipeline_fleet(files, tmp_path):
    base, override = files
    services = merged(base, override)
    topology = fleet_config.Topology.load(tmp_path / "fleet")
    native = fleet_config.environment(fleet_config.machine(tmp_path / "fleet", "worker-a"), topology)
    set_by_the_fleet = {k for k in native if k not in os.environ} | set(topology.shared_environment())
    shared = {
        _option(k) for k in set_by_the_fleet if k.startswith(("AIRFLOW__", "ICEBERG_", "S3_", "PIPELINE_", "AWS_"))
    }
    shared -= {"PIPELINE_VAR_DIR", "AIRFLOW__API__PORT", "AIRFLOW__API__BASE_URL", "AIRFLOW__OPERATORS__DEFAULT_QUEUE"}
    shared -= {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC"}
    for name in (*CONTROL, *WORKERS):
        environment = {_option(key): value for key, value in services[name]["environment"].items()}
        assert shared <= set(environment), f"{name} lacks {sorted(shared - set(environment))}"
        assert environment["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
        for key in ("PIPELINE_LANDING_URI", "PIPELINE_MODELS_URI", "ICEBERG_WAREHOUSE"):
            assert environment[key].startswith("s3://"), (name, key)
        transport = json.loads(environment["AIRFLOW__OPENLINEAGE__TRANSPORT"])
        assert transport["type"] == "include.lineage.emit.spool.SpoolingTransport"
        assert transport["inner"]["url"] == "http://lineage-serve:5050", name
    catalog = services["iceberg-catalog"]["environment"]
    assert catalog["ICEBERG_WAREHOUSE"] == services["airflow-scheduler"]["environment"]["ICEBERG_WAREHOUSE"]
    assert catalog["S3_ENDPOINT"] == services["airflow-scheduler"]["environment"]["S3_ENDPOINT"]


def test_each_worker_is_a_machine_of_its_own_sharing_no_volume(files):
    base, _ = files
    mounted = {name: {v.split(":")[0] for v in base["services"][name].get("volumes", [])} for name in base["services"]}
    for name, worker in WORKERS.items():
        service = base["services"][name]
        assert service["command"][:2] == ["celery", "worker"]
        queues = service["command"][service["command"].index("--queues") + 1].split(",")
        assert queues == [fleet_config.SHARED_QUEUE, fleet_config.worker_queue(worker)]
        others = set().union(*(volumes for other, volumes in mounted.items() if other != name))
        assert mounted[name] and not mounted[name] & others, f"{name} shares {mounted[name] & others}"


def test_every_setting_is_one_airflow_or_the_project_reads(files):
    from airflow.configuration import conf

    base, override = files
    description = conf.configuration_description
    for key in {**base["x-celery-env"], **override["x-celery-env"]}:
        if key.startswith("AIRFLOW__"):
            section, option = key.removeprefix("AIRFLOW__").lower().split("__", 1)
            assert option in description.get(section, {}).get("options", {}), f"{key} is no Airflow option"
        elif key.startswith(("PIPELINE_", "ICEBERG_", "S3_", "LINEAGE_")):
            assert key in settings.SETTINGS, f"{key} is not read by include/core/settings.py"


def test_the_lineage_database_and_token_are_provisioned():
    init_sql = (settings.PROJECT_ROOT / "docker" / "postgres-init.sql").read_text()
    assert "CREATE DATABASE lineage OWNER lineage" in init_sql
    spec = importlib.util.spec_from_file_location("write_env", settings.PROJECT_ROOT / "docker" / "write_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.LINEAGE_TOKEN == "LINEAGE_SERVE_TOKEN" == settings.LINEAGE_SERVE_TOKEN.name


def test_every_postgres_url_names_the_driver_the_image_has(files):
    """SQLAlchemy 2.1's default PostgreSQL driver is psycopg (3), which the image does not install: Celery's result
    backend named `db+postgresql://` and the scheduler and workers failed at start (found running the profile)."""
    base, override = files
    for environment in (base["x-celery-env"], override["x-celery-env"], base["x-airflow-env"]):
        for key, value in environment.items():
            if "postgresql" in str(value):
                assert "postgresql+psycopg2://" in value, key
