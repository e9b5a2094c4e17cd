"""Downloaders for the real sources: TLC trip records and NOAA nClimGrid daily county averages.

Streamed, bounded by timeouts, retried with exponential backoff, written atomically into ``var/landing/``, and
fingerprinted with xxhash64. A file whose fingerprint is already ingested is skipped unless forced; a month not
yet published (HTTP 404) is reported as such, not raised.

With ``PIPELINE_LANDING_URI`` on an object store (``s3://bucket/prefix``, ``include/core/object_store.py``) the file
lands there instead, so the task that loads it may run on another machine: downloaded whole into this machine's
``var/`` first, then uploaded (the object appears complete or not at all), its local copy deleted. The ingest ledger
is then on the store too, one object per (file, fingerprint).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import requests
import xxhash
from tenacity import (
    RetryError,
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from include.core import object_store, settings
from include.core.contract import WEATHER_ELEMENTS
from include.core.errors import SourceError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 60.0
ATTEMPTS = 4
BACKOFF_SECONDS = 1.0
CHUNK_BYTES = 1 << 20


class DownloadError(SourceError):
    pass


@dataclass(frozen=True)
class Download:
    url: str
    path: Path | object_store.StoredFile
    status: str  # "downloaded", "already_ingested" or "not_published"
    fingerprint: str | None = None
    size_bytes: int | None = None

    def to_dict(self) -> dict:
        return {**asdict(self), "path": str(self.path)}


@dataclass(frozen=True)
class DownloadPolicy:
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
    read_timeout: float = READ_TIMEOUT_SECONDS
    attempts: int = ATTEMPTS
    backoff: float = BACKOFF_SECONDS


def tlc_base_url() -> str:
    return settings.TLC_BASE_URL.get().rstrip("/")


def noaa_base_url() -> str:
    return settings.NOAA_BASE_URL.get().rstrip("/")


def tlc_url(month: str) -> str:
    return f"{tlc_base_url()}/yellow_tripdata_{month}.parquet"


def noaa_url(element: str, month: str) -> str:
    year, mm = month.split("-")
    return f"{noaa_base_url()}/{year}/{element}-{year}{mm}-cty-scaled.csv"


def landing_location(paths: settings.Paths | None = None) -> str:
    """Where files land: ``PIPELINE_LANDING_URI`` (an object store every worker reaches), else ``<var>/landing``."""
    return settings.LANDING_URI.raw() or str((paths or settings.Paths.current()).landing)


Landed = Path | object_store.StoredFile  # a landed file: ``name``, ``exists()``, ``open("rb")``; ``str()`` its location


def tlc_landed_path(month: str, paths: settings.Paths | None = None) -> Landed:
    return object_store.located(landing_location(paths), "tlc", f"yellow_tripdata_{month}.parquet")


def noaa_landed_path(element: str, month: str, paths: settings.Paths | None = None) -> Landed:
    year, mm = month.split("-")
    return object_store.located(landing_location(paths), "noaa", f"{element}-{year}{mm}-cty-scaled.csv")


def fingerprint_file(path: Landed) -> str:
    digest = xxhash.xxh64()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


class IngestLedger:
    """Append-only record of the (file, fingerprint) pairs that made it into a raw table: a file beside the landed
    ones, or, with the landing on an object store, one object per pair under ``<landing>/_ingested/`` (an object
    store has no append; concurrent writers never meet)."""

    def __init__(self, paths: settings.Paths | None = None):
        self.path = (paths or settings.Paths.current()).landing / "_ingested.jsonl"
        location = landing_location(paths)
        self.stored = object_store.join(location, "_ingested") if object_store.is_remote(location) else None

    def _stored_entry(self, file_name: str, fingerprint: str) -> str:
        return object_store.join(self.stored, file_name, f"{fingerprint}.json")

    def _entries(self) -> list[dict]:
        """Every entry; a line that is not one (torn by a writer that died mid-line, edited by hand) is skipped with a
        warning naming the file and line, not raised at every download after it: the ledger only saves work, and a
        file it does not name is downloaded again and its month recognised as loaded (``load_taxi.already_loaded``)."""
        if not self.path.exists():
            return []
        entries = []
        for number, line in enumerate(self.path.read_bytes().split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                entry = None
            if not (isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("file", "fingerprint"))):
                log.warning(
                    "%s:%d is not an entry of the ingest ledger (file, fingerprint): skipped", self.path, number
                )
                continue
            entries.append(entry)
        return entries

    def contains(self, file_name: str, fingerprint: str) -> bool:
        if self.stored:
            return object_store.exists(self._stored_entry(file_name, fingerprint))
        return any(e["file"] == file_name and e["fingerprint"] == fingerprint for e in self._entries())

    def record(self, file_name: str, fingerprint: str, table: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(
            {
                "file": file_name,
                "fingerprint": fingerprint,
                "table": table,
                "ingested_at": datetime.now(UTC).isoformat(),
            }
        )
        if self.stored:
            object_store.write_bytes(self._stored_entry(file_name, fingerprint), line.encode() + b"\n")
            return
        with self.path.open("ab+") as stream:  # appends go to the end wherever the stream was read
            fcntl.flock(stream, fcntl.LOCK_EX)
            size = stream.seek(0, os.SEEK_END)
            torn = False
            if size:
                stream.seek(size - 1)
                torn = stream.read(1) != b"\n"  # a writer died mid-line: this entry starts a line of its own
            stream.write((b"\n" if torn else b"") + line.encode() + b"\n")
            stream.flush()
            os.fsync(stream.fileno())


def _fetch_once(session: requests.Session, url: str, target: Path, policy: DownloadPolicy) -> tuple[str, int] | None:
    """Stream url into target atomically. Returns (fingerprint, size) or None on 404."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    with session.get(url, stream=True, timeout=(policy.connect_timeout, policy.read_timeout)) as response:
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise DownloadError(f"{url}: HTTP {response.status_code}")
        expected = response.headers.get("Content-Length")
        digest = xxhash.xxh64()
        received = 0
        try:
            with partial.open("wb") as out:
                for block in response.iter_content(CHUNK_BYTES):
                    out.write(block)
                    digest.update(block)
                    received += len(block)
                out.flush()
                os.fsync(out.fileno())
            if expected is not None and received != int(expected):
                raise DownloadError(f"{url}: truncated body, received {received} of {expected} bytes")
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    return digest.hexdigest(), received


