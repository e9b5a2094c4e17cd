"""What the project's local servers (the Iceberg REST catalog server, the Kafka broker) share: one per ``var/``,
started detached, known by a state file, started and stopped under a lock, recognised by their command line."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from include.core import settings
from include.core.errors import ServiceError


class JavaNotFoundError(ServiceError):
    """No JDK where the local services look for one."""


def java_tool(tool: str, service: str) -> str:
    """``tool`` (java, javac, jar) of ``$JAVA_HOME`` or on PATH; the error names the service that needed it."""
    java_home = settings.JAVA_HOME.raw()
    if java_home and (Path(java_home) / "bin" / tool).exists():
        return str(Path(java_home) / "bin" / tool)
    found = shutil.which(tool)
    if not found:
        raise JavaNotFoundError(f"{service}: `{tool}` not found on PATH (install a JDK 17, or set JAVA_HOME)")
    return found


def alive(pid: int, marker: str) -> bool:
    """The process exists and is ours: its command line holds ``marker`` (a reused pid is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return True


@contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Only one process of a ``var/`` starts or stops the service at a time."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_state(state_file: Path, state_type):
    """The state file as ``state_type`` (a dataclass), or None when missing or unreadable."""
    try:
        return state_type(**json.loads(state_file.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def running(state_file: Path, state_type, marker: str, healthy: Callable) -> object | None:
    """The state of the service of ``state_file`` when its process is ours and alive and ``healthy(state)``; else
    None."""
    state = read_state(state_file, state_type)
    if state and alive(state.pid, marker) and healthy(state):
        return state
    return None


def launch(
    command: list[str],
    log_path: Path,
    cwd: Path,
    prepare: Callable[[BinaryIO], None] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start ``command`` detached, its output appended to ``log_path``: in a session of its own, it outlives the
    command that started it (one server per ``var/``). ``prepare(log)`` runs first, writing to the same log. ``env``:
    its whole environment (None: this process's)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        if prepare is not None:
            prepare(log)
        return subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
            env=env,
        )


def wait_until_healthy(
    process: subprocess.Popen,
    healthy: Callable[[], bool],
    *,
    started: float,
    timeout: float,
    poll: float,
    name: str,
    address: str,
    log_path: Path,
    error: type[ServiceError],
) -> float:
    """Seconds from ``started`` (``time.monotonic()``) until ``healthy()``. ``error`` naming the service (``name``)
    and its log when the process exits first (with the log's tail), or when ``timeout`` passes (the process
    killed)."""
    deadline = started + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise error(
                f"{name} exited with code {process.returncode} while starting; log {log_path}:\n" + tail(log_path)
            )
        if healthy():
            return round(time.monotonic() - started, 2)
        time.sleep(poll)
    process.kill()
    raise error(f"{name} did not answer on {address} within {timeout:.0f}s; log {log_path}")


def port_taken(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def stop(lock_path: Path, state_file: Path, state_type, marker: str, timeout: float) -> bool:
    """SIGTERM the service of ``state_file`` (SIGKILL after ``timeout``) and forget it; True if one was running."""
    with exclusive(lock_path):
        state = read_state(state_file, state_type)
        state_file.unlink(missing_ok=True)
        if not state or not alive(state.pid, marker):
            return False
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive(state.pid, marker):
            time.sleep(0.1)
        if alive(state.pid, marker):
            os.kill(state.pid, signal.SIGKILL)
        return True
