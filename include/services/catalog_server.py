"""The local Iceberg REST catalog server: one per ``var/``, started when missing, bound to 127.0.0.1 only.

It is Apache Iceberg's reference REST adapter (``iceberg-core``'s test artifact, as in the project's Docker image of
``apache/iceberg-rest-fixture``) behind a small launcher of the project's own (``include/services/java/``) that binds one
address and keeps the backend catalog's name, over the JDBC catalog file that earlier versions used directly
(``var/catalog/iceberg_catalog.db``), so an existing ``var/`` keeps its tables. Every Spark job and pyiceberg talk
to it over HTTP: concurrent writers are serialised by one process with one JDBC connection instead of fighting over
SQLite's lock, and the OpenLineage Spark listener names its tables (it has a handler for ``type=rest``).

State lives in ``var/catalog/``: ``rest-server.json`` (pid, address), ``rest-server.properties`` (the backend's
properties, mode 600: they may carry credentials) and the log ``var/logs/catalog-server.log``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from include.core import settings
from include.core.errors import ServiceError
from include.core.private_file import write_private
from include.services import local_service

LAUNCHER_SOURCE = Path(__file__).resolve().parent / "java" / "LocalRestCatalogServer.java"
LAUNCHER_CLASS = "LocalRestCatalogServer"
START_TIMEOUT_SECONDS = 90.0
SERVER_HEAP = "384m"


class CatalogServerError(ServiceError):
    pass


@dataclass(frozen=True)
class ServerState:
    pid: int
    host: str
    port: int
    catalog_name: str
    started_at: float
    start_seconds: float

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"


def _state_file(paths: settings.Paths) -> Path:
    return paths.catalog_dir / "rest-server.json"


def _properties_file(paths: settings.Paths) -> Path:
    return paths.catalog_dir / "rest-server.properties"


def log_file(paths: settings.Paths) -> Path:
    return paths.logs / "catalog-server.log"


def _java(tool: str) -> str:
    return local_service.java_tool(tool, "catalog server")


def launcher_jar() -> Path:
    """The launcher compiled once per source version into ``jars/`` (cached like the Maven jars)."""
    from include.core import jars

    digest = hashlib.sha256(LAUNCHER_SOURCE.read_bytes()).hexdigest()[:12]
    target = settings.JARS_DIR / f"local-rest-catalog-server-{digest}.jar"
    if target.exists():
        return target
    classpath = os.pathsep.join(str(path) for path in jars.jar_paths(jars.CATALOG_SERVER))
    with tempfile.TemporaryDirectory() as build:
        subprocess.run([_java("javac"), "-d", build, "-cp", classpath, str(LAUNCHER_SOURCE)], check=True)
        partial = target.with_suffix(".part")
        subprocess.run([_java("jar"), "cf", str(partial), "-C", build, "."], check=True)
        os.replace(partial, target)
    return target


def backend_properties(paths: settings.Paths, catalog: settings.CatalogSettings) -> dict[str, str]:
    """Properties of the JDBC catalog behind the server."""
    backend = catalog.rest_backend_uri or f"jdbc:sqlite:{paths.catalog_dir / 'iceberg_catalog.db'}"
    properties = {"uri": backend, "warehouse": catalog.warehouse, "jdbc.schema-version": "V1"}
    if backend.startswith("jdbc:sqlite:"):
        # One connection: the server serialises its own commits, and other processes' readers never block them.
        properties.update({"clients": "1", "jdbc.busy_timeout": "30000", "jdbc.journal_mode": "WAL"})
    if catalog.user:
        properties["jdbc.user"] = catalog.user
    if catalog.password:
        properties["jdbc.password"] = catalog.password
    if catalog.warehouse.startswith("s3"):
        properties["io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
        # The server's iceberg-aws 1.11 knows the "apache" and "urlconnection" HTTP clients; the pinned
        # iceberg-aws-bundle 1.12 ships Apache 5's instead, so the AWS SDK's url-connection-client jar is added.
        properties["http-client.type"] = "urlconnection"
        if catalog.s3_endpoint:
            properties.update({"s3.endpoint": catalog.s3_endpoint, "s3.path-style-access": "true"})
    return properties


def _properties_text(properties: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\:").replace("=", "\\=")

    return "".join(f"{escape(key)}={escape(value)}\n" for key, value in sorted(properties.items()))


def is_healthy(endpoint: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/v1/config", timeout=timeout) as response:
            return response.status == 200 and "endpoints" in json.loads(response.read() or b"{}")
    except (OSError, ValueError, urllib.error.URLError):
        return False


SERVER_MARKER = "LocalRestCatalogServer"


def _lock_file(paths: settings.Paths) -> Path:
    return paths.catalog_dir / "rest-server.lock"


def _exclusive(paths: settings.Paths):
    return local_service.exclusive(_lock_file(paths))


def read_state(paths: settings.Paths) -> ServerState | None:
    return local_service.read_state(_state_file(paths), ServerState)


def running(paths: settings.Paths | None = None) -> ServerState | None:
    paths = paths or settings.Paths.current()
    return local_service.running(
        _state_file(paths), ServerState, SERVER_MARKER, lambda state: is_healthy(state.endpoint)
    )


def ensure_running(
    paths: settings.Paths | None = None, catalog: settings.CatalogSettings | None = None
) -> ServerState | None:
    """Start this ``var/``'s server unless it runs; a no-op when the catalog is not the local REST server."""
    paths = (paths or settings.Paths.current()).ensure()
    catalog = catalog or settings.CatalogSettings.current(paths)
    if not catalog.is_local_rest_server:
        return None
    with _exclusive(paths):
        state = running(paths)
        if state:
            if state.port != catalog.rest_port:
                raise CatalogServerError(
                    f"catalog server of {paths.var} runs on port {state.port}, but ICEBERG_REST_PORT is "
                    f"{catalog.rest_port}: stop it (`pipeline catalog stop`) or set ICEBERG_REST_PORT={state.port}"
                )
            return state
        return _start(paths, catalog)


