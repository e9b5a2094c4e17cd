"""Test support for the fleet (tests/integration/test_fleet.py): `pipeline fleet` started and stopped as a user does,
its Airflow's REST API, where each task ran, what each machine emitted against what the lineage store holds, and the
store's graph of the forecast with the names that depend on where the data lives taken out."""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from include.core import settings
from include.services import fleet, fleet_config
from tests.support import environment_of_var

FINISHED = {"success", "failed"}
FORECAST = "nyc_taxi.yellow_rides_hourly_forecast"


class Fleet:
    """`pipeline fleet start --sample-data` in a ``var/`` of its own (its machines under ``<var>/fleet/``)."""

    def __init__(self, var_dir: Path, rows: int, extra_env: dict[str, str] | None = None):
        self.paths = settings.Paths(var_dir.resolve())
        self.rows = rows
        self.env = environment_of_var(self.paths.var, **(extra_env or {}))
        self.env.pop("ICEBERG_REST_PORT", None)
        self.root = fleet_config.root(self.paths)
        self._token: str | None = None

    def command(self, *arguments: str, timeout: float = 1500) -> subprocess.CompletedProcess:
        completed = subprocess.run(
            [str(Path(sys.executable).parent / "pipeline"), "fleet", *arguments],
            env=self.env,
            cwd=settings.PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        (self.paths.var / "logs").mkdir(parents=True, exist_ok=True)
        with (self.paths.var / "logs" / "pipeline-fleet.log").open("a") as log:
            log.write(f"$ pipeline fleet {' '.join(arguments)}\n{completed.stdout}{completed.stderr}\n")
        return completed

    def start(self) -> Fleet:
        completed = self.command("start", "--sample-data", "--rows", str(self.rows))
        assert completed.returncode == 0, f"pipeline fleet start failed:\n{completed.stdout}\n{completed.stderr}"
        return self

    def stop(self) -> str:
        return self.command("stop", timeout=300).stdout

    @property
    def state(self) -> dict:
        return fleet.read_state(self.root)

    @property
    def topology(self) -> fleet_config.Topology:
        return fleet_config.Topology.load(self.root)

    def machine(self, name: str) -> settings.Paths:
        return fleet_config.machine(self.root, name)

    @property
    def lineage_store_url(self) -> str:
        topology = self.topology
        return (
            f"postgresql+psycopg2://{fleet.LINEAGE_ROLE}:{topology.lineage_password}@127.0.0.1:"
            f"{topology.ports['postgres']}/{fleet.LINEAGE_ROLE}"
        )

    # Airflow's REST API, as the UI calls it
    @property
    def base_url(self) -> str:
        return self.state["endpoints"]["airflow"]

    def token(self) -> str:
        if self._token is None:
            passwords = self.machine(fleet_config.CONTROL).airflow_home / "simple_auth_manager_passwords.json.generated"
            password = json.loads(passwords.read_text())["admin"]
            response = requests.post(
                f"{self.base_url}/auth/token", json={"username": "admin", "password": password}, timeout=30
            )
            response.raise_for_status()
            self._token = response.json()["access_token"]
        return self._token

    def api(self, method: str, path: str, **kwargs) -> dict:
        for attempt in range(4 if method == "GET" else 1):
            response = requests.request(
                method,
                f"{self.base_url}/api/v2/{path.lstrip('/')}",
                headers={"Authorization": f"Bearer {self.token()}"},
                timeout=60,
                **kwargs,
            )
            if response.status_code < 500:
                break
            time.sleep(5 * (attempt + 1))
        assert response.status_code < 400, f"{method} {path}: HTTP {response.status_code}: {response.text[:2000]}"
        return response.json() if response.content else {}

    def wait_for_dags(self, dag_ids, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            parsed = {dag["dag_id"] for dag in self.api("GET", "dags", params={"limit": 100})["dags"]}
            if set(dag_ids) <= parsed:
                return
            time.sleep(3)
        raise TimeoutError(f"{dag_ids} not parsed within {timeout:.0f}s")

    def trigger(self, dag_id: str, logical_date: str, conf: dict) -> str:
        return self.api("POST", f"dags/{dag_id}/dagRuns", json={"logical_date": logical_date, "conf": conf})[
            "dag_run_id"
        ]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 1500) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in FINISHED:
                return run
            time.sleep(3)
        raise TimeoutError(f"{dag_id} {run_id} did not finish within {timeout:.0f}s")

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict]:
        instances = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {instance["task_id"]: instance for instance in instances}

    def ran_on(self, dag_id: str, run_id: str, task_id: str, attempt: int = 1) -> list[str]:
        """The machines whose own disk holds the log of that attempt: where it ran (no machine sees another's)."""
        found = []
        for name in fleet_config.WORKERS:
            logs = self.machine(name).airflow_home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
            if (logs / f"task_id={task_id}" / f"attempt={attempt}.log").exists():
                found.append(name)
        return found


