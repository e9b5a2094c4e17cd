"""The one way the project chooses a free TCP port for a server it starts later (the catalog, Kafka, PostgreSQL).

A port taken from ``bind(port 0)`` comes from the kernel's *ephemeral* range (Linux: 32768–60999,
``/proc/sys/net/ipv4/ip_local_port_range``), the same range the kernel draws the local port of every outgoing
connection from. Between choosing the port and the server binding it (seconds: a JVM starting), any client on the
machine — a Spark driver calling the catalog, Airflow calling its API — may be given that very port for its own
connection, and the server then fails with "Address already in use". It happened in the suite: Kafka's broker lost
its port to a connection while three workers ran DAGs (Trap 34 in docs/versions-and-traps.md). So the port is drawn
at random from below the ephemeral range, where the kernel never places an outgoing connection, and checked free by
binding it; a clash with another server choosing at the same moment is left to chance over some 20,000 ports.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# For a kernel whose range cannot be read (/proc not mounted, another OS): Linux's default range and IANA's
# (49152–65535: macOS, Windows) together
DEFAULT_EPHEMERAL_RANGE = (32768, 65535)
# Below this are the well-known and the commonly configured ports (PostgreSQL's 5432, Airflow's 8080, Kafka's 9092)
LOWEST_CHOSEN = 10000
# A range this small leaves no room to draw from at random; the kernel's own choice is then better than none
SMALLEST_USEFUL_RANGE = 1000
ATTEMPTS = 50
# Ports this process has handed out: a caller often chooses several before starting any server (the Airflow of a
# test: API, log servers, PostgreSQL), and a random draw, unlike the kernel's, could repeat one
_handed_out: set[int] = set()


def ephemeral_range(range_file: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's range of ports for outgoing connections (inclusive); ``DEFAULT_EPHEMERAL_RANGE`` when it cannot be
    read."""
    try:
        low, high = (int(value) for value in range_file.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL_RANGE
    if not 0 < low <= high < 65536:
        return DEFAULT_EPHEMERAL_RANGE
    return low, high


def candidate_ranges(ephemeral: tuple[int, int]) -> list[range]:
    """Where a server's port may be drawn from: the registered ports on either side of the ephemeral range, from
    ``LOWEST_CHOSEN`` up, each kept only when it is large enough to draw from."""
    low, high = ephemeral
    sides = [range(LOWEST_CHOSEN, min(low, 65536)), range(max(high + 1, LOWEST_CHOSEN), 65536)]
    return [side for side in sides if len(side) >= SMALLEST_USEFUL_RANGE]


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", range_file: Path = EPHEMERAL_RANGE_FILE) -> int:
    """A port on ``host`` that nothing is bound to now, outside the kernel's ephemeral range when there is room."""
    ranges = candidate_ranges(ephemeral_range(range_file))
    if ranges:
        for _ in range(ATTEMPTS):
            (side,) = random.choices(ranges, weights=[len(side) for side in ranges])
            port = random.randrange(side.start, side.stop)
            if port not in _handed_out and _bindable(host, port):
                _handed_out.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:  # no room, or all of it taken: the kernel's
        probe.bind((host, 0))
        return probe.getsockname()[1]
