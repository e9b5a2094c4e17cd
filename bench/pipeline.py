"""``make bench``: the pipeline and the cost of lineage, measured side by side as ratios in one run.

Every figure is the median of ``BENCH_REPEATS`` (default 3) alternating runs, with its spread (min..max), written to
``var/bench/results.json`` and ``var/bench/results.md``. Nothing here asserts a timing.

1. Ingest efficiency: the taxi load of one generated month (``BENCH_ROWS``, default 3,000,000 rows, about a
   real month) ÷ a bare Spark job doing the same read and a plain parquet write; first load and idempotent re-load;
   the same for the jobs of a git ref (``BENCH_BASELINE_REF``, default the load of the round before, whose
   quarantine was written after raw's month; empty: none)
   run alternately in the same run, with their own code zip.
2. Lineage overhead: the taxi DAG via ``airflow dags test`` with OpenLineage on ÷ with ``[openlineage] disabled``,
   in wall clock and in the CPU time of every process the run started, and the extractor's own time per task (from
   its log line). Pairs are added after ``BENCH_REPEATS`` until the mean ratio's standard error is at most
   ``BENCH_LINEAGE_TARGET_ERROR`` (default 0.01: a 3 % overhead three errors from none) or
   ``BENCH_LINEAGE_MAX_PAIRS`` (default 20) ran; the table says how many ran and whether the target was reached.
3. Scale: each of ``BENCH_SCALE_MONTHS`` (default 12) generated months of ``BENCH_SCALE_ROWS`` (default 500,000) rows
   ingested in turn; month N into a raw table holding months 1..N-1 ÷ month 1 into an empty one.
4. Explorer: the lineage store on a generated 10^5-node lineage graph: ingest rate, upstream/downstream latency from
   the closure table beside a recursive CTE (``bench/explorer.py``; ``BENCH_EXPLORER_NODES``).
5. First hour: the fixed cost of one Spark task (an empty job with the project's settings ÷ the same job submitted
   bare) and ``make demo``'s time per step (``DEMO_ROWS_PER_MONTH`` trips, a ``var/`` of its own); the machine's
   load averages at the start and the end of the bench are written beside every figure.
6. Machine speed (``bench/speed_probe.py``): this VM's cores switch between a fast and a slow state, which moves
   every time and CPU time by up to 1.8x; the share of the bench, and of each section, spent in the slow state.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench import explorer, speed_probe
from include.airflow import runs
from include.core import ports, settings
from include.services import catalog_server
from include.sources import sample_data, sample_server
from include.spark import codeship, submit

# The load of the round before, measured beside this checkout's (BENCH_BASELINE_REF; "" for none): its quarantine
# was written after raw's month, not beside it. Not b03d0b2, the last code with a staging table: its MERGE's audit
# can read the audit branch's empty snapshot and block the month (fixed in 18e5406), which ends the bench.
DEFAULT_BASELINE_REF = "9b297f0"
# load_taxi straight into main, without write-audit-publish: what the audit branch costs a first load.
DIRECT_LOAD_JOB = Path(__file__).resolve().parent / "jobs" / "load_taxi_direct.py"
EXTRACTED = re.compile(r"lineage: extracted (\w+) in ([0-9.]+)s")


def _progress(message: str) -> None:
    print(f"bench [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _spark_submit(script: str | Path, args: list[str], code_zip: Path | None = None) -> float:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    os.environ.update(submit.spark_connection_outside_airflow())
    kwargs = submit.spark_submit_kwargs()
    if code_zip is not None:
        kwargs["py_files"] = str(code_zip)
    started = time.monotonic()
    SparkSubmitHook(**kwargs, application_args=args).submit(str(script))
    return time.monotonic() - started


@dataclass(frozen=True)
class JobsVersion:
    """The taxi jobs of one version of the code: this checkout's, or a git ref's (the baseline)."""

    label: str
    jobs_dir: Path
    code_root: Path | None = None  # a git ref's checkout, shipped as its own code zip; None: this checkout's

    def ingest_month(self, month: str) -> float:
        return sum(
            _spark_submit(self.jobs_dir / f"{job}.py", ["--month", month], self.code_zip()) for job in self.taxi_jobs()
        )

    def code_zip(self) -> Path | None:
        """The ref's code zip, built (or found) at each submit: codeship keeps only the newest zips, and this
        checkout's, rebuilt whenever its code changes, can push a ref's older one out between two rounds."""
        return codeship.ensure_built(settings.Paths.current(), root=self.code_root) if self.code_root else None

    def taxi_jobs(self) -> tuple[str, ...]:
        """The jobs one month's ingest runs: one load since the rows are written once, a stage and a MERGE before."""
        return ("load_taxi",) if (self.jobs_dir / "load_taxi.py").exists() else ("stage_taxi", "merge_taxi")