# -- what each machine emitted, against what the store holds


def _lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [line for line in path.read_bytes().decode("utf-8", "replace").split("\n") if line.strip()]


def canonical(event: dict) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"))


def emitted(machines: list[settings.Paths]) -> list[dict]:
    """Every event the machines emitted: each keeps a copy of what its Airflow processes sent
    (``var/lineage/events.jsonl``, the file half of its transport) and of its Spark listener's events (collected into
    ``var/lineage/spark/events.jsonl`` before they are forwarded)."""
    events = []
    for paths in machines:
        for path in (paths.lineage_events, paths.spark_lineage_events):
            events += [json.loads(line) for line in _lines(path)]
    return events


def stored(store_url: str) -> list[dict]:
    """Every event the store keeps, as it was received (its text as read where it was not changed)."""
    import sqlalchemy

    from include.lineage.store import LineageStore
    from include.lineage.store.schema import events_table

    e = events_table.c
    with LineageStore(store_url) as store, store.engine.connect() as conn:
        return [
            json.loads(row.received or store.packer.text(conn, row.id, row.payload, row.packed))
            for row in conn.execute(sqlalchemy.select(e.id, e.payload, e.packed, e.received))
        ]


def per_run(events: list[dict]) -> dict[str, collections.Counter]:
    """Run id -> how many times each distinct event (canonical JSON) of that run occurs."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for event in events:
        counts[event["run"]["runId"]][canonical(event)] += 1
    return counts


def wait_until_stored(store_url: str, machines: list[settings.Paths], timeout: float = 120) -> tuple[dict, dict]:
    """(emitted per run, stored per run), once every event emitted is stored (DAG runs' last events are sent after
    the run's state is final), or at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        sent, kept = per_run(emitted(machines)), per_run(stored(store_url))
        if all(set(events) <= set(kept.get(run, {})) for run, events in sent.items()):
            return sent, kept
        if time.monotonic() > deadline:
            return sent, kept
        time.sleep(3)


# -- the store's graph of the forecast, wherever the data lives

ML_STAGE_UID = re.compile(r"_[0-9a-f]{12}(?=_|$)")


def where_independent(namespace: str, name: str) -> str:
    """A dataset named without where it lives: an Iceberg table by its table name, a landed file by its path under
    the landing root, a model by its name, a source file by its path on the source server."""
    location = name if namespace == "file" else f"{namespace.rstrip('/')}/{name.lstrip('/')}"
    for marker, kind in (
        (f"/{settings.ICEBERG_NAMESPACE}/", "table"),
        ("/landing/", "landed"),
        ("/models/", "model"),
    ):
        if marker in location:
            return f"{kind}:{location.rsplit(marker, 1)[1]}"
    if namespace.startswith("http"):
        return f"source:{name}"
    return f"other:{location}"


def job_name(name: str) -> str:
    """A job's name with Spark ML's random stage ids (``0_OneHotEncoder_301a90944176_data``) taken out: a model's
    stages get new ids at every fit, on one machine as on several."""
    return ML_STAGE_UID.sub("_<stage>", name)


def node_key(node: dict) -> str:
    identity = node["data"]["id"]
    if node["type"] == "DATASET":
        return "dataset " + where_independent(identity["namespace"], identity["name"])
    return f"job {identity['namespace']}:{job_name(identity['name'])}"


@dataclass(frozen=True)
class Graph:
    nodes: frozenset
    edges: frozenset

    @classmethod
    def of(cls, marquez: dict) -> Graph:
        keys = {node["id"]: node_key(node) for node in marquez["graph"]}
        edges = {
            (keys[edge["origin"]], keys[edge["destination"]])
            for node in marquez["graph"]
            for edge in node["inEdges"] + node["outEdges"]
            if edge["origin"] in keys and edge["destination"] in keys
        }
        return cls(frozenset(keys.values()), frozenset(edges))


def forecast_graph(store_url: str, env: dict[str, str]) -> dict:
    """``lineage upstream <forecast> --json --all-history`` of a store: Marquez's lineage shape, every edge seen."""
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "lineage"), "upstream", FORECAST, "--json", "--all-history"]
        + ["--store", store_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=settings.PROJECT_ROOT,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)
