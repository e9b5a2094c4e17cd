"""The Spark listener's events, shipped to the lineage backend with the spool's guarantees.

The OpenLineage Spark listener (openlineage-java) has no spool: its Kafka or HTTP transport drops an event the
backend does not take. So the listener only ever writes a local file, and this module ships that file's events.

Layout under ``var/lineage/spark/``:

- ``outbox/<time>-<label>-<id>.ndjson``: one file per Spark application the project's operator launches (the
  listener's ``file`` transport, one JSON per line, appended). One file per application, because openlineage-java's
  ``FileTransport`` appends an event with ``Files.write``, which writes in 8 KiB chunks: two applications appending
  large events to one file at once interleave them (Trap 27). Not ``*.jsonl``, so the store reads each event once.
- ``outbox/<name>.ndjson.state``: the file's checkpoint, ``{"collected": bytes, "forwarded": bytes}``, replaced
  atomically (temporary file, fsync, rename, fsync of the folder).
- ``outbox/<name>.ndjson.running``: held locked (``flock``) by the task that launched the application until it ended;
  the kernel releases it when that process dies, so a crashed task's file is known to be final.
- ``events.jsonl``: every Spark event the local store reads. Collected from the outbox files (whole lines, under a
  lock); Spark applications started outside the operator (``spark_conf()`` in a plain ``spark-submit``, a test's
  in-process session) write it directly and are not forwarded.

A forward of one outbox file, under its lock:

1. *collect*: the complete lines after ``collected`` are appended to ``events.jsonl``, then ``collected`` moves. A
   crash between the two appends them again on the next run: the store skips an event it already has.
2. *forward*: each complete line after ``forwarded`` (never past ``collected``) goes to the target; only once the
   target acknowledged it does ``forwarded`` move past it. A crash between the acknowledgement and the checkpoint
   sends that event again (at least once); nothing before an acknowledged checkpoint is ever sent again. A last line
   without its newline is still being written: it waits.
3. *settle*: a file whose launcher is gone and whose every line is collected and forwarded is deleted.

The target is the ``[openlineage] transport`` of airflow.cfg, the very one Airflow's events take (by default the
spooling transport around Kafka, HTTP to ``lineage serve`` or Marquez): a spooling transport acknowledges an event
once the backend took it *or* its spool holds it, so a backend that is down or slow costs the task at most the
spool's ``timeout`` once, after which the task's remaining events go straight to the spool (in order) and out with
the next successful send or ``lineage replay``. A file transport writing under ``var/lineage/`` (the default) is the
local store's own input: nothing is sent. ``SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS`` sends Spark events to that Kafka
instead (topic ``SPARK_LINEAGE_KAFKA_TOPIC``), through a spooling transport of its own (``var/lineage/spool-spark``).

When: right after each Spark task (``LakehouseSparkSubmitOperator``, within ``FORWARD_BUDGET_SECONDS``, never failing
the task), and ``lineage replay`` forwards whatever is left before replaying the spool.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from include.core import settings

log = logging.getLogger(__name__)

SUFFIX = ".ndjson"
FORWARD_BUDGET_SECONDS = 10.0  # what a Spark task gives its own events before it ends, whatever the backend does
STALE_SECONDS = 60.0  # an outbox file untouched this long, its launcher gone, is final
SPARK_SPOOL = "spool-spark"  # the spool of SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS' transport, under var/lineage/
LISTENER_LOCATION = "spark.openlineage.transport.location"


def outbox_dir(paths: settings.Paths) -> Path:
    return paths.spark_lineage_events.parent / "outbox"


def _fsync_dir(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@dataclass
class Checkpoint:
    collected: int = 0
    forwarded: int = 0

    @classmethod
    def read(cls, path: Path) -> Checkpoint:
        try:
            data = json.loads(path.read_text())
            return cls(int(data["collected"]), int(data["forwarded"]))
        except FileNotFoundError:
            return cls()
        except (ValueError, KeyError, TypeError) as error:
            # Written only by os.replace: a broken one was edited by hand. Collecting again duplicates nothing the
            # store keeps; forwarding again may resend: say so.
            log.error("lineage: checkpoint %s unreadable (%s); starting that file over", path, error)
            return cls()

    def write(self, path: Path) -> None:
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with partial.open("w") as stream:
            json.dump({"collected": self.collected, "forwarded": self.forwarded}, stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(partial, path)
        _fsync_dir(path.parent)


@contextlib.contextmanager
def _locked(path: Path, deadline: float | None = None) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path``, waited for until ``deadline`` (None: as long as it takes); yields whether
    it was taken."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | (fcntl.LOCK_NB if deadline is not None else 0))
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        yield True
    finally:
        os.close(descriptor)  # releases the lock


class Outbox:
    """One Spark application's event file and its checkpoint."""

    def __init__(self, path: Path):
        self.path = path
        self._running: int | None = None

    @property
    def state_path(self) -> Path:
        return self.path.with_name(self.path.name + ".state")

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @property
    def running_path(self) -> Path:
        return self.path.with_name(self.path.name + ".running")

    @classmethod
    def for_launch(cls, paths: settings.Paths, label: str = "spark") -> Outbox:
        """A new outbox file for an application about to start, marked running (locked) until :meth:`release`."""
        folder = outbox_dir(paths)
        folder.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:120] or "spark"
        outbox = cls(folder / f"{time.time_ns():020d}-{safe}-{uuid.uuid4().hex[:8]}{SUFFIX}")
        descriptor = os.open(outbox.running_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        outbox._running = descriptor
        return outbox

    def release(self) -> None:
        """The application ended: its file is final."""
        if self._running is not None:
            self.running_path.unlink(missing_ok=True)
            os.close(self._running)
            self._running = None

    def is_live(self) -> bool:
        """Its launcher still holds the running lock (or marked it running a moment ago)."""
        if self._running is not None:
            return True
        try:
            descriptor = os.open(self.running_path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(descriptor)
        # Unlocked: its launcher died, or is between creating and locking it (a fresh file).
        return time.time() - self.running_path.stat().st_mtime < STALE_SECONDS

    def lines(self, start: int, end: int | None = None) -> list[tuple[int, bytes]]:
        """The complete lines from byte ``start`` (to ``end``), each with the offset just past its newline."""
        try:
            with self.path.open("rb") as stream:
                stream.seek(start)
                data = stream.read() if end is None else stream.read(max(0, end - start))
        except FileNotFoundError:
            return []
        result, offset = [], start
        # At b"\n" only: splitlines also ends a line at a lone b"\r", and the check below then stopped there for good
        for line in data.split(b"\n")[:-1]:  # the last piece is what follows the last newline: being written
            offset += len(line) + 1
            result.append((offset, line + b"\n"))
        return result


def _event_line(line: bytes, where: str) -> str | None:
    """The event of a line as JSON text, or None (logged) for a blank or broken line."""
    text = line.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        if isinstance(json.loads(text), dict):
            return text
    except ValueError:
        pass
    log.error("lineage: %s is not an OpenLineage event; skipped", where)
    return None


def _append_whole(archive: Path, data: bytes) -> None:
    """Append ``data`` to ``archive`` (whole lines), under the archive's lock, so collectors never interleave."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with _locked(archive.with_name(archive.name + ".lock")):
        descriptor = os.open(archive, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def collect(outbox: Outbox, archive: Path) -> int:
    """Append the outbox's new complete lines to ``archive`` (the store's ``events.jsonl``); the caller holds the
    outbox's lock. Returns the number of events collected."""
    state = Checkpoint.read(outbox.state_path)
    lines = outbox.lines(state.collected)
    if not lines:
        return 0
    events = [text for end, line in lines if (text := _event_line(line, f"{outbox.path}@{end - len(line)}"))]
    if events:
        _append_whole(archive, "".join(text + "\n" for text in events).encode())
    state.collected = lines[-1][0]
    state.write(outbox.state_path)
    return len(events)


Deliver = Callable[[str], bool]


def forward(outbox: Outbox, deliver: Deliver, deadline: float | None = None) -> tuple[int, bool]:
    """Send the collected lines not yet forwarded, in order, each through ``deliver`` (True: acknowledged), moving
    the checkpoint after each acknowledgement; the caller holds the outbox's lock. Returns (sent, all done)."""
    state = Checkpoint.read(outbox.state_path)
    sent = 0
    for end, line in outbox.lines(state.forwarded, state.collected):
        text = _event_line(line, f"{outbox.path}@{end - len(line)}")
        if text is not None:
            if deadline is not None and time.monotonic() >= deadline and not getattr(deliver, "keeps", False):
                return sent, False
            if not deliver(text):
                return sent, False
            sent += 1
        state.forwarded = end
        state.write(outbox.state_path)
    return sent, state.forwarded == state.collected


def settle(outbox: Outbox) -> bool:
    """Delete a file whose application is gone and whose every byte is collected and forwarded; True if it is
    gone. A file whose application is gone but ends with part of a line (the JVM died while writing it) waits
    ``STALE_SECONDS`` for the rest, then is kept as ``<name>.ndjson.torn`` for a post-mortem, with an error."""
    if outbox.is_live():
        return False
    state = Checkpoint.read(outbox.state_path)
    try:
        stat = outbox.path.stat()
        size, idle = stat.st_size, time.time() - stat.st_mtime
    except FileNotFoundError:
        size, idle = 0, 0.0
    if state.forwarded != state.collected:
        return False
    if state.collected < size:
        if idle < STALE_SECONDS or outbox.lines(state.collected):
            return False
        torn = outbox.path.with_name(outbox.path.name + ".torn")
        os.replace(outbox.path, torn)
        log.error(
            "lineage: %s ends with %d bytes of an event its Spark application never finished; kept as %s",
            outbox.path,
            size - state.collected,
            torn,
        )
    for path in (outbox.path, outbox.state_path, outbox.running_path, outbox.lock_path):
        path.unlink(missing_ok=True)
    return True


# -- the target ---------------------------------------------------------------------------------------------------


def _under(path_text: str, folder: Path) -> bool:
    try:
        return Path(path_text).resolve().is_relative_to(folder.resolve())
    except (OSError, ValueError):
        return False


def target_configuration(paths: settings.Paths) -> dict | None:
    """Where Spark events go: ``SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS`` (spooled), else airflow.cfg's ``[openlineage]
    transport``; None when that is a file under ``var/lineage/`` (the store's own input: nothing to send)."""
    bootstrap = settings.SPARK_LINEAGE_KAFKA.raw()
    if bootstrap:
        return {
            "type": "include.lineage.emit.spool.SpoolingTransport",
            "timeout": 0.5,
            "spool_dir": SPARK_SPOOL,
            "inner": {
                "type": "kafka",
                "topic": settings.SPARK_LINEAGE_KAFKA_TOPIC.get(),
                "config": {"bootstrap.servers": bootstrap, "acks": "all"},
            },
        }
    from include.lineage.emit.transports import configured_transport

    config = configured_transport()
    if _is_local_store_file(config, paths):
        return None
    return config


def _is_local_store_file(config: dict, paths: settings.Paths) -> bool:
    return config.get("type") == "file" and _under(str(config.get("log_file_path", "")), paths.lineage)


class Target:
    """Delivers one event (JSON text) to a transport; True once the backend acknowledged it or a spool holds it.

    A spooling transport (alone or in a composite) is given its ``timeout`` for the first event; once it spooled one
    (the backend is down or slow) or the deadline passed, the following events go straight to its spool, in order.
    Any other transport gets the time left, in a worker thread; a failure or lateness is "not acknowledged" (the
    event waits in its outbox file). A file transport writing under ``var/lineage/`` is skipped: it is the store's
    input, which already has the event."""

    keeps = True  # forward() keeps calling past the deadline: a spool still takes the event at once

    def __init__(self, transport, paths: settings.Paths, deadline: float | None = None):
        self.transport = transport
        self.paths = paths
        self.deadline = deadline
        self._degraded: set[int] = set()

    def __call__(self, text: str) -> bool:
        return self._deliver(self.transport, text)

    def _left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _deliver(self, transport, text: str) -> bool:
        from openlineage.client.transport.composite import CompositeTransport
        from openlineage.client.transport.file import FileTransport

        from include.lineage.emit.spool import SpoolingTransport

        if isinstance(transport, CompositeTransport):
            return all([self._deliver(inner, text) for inner in transport.transports])
        if isinstance(transport, SpoolingTransport):
            left = self._left()
            if id(transport) in self._degraded or (left is not None and left <= 0):
                transport.keep(text)
                return True
            transport.emit(text)
            if transport.spool.pending():
                self._degraded.add(id(transport))
            return True
        if isinstance(transport, FileTransport) and _under(str(transport.config.log_file_path), self.paths.lineage):
            return True
        left = self._left()
        if left is not None and left <= 0:
            return False
        outcome: dict = {}

        def attempt() -> None:
            try:
                transport.emit(json.loads(text))
                outcome["ok"] = True
            except Exception as error:  # any failure of the backend: not acknowledged
                outcome["error"] = error

        worker = threading.Thread(target=attempt, daemon=True, name="spark-lineage-forward")
        worker.start()
        worker.join(left)
        if not outcome.get("ok"):
            log.warning("lineage: Spark event not forwarded (%s); it waits", outcome.get("error", "timed out"))
            return False
        return True

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.transport.close(1.0)


def configured_target(paths: settings.Paths, deadline: float | None = None) -> Target | None:
    config = target_configuration(paths)
    if config is None:
        return None
    from openlineage.client.transport import get_default_factory

    return Target(get_default_factory().create(config), paths, deadline)


# -- runs -----------------------------------------------------------------------------------------------------------


@dataclass
class ForwardReport:
    files: int = 0
    collected: int = 0
    forwarded: int = 0
    waiting: int = 0  # files with events not forwarded yet
    settled: int = 0
    errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"Spark events: {self.collected} collected, {self.forwarded} forwarded from {self.files} file(s), "
            f"{self.waiting} file(s) waiting"
        )


