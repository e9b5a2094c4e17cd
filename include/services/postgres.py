"""PostgreSQL clusters of the project's own: Airflow's metadata database under ``make airflow``, and the tests' throwaway
clusters (a shared catalog, the lineage store on Postgres).

Debian's package (``include/setup/system_packages.sh`` installs it when missing; nothing else is installed) gives the
binaries; a cluster is made with ``initdb`` in a folder of the ``var/`` and run with ``pg_ctl``: TCP on 127.0.0.1 only
with password (SCRAM) authentication, its Unix socket in the folder with mode 700 (in a temporary folder of mode 700
when the folder's path is too long for a socket's), no system service involved.
PostgreSQL refuses to run as root: as root every server command runs as Debian's ``postgres`` user (``runuser``) and
the folder belongs to that user.

Airflow's metadata database (:func:`ensure_metadata_db`) is one cluster per ``var/``, like the catalog server: folder
``var/postgres/``, a port chosen free once (``var/postgres/port``, or ``AIRFLOW_METADATA_DB_PORT``), a role and a
database ``airflow`` whose generated password lives in ``var/secrets/postgres.json`` and whose SQLAlchemy URL lives in
``var/secrets/airflow-metadata-db.url`` (both mode 600). Airflow reads the URL through
``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD`` (``settings.airflow_env``): the password is in no environment, no
airflow.cfg and no command line, so it cannot reach a task's lineage.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from include.core import ports, settings
from include.core.errors import ServiceError
from include.core.private_file import read_secrets, write_private
from include.services import local_service

HOST = "127.0.0.1"
METADATA_ROLE = "airflow"
METADATA_DATABASE = "airflow"
START_TIMEOUT_SECONDS = 60
# sun_path is 108 bytes on Linux, its NUL included; the server adds "/.s.PGSQL.<port>" (and ".lock") to the folder.
SOCKET_PATH_LIMIT = 107
SOCKET_NAME_ROOM = len("/.s.PGSQL.65535.lock")


class PostgresError(ServiceError):
    pass


def binary(tool: str) -> str | None:
    """A PostgreSQL program: on PATH, or under Debian's ``/usr/lib/postgresql/<version>/bin`` (kept off PATH)."""
    found = shutil.which(tool)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"), key=_version_key, reverse=True)
    return versions[0] if versions else None


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parents[1].name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def available() -> bool:
    return all(binary(tool) for tool in ("initdb", "pg_ctl", "postgres"))


