"""docker-compose's `celery` profile run for real (opt-in: `make test-docker`, PIPELINE_TEST_DOCKER=1): the stand-in
base images built from Debian and PyPI (docker/stand-ins/build.sh), the project's image, then
`docker-compose -f docker-compose.yml -f docker-compose.celery.yml --profile celery up`; both ingest DAGs triggered
through the REST API, the forecast run by their Assets, the lineage complete in `lineage serve`'s store.

Debian's docker-compose (1.29.2) does not know the Compose spec's top-level `name`: it is given as `-p`, from a copy of
docker-compose.yml without that line. The generated month is served inside the network by an extra service of this
test's own (the project's image, `python -m http.server`), and the workers' TLC_BASE_URL / NOAA_BASE_URL point at it.
Marquez's services run as placeholders that start and wait (left out of this run).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml

from include.core import settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(7200),
    pytest.mark.skipif(not settings.truthy(os.environ.get("PIPELINE_TEST_DOCKER")), reason="opt-in: make test-docker"),
]

PROJECT = "lineage-aware-pipelines"
API = "http://127.0.0.1:8080"
ROWS = 5_000
SOURCE = "http://sample-source:18080"
INGEST = ("ingest_yellow_taxi_data", "ingest_weather_data")
SERVE_SAMPLE = (
    'python -c "from pathlib import Path; from include.sources import sample_server; '
    f"sample_server.publish_months(Path('/tmp/source'), [(2025, 1)], {ROWS})\" "
    "&& exec python -m http.server 18080 --bind 0.0.0.0 --directory /tmp/source"
)


class Compose:
    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        # docker-compose 1.29 refuses the spec's top-level name: it is given as -p
        (folder / "docker-compose.yml").write_text(
            "\n".join(line for line in (settings.PROJECT_ROOT / "docker-compose.yml").read_text().splitlines()
                      if not line.startswith("name:")) + "\n"
        )  # fmt: skip
        sample = {"TLC_BASE_URL": f"{SOURCE}/trip-data", "NOAA_BASE_URL": f"{SOURCE}/averages"}
        test_services = {
            "sample-source": {
                "image": f"{PROJECT}:0.1.0",
                "profiles": ["celery"],
                "command": ["bash", "-c", SERVE_SAMPLE],
                "environment": {"PIPELINE_VAR_DIR": "/tmp/var"},
            },
            **{name: {"environment": sample} for name in ("airflow-worker-a", "airflow-worker-b")},
        }
        (folder / "docker-compose.test.yml").write_text(yaml.safe_dump({"services": test_services}))
        env = {
            "AIRFLOW_JWT_SECRET": secrets.token_urlsafe(48),
            "AIRFLOW_FERNET_KEY": __import__("base64").urlsafe_b64encode(secrets.token_bytes(32)).decode(),
            "AIRFLOW_API_SECRET_KEY": secrets.token_urlsafe(32),
            "LINEAGE_SERVE_TOKEN": secrets.token_urlsafe(32),
        }
        (folder / "compose.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
        os.chmod(folder / "compose.env", 0o600)
        self.folder = folder
        self.base = [
            "docker-compose", "--project-directory", str(settings.PROJECT_ROOT), "-p", PROJECT,
            "--env-file", str(folder / "compose.env"),
            "-f", str(folder / "docker-compose.yml"), "-f", str(settings.PROJECT_ROOT / "docker-compose.celery.yml"),
            "-f", str(folder / "docker-compose.test.yml"), "--profile", "celery",
        ]  # fmt: skip

    def run(self, *arguments: str, timeout: float = 3600, check: bool = True) -> subprocess.CompletedProcess:
        completed = subprocess.run([*self.base, *arguments], capture_output=True, text=True, timeout=timeout)
        with (self.folder / "compose.log").open("a") as log:
            log.write(f"$ docker-compose {' '.join(arguments)}\n{completed.stdout}{completed.stderr}\n")
        if check:
            assert completed.returncode == 0, f"docker-compose {' '.join(arguments)}:\n{completed.stderr[-3000:]}"
        return completed

    def exec(self, service: str, *command: str) -> str:
        return self.run("exec", "-T", service, *command).stdout


@pytest.fixture(scope="module")
def stack(paths):
    folder = paths.var / "docker-celery"
    build = subprocess.run(
        [str(settings.PROJECT_ROOT / "docker" / "stand-ins" / "build.sh")], capture_output=True, text=True
    )
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    (folder / "logs" / "build.log").write_text(build.stdout + build.stderr)
    assert build.returncode == 0, f"building the images failed; {folder / 'logs' / 'build.log'}"
    compose = Compose(folder)
    try:
        compose.run("up", "-d", "--no-build")
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{API}/api/v2/monitor/health", timeout=5).json()["scheduler"]["status"] == "healthy":
                    break
            except (requests.RequestException, ValueError, KeyError):
                pass
            time.sleep(5)
        yield compose
    finally:
        logs = compose.run("logs", "--no-color", timeout=600, check=False)
        (folder / "logs" / "services.log").write_text(logs.stdout + logs.stderr)
        compose.run("down", "-v", timeout=600, check=False)


def _token(compose: Compose) -> str:
    passwords = json.loads(
        compose.exec(
            "airflow-apiserver", "cat", "/opt/project/var/airflow/simple_auth_manager_passwords.json.generated"
        )
    )
    response = requests.post(
        f"{API}/auth/token", json={"username": "admin", "password": passwords["admin"]}, timeout=30
    )
    response.raise_for_status()
    return response.json()["access_token"]


def _wait(api, path: str, timeout: float = 2400) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api("GET", path)
        if run["state"] in ("success", "failed"):
            return run
        time.sleep(10)
    raise TimeoutError(path)


def test_both_ingests_through_the_rest_api_then_the_forecast_by_their_assets_with_lineage_in_the_store(stack):
    token = _token(stack)

    def api(method: str, path: str, **kwargs) -> dict:
        response = requests.request(
            method, f"{API}/api/v2/{path}", headers={"Authorization": f"Bearer {token}"}, timeout=60, **kwargs
        )
        assert response.status_code < 400, f"{method} {path}: {response.status_code} {response.text[:1000]}"
        return response.json()

    deadline = time.monotonic() + 600
    while {d["dag_id"] for d in api("GET", "dags")["dags"]} < {*INGEST, "forecast_yellow_rides"}:
        assert time.monotonic() < deadline, "the DAGs were not parsed"
        time.sleep(5)
    run_ids = {
        dag: api("POST", f"dags/{dag}/dagRuns", json={"logical_date": "2025-02-01T00:00:00Z", "conf": {}})["dag_run_id"]
        for dag in INGEST
    }
    for dag, run_id in run_ids.items():
        assert _wait(api, f"dags/{dag}/dagRuns/{run_id}")["state"] == "success", dag
    deadline = time.monotonic() + 1800
    forecast = []
    while not forecast:
        runs = api("GET", "dags/forecast_yellow_rides/dagRuns")["dag_runs"]
        forecast = [run for run in runs if run["run_type"] == "asset_triggered"]
        assert time.monotonic() < deadline, "no asset-triggered forecast run"
        time.sleep(10)
    assert _wait(api, f"dags/forecast_yellow_rides/dagRuns/{forecast[0]['dag_run_id']}")["state"] == "success"

    def upstream(node: str) -> set[tuple[str, str]]:
        script = (
            "import os, sys; from include.lineage.cli import main; "
            f"sys.exit(main(['upstream', '{node}', '--json', '--all-history', "
            "'--store', os.environ['LINEAGE_STORE_URL']]))"
        )
        graph = json.loads(stack.exec("lineage-serve", "python", "-c", script))
        return {(n["data"]["id"]["namespace"], n["data"]["id"]["name"]) for n in graph["graph"]}

    # The Assets' forecast runs the default model, seasonal-naive: its graph is the taxi side's; weather has its own.
    forecast_graph, weather_graph = upstream("nyc_taxi.yellow_rides_hourly_forecast"), upstream("nyc_taxi.weather_raw")
    assert ("s3://fleet", "landing/tlc/yellow_tripdata_2025-01.parquet") in forecast_graph
    assert ("s3://fleet", "models/seasonal_naive") in forecast_graph
    assert ("s3://fleet", "warehouse/nyc_taxi/yellow_taxi_raw") in forecast_graph
    assert ("s3://fleet", "landing/noaa/prcp-202501-cty-scaled.csv") in weather_graph
    jobs = {name for namespace, name in forecast_graph | weather_graph if namespace == "nyc_taxi_pipeline"}
    assert {
        "ingest_yellow_taxi_data.download_tlc_month",
        "ingest_yellow_taxi_data.load_yellow_taxi_raw",
        "ingest_weather_data.download_noaa_month",
        "ingest_weather_data.stage_weather",
        "ingest_weather_data.merge_weather_raw",
        "forecast_yellow_rides.compute_hourly_actuals",
        "forecast_yellow_rides.train_model",
        "forecast_yellow_rides.write_forecast",
    } <= jobs
    print(
        f"\ndocker celery: in lineage serve's store, the forecast's graph {len(forecast_graph)} nodes, weather's {len(weather_graph)}"
    )