def _start(paths: settings.Paths, catalog: settings.CatalogSettings) -> ServerState:
    host, port = settings.LOCAL_REST_HOST, catalog.rest_port
    endpoint = f"http://{host}:{port}"
    if is_healthy(endpoint, timeout=0.5) or local_service.port_taken(host, port):
        raise CatalogServerError(
            f"port {port} on {host} is already in use by another process (not the catalog server of {paths.var}); "
            "set ICEBERG_REST_PORT to a free port"
        )
    if catalog.rest_backend_uri is None:
        (paths.catalog_dir).mkdir(parents=True, exist_ok=True)
    command = foreground_command(paths, catalog, host)
    missing = [path for path in command[command.index("-cp") + 1].split(os.pathsep) if not Path(path).exists()]
    if missing:
        raise CatalogServerError(f"catalog server: jars missing ({missing[0]} …); run `make setup`")
    log_path = log_file(paths)
    started = time.monotonic()
    process = local_service.launch(command, log_path, paths.var)
    seconds = local_service.wait_until_healthy(
        process,
        lambda: is_healthy(endpoint, timeout=0.5),
        started=started,
        timeout=START_TIMEOUT_SECONDS,
        poll=0.2,
        name="catalog server",
        address=endpoint,
        log_path=log_path,
        error=CatalogServerError,
    )
    state = ServerState(process.pid, host, port, catalog.name, time.time(), seconds)
    write_private(_state_file(paths), json.dumps(asdict(state)))
    return state


def foreground_command(paths: settings.Paths, catalog: settings.CatalogSettings, host: str) -> list[str]:
    """The server's command bound to ``host``: 127.0.0.1 for the local server, 0.0.0.0 for docker-compose's catalog
    service on its own network (run in the foreground there). Its backend properties file is written first."""
    from include.core import jars

    write_private(_properties_file(paths), _properties_text(backend_properties(paths, catalog)))
    classpath = os.pathsep.join(str(path) for path in [*jars.jar_paths(jars.CATALOG_SERVER), launcher_jar()])
    return [
        _java("java"),
        f"-Xmx{SERVER_HEAP}",
        "-cp",
        classpath,
        LAUNCHER_CLASS,
        host,
        str(catalog.rest_port),
        catalog.name,
        str(_properties_file(paths)),
    ]


def stop(paths: settings.Paths | None = None, timeout: float = 20.0) -> bool:
    """Stop this ``var/``'s server; True if one was running."""
    paths = paths or settings.Paths.current()
    return local_service.stop(_lock_file(paths), _state_file(paths), ServerState, SERVER_MARKER, timeout)


def memory_rss_kib(state: ServerState) -> int | None:
    try:
        for line in Path(f"/proc/{state.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
