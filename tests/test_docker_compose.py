"""docker-compose.yml, validated statically: no Docker engine runs here."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from jsonschema import Draft7Validator

from include import config, vendored_specs

COMPOSE = config.PROJECT_ROOT / "docker-compose.yml"


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
            assert (config.PROJECT_ROOT / service["build"] / "Dockerfile").exists()
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./") and source != "./var":
                assert (config.PROJECT_ROOT / source).exists(), f"service {name} mounts missing {source}"


def test_airflow_service_configures_lineage_and_the_variables_the_project_reads(compose):
    env = compose["services"]["airflow"]["environment"]
    assert json.loads(env["AIRFLOW__OPENLINEAGE__TRANSPORT"])["url"] == "http://marquez:5000"
    assert env["AIRFLOW__OPENLINEAGE__EXTRACTORS"] == "lakehouse_extractor.LakehouseSparkExtractor"
    for variable in ("PIPELINE_VAR_DIR", "ICEBERG_CATALOG_URI", "ICEBERG_WAREHOUSE", "AIRFLOW_CONN_SPARK_DEFAULT"):
        assert env.get(variable), f"{variable} is not set for the airflow service"
    services = set(compose["services"])
    for dependency in compose["services"]["airflow"]["depends_on"]:
        assert dependency in services
    init_sql = (config.PROJECT_ROOT / "docker" / "postgres-init.sql").read_text()
    for database in ("airflow", "iceberg", "marquez"):
        assert f"CREATE DATABASE {database}" in init_sql
