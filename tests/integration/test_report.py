"""The lineage report, rendered by a real headless Chromium (Debian's package)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from include import naming
from include.lineage import report

pytestmark = pytest.mark.integration
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it with apt-get)")
def test_report_renders_the_connected_graph_in_a_browser(pipeline_run, tmp_path):
    path = report.write_report(pipeline_run.paths)
    completed = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    dom = completed.stdout
    assert 'id="lineage-graph"' in dom
    datasets = re.findall(r'class="node dataset" data-id="([^"]+)"', dom)
    jobs = re.findall(r'class="node job" data-id="([^"]+)"', dom)
    raw = naming.table_id(naming.TAXI_RAW)
    assert f"dataset:{raw.namespace}:{raw.name}" in datasets
    assert any(job.endswith("forecast_yellow_rides.write_forecast") for job in jobs)
    assert re.search(r"(\d+) Airflow events", dom) and int(re.search(r"(\d+) Airflow events", dom).group(1)) > 20
    screenshot = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile2'}", f"--screenshot={screenshot}", "--window-size=1600,900", path.as_uri()],
        capture_output=True, timeout=120,
    )
    assert screenshot.exists() and screenshot.stat().st_size > 10_000