CURRENT = JobsVersion("this checkout", settings.SPARK_JOBS_DIR)


def baseline_version(paths: settings.Paths, ref: str) -> JobsVersion | None:
    """The jobs as they were at ``ref`` (``git archive``), shipped as their own code zip; None outside a git clone
    or for an unknown ref (the bench then reports this checkout only)."""
    folder = paths.var / "baseline" / ref
    if not (folder / "spark_jobs").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(settings.PROJECT_ROOT), "archive", "--format=tar", ref, "include", "spark_jobs"],
            capture_output=True,
        )
        if archive.returncode != 0:
            _progress(f"no baseline: git archive {ref}: {archive.stderr.decode(errors='replace').strip()}")
            shutil.rmtree(folder, ignore_errors=True)
            return None
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(folder, filter="data")
    return JobsVersion(f"baseline {ref}", folder / "spark_jobs", folder)


def _summary(values: list[float]) -> dict:
    """Median and spread, and the standard error of the mean: whether a ratio's repeats resolve a difference (the
    lineage overhead's 3 %) is read from the error, not the spread."""
    error = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else None
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
        "standard_error": error,
        "runs": values,
    }


def _descendants_cpu_seconds() -> float:
    """User + system CPU of every finished, reaped descendant (a DAG run's task processes, Spark's JVMs and Python
    drivers; not the catalog server, which the bench started and keeps running): what lineage adds to a run's work,
    whether or not the run's two cores were idle while it waited."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reset_tables(paths: settings.Paths) -> None:
    """Empty warehouse and catalog; the catalog server keeps its SQLite file open, so it restarts around it."""
    catalog_server.stop(paths)
    for folder in (paths.warehouse, paths.catalog_dir):
        shutil.rmtree(folder, ignore_errors=True)
    (paths.landing / "_ingested.jsonl").unlink(missing_ok=True)
    paths.ensure()
    catalog_server.ensure_running(paths)


def ingest_efficiency(paths: settings.Paths, rows: int, repeats: int, baseline: JobsVersion | None) -> dict:
    month = "2025-01"
    landed = paths.landing / "tlc" / sample_data.taxi_file_name(2025, 1)
    sample_data.write_taxi_month(landed.parent, 2025, 1, rows)
    size = landed.stat().st_size
    bare_script = Path(__file__).resolve().parent / "jobs" / "bare_copy.py"
    versions = [CURRENT, *([baseline] if baseline else [])]
    first: dict[str, list[float]] = {v.label: [] for v in versions}
    reload: dict[str, list[float]] = {v.label: [] for v in versions}
    bare: list[float] = []
    direct: list[float] = []
    for i in range(repeats):
        _reset_tables(paths)
        _progress(f"ingest {i + 1}/{repeats}: bare read + parquet write")
        bare.append(_spark_submit(bare_script, [str(landed), str(paths.bench / "bare_copy")]))
        for version in versions:
            _reset_tables(paths)
            jobs = " + ".join(version.taxi_jobs())
            _progress(f"ingest {i + 1}/{repeats}: {version.label}: {jobs}, first load")
            first[version.label].append(version.ingest_month(month))
            _progress(f"ingest {i + 1}/{repeats}: {version.label}: {jobs}, idempotent re-load")
            reload[version.label].append(version.ingest_month(month))
        _reset_tables(paths)
        _progress(f"ingest {i + 1}/{repeats}: this checkout's load without write-audit-publish, first load")
        direct.append(_spark_submit(DIRECT_LOAD_JOB, ["--month", month]))

    def figures(label: str) -> dict:
        return {
            "first_load_seconds": _summary(first[label]),
            "reload_seconds": _summary(reload[label]),
            "first_load_ratio": _summary([f / b for f, b in zip(first[label], bare, strict=True)]),
            "reload_ratio": _summary([r / b for r, b in zip(reload[label], bare, strict=True)]),
            "first_load_rows_per_second": rows / statistics.median(first[label]),
        }

    results = {
        "rows": rows,
        "file_bytes": size,
        "bare_seconds": _summary(bare),
        "bare_rows_per_second": rows / statistics.median(bare),
        **figures(CURRENT.label),
        "first_load_without_wap_seconds": _summary(direct),
        "first_load_without_wap_ratio": _summary([d / b for d, b in zip(direct, bare, strict=True)]),
    }
    if baseline:
        results["baseline"] = {"version": baseline.label, **figures(baseline.label)}
        results["first_load_speedup"] = _summary(
            [b / c for b, c in zip(first[baseline.label], first[CURRENT.label], strict=True)]
        )
    return results


# Pairs measured before the stopping rule may stop the lineage section: a standard error estimated from two or three
# pairs is small by chance as often as not (two pairs of 1.098 and 1.111 gave ± 0.007 and stopped a bench at a ratio
# of 1.10); from ten on, the estimate itself is within about ±25 % of the spread it estimates.
MIN_LINEAGE_PAIRS = 10


def interval_95(values: list[float]) -> tuple[float, float] | None:
    """The mean's 95 % interval (Student's t, two-sided), None under two values."""
    if len(values) < 2:
        return None
    mean, error = statistics.fmean(values), statistics.stdev(values) / len(values) ** 0.5
    degrees = len(values) - 1
    quantile = _T_975[degrees - 1] if degrees <= len(_T_975) else statistics.NormalDist().inv_cdf(0.975)
    return (mean - quantile * error, mean + quantile * error)


# Student's t at 0.975 for 1 to 30 degrees of freedom (any statistics table); past 30, the normal's 1.96.
_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def resolved(ratios: list[float], target_error: float, min_pairs: int) -> bool:
    """Whether the pairs so far pin the mean ratio down: at least ``min_pairs`` (and two, for an error at all) and a
    standard error of the mean no larger than ``target_error``. A pair's ratio varies by ±0.02 on an idle machine and
    by ±0.1 on a busy one, so a fixed count either wastes an idle machine's time or cannot tell 1.03 from 1.00."""
    if len(ratios) < max(min_pairs, 2):
        return False
    return statistics.stdev(ratios) / len(ratios) ** 0.5 <= target_error