def download(
    url: str, target: Path, policy: DownloadPolicy = DownloadPolicy(), session: requests.Session | None = None
) -> tuple[str, int] | None:
    """Download with retries (exponential backoff: ``backoff``, 2x, 4x ... seconds). Returns (fingerprint, size), or
    None when the server says 404."""
    target.parent.mkdir(parents=True, exist_ok=True)
    session = session or requests.Session()
    retrying = Retrying(
        retry=retry_if_exception_type((requests.RequestException, DownloadError)),
        stop=stop_after_attempt(policy.attempts),
        wait=wait_exponential(multiplier=policy.backoff),
        before_sleep=before_sleep_log(log, logging.WARNING),
    )
    try:
        return retrying(_fetch_once, session, url, target, policy)
    except RetryError as error:
        last_error = error.last_attempt.exception()
        raise DownloadError(f"{url}: gave up after {policy.attempts} attempts: {last_error}") from last_error


def fetch(
    url: str,
    target: Landed,
    force: bool = False,
    policy: DownloadPolicy = DownloadPolicy(),
    ledger: IngestLedger | None = None,
) -> Download:
    ledger = ledger or IngestLedger()
    stored = isinstance(target, object_store.StoredFile)
    # On an object store the file is first downloaded whole here, then uploaded: no reader sees part of it.
    local = settings.Paths.current().var / "landing-uploads" / target.name if stored else target
    result = download(url, local, policy)
    if result is None:
        log.info("%s is not published yet (HTTP 404): nothing to ingest", url)
        return Download(url, target, "not_published")
    fingerprint, size = result
    try:
        if not force and ledger.contains(target.name, fingerprint):
            log.info(
                "%s (xxhash64 %s) is already ingested: skipping; pass force to re-ingest", target.name, fingerprint
            )
            return Download(url, target, "already_ingested", fingerprint, size)
        if stored:
            object_store.upload(local, str(target))
    finally:
        if stored:
            local.unlink(missing_ok=True)
    log.info("landed %s: %d bytes, xxhash64 %s", target, size, fingerprint)
    return Download(url, target, "downloaded", fingerprint, size)


def fetch_tlc_month(month: str, force: bool = False, policy: DownloadPolicy = DownloadPolicy()) -> Download:
    return fetch(tlc_url(month), tlc_landed_path(month), force, policy)


def fetch_noaa_month(month: str, force: bool = False, policy: DownloadPolicy = DownloadPolicy()) -> list[Download]:
    return [
        fetch(noaa_url(element, month), noaa_landed_path(element, month), force, policy) for element in WEATHER_ELEMENTS
    ]
