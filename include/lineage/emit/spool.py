"""A spooling OpenLineage transport: lineage never blocks a task and is never lost.

Selected in airflow.cfg by its class path, wrapping any openlineage-python transport::

    transport = {"type": "include.lineage.emit.spool.SpoolingTransport", "timeout": 0.5,
                 "inner": {"type": "http", "url": "http://marquez:5000", "endpoint": "api/v1/lineage"}}

``spool_dir`` defaults to ``var/lineage/spool`` of the running project (``$PIPELINE_VAR_DIR``); a relative one is
taken under ``var/lineage/``. An inner ``http``
transport gets no retries of its own unless configured (the spool is the retry): its default five retries would
keep sending in the background after the event was spooled, and deliver it twice. An inner ``kafka`` transport is
the project's :class:`include.lineage.emit.kafka_transport.AckedKafkaTransport` (same configuration as
openlineage-python's): an event counts as sent only once the broker acknowledged it.

``emit`` gives the inner transport at most ``timeout`` seconds. When it fails or is slow, the event is written to the
spool folder, one file per event (written to a temporary name, fsynced, then renamed: an event is never split, and
any number of processes can spool at once). Spooled events go out first, oldest first, on the next emit that finds
the backend back, and with ``lineage replay``. A file leaves the spool only after its send succeeded, and what is
sent is the original JSON, unchanged, so a receiver can drop a duplicate by run id + event type + event time. An
event the backend will never take (``UndeliverableEventError``: one an HTTP backend answers 400, 413 or 422, one past
Amazon DataZone's 300,000 bytes, a DatasetEvent for DataZone) is set aside in ``<spool>/undeliverable/`` with its
reason, and the events after it go on: before, one such event stopped every replay at it for good. An inner
``amazon_datazone_api`` transport is the project's ``include.lineage.emit.transports.DataZoneTransport`` (same
configuration as openlineage-python's; the stock one drops an event given as JSON, as every replayed one is).

A replay to an inner ``http`` transport sends ``replay_batch`` (100) events at a time to OpenLineage's batch
endpoint, ``<endpoint>/batch`` (``lineage serve`` stores a batch all or nothing), with the transport's own auth and
compression; a backend that answers 404, 405 or 501 there gets them one by one from then on
(``"replay_in_batches": false`` asks for that from the start). A batch refused with 400 (one of its events is bad)
is sent again one by one, so the events before the bad one are delivered and the replay stops at it.
``lineage replay`` gives each send ``replay_timeout`` seconds (30), not ``timeout``: nobody waits on it, and a batch
of large events can take the backend longer than an emit's bound to store. A batch's request waits as long (the
inner transport's own ``timeout`` is an emit's bound: a loaded ``lineage serve`` once took more than its 5 s to
store 48 Spark events, and the replay gave up with the batch stored); an event sent alone keeps the inner
transport's ``timeout``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import attr
from openlineage.client.serde import Serde
from openlineage.client.transport import Config, Transport, get_default_factory

from include.lineage.emit.transports import UndeliverableEventError

log = logging.getLogger(__name__)
SUFFIX = ".json"
UNDELIVERABLE = "undeliverable"  # the spool's folder of events the backend will never take, each with its reason
# What an HTTP backend answers an event it read and will never take (lineage serve: 400 and 422 where Marquez refuses
# it, 413 past a limit; DataHub: 400 for a facet of the wrong shape): set aside, not retried before every other event.
# 401, 403, 404 and 405 say the configuration is wrong (a token, the endpoint): every event waits until it is fixed.
REFUSED_FOR_GOOD = frozenset({400, 413, 422})


@attr.define
class SpoolingConfig(Config):
    inner: dict = attr.field(factory=dict)
    spool_dir: str = ""
    timeout: float = 1.0
    replay_batch: int = 100
    replay_in_batches: bool = True
    replay_timeout: float = 30.0

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> SpoolingConfig:
        if not params.get("inner"):
            raise ValueError("the spooling transport needs an 'inner' transport configuration")
        inner = dict(params["inner"])
        if inner.get("type") == "http":
            inner.setdefault("retry", {"total": 0, "connect": 0, "read": 0, "status": 0, "other": 0})
        return cls(
            inner=inner,
            spool_dir=str(_spool_dir(params.get("spool_dir"))),
            timeout=float(params.get("timeout", 1.0)),
            replay_batch=max(1, int(params.get("replay_batch", 100))),
            replay_in_batches=bool(params.get("replay_in_batches", True)),
            replay_timeout=float(params.get("replay_timeout", 30.0)),
        )


def _spool_dir(configured: str | None) -> Path:
    """The configured folder; a relative one is under ``var/lineage/``; none is ``var/lineage/spool``."""
    from include.core import settings

    paths = settings.Paths.current()
    if not configured:
        return paths.lineage_spool
    folder = Path(configured)
    return folder if folder.is_absolute() else paths.lineage / folder


class Spool:
    """A folder of pending events, one file each, named so that name order is emission order."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)

    def append(self, payload: str) -> Path:
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        partial = self.folder / f".{name}.tmp"
        with partial.open("w") as stream:
            stream.write(payload)
            stream.flush()
            os.fsync(stream.fileno())
        target = self.folder / f"{name}{SUFFIX}"
        os.replace(partial, target)
        directory = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return target

    def pending(self) -> list[Path]:
        return sorted(p for p in self.folder.glob(f"*{SUFFIX}") if not p.name.startswith("."))

    def __len__(self) -> int:
        return len(self.pending())


