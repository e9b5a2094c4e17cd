"""include/core/ports.py: a server's port is drawn from outside the kernel's ephemeral range, so no outgoing
connection can take it between its choice and the server's bind (the suite's Kafka broker lost its port that way)."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from include.core import ports


def _held(port: int) -> socket.socket:
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    return holder


def test_outgoing_connections_and_port_zero_are_given_ports_of_the_ephemeral_range():
    """The premise, on this machine's real kernel: what ``bind(port 0)`` gave before is exactly where the kernel puts
    the local end of every outgoing connection."""
    low, high = ports.ephemeral_range()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        assert low <= listener.getsockname()[1] <= high
        clients = [socket.create_connection(listener.getsockname()) for _ in range(20)]
        try:
            assert all(low <= client.getsockname()[1] <= high for client in clients)
        finally:
            for client in clients:
                client.close()


def test_every_chosen_port_is_outside_the_ephemeral_range_and_free():
    low, high = ports.ephemeral_range()
    chosen = [ports.free_port() for _ in range(200)]
    assert all(not low <= port <= high and port >= ports.LOWEST_CHOSEN for port in chosen)
    for port in chosen[:20]:
        _held(port).close()  # nothing was bound there
    assert len(set(chosen)) > 150, "drawn at random, so two var/s choosing at once rarely meet"


def test_a_port_already_handed_out_by_this_process_is_not_handed_out_again(monkeypatch):
    """Several are often chosen before any server binds one; the kernel's sequence never repeated, a draw could."""
    first = ports.free_port()
    drawn = []
    real_randrange = ports.random.randrange

    def draw(start, stop):  # the first port again, then the real draw
        drawn.append(first if not drawn else real_randrange(start, stop))
        return drawn[-1]

    monkeypatch.setattr(ports.random, "randrange", draw)
    assert ports.free_port() != first
    assert drawn[0] == first and len(drawn) >= 2


def test_a_port_someone_holds_is_never_chosen(monkeypatch):
    held = _held(ports.free_port())
    taken = held.getsockname()[1]
    monkeypatch.setattr(ports, "_handed_out", set())  # held by another process, as far as this one knows
    drawn = []
    real_randrange = ports.random.randrange

    def draw(start, stop):  # the held port twice, then the real draw
        drawn.append(taken if len(drawn) < 2 else real_randrange(start, stop))
        return drawn[-1]

    monkeypatch.setattr(ports.random, "randrange", draw)
    try:
        assert ports.free_port() != taken
        assert drawn[:2] == [taken, taken] and len(drawn) >= 3
    finally:
        held.close()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("32768\t60999\n", (32768, 60999)),
        ("49152 65535", (49152, 65535)),
        ("1024 65535", (1024, 65535)),
        (None, ports.DEFAULT_EPHEMERAL_RANGE),  # no such file: another OS, /proc not mounted
        ("", ports.DEFAULT_EPHEMERAL_RANGE),
        ("garbage", ports.DEFAULT_EPHEMERAL_RANGE),
        ("1 2 3", ports.DEFAULT_EPHEMERAL_RANGE),
        ("60999 32768", ports.DEFAULT_EPHEMERAL_RANGE),  # reversed
        ("0 100", ports.DEFAULT_EPHEMERAL_RANGE),
        ("40000 70000", ports.DEFAULT_EPHEMERAL_RANGE),
        ("-5 10", ports.DEFAULT_EPHEMERAL_RANGE),
        ("\x00\xff", ports.DEFAULT_EPHEMERAL_RANGE),
    ],
)
def test_the_ephemeral_range_is_read_or_a_default_covering_linux_and_iana(tmp_path, content, expected):
    range_file = tmp_path / "ip_local_port_range"
    if content is not None:
        range_file.write_text(content)
    assert ports.ephemeral_range(range_file) == expected


def test_the_default_range_leaves_only_ports_below_linuxs_and_ianas_ranges(tmp_path):
    assert ports.candidate_ranges(ports.ephemeral_range(tmp_path / "missing")) == [range(ports.LOWEST_CHOSEN, 32768)]


def test_with_no_room_outside_the_range_the_kernels_own_choice_is_taken(tmp_path):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("1024 65535")
    assert ports.candidate_ranges(ports.ephemeral_range(range_file)) == []
    _held(ports.free_port(range_file=range_file)).close()


def test_a_range_high_in_the_port_space_leaves_the_ports_below_it(tmp_path):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("49152 65535")  # the IANA range (macOS, Windows)
    assert all(ports.LOWEST_CHOSEN <= ports.free_port(range_file=range_file) < 49152 for _ in range(50))


@given(st.integers(1, 65535), st.integers(1, 65535))
def test_no_candidate_port_lies_in_the_ephemeral_range(a, b):
    low, high = min(a, b), max(a, b)
    for side in ports.candidate_ranges((low, high)):
        assert len(side) >= ports.SMALLEST_USEFUL_RANGE
        assert ports.LOWEST_CHOSEN <= side.start and side.stop <= 65536
        assert side.stop <= low or side.start > high
