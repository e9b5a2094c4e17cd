"""`make demo` as a newcomer runs it: the real ``pipeline demo --rows N`` in a ``var/`` of its own (set up as
``make setup`` does), its outputs checked, and every socket its processes listened on while it ran.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from include.core import settings
from include.services import catalog_server
from tests.integration import listening
from tests.support import environment_of_var, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2400)]

ROWS = 3_000
STEPS = (
    "generate sources",
    "ingest_yellow_taxi_data",
    "ingest_weather_data",
    "forecast_yellow_rides (seasonal_naive)",
    "forecast_yellow_rides (weather)",
    "forecast query",
    "lineage store and page",
)


class Demo:
    def __init__(self, var_dir: Path):
        self.paths = settings.Paths(var_dir.resolve())
        self.env = environment_of_var(self.paths.var, SAMPLE_SOURCE_PORT=str(free_port()))
        self.output = ""
        self.returncode: int | None = None
        self.listeners: set[listening.Listener] = set()
        self.seconds = 0.0

    def run(self) -> Demo:
        subprocess.run(
            [sys.executable, "-m", "include.setup.bootstrap"],
            env=self.env,
            check=True,
            cwd=settings.PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
        )
        started = time.monotonic()
        with listening.sampled(self.paths.var) as seen:
            completed = subprocess.run(
                [str(Path(sys.executable).parent / "pipeline"), "demo", "--rows", str(ROWS)],
                env=self.env,
                cwd=settings.PROJECT_ROOT,
                capture_output=True,
                text=True,
                timeout=2000,
            )
        self.seconds = time.monotonic() - started
        self.listeners = set(seen)
        self.output = completed.stdout + completed.stderr
        self.returncode = completed.returncode
        (self.paths.var / "demo-output.txt").write_text(self.output)
        return self

    def lineage(self, *args: str) -> dict:
        completed = subprocess.run(
            [str(Path(sys.executable).parent / "lineage"), *args, "--json"],
            env=self.env,
            cwd=settings.PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(completed.stdout)


@pytest.fixture(scope="module")
def demo(paths):
    ran = Demo(paths.var / "demo").run()
    try:
        yield ran
    finally:
        catalog_server.stop(ran.paths)


def test_the_demo_succeeds_and_prints_its_time_per_step(demo):
    assert demo.returncode == 0, demo.output[-4000:]
    timings = json.loads((demo.paths.var / "demo-logs" / "timings.json").read_text())
    assert tuple(timings["steps"]) == STEPS
    assert all(seconds >= 0 for seconds in timings["steps"].values())
    assert sum(timings["steps"].values()) <= timings["total"] <= demo.seconds
    for step in STEPS:
        assert f"demo:   {step}" in demo.output
    print(f"\ndemo of {ROWS:,} trips: {timings}")


def test_the_three_dags_ran_with_both_models(demo):
    finished = [line for line in demo.output.splitlines() if line.startswith("demo:   success in")]
    assert len(finished) == 4, demo.output[-4000:]
    for model in ("seasonal_naive", "weather"):
        metrics = json.loads((demo.paths.models / model / "model.json").read_text())
        assert f"demo: model {metrics['model_version']}: holdout MAE" in demo.output


def test_the_forecast_query_prints_zone_10(demo):
    """The seed's example query: 24 forecast hours of pickup zone 10 from the weather model."""
    lines = demo.output.splitlines()
    assert "WHERE pulocationid = 10 AND model_name = 'weather'" in demo.output
    header = lines.index("datetime_hour       | pulocationid | forecasted_total_rides")
    rows = [line for line in lines[header + 2 :] if "|" in line]
    assert rows and all(line.split("|")[1].strip() == "10" for line in rows), rows
    assert f"({len(rows)} rows)" in lines[header + 2 + len(rows)]


def test_lineage_reached_the_store_and_the_page(demo):
    assert "demo: lineage ingest:" in demo.output
    page = demo.paths.lineage / "index.html"
    assert page.exists() and page.stat().st_size > 10_000
    runs = demo.lineage("runs", "ingest_yellow_taxi_data")["runs"]
    assert len(runs) == 1, runs
    upstream = demo.lineage("upstream", "nyc_taxi.yellow_rides_hourly_forecast")
    assert "yellow_taxi_raw" in json.dumps(upstream)


def test_every_process_of_the_demo_listened_on_loopback_only(demo):
    """Airflow's `dags test`, spark-submit and its driver JVM, the catalog server and the sample-file server:
    sampled from /proc/net/tcp while the demo ran."""
    assert demo.listeners, "no listening socket was seen: the sampling is broken"
    processes = {listener.process.split()[0].rsplit("/", 1)[-1] for listener in demo.listeners}
    assert "java" in processes, f"the Spark driver and the catalog server listen: {processes}"
    outside = sorted(
        f"{listener.process} on {listener.readable_address}:{listener.port}"
        for listener in demo.listeners
        if not listener.loopback
    )
    assert outside == [], "listening beyond loopback:\n" + "\n".join(outside)
