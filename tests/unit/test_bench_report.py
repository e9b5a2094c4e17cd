"""The benchmark's report: every figure it promises is in the table (figures are reported, never asserted)."""

from __future__ import annotations

import statistics
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import pipeline
from bench.pipeline import _summary, resolved, to_markdown
from include.sources import sample_data


def test_markdown_table_carries_every_figure_with_its_spread():
    results = {
        "machine": "test",
        "repeats": 3,
        "lineage_rows": 10,
        "scale_rows": 5,
        "ingest": {
            "rows": 100,
            "file_bytes": 2**20,
            "bare_seconds": _summary([1.0, 2.0, 3.0]),
            "first_load_seconds": _summary([4.0, 5.0, 6.0]),
            "reload_seconds": _summary([3.0, 3.5, 4.0]),
            "first_load_ratio": _summary([4.0, 2.5, 2.0]),
            "reload_ratio": _summary([3.0, 1.75, 1.33]),
            "first_load_rows_per_second": 20.0,
            "bare_rows_per_second": 50.0,
            "baseline": {
                "version": "baseline abc123",
                "first_load_seconds": _summary([8.0, 9.0, 10.0]),
                "reload_seconds": _summary([8.0, 8.5, 9.0]),
                "first_load_ratio": _summary([8.0, 4.5, 3.33]),
                "reload_ratio": _summary([8.0, 4.25, 3.0]),
                "first_load_rows_per_second": 11.0,
            },
            "first_load_speedup": _summary([2.0, 1.8, 1.67]),
            "first_load_without_wap_seconds": _summary([3.0, 4.0, 5.0]),
            "first_load_without_wap_ratio": _summary([3.0, 2.0, 1.67]),
        },
        "lineage": {
            "pairs": 3,
            "target_standard_error": 0.01,
            "resolved": True,
            "dag_seconds_lineage_on": _summary([10.0, 11.0, 12.0]),
            "dag_seconds_lineage_off": _summary([9.0, 10.0, 11.0]),
            "overhead_ratio": _summary([1.11, 1.1, 1.09]),
            "dag_cpu_seconds_lineage_on": _summary([40.0, 42.0, 44.0]),
            "dag_cpu_seconds_lineage_off": _summary([39.0, 41.0, 43.0]),
            "cpu_overhead_ratio": _summary([1.02, 1.03, 1.04]),
            "extractor_seconds_per_task": {"load_yellow_taxi_raw": _summary([0.7, 0.8, 0.9])},
        },
        "scale": {
            "months": 3,
            "month_seconds": {
                "1": _summary([1.0, 1.0, 1.0]),
                "2": _summary([1.0, 1.1, 1.2]),
                "3": _summary([1.1, 1.2, 1.3]),
            },
            "month_growth_ratio": _summary([1.1, 1.2, 1.3]),
        },
    }
    table = to_markdown(results)
    assert "| `ingest.first_load_ratio`: first load ÷ bare | 2.50 (2.00–4.00) |" in table
    assert "| `ingest.reload_ratio`: re-load ÷ bare | 1.75 (1.33–3.00) |" in table
    assert "| baseline abc123: first load ÷ bare | 4.50 (3.33–8.00) |" in table
    assert "| first load, baseline abc123 ÷ this checkout | 1.80 (1.67–2.00) |" in table
    assert "| `ingest.first_load_without_wap_ratio`: that ÷ bare | 2.00 (1.67–3.00) |" in table
    # The mean and its standard error (stdev / sqrt(n)): whether the repeats resolve a 3 % difference.
    assert (
        "| `lineage.overhead_ratio`: on ÷ off | 1.10 (1.09–1.11); mean 1.100 ± 0.006; 3 pairs, target ± 0.010 reached |"
        in table
    )
    assert "| taxi DAG's CPU, OpenLineage on (CPU-s) | 42.00 (40.00–44.00) |" in table
    assert "| `lineage.cpu_overhead_ratio`: on ÷ off | 1.03 (1.02–1.04); mean 1.030 ± 0.006 |" in table
    assert "| extractor time, load_yellow_taxi_raw (s) | 0.80 (0.70–0.90) |" in table
    assert "| month 3 into raw holding months 1–2 (s) | 1.20 (1.10–1.30) |" in table
    assert "| `scale.month_growth_ratio`: month 3 ÷ month 1 | 1.20 (1.10–1.30) |" in table
    assert "Median (min–max) of 3 alternating runs" in table


