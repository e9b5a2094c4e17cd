"""`pipeline fleet start|stop|status`: the whole pipeline on Airflow's CeleryExecutor, with two workers that share no
disk, on loopback (what the machines are and what they share: ``include/services/fleet_config.py``).

``start`` brings up, in order: PostgreSQL (Airflow's metadata, Celery's results, the lineage store), Redis (the
broker), the object store (moto's S3 server, bucket ``fleet``), the Iceberg REST catalog on it, ``lineage serve`` on
PostgreSQL with tokens, optionally the sample TLC/NOAA files (``--sample-data``), then Airflow's api-server, scheduler
and dag-processor on the control machine and one Celery worker per worker machine (queues ``default`` and its own
name). Each is started detached in a session of its own, its output in its machine's ``var/logs/fleet-<name>.log``,
and waited for until it answers. The fleet's state (ports, pids, endpoints) is ``<var>/fleet/fleet.json``; ``stop``
ends every process of every session (reverse order), ``status`` says what runs. ``kill_machine`` SIGKILLs every
process of one worker at once: a machine that died.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import requests

from include.core import settings
from include.core.errors import ServiceError
from include.services import catalog_server, local_service, postgres
from include.services.fleet_config import (
    BUCKET,
    CONTROL,
    HOST,
    SHARED_QUEUE,
    WORKERS,
    Component,
    Topology,
    environment,
    machine,
    provision,
    root,
    worker_queue,
)

START_TIMEOUT_SECONDS = 600  # a machine loaded by other work starts Airflow's components slowly
LINEAGE_ROLE = "lineage"


class FleetError(ServiceError):
    pass


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def state_file(fleet_root: Path) -> Path:
    return fleet_root / "fleet.json"


def read_state(fleet_root: Path) -> dict | None:
    try:
        return json.loads(state_file(fleet_root).read_text())
    except (OSError, ValueError):
        return None


def _write_state(fleet_root: Path, state: dict) -> None:
    state_file(fleet_root).write_text(json.dumps(state, indent=2) + "\n")


def _session_processes(leader: int) -> list:
    """The live processes of the session ``leader`` started (all a component started, whatever it renamed itself)."""
    import psutil

    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, ProcessLookupError):
            if os.getsid(process.pid) == leader and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def _alive(component: dict) -> bool:
    import psutil

    pid = component.get("pid")
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        return abs(process.create_time() - component["started_at"]) < 2 and process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def _signal_session(component: dict, signum: int) -> list:
    """Send ``signum`` to every process of the component's session; the processes signalled."""
    if not component.get("pid") or (not _alive(component) and not _session_processes(component["pid"])):
        return []
    processes = _session_processes(component["pid"])
    for process in processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signum)
    return processes


def _end(component: dict, grace: float) -> None:
    import psutil

    signalled = _signal_session(component, signal.SIGTERM)
    _, alive = psutil.wait_procs(signalled, timeout=grace)
    for process in alive + _session_processes(component["pid"]):
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


# -- starting


class _Starter:
    """Starts the components one after another, recording each in the state file as soon as it runs."""

    def __init__(self, fleet_root: Path, topology: Topology, say: Callable[[str], None]):
        self.root = fleet_root
        self.topology = topology
        self.say = say
        self.state = read_state(fleet_root) or {}
        self.state.update({"topology": topology.describe(), "components": self.state.get("components", [])})

    def env(self, name: str) -> dict[str, str]:
        return environment(machine(self.root, name), self.topology)

    def launch(
        self, component: Component, healthy: Callable[[], bool], address: str, extra_env: dict | None = None
    ) -> None:
        existing = next((c for c in self.state["components"] if c["name"] == component.name), None)
        if existing and _alive(existing) and healthy():
            self.say(f"fleet: {component.name} already runs ({address})")
            return
        paths = machine(self.root, component.machine)
        process = local_service.launch(
            component.command,
            Path(component.log),
            settings.PROJECT_ROOT,
            env={**self.env(component.machine), **(extra_env or {})},
        )
        import psutil

        component.pid, component.started_at = process.pid, psutil.Process(process.pid).create_time()
        self.state["components"] = [c for c in self.state["components"] if c["name"] != component.name]
        self.state["components"].append(component.as_dict())
        _write_state(self.root, self.state)
        seconds = local_service.wait_until_healthy(
            process,
            healthy,
            started=time.monotonic(),
            timeout=START_TIMEOUT_SECONDS,
            poll=1.0,
            name=f"fleet {component.name} ({paths.var.name})",
            address=address,
            log_path=Path(component.log),
            error=FleetError,
        )
        self.say(f"fleet: {component.name} on {component.machine} ready in {seconds:.0f} s ({address})")

    def component(self, name: str, node: str, command: list[str]) -> Component:
        log = machine(self.root, node).logs / f"fleet-{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        return Component(name, node, command, str(log))


def _port_answers(port: int) -> bool:
    return local_service.port_taken(HOST, port)


