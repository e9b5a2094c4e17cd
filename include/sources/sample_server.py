"""Serve generated sample files over HTTP on loopback with the real sources' URL layout.

The demo, ``make airflow SAMPLE_DATA=1`` and the tests point the real downloaders at it (``TLC_BASE_URL``,
``NOAA_BASE_URL``), so the download path that talks to cloudfront.net and ncei.noaa.gov in production is the one
exercised here. The demo and the UI use a fixed port (``SAMPLE_SOURCE_PORT``, default 18080), so the source
datasets keep one identity from run to run; tests use a free port. A month that was not generated answers 404, which
the ingest DAGs treat as "not published yet" (the run ends ``skipped``).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from pathlib import Path

from include.core import settings
from include.sources import sample_data

DEFAULT_PORT = 18080


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def publish_months(
    root: Path,
    months: list[tuple[int, int]],
    taxi_rows: int,
    weather_last_day: int | None = None,
    seed: int = 42,
    only_missing: bool = False,
) -> None:
    """Write taxi and weather files for each month under ``root`` in the TLC and NOAA folder layouts."""
    for year, month in months:
        taxi_file = root / "trip-data" / sample_data.taxi_file_name(year, month)
        if only_missing and taxi_file.exists():
            continue
        sample_data.write_taxi_month(root / "trip-data", year, month, taxi_rows, seed)
        sample_data.write_weather_month(root / "averages" / f"{year:04d}", year, month, weather_last_day, seed)


def stable_port() -> int:
    return settings.SAMPLE_SOURCE_PORT.port()


class SourceServer:
    """A loopback HTTP server over ``root``; ``start()`` returns the environment that points the downloaders at it."""

    def __init__(self, root: Path, port: int | None = None):
        self.root = root
        self.port = stable_port() if port is None else port
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port if self._server else self.port}"

    def start(self) -> dict[str, str]:
        handler = functools.partial(_QuietHandler, directory=str(self.root))
        try:
            self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        except OSError as error:
            raise OSError(
                f"sample source: port {self.port} on 127.0.0.1 is taken ({error}); set SAMPLE_SOURCE_PORT"
            ) from error
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return {"TLC_BASE_URL": f"{self.base_url}/trip-data", "NOAA_BASE_URL": f"{self.base_url}/averages"}

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@contextlib.contextmanager
def serve(root: Path, port: int = 0):
    """Yield the downloaders' environment for a loopback server over ``root`` (a free port unless given)."""
    server = SourceServer(root, port)
    try:
        yield server.start()
    finally:
        server.stop()
