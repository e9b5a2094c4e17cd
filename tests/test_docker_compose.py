"""docker-compose.yml, validated statically: no Docker engine runs here."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess

import pytest
import yaml
from jsonschema import Draft7Validator

from include.core import settings
from include.setup import vendored_specs

COMPOSE = settings.PROJECT_ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_file_validates_against_the_compose_spec(compose):
    schema = json.loads(vendored_specs.COMPOSE_SPEC.read_text())
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in Draft7Validator(schema).iter_errors(compose)]
    assert errors == []


def test_every_image_is_pinned_to_a_version(compose):
    for name, service in compose["services"].items():
        image = service.get("image")
        assert image, f"service {name} has no image"
        assert re.search(r":\d+(\.\d+)+", image), f"service {name}: image {image} is not pinned to a version"


def test_every_mounted_host_path_and_build_context_exists(compose):
    for name, service in compose["services"].items():
        if "build" in service:
            assert (settings.PROJECT_ROOT / service["build"] / "Dockerfile").exists()
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./") and source != "./var":
                assert (settings.PROJECT_ROOT / source).exists(), f"service {name} mounts missing {source}"


PROJECT_IMAGE = "lineage-aware-pipelines"
AIRFLOW_COMPONENTS = {"api-server", "scheduler", "dag-processor", "triggerer"}
SHARED_SECRETS = ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API__SECRET_KEY")
OBVIOUS_LOCAL_DEFAULTS = {"postgres", "airflow", "iceberg", "marquez", "redis", "lineage", "fleet"}
PROJECT_PREFIXES = ("PIPELINE_", "ICEBERG_", "S3_", "SPARK_PYSPARK_", "SPARK_DRIVER_", "SPARK_SHUFFLE_", "SPARK_CONF_")


def _pin(package: str) -> str:
    for line in (settings.PROJECT_ROOT / "requirements.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        if name.split("[")[0].strip().lower() == package:
            return version.strip()
    raise AssertionError(f"{package} is not pinned in requirements.txt")


def _command(service: dict) -> str:
    command = service.get("command", [])
    return " ".join(command) if isinstance(command, list) else command


def _airflow_services(compose) -> dict[str, dict]:
    return {name: s for name, s in compose["services"].items() if set(s.get("command", [])) & AIRFLOW_COMPONENTS}


def _env_read_by_config() -> set[str]:
    """Every environment variable the project reads: all are declared in include/core/settings.py."""
    return set(settings.SETTINGS)


def _resolved(environment: dict) -> dict[str, str]:
    """The environment as compose passes it, ``${VAR:-default}`` resolved to its default, ``${VAR:?…}`` to a dummy."""

    def resolve(value: str) -> str:
        value = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))
        return re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "set-in-dot-env", value)

    return {key: resolve(value) for key, value in environment.items()}


def test_images_follow_the_project_pins(compose):
    dockerfile = (settings.PROJECT_ROOT / "Dockerfile").read_text()
    assert re.search(rf"^FROM apache/airflow:{re.escape(_pin('apache-airflow'))}-python3\.11$", dockerfile, re.M)
    assert "pip install --no-cache-dir -r requirements.txt -c constraints.txt" in dockerfile  # pyspark 4.1.3 inside
    project = {name for name, s in compose["services"].items() if s["image"].startswith(PROJECT_IMAGE + ":")}
    # the `celery` profile's (tests/test_docker_compose_celery.py)
    celery_profile = {"fleet-init", "lineage-serve", "airflow-worker-a", "airflow-worker-b"}
    assert project == {
        "iceberg-catalog", "spark-master", "spark-worker", "airflow-init", *_airflow_services(compose), *celery_profile
    }  # fmt: skip
    for name in project:
        assert compose["services"][name]["build"] == "."
    for name, service in compose["services"].items():
        if service["image"].startswith(("apache/spark:", "spark:", "bitnami/spark:")):
            assert service["image"].split(":")[1].startswith(_pin("pyspark")), f"{name}: Spark differs from pyspark"
        if service["image"].startswith("apache/airflow:"):
            assert service["image"].split(":")[1].startswith(_pin("apache-airflow")), name
    assert "spark-class org.apache.spark.deploy.master.Master" in _command(compose["services"]["spark-master"])
    assert "org.apache.spark.deploy.worker.Worker spark://spark-master:7077" in _command(
        compose["services"]["spark-worker"]
    )


def test_airflow_runs_as_four_components_sharing_one_set_of_secrets_from_dot_env(compose):
    services = _airflow_services(compose)
    assert {service["command"][0] for service in services.values()} == AIRFLOW_COMPONENTS
    write_env = importlib.util.spec_from_file_location("write_env", settings.PROJECT_ROOT / "docker" / "write_env.py")
    module = importlib.util.module_from_spec(write_env)
    write_env.loader.exec_module(module)
    VARIABLES = module.VARIABLES  # noqa: N806  (what docker/write_env.py writes into .env)

    for secret in SHARED_SECRETS:
        values = {service["environment"][secret] for service in services.values()}
        assert len(values) == 1, f"{secret} differs between the Airflow components"
        reference = re.fullmatch(r"\$\{([A-Z_]+):\?[^}]+\}", values.pop())
        assert reference, f"{secret} must come from the environment/.env, required, never a committed value"
        assert reference[1] in VARIABLES.values(), f"docker/write_env.py does not write {reference[1]}"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=settings.PROJECT_ROOT)
    assert ignored.returncode == 0, ".env holds the secrets: it must be git-ignored"


def test_no_secret_in_clear_beyond_obvious_local_defaults(compose):
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            value = str(value)
            if re.search(r"PASSWORD|SECRET|FERNET|JWT", key) or re.search(r"://[^:/]+:[^@]+@", value):
                literal = re.sub(r"\$\{[A-Z_]+:[-?][^}]*\}", "", value)
                assert not re.search(r"PASSWORD|SECRET|FERNET|JWT", key) or "${" in value, f"{name}: {key} in clear"
                assert not re.search(r"://[^:/]+:[^@${]+@", literal), f"{name}: {key} has a password in clear"
                for default in re.findall(r"\$\{[A-Z_]+:-([^}]*)\}", value):
                    assert default in OBVIOUS_LOCAL_DEFAULTS, f"{name}: {key} defaults to {default!r}"


def test_every_airflow_setting_exists_in_airflow(compose):
    from airflow.configuration import conf

    description = conf.configuration_description
    for name, service in {**_airflow_services(compose), "airflow-init": compose["services"]["airflow-init"]}.items():
        for key in service["environment"]:
            if key.startswith("AIRFLOW__"):
                section, option = key.removeprefix("AIRFLOW__").lower().split("__", 1)
                assert option in description.get(section, {}).get("options", {}), f"{name}: {key} is no Airflow option"


def test_environment_matches_what_include_config_reads(compose, monkeypatch):
    read = _env_read_by_config()
    services = compose["services"]
    for name, service in services.items():
        if not service["image"].startswith(PROJECT_IMAGE + ":"):
            continue
        for key in service.get("environment") or {}:
            if key.startswith(PROJECT_PREFIXES):
                assert key in read, f"{name}: {key} is not read by include/core/settings.py"
        for volume in service.get("volumes", []):
            if volume.startswith("project-var:"):
                image_default = re.search(r"PIPELINE_VAR_DIR=(\S+)", (settings.PROJECT_ROOT / "Dockerfile").read_text())
                var_dir = (service.get("environment") or {}).get("PIPELINE_VAR_DIR", image_default[1])
                assert volume.split(":")[1] == var_dir, name

    def catalog_of(service: str) -> settings.CatalogSettings:
        for key in read:
            monkeypatch.delenv(key, raising=False)
        for key, value in _resolved(services[service]["environment"]).items():
            monkeypatch.setenv(key, value)
        return settings.CatalogSettings.current()

    server = catalog_of("iceberg-catalog")
    assert server.is_local_rest_server and server.rest_backend_uri == "jdbc:postgresql://postgres:5432/iceberg"
    init_sql = (settings.PROJECT_ROOT / "docker" / "postgres-init.sql").read_text()
    assert f"CREATE USER {server.user} " in init_sql and "CREATE DATABASE iceberg OWNER iceberg" in init_sql
    for name in (*_airflow_services(compose), "airflow-init"):
        client = catalog_of(name)
        assert (client.type, client.is_local_rest_server) == ("rest", False), name
        assert client.uri == f"http://iceberg-catalog:{server.rest_port}", name
        assert client.warehouse == server.warehouse, name
        connection = json.loads(services[name]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"])
        master = f"{connection['host']}:{connection['port']}"
        assert master == "spark://spark-master:7077" and "--port 7077" in _command(services["spark-master"])
        assert json.loads(services[name]["environment"]["AIRFLOW__OPENLINEAGE__TRANSPORT"])["inner"]["url"] == (
            "http://marquez:5000"
        )
    for database in ("airflow", "iceberg", "marquez"):
        assert f"CREATE DATABASE {database}" in init_sql


def test_the_production_image_gets_no_test_tools():
    dockerfile = (settings.PROJECT_ROOT / "Dockerfile").read_text()
    assert "requirements-dev.txt" not in dockerfile
    runtime = {
        line.split("==")[0].split("[")[0].lower()
        for line in (settings.PROJECT_ROOT / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert runtime.isdisjoint({"pytest", "pytest-timeout", "ruff", "playwright", "moto", "hypothesis"}), runtime
    dev = (settings.PROJECT_ROOT / "requirements-dev.txt").read_text()
    assert "-r requirements.txt" in dev and "pytest==" in dev and "hypothesis==" in dev
