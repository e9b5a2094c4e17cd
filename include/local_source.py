"""Serve generated sample files over HTTP on loopback with the real sources' URL layout.

The demo and the tests point the real downloaders at it (``TLC_BASE_URL``, ``NOAA_BASE_URL``), so the download
path that talks to cloudfront.net and ncei.noaa.gov in production is the one exercised here.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from pathlib import Path

from include import sample_data


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def publish_months(root: Path, months: list[tuple[int, int]], taxi_rows: int, weather_last_day: int | None = None, seed: int = 42) -> None:
    """Write taxi and weather files for each month under ``root`` in the TLC and NOAA folder layouts."""
    for year, month in months:
        sample_data.write_taxi_month(root / "trip-data", year, month, taxi_rows, seed)
        sample_data.write_weather_month(root / "averages" / f"{year:04d}", year, month, weather_last_day, seed)


@contextlib.contextmanager
def serve(root: Path):
    """Yield (tlc_base_url, noaa_base_url) of a loopback server over ``root``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        yield {"TLC_BASE_URL": f"{base}/trip-data", "NOAA_BASE_URL": f"{base}/averages"}
    finally:
        server.shutdown()
        server.server_close()