def events_of(outbox: Outbox) -> list[dict]:
    """The listener's events in an application's file, parsed (a torn last line is left out: still being written)."""
    from include.lineage.emit.observed import read_event_lines

    return read_event_lines((line for _, line in outbox.lines(0)), str(outbox.path))


def pending_outboxes(paths: settings.Paths) -> list[Outbox]:
    folder = outbox_dir(paths)
    if not folder.exists():
        return []
    # An application that wrote nothing left only its running mark: listed too, so that it is cleared.
    names = {path.name for path in folder.glob(f"*{SUFFIX}")}
    names |= {path.name.removesuffix(".running") for path in folder.glob(f"*{SUFFIX}.running")}
    return [Outbox(folder / name) for name in sorted(names) if not name.startswith(".")]


def run(
    paths: settings.Paths | None = None,
    outboxes: list[Outbox] | None = None,
    deadline: float | None = None,
    deliver: Deliver | None | bool = True,
) -> ForwardReport:
    """Collect, forward and settle ``outboxes`` (default: every one, oldest first). ``deliver``: True builds the
    configured target; None forwards nothing (the store's own file is the target); a callable is used as is."""
    paths = paths or settings.Paths.current()
    outboxes = pending_outboxes(paths) if outboxes is None else outboxes
    report = ForwardReport(files=len(outboxes))
    target = configured_target(paths, deadline) if deliver is True else deliver
    try:
        for outbox in outboxes:
            with _locked(outbox.lock_path, deadline) as taken:
                if not taken:
                    report.waiting += 1
                    continue
                report.collected += collect(outbox, paths.spark_lineage_events)
                if target is None:
                    state = Checkpoint.read(outbox.state_path)
                    if state.forwarded != state.collected:
                        state.forwarded = state.collected
                        state.write(outbox.state_path)
                    done = True
                else:
                    sent, done = forward(outbox, target, deadline)
                    report.forwarded += sent
                settled = settle(outbox)
                report.settled += settled
                report.waiting += 0 if done and (settled or outbox.is_live()) else 1
    finally:
        if isinstance(target, Target):
            target.close()
    return report


def after_task(outbox: Outbox, paths: settings.Paths | None = None, budget: float = FORWARD_BUDGET_SECONDS):
    """What a Spark task does once its application ended: release its file and forward it within ``budget``
    seconds. Never raises: lineage must not fail the task (what is left waits for ``lineage replay``)."""
    outbox.release()
    started = time.monotonic()
    try:
        report = run(paths, [outbox], deadline=started + budget)
        log.info("lineage: %s, in %.2f s", report.line(), time.monotonic() - started)
        return report
    except Exception as error:  # lineage never fails the task
        log.warning("lineage: Spark events of %s not forwarded now (%s); `lineage replay` will", outbox.path, error)
        return None
