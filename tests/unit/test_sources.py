"""The real downloaders against a real HTTP server on loopback: success, 404, truncated body, stall, fingerprints."""

from __future__ import annotations

import re
import time

import pytest
import xxhash

from include.core import contract
from include.sources import downloads
from tests.support import QuietHandler, loopback_server

FAST = downloads.DownloadPolicy(connect_timeout=2, read_timeout=0.5, attempts=3, backoff=0.01)


class Behaviour:
    def __init__(self):
        self.body = b"PAR1" + b"x" * 10_000 + b"PAR1"
        self.mode = "ok"  # ok | missing | truncated | stall | flaky
        self.requests = 0
        self.paths: list[str] = []


@pytest.fixture()
def server():
    behaviour = Behaviour()

    class Handler(QuietHandler):
        def do_GET(self):
            behaviour.requests += 1
            behaviour.paths.append(self.path)
            if behaviour.mode == "missing":
                self.send_error(404)
                return
            if behaviour.mode == "flaky" and behaviour.requests == 1:
                self.send_error(503)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(behaviour.body)))
            self.end_headers()
            if behaviour.mode == "truncated":
                self.wfile.write(behaviour.body[: len(behaviour.body) // 2])
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if behaviour.mode == "stall":
                self.wfile.write(behaviour.body[:100])
                self.wfile.flush()
                time.sleep(3)
                return
            self.wfile.write(behaviour.body)

    with loopback_server(Handler) as base_url:
        yield behaviour, f"{base_url}/trip-data/yellow_tripdata_2025-01.parquet"


def test_download_lands_the_file_atomically_with_its_xxhash64(server, tmp_path):
    behaviour, url = server
    target = tmp_path / "landing" / "f.parquet"
    result = downloads.fetch(url, target, policy=FAST, ledger=downloads.IngestLedger(_paths(tmp_path)))
    assert result.status == "downloaded"
    assert target.read_bytes() == behaviour.body
    assert result.fingerprint == xxhash.xxh64(behaviour.body).hexdigest()
    assert [p.name for p in target.parent.iterdir()] == ["f.parquet"], "no partial file may be left behind"


def test_month_not_published_is_reported_not_raised(server, tmp_path):
    behaviour, url = server
    behaviour.mode = "missing"
    result = downloads.fetch(url, tmp_path / "f.parquet", policy=FAST, ledger=downloads.IngestLedger(_paths(tmp_path)))
    assert result.status == "not_published"
    assert not (tmp_path / "f.parquet").exists()
    assert behaviour.requests == 1, "a 404 is an answer, not a failure to retry"


def test_truncated_body_is_retried_then_fails_naming_the_url_and_keeps_the_old_file(server, tmp_path):
    behaviour, url = server
    behaviour.mode = "truncated"
    target = tmp_path / "f.parquet"
    target.write_bytes(b"previous complete file")
    with pytest.raises(downloads.DownloadError, match=r"yellow_tripdata_2025-01\.parquet.*gave up after 3 attempts"):
        downloads.download(url, target, FAST)
    assert behaviour.requests == 3
    assert target.read_bytes() == b"previous complete file"
    assert list(tmp_path.glob(".*.part")) == []


def test_stalled_server_times_out_and_is_retried(server, tmp_path):
    behaviour, url = server
    behaviour.mode = "stall"
    started = time.monotonic()
    with pytest.raises(downloads.DownloadError, match="Read timed out|timed out"):
        downloads.download(url, tmp_path / "f.parquet", FAST)
    assert behaviour.requests == 3
    assert time.monotonic() - started < 10


def test_transient_503_is_retried_and_succeeds(server, tmp_path):
    behaviour, url = server
    behaviour.mode = "flaky"
    assert downloads.download(url, tmp_path / "f.parquet", FAST)[1] == len(behaviour.body)
    assert behaviour.requests == 2


def test_already_ingested_fingerprint_is_skipped_unless_forced(server, tmp_path):
    behaviour, url = server
    ledger = downloads.IngestLedger(_paths(tmp_path))
    target = tmp_path / "f.parquet"
    first = downloads.fetch(url, target, policy=FAST, ledger=ledger)
    ledger.record(target.name, first.fingerprint, "nyc_taxi.yellow_taxi_raw")
    assert downloads.fetch(url, target, policy=FAST, ledger=ledger).status == "already_ingested"
    assert downloads.fetch(url, target, force=True, policy=FAST, ledger=ledger).status == "downloaded"
    behaviour.body += b"a new revision"
    assert downloads.fetch(url, target, policy=FAST, ledger=ledger).status == "downloaded"


def test_urls_are_the_real_sources_by_default(monkeypatch):
    monkeypatch.delenv("TLC_BASE_URL", raising=False)
    monkeypatch.delenv("NOAA_BASE_URL", raising=False)
    assert (
        downloads.tlc_url("2024-01")
        == "https://d37ci6vzurychx.cloudfront.net/trip-data/yellow_tripdata_2024-01.parquet"
    )
    assert downloads.noaa_url("prcp", "2025-03") == (
        "https://www.ncei.noaa.gov/pub/data/daily-grids/v1-0-0/averages/2025/prcp-202503-cty-scaled.csv"
    )


def test_base_urls_from_the_environment_keep_the_real_file_layout(monkeypatch):
    monkeypatch.setenv("TLC_BASE_URL", "http://127.0.0.1:8000/trip-data/")
    monkeypatch.setenv("NOAA_BASE_URL", "http://127.0.0.1:8000/averages")
    assert downloads.tlc_url("2025-12") == "http://127.0.0.1:8000/trip-data/yellow_tripdata_2025-12.parquet"
    assert downloads.noaa_url("tmax", "2025-12") == "http://127.0.0.1:8000/averages/2025/tmax-202512-cty-scaled.csv"


def test_fetching_a_noaa_month_downloads_one_file_per_weather_element(server, tmp_path, monkeypatch):
    behaviour, url = server
    monkeypatch.setenv("NOAA_BASE_URL", url.split("/trip-data/")[0] + "/averages")
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    fetched = downloads.fetch_noaa_month("2025-01", policy=FAST)
    assert [d.status for d in fetched] == ["downloaded"] * len(contract.WEATHER_ELEMENTS)
    assert sorted(behaviour.paths) == sorted(
        f"/averages/2025/{e}-202501-cty-scaled.csv" for e in contract.WEATHER_ELEMENTS
    )


def test_retries_wait_exponentially_longer(server, tmp_path, caplog):
    behaviour, url = server
    behaviour.mode = "truncated"
    policy = downloads.DownloadPolicy(connect_timeout=2, read_timeout=2, attempts=4, backoff=0.05)
    with caplog.at_level("WARNING", logger=downloads.log.name), pytest.raises(downloads.DownloadError):
        downloads.download(url, tmp_path / "f.parquet", policy)
    waits = [float(re.search(r"in ([0-9.]+) seconds", r.getMessage()).group(1)) for r in caplog.records]
    assert waits == [0.05, 0.1, 0.2]


def _paths(tmp_path):
    from include.core import settings

    return settings.Paths(tmp_path / "var")


@pytest.mark.parametrize(
    "bad",
    [b'{"file": "yellow_tripdata_2025-0', b"not json", b'"a string"', b'{"file": 1, "fingerprint": "x"}', b"\xff\xfe"],
    ids=["torn", "text", "not an object", "a number for a name", "not UTF-8"],
)
def test_a_bad_line_of_the_ingest_ledger_is_skipped_with_its_line_named_and_the_next_entry_starts_a_line(
    tmp_path, caplog, bad
):
    """Before: ``json.loads`` of every line raised at the bad one, so every download after it failed; and an entry
    appended after a torn line joined it, so that entry was lost too."""
    ledger = downloads.IngestLedger(_paths(tmp_path))
    ledger.record("yellow_tripdata_2025-01.parquet", "aaaa", "nyc_taxi.yellow_taxi_raw")
    with ledger.path.open("ab") as stream:
        stream.write(bad)  # no newline: a writer that died mid-line
    ledger.record("yellow_tripdata_2025-02.parquet", "bbbb", "nyc_taxi.yellow_taxi_raw")
    with caplog.at_level("WARNING", logger="include.sources.downloads"):
        assert ledger.contains("yellow_tripdata_2025-01.parquet", "aaaa")
        assert ledger.contains("yellow_tripdata_2025-02.parquet", "bbbb"), "the entry after the torn line is whole"
        assert not ledger.contains("yellow_tripdata_2025-03.parquet", "cccc")
    assert f"{ledger.path}:2 is not an entry of the ingest ledger" in caplog.text
    assert ledger.path.read_bytes().count(b"\n") == 3
