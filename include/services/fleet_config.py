"""What `pipeline fleet` starts, and the environment each of its machines gets (include/services/fleet.py starts it).

The fleet stands for several machines on one: a control machine and two workers, each a ``var/`` of its own under
``<var>/fleet/`` (``control``, ``worker-a``, ``worker-b``: its own ``PIPELINE_VAR_DIR``, ``AIRFLOW_HOME``, logs,
Spark scratch and lineage outbox), sharing no folder. What one machine needs of another goes over the network:

- Airflow's metadata and Celery's results: PostgreSQL (Debian's, a cluster under ``control/postgres``);
- Celery's broker: Redis (Debian's ``redis-server``, with a password, nothing persisted);
- tables, landed files and models: an S3-compatible object store (moto's server), bucket ``fleet``: the warehouse
  (``ICEBERG_WAREHOUSE``), ``PIPELINE_LANDING_URI`` and ``PIPELINE_MODELS_URI``, reached at ``S3_ENDPOINT``;
- the Iceberg REST catalog (the project's server, ``ICEBERG_CATALOG_URI`` for every other machine);
- lineage: ``lineage serve`` on PostgreSQL with bearer tokens, fed through the spooling transport
  (``AIRFLOW__OPENLINEAGE__TRANSPORT``); each machine keeps a copy of what it sent in its own
  ``var/lineage/events.jsonl`` (the store never reads it: an audit trail, and what the fleet test counts against).

A secret reaches a machine as a file in its own ``var/secrets/`` (mode 600), never in an environment or a command
line: Airflow reads the database, broker and result-backend URLs through ``_CMD`` options, every machine's
airflow.cfg carries the same ``[api_auth] jwt_secret`` and fernet key, and each worker's lineage tokens file holds the
control machine's ``write`` token. The object store's keys are the standard AWS variables, as for the ``s3://``
warehouse.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from include.core import ports, settings
from include.core.private_file import kept_secrets, write_private

CONTROL = "control"
WORKERS = ("worker-a", "worker-b")
SHARED_QUEUE = "default"  # every worker serves it; each also serves a queue of its own name
BUCKET = "fleet"
HOST = "127.0.0.1"
# A task whose worker died is noticed after this many seconds without a heartbeat and retried (Airflow's default, 300,
# would keep a killed worker's task "running" for five minutes).
HEARTBEAT_TIMEOUT_SECONDS = 30
# The variables of the machine `pipeline fleet` runs on that name its own var/: each machine of the fleet has its own.
MACHINE_VARIABLES = (
    "AIRFLOW_HOME",
    "AIRFLOW_CONFIG",
    "PIPELINE_VAR_DIR",
    "ICEBERG_REST_PORT",
    "ICEBERG_CATALOG_URI",
    "ICEBERG_CATALOG_TYPE",
    "AIRFLOW_METADATA_DB",
    "AIRFLOW_METADATA_DB_PORT",
)
PORT_NAMES = ("postgres", "redis", "s3", "catalog", "lineage", "api", "source")


def root(paths: settings.Paths | None = None) -> Path:
    """The fleet's folder: ``<var>/fleet``, one folder per machine in it."""
    return (paths or settings.Paths.current()).var / "fleet"


def machine(fleet_root: Path, name: str) -> settings.Paths:
    return settings.Paths(fleet_root / name)


def worker_queue(worker: str) -> str:
    """The Celery queue only ``worker`` serves (beside the shared ``default``)."""
    return worker


@dataclass
class Topology:
    """The fleet's ports (chosen free once, kept in ``ports.json``) and secrets (``control/secrets/fleet.json``)."""

    root: Path
    ports: dict[str, int] = field(default_factory=dict)
    redis_password: str = ""
    lineage_password: str = ""
    s3_access_key: str = ""
    s3_secret_key: str = ""
    sample_data: bool = False  # the sources are the fleet's sample-file server (`--sample-data`), not TLC and NOAA

    @classmethod
    def load(cls, fleet_root: Path) -> Topology:
        fleet_root.mkdir(parents=True, exist_ok=True)
        record = fleet_root / "ports.json"
        chosen = json.loads(record.read_text()) if record.exists() else {}
        for name in PORT_NAMES:
            chosen.setdefault(name, ports.free_port(HOST))
        record.write_text(json.dumps(chosen, indent=2) + "\n")
        made = {
            "redis_password": secrets.token_hex(16),
            "lineage_password": secrets.token_hex(16),
            "s3_access_key": "AKIA" + secrets.token_hex(8).upper(),
            "s3_secret_key": secrets.token_urlsafe(30),
        }
        values = kept_secrets(
            machine(fleet_root, CONTROL).secrets / "fleet.json",
            made,
            "the fleet's services keep the old ones: `pipeline fleet stop`, delete it",
        )
        return cls(fleet_root, chosen, **values)

    def url(self, name: str) -> str:
        return f"http://{HOST}:{self.ports[name]}"

    @property
    def broker_url(self) -> str:
        return f"redis://:{self.redis_password}@{HOST}:{self.ports['redis']}/0"

    @property
    def warehouse(self) -> str:
        return f"s3://{BUCKET}/warehouse"

    def shared_environment(self) -> dict[str, str]:
        """What every machine sets: where the shared services are (no secret but the object store's keys)."""
        return {
            "ICEBERG_CATALOG_TYPE": "rest",
            "ICEBERG_WAREHOUSE": self.warehouse,
            "S3_ENDPOINT": self.url("s3"),
            "AWS_ACCESS_KEY_ID": self.s3_access_key,
            "AWS_SECRET_ACCESS_KEY": self.s3_secret_key,
            "AWS_REGION": "us-east-1",
            "PIPELINE_LANDING_URI": f"s3://{BUCKET}/landing",
            "PIPELINE_MODELS_URI": f"s3://{BUCKET}/models",
            **(
                {"TLC_BASE_URL": f"{self.url('source')}/trip-data", "NOAA_BASE_URL": f"{self.url('source')}/averages"}
                if self.sample_data
                else {}
            ),
        }

    def describe(self) -> dict:
        return {"root": str(self.root), "ports": self.ports, "warehouse": self.warehouse}