def test_first_hour_table_puts_now_and_before_side_by_side_per_step():
    from bench.pipeline import first_hour_markdown

    demo = {"rows": 300_000, "steps": {"ingest_yellow_taxi_data": 40.0, "forecast query": 9.0}, "total": 49.0}
    before = {"rows": 300_000, "steps": {"ingest_yellow_taxi_data": 52.0, "forecast query": 15.5}, "total": 67.5}
    task = {
        "project_seconds": _summary([5.0, 6.0, 7.0]),
        "before_seconds": _summary([9.0, 10.0, 11.0]),
        "bare_seconds": _summary([8.0, 9.0, 10.0]),
        "fixed_cost_ratio": _summary([0.6, 0.66, 0.7]),
        "before_fixed_cost_ratio": _summary([1.1, 1.11, 1.12]),
        "start_up_speedup": _summary([1.6, 1.66, 1.8]),
    }
    text = first_hour_markdown({"spark_task": task, "demo": demo, "demo_before": before, "load": "1.0 / 0.5 / 0.2"})
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["demo of 300,000 trips: ingest_yellow_taxi_data (s)"].endswith("| 40.0 | 52.0 |")
    assert rows["demo of 300,000 trips: forecast query (s)"].endswith("| 9.0 | 15.5 |")
    assert rows["demo of 300,000 trips: total (s)"].endswith("| 49.0 | 67.5 |")
    assert rows["empty Spark job, project settings (s)"].endswith("| 6.00 (5.00–7.00) | 10.00 (9.00–11.00) |")
    assert rows["`first_hour.start_up_speedup`: empty job before ÷ now"].endswith("| 1.66 (1.60–1.80) | |")
    assert "load average 1.0 / 0.5 / 0.2" in text


def test_descendants_cpu_counts_a_finished_grandchild_and_not_sleep():
    """The lineage overhead's CPU figure: a grandchild's busy loop counts once its parent reaps it; sleeping does not."""
    import subprocess
    import sys

    from bench.pipeline import _descendants_cpu_seconds

    burn = "import time; end = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    grandchild = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}], check=True)"
    before = _descendants_cpu_seconds()
    subprocess.run([sys.executable, "-c", grandchild], check=True)
    busy = _descendants_cpu_seconds() - before
    assert busy >= 0.4
    before = _descendants_cpu_seconds()
    subprocess.run([sys.executable, "-c", "import time; time.sleep(0.5)"], check=True)
    assert _descendants_cpu_seconds() - before < busy


@pytest.mark.parametrize(
    "ratios, target, min_pairs, expected",
    [
        ([], 0.01, 3, False),
        ([1.03], 0.01, 1, False),  # one pair has no error at all
        ([1.03, 1.03], 0.01, 3, False),  # exact, but fewer pairs than asked for
        ([1.03, 1.03, 1.03], 0.01, 3, True),
        ([1.00, 1.10, 0.95, 1.08], 0.01, 3, False),  # a busy machine's spread
        ([1.02, 1.04, 1.03, 1.035], 0.01, 3, True),  # an idle machine's
        ([1.0, 1.019], 0.01, 2, True),  # stdev 0.01344 / sqrt(2) = 0.0095
        ([1.0, 1.021], 0.01, 2, False),  # 0.0105
    ],
)
def test_the_lineage_pairs_are_resolved_at_the_target_error_and_not_before_the_minimum(
    ratios, target, min_pairs, expected
):
    assert resolved(ratios, target, min_pairs) is expected


@given(st.lists(st.floats(min_value=0.5, max_value=2.0), min_size=2, max_size=30), st.integers(1, 10))
def test_more_of_the_same_pairs_never_unresolve_the_mean(ratios, min_pairs):
    """Each pair measured twice over (the same spread, twice the pairs) has a smaller standard error: what was
    resolved stays resolved, and with a target of that error it always is."""
    target = statistics.stdev(ratios) / len(ratios) ** 0.5
    if resolved(ratios, target, min_pairs):
        assert resolved(ratios + ratios, target, min_pairs)
    assert resolved(ratios + ratios, target, min_pairs) or len(ratios) * 2 < max(min_pairs, 2)


def _fake_dag_runs(monkeypatch, seconds_by_label):
    """The DAG runs replaced by fixed timings (a unit test of the stopping rule: the real runs are the bench's own,
    and `make bench` runs them); the sample server and the table reset do nothing, and each run counts one CPU-second."""
    import contextlib

    calls = []

    def dags_test(dag_id, logical_date, conf, env):
        label = "off" if env.get("AIRFLOW__OPENLINEAGE__DISABLED") else "on"
        values = seconds_by_label[label]
        calls.append(label)
        return SimpleNamespace(succeeded=True, seconds=values[len([c for c in calls if c == label]) - 1], log="")

    monkeypatch.setattr(pipeline.runs, "dags_test", dags_test)
    monkeypatch.setattr(pipeline, "_reset_tables", lambda paths: None)
    monkeypatch.setattr(pipeline.sample_server, "publish_months", lambda *args: None)
    monkeypatch.setattr(pipeline.sample_server, "serve", lambda source: contextlib.nullcontext({}))
    clock = iter(range(1_000))
    monkeypatch.setattr(pipeline, "_descendants_cpu_seconds", lambda: float(next(clock)))  # one CPU-second a run
    return calls


