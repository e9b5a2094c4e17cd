"""Which TCP sockets the processes of one ``var/`` listen on, read from the kernel (``/proc/net/tcp``, ``tcp6`` and
each process's file descriptors), sampled for as long as a command runs.

A process belongs to the ``var/`` when its environment names it (``PIPELINE_VAR_DIR``): task runners, spark-submit
and its JVM, the catalog server, the sample-file server, PostgreSQL (started through ``runuser``, which keeps the
environment); or when it descends from a given process (``pipeline ui``: Airflow's components rename themselves).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"
LOOPBACK_V4 = "0100007F"  # 127.0.0.1 as the kernel writes it (little-endian hex)
LOOPBACK_V6 = "00000000000000000000000001000000"  # ::1
IPV4_MAPPED_PREFIX = "0000000000000000FFFF0000"  # ::ffff:a.b.c.d


@dataclass(frozen=True)
class Listener:
    process: str  # the command line's first words
    address: str  # the kernel's hex form
    port: int

    @property
    def loopback(self) -> bool:
        address = self.address.removeprefix(IPV4_MAPPED_PREFIX)
        return address == LOOPBACK_V4 or address == LOOPBACK_V6

    @property
    def readable_address(self) -> str:
        address = self.address.removeprefix(IPV4_MAPPED_PREFIX)
        if len(address) == 8:
            return ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
        return "[" + address + "]"


def listening_inodes() -> dict[int, tuple[str, int]]:
    """Socket inode -> (hex address, port) of every listening TCP socket of the machine."""
    found: dict[int, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == LISTEN:
                address, port_hex = local.rsplit(":", 1)
                found[inode] = (address, int(port_hex, 16))
    return found


def _descendants(roots: Iterable[int]) -> set[int]:
    import psutil

    found: set[int] = set()
    for root in roots:
        try:
            parent = psutil.Process(root)
            found |= {root, *(child.pid for child in parent.children(recursive=True))}
        except psutil.NoSuchProcess:
            continue
    return found


def processes_of(var_dir: Path, roots: Iterable[int] = ()) -> Iterator[tuple[int, str]]:
    """The processes whose environment names ``var_dir``, and every descendant of ``roots``: Airflow's api-server,
    scheduler and triggerer rename themselves with setproctitle, which overwrites the memory /proc/PID/environ
    shows, so only their ancestry tells whose they are."""
    marker = f"PIPELINE_VAR_DIR={var_dir}".encode()
    family = _descendants(roots)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if int(entry.name) not in family and marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        yield int(entry.name), " ".join(command.split()[:3])[:160]


def socket_inodes_of(pid: int) -> Iterator[int]:
    """The inode of every socket process ``pid`` holds open (none when it is gone or not ours to read)."""
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return
    for descriptor in descriptors:
        try:
            target = os.readlink(descriptor)
        except OSError:
            continue
        if target.startswith("socket:["):
            yield int(target[len("socket:[") : -1])


def listeners_of(var_dir: Path, roots: Iterable[int] = ()) -> set[Listener]:
    sockets = listening_inodes()
    found: set[Listener] = set()
    for pid, command in processes_of(var_dir, roots):
        found.update(Listener(command, *sockets[inode]) for inode in socket_inodes_of(pid) if inode in sockets)
    return found


@contextlib.contextmanager
def sampled(var_dir: Path, every: float = 0.5, roots: Callable[[], Iterable[int]] = tuple) -> Iterator[set[Listener]]:
    """Every listener of ``var_dir``'s processes (and of the descendants of ``roots()``) seen while the block runs,
    sampled every ``every`` seconds."""
    seen: set[Listener] = set()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.update(listeners_of(var_dir, roots()))
            stop.wait(every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()
        seen.update(listeners_of(var_dir, roots()))


def pid_listening_on(port: int) -> int | None:
    """The process that listens on ``port`` (any address), read from the kernel, not from a state file."""
    inodes = {inode for inode, (_, listening_port) in listening_inodes().items() if listening_port == port}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and any(inode in inodes for inode in socket_inodes_of(int(entry.name))):
            return int(entry.name)
    return None


def all_threads_stopped(pid: int) -> bool:
    """Every thread of ``pid`` is in the stopped state (``T``, or ``t`` when traced): a SIGSTOP took effect."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            # the state is the field after the command's closing parenthesis (a command may hold spaces)
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    return bool(states) and all(state in ("T", "t") for state in states)