def _http_ok(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return requests.get(url, timeout=2).status_code < 500
        except requests.RequestException:
            return False

    return check


def _log_says(log: str, text: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return text in Path(log).read_text(errors="replace")
        except OSError:
            return False

    return check


def _airflow_healthy(url: str, parts: tuple[str, ...]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            health = requests.get(f"{url}/api/v2/monitor/health", timeout=5).json()
        except (requests.RequestException, ValueError):
            return False
        return all((health.get(part) or {}).get("status") == "healthy" for part in parts)

    return check


def _databases(fleet_root: Path, topology: Topology) -> tuple[str, str]:
    """PostgreSQL on the control machine (its metadata cluster, at the fleet's port), with the ``airflow`` database
    and role and the lineage store's; (metadata URL, lineage store URL)."""
    control = machine(fleet_root, CONTROL)
    control.ensure()
    record = control.var / "postgres.port"
    record.write_text(f"{topology.ports['postgres']}\n")
    database = postgres.ensure_metadata_db(control)
    cluster = postgres.metadata_cluster(control)
    cluster.ensure_role(LINEAGE_ROLE, topology.lineage_password)
    cluster.ensure_database(LINEAGE_ROLE, LINEAGE_ROLE)
    lineage_url = (
        f"postgresql+psycopg2://{LINEAGE_ROLE}:{topology.lineage_password}@{HOST}:{database.port}/{LINEAGE_ROLE}"
    )
    return database.url_file.read_text().strip(), lineage_url


def _prepare_machines(fleet_root: Path, topology: Topology, metadata_url: str, say) -> None:
    """Each machine's ``var/`` made as set-up makes one (airflow.cfg, the code zip, …) from its own secrets."""

    def set_up(paths: settings.Paths) -> None:
        subprocess.run(
            [sys.executable, "-m", "include.setup.bootstrap", "--no-db"],
            env=environment(paths, topology),
            check=True,
            cwd=settings.PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
        )

    control = machine(fleet_root, CONTROL)
    set_up(control)  # first alone: its secrets are the ones every machine shares
    shared = json.loads((control.secrets / "airflow.json").read_text())
    tokens = json.loads((control.secrets / "lineage-tokens.json").read_text())["tokens"]
    writer = next(token["token"] for token in tokens if "write" in token["scopes"])
    for name in (CONTROL, *WORKERS):
        paths = machine(fleet_root, name).ensure()
        provision(paths, topology, metadata_url, writer, shared)
        set_up(paths)
    say(f"fleet: machines {CONTROL}, {', '.join(WORKERS)} set up under {fleet_root}")


def _object_store(starter: _Starter) -> None:
    """moto's S3 server keeps objects in memory: started anew it is empty, and so must the catalog be whose tables'
    files were there (its SQLite database on the control machine is reset; the lineage store keeps its history)."""
    topology = starter.topology
    if not _http_ok(topology.url("s3"))():
        control = machine(starter.root, CONTROL)
        catalog_server.stop(control)
        for leftover in control.catalog_dir.glob("iceberg_catalog.db*"):
            leftover.unlink()
    starter.launch(
        starter.component("object-store", CONTROL, [_bin("moto_server"), "-H", HOST, "-p", str(topology.ports["s3"])]),
        _http_ok(topology.url("s3")),
        topology.url("s3"),
    )
    requests.put(f"{topology.url('s3')}/{BUCKET}", timeout=10)  # the bucket (moto takes any signature)


def _broker(starter: _Starter) -> None:
    topology = starter.topology
    folder = machine(starter.root, CONTROL).var / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "redis.conf"  # the password in a file of mode 600, not on the command line
    settings_text = (
        f"bind {HOST}\nport {topology.ports['redis']}\nrequirepass {topology.redis_password}\n"
        f'dir {folder}\nsave ""\nappendonly no\nprotected-mode yes\n'
    )
    from include.core.private_file import write_private

    write_private(config, settings_text)
    redis_server = _which("redis-server", "Debian's redis-server (include/setup/system_packages.sh redis)")
    starter.launch(
        starter.component("broker", CONTROL, [redis_server, str(config)]),
        lambda: _redis_ping(topology),
        f"redis://{HOST}:{topology.ports['redis']}",
    )


def _which(tool: str, what: str) -> str:
    import shutil

    found = shutil.which(tool)
    if not found:
        raise FleetError(f"fleet: `{tool}` not found: install {what}")
    return found


def _redis_ping(topology: Topology) -> bool:
    import redis

    try:
        client = redis.Redis(
            host=HOST, port=topology.ports["redis"], password=topology.redis_password, socket_timeout=2
        )
        return bool(client.ping())
    except redis.RedisError:
        return False


def _catalog(starter: _Starter) -> None:
    control = machine(starter.root, CONTROL)
    env = {**starter.env(CONTROL), "ICEBERG_REST_PORT": str(starter.topology.ports["catalog"])}
    env.pop("ICEBERG_CATALOG_URI")  # the control machine runs the server the others name by that URI
    subprocess.run(
        [_bin("pipeline"), "catalog", "start"],
        env=env,
        check=True,
        cwd=settings.PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
    )
    starter.say(
        f"fleet: Iceberg REST catalog on {CONTROL} ready ({starter.topology.url('catalog')}, log "
        f"{catalog_server.log_file(control)})"
    )


def _lineage_serve(starter: _Starter, store_url: str) -> None:
    topology = starter.topology
    component = starter.component(
        "lineage-serve", CONTROL, [_bin("lineage"), "serve", "--host", HOST, "--port", str(topology.ports["lineage"])]
    )
    # The store's URL (its password) in the server's environment only, never on a command line.
    healthy = _http_ok(f"{topology.url('lineage')}/api/v1/health")
    starter.launch(component, healthy, topology.url("lineage"), extra_env={"LINEAGE_STORE_URL": store_url})


def _sample_source(starter: _Starter, months: str, rows: int) -> None:
    port = starter.topology.ports["source"]
    command = [_bin("pipeline"), "sample-source", "--port", str(port), "--rows", str(rows), "--months", months]
    starter.launch(starter.component("sample-source", CONTROL, command), lambda: _port_answers(port), f"{HOST}:{port}")


def _airflow(starter: _Starter) -> None:
    api = starter.topology.url("api")
    subprocess.run(
        [sys.executable, "-m", "include.setup.bootstrap"],  # the metadata DB migrated, spark_default made
        env=starter.env(CONTROL),
        check=True,
        cwd=settings.PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
    )
    for name, command, parts in (
        ("api-server", ["api-server", "--port", str(starter.topology.ports["api"])], ("metadatabase",)),
        ("scheduler", ["scheduler"], ("metadatabase", "scheduler")),
        ("dag-processor", ["dag-processor"], ("metadatabase", "dag_processor")),
    ):
        starter.launch(starter.component(name, CONTROL, [_bin("airflow"), *command]), _airflow_healthy(api, parts), api)
    for worker in WORKERS:
        queues = f"{SHARED_QUEUE},{worker_queue(worker)}"
        command = [
            _bin("airflow"), "celery", "worker", "--queues", queues, "--concurrency", "1",
            "--celery-hostname", f"{worker}@fleet", "--skip-serve-logs", "--without-mingle", "--without-gossip",
        ]  # fmt: skip
        component = starter.component("celery-" + worker, worker, command)
        starter.launch(component, _log_says(component.log, f"{worker}@fleet ready"), f"queues {queues}")


def start(paths: settings.Paths | None = None, sample_months: str | None = None, rows: int = 20_000, say=print) -> dict:
    """Start the fleet (what runs already is kept); its state."""
    fleet_root = root(paths)
    topology = Topology.load(fleet_root)
    topology.sample_data = bool(sample_months)
    metadata_url, lineage_url = _databases(fleet_root, topology)
    say(f"fleet: PostgreSQL on {CONTROL} ready ({HOST}:{topology.ports['postgres']}: airflow, lineage)")
    _prepare_machines(fleet_root, topology, metadata_url, say)
    starter = _Starter(fleet_root, topology, say)
    _broker(starter)
    _object_store(starter)
    _catalog(starter)
    _lineage_serve(starter, lineage_url)
    if sample_months:
        _sample_source(starter, sample_months, rows)
    _airflow(starter)
    starter.state["endpoints"] = {
        "airflow": topology.url("api"),
        "lineage": topology.url("lineage"),
        "catalog": topology.url("catalog"),
        "object_store": topology.url("s3"),
        **({"sample_source": topology.url("source")} if sample_months else {}),
    }
    _write_state(fleet_root, starter.state)
    return starter.state


def stop(paths: settings.Paths | None = None, grace: float = 20.0) -> list[str]:
    """Stop every process of the fleet (workers first, PostgreSQL last); the names of what was running."""
    fleet_root = root(paths)
    state = read_state(fleet_root) or {}
    stopped = []
    for component in reversed(state.get("components", [])):
        if _alive(component) or _session_processes(component["pid"] or -1):
            _end(component, grace)
            stopped.append(component["name"])
    control = machine(fleet_root, CONTROL)
    if catalog_server.stop(control):
        stopped.append("catalog")
    if postgres.stop_metadata_db(control):
        stopped.append("postgres")
    if state:
        state["components"] = [{**c, "pid": None} for c in state.get("components", [])]
        _write_state(fleet_root, state)
    return stopped


def status(paths: settings.Paths | None = None) -> dict[str, bool]:
    """Each component of the fleet: running or not."""
    fleet_root = root(paths)
    state = read_state(fleet_root) or {}
    control = machine(fleet_root, CONTROL)
    running = {component["name"]: _alive(component) for component in state.get("components", [])}
    running["catalog"] = bool(catalog_server.running(control))
    running["postgres"] = postgres.Cluster(postgres.folder(control), 0).running() if state else False
    return running


def kill_machine(worker: str, paths: settings.Paths | None = None) -> list[int]:
    """SIGKILL every process of ``worker`` (its Celery worker and all it started: task supervisors, task runners,
    spark-submit and the Spark driver) at once, as a machine that lost power; the pids killed."""
    state = read_state(root(paths)) or {}
    killed = []
    for component in state.get("components", []):
        if component["machine"] == worker and component.get("pid"):
            killed += [process.pid for process in _signal_session(component, signal.SIGKILL)]
    return killed
