"""Downloads checked against a lock file, retried, and written atomically: the one way set-up fetches pinned things
(the jars from Maven Central, the page's scripts from npm).

A download that completes but does not match its lock is retried like a network error (a proxy may have served a
truncated body), then reported with what was received against what the lock says.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from include.core.errors import EXIT_FAILURE, EXIT_OK, ProvisioningError

DOWNLOAD_ATTEMPTS = 3
DOWNLOAD_TIMEOUT_SECONDS = 60
T = TypeVar("T")


class BadDownloadError(OSError):
    """A download that completed but does not match the lock: worth another attempt, then fatal."""


def download_bytes(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
        return response.read()


def download_to(url: str, target: Path) -> None:
    """Stream ``url`` into ``target`` through a ``.part`` file, so an interrupted download never looks complete."""
    partial = target.with_suffix(".part")
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response, partial.open("wb") as out:
        while block := response.read(1 << 20):
            out.write(block)
    os.replace(partial, target)


def with_retries(
    fetch: Callable[[], T],
    failure: str,
    error_class: type[ProvisioningError] = ProvisioningError,
    wait=None,
) -> T:
    """``fetch()`` until it returns, at most DOWNLOAD_ATTEMPTS times on OSError (BadDownloadError included);
    then ``error_class`` with ``failure`` (what could not be provisioned, from where) and the last attempt's reason."""
    retrying = Retrying(
        stop=stop_after_attempt(DOWNLOAD_ATTEMPTS),
        wait=wait or wait_exponential(multiplier=1, max=10),
        retry=retry_if_exception_type(OSError),
    )
    try:
        return retrying(fetch)
    except RetryError as error:
        last = error.last_attempt.exception()
        detail = str(last) if isinstance(last, BadDownloadError) else f"download failed: {last}"
        raise error_class(f"{failure} after {DOWNLOAD_ATTEMPTS} attempts: {detail}") from last


def verify_and_report(provision: Callable[[], str], error_class: type[ProvisioningError] = ProvisioningError) -> int:
    """The end of a command that provisions and verifies pinned things (``python -m include.core.jars``, the page's
    scripts, set-up): ``provision()``'s one-line summary printed and exit status 0; ``error_class``'s message (what
    could not be provisioned, and why) on stderr and 1."""
    try:
        summary = provision()
    except error_class as error:
        print(error, file=sys.stderr)
        return EXIT_FAILURE
    print(summary)
    return EXIT_OK