@dataclass
class Cluster:
    """One PostgreSQL cluster: data in ``folder/data``, socket in ``folder/sockets``, log ``folder/server.log``."""

    folder: Path
    port: int

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def sockets(self) -> Path:
        """``folder/sockets``, or, where that path is too long for a Unix socket (a checkout deep in a CI runner's
        tree), a folder in the system's temporary directory named after the cluster's folder."""
        beside = self.folder / "sockets"
        if len(os.fsencode(beside)) + SOCKET_NAME_ROOM <= SOCKET_PATH_LIMIT:
            return beside
        digest = hashlib.sha256(os.fsencode(self.folder.resolve())).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"pipeline-pg-{digest}"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0

    @property
    def initialized(self) -> bool:
        return (self.data / "PG_VERSION").exists()

    def _tool(self, name: str) -> str:
        found = binary(name)
        if not found:
            raise PostgresError(
                f"PostgreSQL's `{name}` was not found (on PATH or under /usr/lib/postgresql/*/bin): install Debian's "
                "postgresql package (include/setup/system_packages.sh does, as root), or set AIRFLOW_METADATA_DB=sqlite"
            )
        return found

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        completed = subprocess.run([*prefix, *command], capture_output=True, text=True)
        if check and completed.returncode != 0:
            raise PostgresError(
                f"`{Path(command[0]).name} {' '.join(command[1:3])}` failed with code {completed.returncode} "
                f"(cluster {self.data}; log {self.log}):\n{(completed.stderr or completed.stdout)[-2000:]}\n"
                + local_service.tail(self.log)
            )
        return completed

    def _private_folders(self) -> None:
        """The cluster's folder and its socket folder, mode 700, the server's user's (the socket may live in /tmp,
        which a cleaner may empty between runs)."""
        for folder in (self.folder, self.sockets):
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
            if self.as_root:
                shutil.chown(folder, "postgres", "postgres")

    def init(self) -> Cluster:
        """``initdb`` when the folder holds no cluster yet: superuser ``postgres`` over the socket, SCRAM over TCP."""
        if self.initialized:
            return self
        self._private_folders()
        self._run(
            self._tool("initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth-local=trust",  # only the folder's owner reaches the socket (mode 700)
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--no-instructions",
        )
        return self

    def running(self) -> bool:
        return (
            self.initialized
            and self._run(self._tool("pg_ctl"), "-D", str(self.data), "status", check=False).returncode == 0
        )

    def running_port(self) -> int | None:
        """The port of the running server, from ``postmaster.pid`` (its fourth line)."""
        try:
            lines = (self.data / "postmaster.pid").read_text().splitlines()
            return int(lines[3])
        except (OSError, IndexError, ValueError):
            return None

    def start(self, durable: bool = True) -> Cluster:
        """Start the server unless it runs; ``durable=False`` (throwaway clusters) turns fsync off."""
        if self.running():
            return self
        self._private_folders()
        if local_service.port_taken(HOST, self.port):
            raise PostgresError(
                f"port {self.port} on {HOST} is already in use by another process; set AIRFLOW_METADATA_DB_PORT to a "
                f"free port, or delete {self.folder / 'port'} to choose a new one"
            )
        options = [
            "-c listen_addresses=127.0.0.1",
            f"-p {self.port}",
            f"-k {self.sockets}",
            "-c unix_socket_permissions=0700",
            "-c max_connections=200",  # every Airflow process keeps a pool, a sync and an async one
            # A commit returns before its WAL reaches the disk: a crash loses the last moments, never consistency.
            "-c synchronous_commit=off",
        ]
        if not durable:
            options.append("-c fsync=off")
        self._run(
            self._tool("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            " ".join(options),
            "-l",
            str(self.log),
            "-t",
            str(START_TIMEOUT_SECONDS),
            "-w",
            "start",
        )
        return self

    def stop(self) -> bool:
        """Fast shutdown (open sessions are ended); True if it was running."""
        if not self.running():
            return False
        self._run(self._tool("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        return True

    def connect_superuser(self, database: str = "postgres"):
        import psycopg2

        connection = psycopg2.connect(host=str(self.sockets), port=self.port, dbname=database, user="postgres")
        connection.autocommit = True
        return connection

    def sql(self, statement: str, parameters: tuple = (), database: str = "postgres") -> list[tuple]:
        """One statement as the superuser, over the socket, outside a transaction (CREATE DATABASE needs that)."""
        connection = self.connect_superuser(database)
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement, parameters)
                return cursor.fetchall() if cursor.description else []
        finally:
            connection.close()

    def ensure_role(self, name: str, password: str) -> None:
        """The login role ``name`` with ``password`` (set again when it exists: the secret file is the truth)."""
        from psycopg2 import sql

        exists = self.sql("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
        verb = "ALTER" if exists else "CREATE"
        statement = sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), sql.Literal(password))
        connection = self.connect_superuser()
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement)
        finally:
            connection.close()

    def ensure_database(self, name: str, owner: str) -> None:
        from psycopg2 import sql

        if self.sql("SELECT 1 FROM pg_database WHERE datname = %s", (name,)):
            return
        connection = self.connect_superuser()
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(owner))
                )
        finally:
            connection.close()


# -- Airflow's metadata database, one cluster per var/


def folder(paths: settings.Paths) -> Path:
    return paths.var / "postgres"