def lineage_overhead(
    paths: settings.Paths, rows: int, repeats: int, target_error: float = 0.0, max_pairs: int | None = None
) -> dict:
    """The taxi DAG with OpenLineage on and off, in alternating pairs: ``repeats`` of them, then more until the mean
    on ÷ off ratio's standard error is at most ``target_error`` or ``max_pairs`` ran (a ratio's 3 % takes about 10
    pairs on an idle machine, 45 on a busy one)."""
    min_pairs = max(repeats, MIN_LINEAGE_PAIRS)
    max_pairs = max(max_pairs or min_pairs, min_pairs)
    source = paths.var / "bench-source"
    sample_server.publish_months(source, [(2025, 1)], rows)
    on, off, extractor = [], [], {}
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    variants = [("on", {}), ("off", {"AIRFLOW__OPENLINEAGE__DISABLED": "True"})]
    ratios = lambda: [a / b for a, b in zip(on, off, strict=True)]  # noqa: E731
    with sample_server.serve(source) as env:
        i = 0
        while i < max_pairs and not resolved(ratios(), target_error, min_pairs):
            # Alternating which goes first cancels a drift of the machine; empty tables make every run load the
            # month (a forced run of a month already loaded is recognised and writes nothing: loaded_source).
            for label, extra in variants if i % 2 == 0 else reversed(variants):
                _reset_tables(paths)
                _progress(f"lineage pair {i + 1} (at most {max_pairs}): taxi DAG with OpenLineage {label}")
                cpu_before = _descendants_cpu_seconds()
                result = runs.dags_test("ingest_yellow_taxi_data", "2025-02-01", {"force": True}, env={**env, **extra})
                cpu[label].append(_descendants_cpu_seconds() - cpu_before)
                if not result.succeeded:
                    raise RuntimeError(f"taxi DAG failed during the benchmark ({label})")
                (on if label == "on" else off).append(result.seconds)
                for task, seconds in EXTRACTED.findall(result.log):
                    extractor.setdefault(task, []).append(float(seconds))
            i += 1
    return {
        "pairs": len(on),
        "target_standard_error": target_error,
        "min_pairs": min_pairs,
        "resolved": resolved(ratios(), target_error, min_pairs),
        "overhead_ratio_interval_95": interval_95(ratios()),
        "dag_seconds_lineage_on": _summary(on),
        "dag_seconds_lineage_off": _summary(off),
        "overhead_ratio": _summary(ratios()),
        "dag_cpu_seconds_lineage_on": _summary(cpu["on"]),
        "dag_cpu_seconds_lineage_off": _summary(cpu["off"]),
        "cpu_overhead_ratio": _summary([a / b for a, b in zip(cpu["on"], cpu["off"], strict=True)]),
        "extractor_seconds_per_task": {task: _summary(values) for task, values in extractor.items()},
    }