def test_the_lineage_section_takes_the_minimum_pairs_before_its_stopping_rule_applies(monkeypatch, tmp_path):
    """Two pairs of 1.098 and 1.111 have a standard error of 0.007 by chance: a bench once stopped there and called
    1.10 resolved. The rule applies only from MIN_LINEAGE_PAIRS on, even where the repeats asked for fewer."""
    assert not resolved([1.098, 1.111], 0.01, pipeline.MIN_LINEAGE_PAIRS)
    calls = _fake_dag_runs(monkeypatch, {"on": [10.3] * 20, "off": [10.0] * 20})
    result = pipeline.lineage_overhead(SimpleNamespace(var=tmp_path), 10, 2, target_error=0.01, max_pairs=2)
    assert result["pairs"] == pipeline.MIN_LINEAGE_PAIRS == 10 and result["resolved"] is True
    assert calls[:6] == ["on", "off", "off", "on", "on", "off"], "pairs alternate which variant goes first"
    low, high = result["overhead_ratio_interval_95"]
    assert low == pytest.approx(1.03) == high, "ten equal ratios: an interval of no width around them"


def test_the_interval_is_the_means_students_t_interval():
    values = [1.0, 1.02, 1.04, 1.03, 1.01]  # mean 1.02, stdev 0.01581, t(4) = 2.776
    low, high = pipeline.interval_95(values)
    assert (low, high) == pytest.approx((1.02 - 2.776 * 0.01581 / 5**0.5, 1.02 + 2.776 * 0.01581 / 5**0.5), abs=1e-4)
    assert pipeline.interval_95([1.0]) is None


def test_the_lineage_section_adds_pairs_until_the_target_error_or_the_most_pairs(monkeypatch, tmp_path):
    noisy_on = [11.0, 9.5, 10.8, 9.6, 10.9, 9.4] + [10.3] * 54
    _fake_dag_runs(monkeypatch, {"on": noisy_on, "off": [10.0] * 60})
    result = pipeline.lineage_overhead(SimpleNamespace(var=tmp_path), 10, 3, target_error=0.01, max_pairs=60)
    ratios = result["overhead_ratio"]["runs"]
    assert 10 < result["pairs"] < 60 and result["resolved"] is True
    assert resolved(ratios, 0.01, 10) and not resolved(ratios[:-1], 0.01, 10), "it stops at the first resolving pair"

    _fake_dag_runs(monkeypatch, {"on": [11.0, 9.0] * 10, "off": [10.0] * 20})
    result = pipeline.lineage_overhead(SimpleNamespace(var=tmp_path), 10, 3, target_error=0.001, max_pairs=12)
    assert result["pairs"] == 12 and result["resolved"] is False


def test_a_refs_code_zip_is_built_again_when_newer_zips_pushed_it_out(tmp_path, monkeypatch):
    """codeship keeps only its newest zips: a baseline's zip built once at the bench's start was gone by its third
    round (spark-submit: ``FileNotFoundException: ...project-<digest>.zip does not exist``). It is found or built
    at each submit."""
    from include.core import settings

    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    version = pipeline.JobsVersion("baseline HEAD", settings.SPARK_JOBS_DIR, settings.PROJECT_ROOT)
    first = version.code_zip()
    assert first is not None and first.exists()
    first.unlink()  # what codeship's pruning does to an older zip
    again = version.code_zip()
    assert again == first and again.exists()
    assert pipeline.CURRENT.code_zip() is None, "this checkout's jobs run with the operator's own code zip"


def test_the_scale_section_loads_months_of_the_size_asked_for_even_over_an_earlier_benchs_files(monkeypatch, tmp_path):
    """A month file left by an earlier bench of another size was reused: months 1-2 of 5,000 rows against 500,000
    for the rest gave a growth ratio of 1.50 where every month cost the same."""
    import pyarrow.parquet as pq

    paths = SimpleNamespace(landing=tmp_path / "landing")
    sample_data.write_taxi_month(paths.landing / "tlc", 2024, 1, 5)  # the earlier, smaller bench's month
    loaded_rows = {}

    def ingest_month(month):
        year, number = map(int, month.split("-"))
        landed = paths.landing / "tlc" / sample_data.taxi_file_name(year, number)
        loaded_rows[month] = pq.ParquetFile(landed).metadata.num_rows
        return 1.0

    monkeypatch.setattr(pipeline, "_reset_tables", lambda paths: None)
    monkeypatch.setattr(pipeline, "CURRENT", SimpleNamespace(ingest_month=ingest_month))
    result = pipeline.scale(paths, rows=40, months=2, repeats=1)
    assert loaded_rows == {"2024-01": 40, "2024-02": 40}
    assert result["months"] == 2