def _lock_file(paths: settings.Paths) -> Path:
    return paths.var / "postgres.lock"  # outside the folder: the folder belongs to the postgres user as root


def secrets_file(paths: settings.Paths) -> Path:
    return paths.secrets / "postgres.json"


def _port(paths: settings.Paths) -> int:
    if settings.AIRFLOW_METADATA_DB_PORT.raw():
        return settings.AIRFLOW_METADATA_DB_PORT.port()
    record = paths.var / "postgres.port"
    if not record.exists():
        record.write_text(f"{ports.free_port(HOST)}\n")
    text = record.read_text().strip()
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise settings.SettingError(f"{record}: {text!r} is not a TCP port; delete the file to choose a new one")
    return int(text)


def metadata_cluster(paths: settings.Paths) -> Cluster:
    return Cluster(folder(paths), _port(paths))


def _password(paths: settings.Paths) -> str:
    """The ``airflow`` role's password, generated once per ``var/`` and kept with mode 600."""
    path = secrets_file(paths)
    stored = read_secrets(
        path,
        ("airflow_password",),
        f"the database in {folder(paths)} keeps the old password (delete that folder too to start it anew, empty)",
    ).get("airflow_password")
    if stored:
        return stored
    password = secrets.token_hex(24)  # URL-safe: it goes into a SQLAlchemy URL unquoted
    write_private(path, json.dumps({"airflow_password": password}, indent=2))
    return password


@dataclass(frozen=True)
class MetadataDb:
    port: int
    url_file: Path
    started_seconds: float  # 0 when it was running already
    created: bool  # the cluster was made by this call

    @property
    def endpoint(self) -> str:
        return f"postgresql://{HOST}:{self.port}/{METADATA_DATABASE}"


def ensure_metadata_db(paths: settings.Paths | None = None) -> MetadataDb:
    """This ``var/``'s metadata cluster, made and started unless it runs, with its role, database and URL file."""
    paths = (paths or settings.Paths.current()).ensure()
    started = time.monotonic()
    with local_service.exclusive(_lock_file(paths)):
        cluster = metadata_cluster(paths)
        created = not cluster.initialized
        was_running = cluster.running()
        if not was_running:
            cluster.init().start()
        port = cluster.running_port() or cluster.port
        cluster.port = port
        password = _password(paths)
        if created or not was_running:
            cluster.ensure_role(METADATA_ROLE, password)
            cluster.ensure_database(METADATA_DATABASE, METADATA_ROLE)
        url = f"postgresql+psycopg2://{METADATA_ROLE}:{password}@{HOST}:{port}/{METADATA_DATABASE}"
        url_file = settings.metadata_db_url_file(paths)
        if not url_file.exists() or url_file.read_text() != url:
            write_private(url_file, url)
        return MetadataDb(port, url_file, 0.0 if was_running else round(time.monotonic() - started, 2), created)


def stop_metadata_db(paths: settings.Paths | None = None) -> bool:
    paths = paths or settings.Paths.current()
    cluster = Cluster(folder(paths), 0)
    if not cluster.initialized:
        return False
    with local_service.exclusive(_lock_file(paths)):
        return cluster.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m include.services.postgres stop|status``: this ``var/``'s metadata cluster (``make clean`` stops it)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m include.services.postgres", description=main.__doc__)
    parser.add_argument("action", choices=["stop", "status"])
    options = parser.parse_args(argv)
    paths = settings.Paths.current()
    cluster = Cluster(folder(paths), 0)
    if options.action == "stop":
        print("postgres: stopped" if stop_metadata_db(paths) else f"postgres: none running for {paths.var}")
        return 0
    if cluster.running():
        print(f"postgres: running on {HOST}:{cluster.running_port()} ({cluster.data})")
        return 0
    print(f"postgres: not running ({cluster.data})")
    return 1


if __name__ == "__main__":
    import sys

    sys.exit(main())