def scale(paths: settings.Paths, rows: int, months: int, repeats: int) -> dict:
    """Each month's load as history grows: month ``months`` into a raw table already holding the ones
    before it, against month 1 into an empty table."""
    calendar = [(2024 + (m - 1) // 12, (m - 1) % 12 + 1) for m in range(1, months + 1)]
    for year, month in calendar:
        # Written each time, never reused: a file left by an earlier bench of another size (5,000 rows from a quick
        # run) made months 1-2 cheap and the growth ratio 1.50 where every month cost the same (27 November).
        sample_data.write_taxi_month(paths.landing / "tlc", year, month, rows)
    timings: dict[int, list[float]] = {m: [] for m in range(1, months + 1)}
    for i in range(repeats):
        _reset_tables(paths)
        for number, (year, month) in enumerate(calendar, start=1):
            _progress(f"scale {i + 1}/{repeats}: month {number} of {months}")
            timings[number].append(CURRENT.ingest_month(f"{year}-{month:02d}"))
    return {
        "months": months,
        "month_seconds": {str(m): _summary(v) for m, v in timings.items()},
        "month_growth_ratio": _summary([last / one for last, one in zip(timings[months], timings[1], strict=True)]),
    }


EMPTY_JOB = Path(__file__).resolve().parent / "jobs" / "empty_job.py"


# The driver's JVM as it started before include/spark/jvm.py: every class loaded from the jars, C2 compiling, the
# JVM's default collector (G1 on a machine of two cores or more).
BEFORE_START_UP = {"SPARK_CLASS_DATA_SHARING": "false", "SPARK_DRIVER_JIT": "full", "SPARK_DRIVER_GC": "g1"}


@contextlib.contextmanager
def _settings(values: dict[str, str]):
    """The project's settings as ``values`` say while the launch is built, then as they were."""
    saved = {name: settings.SETTINGS[name].raw() for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _submit_empty_job(project_settings: bool, settings_env: dict[str, str] | None = None) -> float:
    """Seconds of one ``spark-submit`` of the empty job: with every property, jar and the code zip a task of the
    project gets (Iceberg, the catalog, the OpenLineage listener; ``settings_env`` overrides settings such as
    ``SPARK_CLASS_DATA_SHARING`` while the launch is built), or bare (local mode, nothing added)."""
    if project_settings:
        with _settings(settings_env or {}):
            kwargs = submit.spark_submit_kwargs()
        command = ["spark-submit", "--master", submit.DEFAULT_SPARK_MASTER]
        for key, value in kwargs["conf"].items():
            command += ["--conf", f"{key}={value}"]
        command += ["--jars", kwargs["jars"], "--py-files", kwargs["py_files"]]
        env = {**os.environ, **kwargs["env_vars"]}
    else:
        command = ["spark-submit", "--master", submit.DEFAULT_SPARK_MASTER]
        env = dict(os.environ)
    started = time.monotonic()
    subprocess.run([*command, str(EMPTY_JOB)], env=env, check=True, capture_output=True)
    return time.monotonic() - started


def spark_task_fixed_cost(repeats: int) -> dict:
    """The empty job with the project's settings, with them as the driver started before class-data sharing and the
    quick JIT (``BEFORE_START_UP``), and submitted bare: the three alternating, so they share the machine's load."""
    project, before, bare = [], [], []
    for repeat in range(1, repeats + 1):
        _progress(f"first hour: empty Spark job, project settings, as before, and bare ({repeat}/{repeats})")
        project.append(_submit_empty_job(True))
        before.append(_submit_empty_job(True, BEFORE_START_UP))
        bare.append(_submit_empty_job(False))
    return {
        "project_seconds": _summary(project),
        "before_seconds": _summary(before),
        "bare_seconds": _summary(bare),
        "fixed_cost_ratio": _summary([a / b for a, b in zip(project, bare, strict=True)]),
        "before_fixed_cost_ratio": _summary([a / b for a, b in zip(before, bare, strict=True)]),
        "start_up_speedup": _summary([b / a for a, b in zip(project, before, strict=True)]),
    }


def demo_steps(paths: settings.Paths, rows: int, label: str, settings_env: dict[str, str] | None = None) -> dict:
    """``pipeline demo --rows N`` in a ``var/`` of its own: its time per step (``var/demo-logs/timings.json``)."""
    demo_var = paths.var / f"demo-{label}"
    shutil.rmtree(demo_var, ignore_errors=True)
    env = {
        **os.environ,
        **(settings_env or {}),
        "PIPELINE_VAR_DIR": str(demo_var),
        "ICEBERG_REST_PORT": str(ports.free_port()),
    }
    for name in ("AIRFLOW_HOME", "AIRFLOW_CONFIG", "AIRFLOW_CONN_SPARK_DEFAULT"):
        env.pop(name, None)
    _progress(f"first hour: make demo of {rows:,} trips in {demo_var} ({label})")
    subprocess.run([sys.executable, "-m", "include.setup.bootstrap"], env=env, check=True, stdout=subprocess.DEVNULL)
    pipeline = Path(sys.executable).parent / "pipeline"
    try:
        subprocess.run([str(pipeline), "demo", "--rows", str(rows)], env=env, check=True, stdout=subprocess.DEVNULL)
    finally:
        subprocess.run([str(pipeline), "catalog", "stop"], env=env, stdout=subprocess.DEVNULL)
    return {"rows": rows, **json.loads((demo_var / "demo-logs" / "timings.json").read_text())}


def first_hour(paths: settings.Paths, repeats: int) -> dict:
    """The fixed cost of a Spark task, and the demo with the driver as it starts now and as it started before, one
    after the other in this run."""
    rows = settings.DEMO_ROWS_PER_MONTH.integer()
    return {
        "spark_task": spark_task_fixed_cost(repeats),
        "demo": demo_steps(paths, rows, "now"),
        "demo_before": demo_steps(paths, rows, "before", BEFORE_START_UP),
    }


def first_hour_markdown(results: dict) -> str:
    fmt = lambda s: f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"  # noqa: E731
    task, demo = results["spark_task"], results["demo"]
    before = results.get("demo_before") or {"steps": {}, "total": float("nan")}
    lines = [
        "",
        f"First hour (load average {results.get('load', '?')}):",
        "",
        "| figure | now | before (no class-data sharing, C2, G1) |",
        "|---|---|---|",
        f"| empty Spark job, project settings (s) | {fmt(task['project_seconds'])} | "
        f"{fmt(task['before_seconds']) if 'before_seconds' in task else ''} |",
        f"| empty Spark job, bare spark-submit (s) | {fmt(task['bare_seconds'])} | |",
        f"| `first_hour.fixed_cost_ratio`: project ÷ bare | {fmt(task['fixed_cost_ratio'])} | "
        f"{fmt(task['before_fixed_cost_ratio']) if 'before_fixed_cost_ratio' in task else ''} |",
        f"| `first_hour.start_up_speedup`: empty job before ÷ now | "
        f"{fmt(task['start_up_speedup']) if 'start_up_speedup' in task else ''} | |",
        *[
            f"| demo of {demo['rows']:,} trips: {step} (s) | {seconds:.1f} | "
            f"{before['steps'].get(step, float('nan')):.1f} |"
            for step, seconds in demo["steps"].items()
        ],
        f"| demo of {demo['rows']:,} trips: total (s) | {demo['total']:.1f} | {before['total']:.1f} |",
    ]
    return "\n".join(lines) + "\n"


def to_markdown(results: dict) -> str:
    ing, lin, sc = results["ingest"], results["lineage"], results["scale"]
    fmt = lambda s: f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"  # noqa: E731

    def mean_error(summary: dict) -> str:
        error = summary.get("standard_error")
        return f"; mean {summary['mean']:.3f} ± {error:.3f}" if error is not None else ""

    def pairs_note(lineage: dict) -> str:
        if "pairs" not in lineage:
            return ""
        reached = "reached" if lineage["resolved"] else "not reached"
        interval = lineage.get("overhead_ratio_interval_95")
        within = f", 95 % interval {interval[0]:.3f}–{interval[1]:.3f}" if interval else ""
        return f"; {lineage['pairs']} pairs, target ± {lineage['target_standard_error']:.3f} {reached}{within}"

    lines = [
        f"Machine: {results['machine']}. Ingest: {ing['rows']:,} rows ({ing['file_bytes'] / 2**20:.1f} MiB); "
        f"DAG runs: {results['lineage_rows']:,} rows; scale: {sc['months']} months of {results['scale_rows']:,} rows. "
        f"Median (min–max) of {results['repeats']} alternating runs.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| bare Spark read + parquet write (s) | {fmt(ing['bare_seconds'])} |",
        f"| load, first load (s) | {fmt(ing['first_load_seconds'])} |",
        f"| load, idempotent re-load (s) | {fmt(ing['reload_seconds'])} |",
        f"| `ingest.first_load_ratio`: first load ÷ bare | {fmt(ing['first_load_ratio'])} |",
        f"| `ingest.reload_ratio`: re-load ÷ bare | {fmt(ing['reload_ratio'])} |",
        *(
            [
                f"| load without write-audit-publish, first load (s) | {fmt(ing['first_load_without_wap_seconds'])} |",
                f"| `ingest.first_load_without_wap_ratio`: that ÷ bare | {fmt(ing['first_load_without_wap_ratio'])} |",
            ]
            if "first_load_without_wap_ratio" in ing
            else []
        ),
        f"| rows/s, first load (bare) | {ing['first_load_rows_per_second']:,.0f} ({ing['bare_rows_per_second']:,.0f}) |",
    ]
    if "baseline" in ing:
        base = ing["baseline"]
        lines += [
            f"| {base['version']}: first load (s) | {fmt(base['first_load_seconds'])} |",
            f"| {base['version']}: re-load (s) | {fmt(base['reload_seconds'])} |",
            f"| {base['version']}: first load ÷ bare | {fmt(base['first_load_ratio'])} |",
            f"| {base['version']}: re-load ÷ bare | {fmt(base['reload_ratio'])} |",
            f"| first load, {base['version']} ÷ this checkout | {fmt(ing['first_load_speedup'])} |",
        ]
    lines += [
        f"| taxi DAG, OpenLineage on (s) | {fmt(lin['dag_seconds_lineage_on'])} |",
        f"| taxi DAG, OpenLineage disabled (s) | {fmt(lin['dag_seconds_lineage_off'])} |",
        f"| `lineage.overhead_ratio`: on ÷ off | {fmt(lin['overhead_ratio'])}{mean_error(lin['overhead_ratio'])}"
        f"{pairs_note(lin)} |",
        *(
            [
                f"| taxi DAG's CPU, OpenLineage on (CPU-s) | {fmt(lin['dag_cpu_seconds_lineage_on'])} |",
                f"| taxi DAG's CPU, OpenLineage disabled (CPU-s) | {fmt(lin['dag_cpu_seconds_lineage_off'])} |",
                f"| `lineage.cpu_overhead_ratio`: on ÷ off | {fmt(lin['cpu_overhead_ratio'])}"
                f"{mean_error(lin['cpu_overhead_ratio'])} |",
            ]
            if "cpu_overhead_ratio" in lin
            else []
        ),
        *[
            f"| extractor time, {task} (s) | {fmt(s)} |"
            for task, s in sorted(lin["extractor_seconds_per_task"].items())
        ],
        *[
            f"| month {m} into raw holding months 1–{int(m) - 1} (s) | {fmt(s)} |"
            for m, s in sc["month_seconds"].items()
        ],
        f"| `scale.month_growth_ratio`: month {sc['months']} ÷ month 1 | {fmt(sc['month_growth_ratio'])} |",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    rows = settings.BENCH_ROWS.integer()
    lineage_rows = settings.BENCH_LINEAGE_ROWS.integer() if settings.BENCH_LINEAGE_ROWS.raw() else rows
    scale_rows = settings.BENCH_SCALE_ROWS.integer()
    scale_months = settings.BENCH_SCALE_MONTHS.integer()
    baseline_ref = settings.BENCH_BASELINE_REF.text(DEFAULT_BASELINE_REF)
    repeats = settings.BENCH_REPEATS.integer()
    out = settings.Paths.current().bench
    paths = settings.Paths(settings.Paths.current().var / "bench-state").ensure()
    os.environ["PIPELINE_VAR_DIR"] = str(paths.var)
    os.environ["ICEBERG_REST_PORT"] = str(ports.free_port())  # beside the catalog server of the project's own var/
    if not settings.SPARK_DRIVER_MEMORY.raw():
        os.environ[settings.SPARK_DRIVER_MEMORY.name] = "6g"  # the bench's 3 M-row month needs more than 2g
    from include.setup import bootstrap

    bootstrap.setup(paths)
    os.environ.update(settings.airflow_env(paths))  # spark-submit on PATH, spark_default connection, AIRFLOW_HOME
    _progress(
        f"{rows:,} rows per month ({lineage_rows:,} for the DAG runs, {scale_rows:,} for scale), "
        f"{repeats} repeats, state in {paths.var}"
    )
    catalog_server.ensure_running(paths)
    load_at_start = list(os.getloadavg())  # the 1/5/15-minute load averages: a loaded machine inflates every time
    try:
        with speed_probe.SpeedProbe() as probe:
            results = {
                "started": datetime.now(UTC).isoformat(),
                "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                "repeats": repeats,
                "lineage_rows": lineage_rows,
                "scale_rows": scale_rows,
            }
            with probe.section("ingest"):
                baseline = baseline_version(paths, baseline_ref) if baseline_ref else None
                results["ingest"] = ingest_efficiency(paths, rows, repeats, baseline)
            with probe.section("lineage"):
                results["lineage"] = lineage_overhead(
                    paths,
                    lineage_rows,
                    repeats,
                    settings.BENCH_LINEAGE_TARGET_ERROR.number(),
                    settings.BENCH_LINEAGE_MAX_PAIRS.integer(),
                )
            with probe.section("scale"):
                results["scale"] = scale(paths, scale_rows, scale_months, repeats)
            with probe.paused():
                results["explorer"] = explorer.explorer(paths.var / "explorer")
            with probe.section("first_hour"):
                results["first_hour"] = first_hour(paths, repeats)
        results["load_average"] = {"start": load_at_start, "end": list(os.getloadavg())}
        results["first_hour"]["load"] = " / ".join(f"{value:.1f}" for value in os.getloadavg())
        results["cpu_speed"] = probe.report()
    finally:
        catalog_server.stop(paths)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    markdown = (
        to_markdown(results)
        + speed_probe.to_markdown(results["cpu_speed"])
        + explorer.to_markdown(results["explorer"])
        + first_hour_markdown(results["first_hour"])
    )
    (out / "results.md").write_text(markdown)
    print(markdown)
    _progress(f"results in {out / 'results.json'} and {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