class SpoolingTransport(Transport):
    kind = "spooling"
    config_class = SpoolingConfig

    def __init__(self, config: SpoolingConfig) -> None:
        self.config = config
        if config.inner.get("type") == "kafka":
            from include.lineage.emit.kafka_transport import AckedKafkaTransport

            self.inner = AckedKafkaTransport(config.inner)
        elif config.inner.get("type") == "amazon_datazone_api":
            from include.lineage.emit.transports import DataZoneTransport

            self.inner = DataZoneTransport(config.inner)
        else:
            self.inner = get_default_factory().create(config.inner)
        self.spool = Spool(Path(config.spool_dir))
        self._lock = threading.Lock()
        self._batch_unsupported = False
        self._batch_refused = False

    def _send_within_bound(self, send, timeout: float, spooled_copy) -> bool:
        """Send within ``timeout``. On failure or lateness the event must be in the spool: ``spooled_copy()`` puts it
        there (or names the file it already is) and returns that file. A send that succeeds only after the bound
        removes that file, so the event is not delivered a second time by a replay."""
        outcome: dict[str, Any] = {}
        settled = threading.Lock()

        def attempt() -> None:
            try:
                send()
                outcome["ok"] = True
            except UndeliverableEventError as error:  # never taken, whatever the retries: set aside by the caller
                outcome["undeliverable"] = error
            except Exception as error:  # any failure of the backend means: spool it
                outcome["error"] = error
            with settled:
                if outcome.get("ok") and outcome.get("late_copy"):
                    late = outcome["late_copy"]
                    for path in late if isinstance(late, list) else [late]:
                        path.unlink(missing_ok=True)

        worker = threading.Thread(target=attempt, daemon=True, name="lineage-send")
        worker.start()
        worker.join(timeout)
        with settled:
            if worker.is_alive():
                outcome["late_copy"] = spooled_copy()
                log.warning("lineage: backend did not answer within %.1fs; spooled", timeout)
                return False
        if outcome.get("ok"):
            return True
        if "undeliverable" in outcome:
            raise outcome["undeliverable"]
        log.warning("lineage: backend failed (%s); spooled", outcome.get("error"))
        spooled_copy()
        return False

    def _send_raw(self, payload: str) -> None:
        # A dict goes through Serde.to_json unchanged (same keys, sorted): the receiver gets the original event.
        try:
            self.inner.emit(payload if getattr(self.inner, "takes_text", False) else json.loads(payload))
        except UndeliverableEventError:
            raise
        except Exception as error:
            response = getattr(error, "response", None)
            status = getattr(response, "status_code", None)
            if status in REFUSED_FOR_GOOD:  # the backend read this event and refused it: it never will take it
                text = (getattr(response, "text", "") or "")[:300]
                raise UndeliverableEventError(f"the backend answered {status}: {text}") from error
            raise

    def set_aside(self, payload: str, reason: str, spooled: Path | None = None) -> Path:
        """An event the backend will never take (``UndeliverableEventError``): kept under ``<spool>/undeliverable/``
        with a ``.reason`` file beside it, out of the way of the events after it, and named in an error."""
        folder = self.spool.folder / UNDELIVERABLE
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / (
            spooled.name if spooled is not None else f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        )
        if spooled is not None:
            os.replace(spooled, target)
        else:
            target.write_text(payload)
        target.with_suffix(".reason").write_text(reason + "\n")
        log.error("lineage: the backend will never take this event (%s); set aside as %s", reason, target)
        return target

    def emit(self, event: Any) -> None:
        payload = Serde.to_json(event) if not isinstance(event, str) else event
        deadline = time.monotonic() + self.config.timeout
        with self._lock:
            if self.spool.pending():
                self.spool.append(payload)
                self.replay(deadline=deadline)
                return
            try:
                self._send_within_bound(
                    lambda: self._send_raw(payload), self.config.timeout, lambda: self.spool.append(payload)
                )
            except UndeliverableEventError as error:
                self.set_aside(payload, str(error))

    def keep(self, payload: str) -> Path:
        """Spool an event without trying the backend (the Spark event forwarder once the backend failed or its time
        is up): durable at once, and it goes out in order with the next successful send or ``lineage replay``."""
        with self._lock:
            return self.spool.append(payload)

    def _batch_url(self) -> str | None:
        """Where a batch goes: ``<endpoint>/batch`` of an inner ``http`` transport (OpenLineage's batch endpoint,
        which ``lineage serve`` has) until the backend shows it has none; None: one event at a time."""
        from openlineage.client.transport.http import HttpTransport

        if not self.config.replay_in_batches or self._batch_unsupported or not isinstance(self.inner, HttpTransport):
            return None
        return urljoin(self.inner.url, self.inner.endpoint.rstrip("/") + "/batch")

    def _send_batch(self, payloads: list[str], timeout: float) -> None:
        """POST the events as one JSON array through the inner transport's session, headers (its auth, so a
        token provider's bearer token) and compression, waiting ``timeout`` seconds for the answer; a backend
        without the endpoint (404, 405, 501) is remembered and the events go one by one."""
        url = self._batch_url()
        body, headers = self.inner._prepare_request("[" + ",".join(payloads) + "]")
        response = self.inner.session.post(url, data=body, headers=headers, timeout=timeout, verify=self.inner.verify)
        response.close()
        if response.status_code in (404, 405, 501):
            # no batch endpoint: the replay sends this chunk again one by one (and every later one), so that an
            # event the backend refuses for good is the one set aside
            self._batch_unsupported = self._batch_refused = True
            raise RuntimeError(f"the backend has no batch endpoint ({response.status_code}); one by one")
        if response.status_code == 400:
            self._batch_refused = True  # an event of it is bad: the replay sends this chunk one by one
        response.raise_for_status()

    def replay(self, deadline: float | None = None) -> tuple[int, int]:
        """Send spooled events oldest first, ``replay_batch`` at a time as one batch where the backend takes
        batches (else one by one); stop at the first failure. Returns (sent, remaining)."""
        sent, singly = 0, False
        pending = self.spool.pending()[: self.config.replay_batch if deadline else None]
        while pending:
            # `lineage replay` (no deadline): nobody waits on it, so a batch the backend needs longer than the
            # emit bound to store (lineage serve checking 100 large Spark events) is not given up after `timeout`.
            if deadline is None:
                remaining_time = max(self.config.timeout, self.config.replay_timeout)
            else:
                remaining_time = deadline - time.monotonic()
            if remaining_time <= 0:
                break
            size = self.config.replay_batch if self._batch_url() and not singly else 1
            chunk, pending = pending[:size], pending[size:]
            paths, payloads = [], []
            for path in chunk:
                try:
                    payload = path.read_text()
                    json.loads(payload)
                except (OSError, ValueError):
                    log.error("lineage: unreadable spool file %s left in place", path)
                    continue
                paths.append(path)
                payloads.append(payload)
            if not paths:
                continue
            if len(paths) > 1:
                # an emit's replay keeps the inner transport's bound; `lineage replay` waits the replay's time
                request_timeout = self.inner.timeout if deadline else remaining_time
                send = functools.partial(self._send_batch, payloads, request_timeout)
            else:
                send = functools.partial(self._send_raw, payloads[0])
            self._batch_refused = False
            try:
                delivered = self._send_within_bound(send, max(remaining_time, 0.05), lambda paths=paths: paths)
            except UndeliverableEventError as error:  # one event (only an inner transport that sends singly raises it)
                self.set_aside(payloads[0], str(error), paths[0])
                continue
            if not delivered:
                if self._batch_refused and len(paths) > 1:
                    singly, pending = True, paths + pending  # the good events before the bad one still go
                    continue
                break
            for path in paths:
                path.unlink(missing_ok=True)
            sent += len(paths)
        return sent, len(self.spool)

    def close(self, timeout: float = -1) -> bool:
        return self.inner.close(timeout) if hasattr(self.inner, "close") else True