def lineage_transport(paths: settings.Paths, lineage_url: str) -> str:
    """``[openlineage] transport`` of a machine: ``lineage serve`` through the spooling transport (its spool in this
    machine's ``var/lineage/spool/``), and a copy of every event in this machine's ``var/lineage/events.jsonl``."""
    return json.dumps(
        {
            "type": "composite",
            "continue_on_failure": True,
            "transports": [
                {"type": "file", "log_file_path": str(paths.lineage_events), "append": True},
                {
                    "type": "include.lineage.emit.spool.SpoolingTransport",
                    "timeout": 0.5,
                    "inner": {
                        "type": "http",
                        "url": lineage_url,
                        "endpoint": "api/v1/lineage",
                        "timeout": 5,
                        "auth": {"type": "include.lineage.emit.tokens.LineageServeTokenProvider"},
                    },
                },
            ],
        }
    )


def secret_file(paths: settings.Paths, name: str) -> Path:
    return paths.secrets / f"fleet-{name}.url"


def provision(paths: settings.Paths, topology: Topology, metadata_url: str, writer_token: str, shared: dict) -> None:
    """A machine's own copy of the secrets it needs (files of mode 600 in its ``var/secrets/``): the database and
    broker URLs, the Airflow secrets every component shares (its airflow.cfg is made from them) and the lineage
    ``write`` token."""
    paths.secrets.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.secrets, 0o700)
    write_private(settings.metadata_db_url_file(paths), metadata_url)
    write_private(secret_file(paths, "broker"), topology.broker_url)
    write_private(secret_file(paths, "results"), "db+" + metadata_url)
    write_private(paths.secrets / "airflow.json", json.dumps(shared, indent=2))
    tokens = {"tokens": [{"name": "writer", "scopes": ["write"], "token": writer_token}]}
    if paths.var.name != CONTROL:  # the control machine keeps its own file: lineage serve reads every token there
        write_private(paths.secrets / "lineage-tokens.json", json.dumps(tokens, indent=2) + "\n")


def environment(paths: settings.Paths, topology: Topology) -> dict[str, str]:
    """The whole environment of one machine's processes: this process's, without what names its own ``var/`` (an
    Airflow option exported before `pipeline fleet start` reaches every machine); the machine's ``var/`` and Airflow
    home; the shared services; Airflow with the CeleryExecutor."""
    base = {name: value for name, value in os.environ.items() if name not in MACHINE_VARIABLES}
    cat = lambda path: f"cat {shlex.quote(str(path))}"  # noqa: E731
    env = {
        **base,
        **topology.shared_environment(),
        "PIPELINE_VAR_DIR": str(paths.var),
        "ICEBERG_CATALOG_URI": topology.url("catalog"),
        "AIRFLOW_METADATA_DB": "postgres",
        **settings.airflow_env(paths),
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL_CMD": cat(secret_file(paths, "broker")),
        "AIRFLOW__CELERY__RESULT_BACKEND_CMD": cat(secret_file(paths, "results")),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{topology.url('api')}/execution/",
        "AIRFLOW__API__PORT": str(topology.ports["api"]),
        "AIRFLOW__API__BASE_URL": topology.url("api"),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": lineage_transport(paths, topology.url("lineage")),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_SECONDS),
        "AIRFLOW__OPERATORS__DEFAULT_QUEUE": SHARED_QUEUE,
    }
    return env


@dataclass
class Component:
    """One long-running process of the fleet: its machine, command and log; ``pid`` once started (the leader of a
    session of its own: everything it starts is in that session)."""

    name: str
    machine: str
    command: list[str]
    log: str
    pid: int | None = None
    started_at: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)
