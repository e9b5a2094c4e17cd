"""The contract between the Spark jobs and the extractor: layers without a cycle, one report format, one report path."""

from __future__ import annotations

import ast
import json
import logging
from types import SimpleNamespace

import pytest

from include.core import contract, settings
from include.lineage.emit import extraction

INCLUDE_DIR = settings.PROJECT_ROOT / "include"


def _imported_modules(path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def test_no_module_of_include_imports_spark_jobs_even_inside_a_function():
    offenders = {
        str(path.relative_to(settings.PROJECT_ROOT)): sorted(
            m for m in _imported_modules(path) if m.split(".")[0] == "spark_jobs"
        )
        for path in sorted(INCLUDE_DIR.rglob("*.py"))
    }
    assert {path: modules for path, modules in offenders.items() if modules} == {}
    assert len(offenders) > 10, "the walk must have found include's modules"


def test_a_spark_jobs_driver_does_not_import_the_openlineage_client():
    """Every Spark application's Python driver imports its job's modules; openlineage.client costs 0.3 s of CPU
    there and no job needs it (the listener in the JVM and the extractor in the task emit lineage)."""
    import subprocess
    import sys

    jobs = sorted(path.stem for path in settings.SPARK_JOBS_DIR.glob("*.py") if not path.stem.startswith("_"))
    assert "load_taxi" in jobs and "merge_weather" in jobs
    program = (
        "import importlib, sys\n"
        f"for job in {jobs!r}: importlib.import_module('spark_jobs.' + job)\n"
        "print(sorted(m for m in sys.modules if m.startswith('openlineage')))"
    )
    imported = subprocess.run(
        [sys.executable, "-c", program], cwd=settings.PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    assert imported.stdout.strip() == "[]"


def test_the_import_walk_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from spark_jobs.common import models\n    import spark_jobs.load_taxi\n")
    assert _imported_modules(module) == {"spark_jobs.common", "spark_jobs.load_taxi"}


def _full_report() -> contract.JobReport:
    return contract.JobReport(
        inputs={"weather_staging": {"snapshot_id": 11, "rows": 3}},
        outputs={"yellow_taxi_raw": {"previous_snapshot_id": 11, "snapshot_id": 12, "rows": 3}},
        input_metrics={"/landing/f.parquet": {"rowCount": 3, "columnMetrics": {"PULocationID": {"nullCount": 1}}}},
        assertions={
            "yellow_taxi_raw": [
                {"assertion": "unique", "success": True, "column": "unique_row_id", "actual": "3", "expected": "3"}
            ]
        },
        source_fingerprints={"/landing/f.parquet": "ab12"},
        schema_drift={
            "renamed": {"airport_fee": "Airport_fee"},
            "filled_with_null": ["cbd_congestion_fee"],
            "unexpected": [],
        },
        model={
            "model_name": "weather",
            "model_version": "weather-1",
            "mae": 1.5,
            "baseline_mae": 2.0,
            "holdout_rows": 24,
        },
        source_rows=4,
        staged_rows=3,
        quarantined_rows={"negative_total": 1},
    )


def test_a_report_written_by_a_job_is_read_back_whole_by_the_extractor(tmp_path):
    from spark_jobs.common.report import write_report

    path = tmp_path / "reports" / "try-1.json"
    written = _full_report()
    write_report(path, written.to_dict())  # the jobs pass a dict of JobReport fields
    assert json.loads(path.read_text())["version"] == contract.REPORT_VERSION
    assert extraction.read_report(path) == written
    assert [p.name for p in path.parent.iterdir()] == ["try-1.json"], "no partial file is left behind"


def test_a_job_cannot_write_a_field_the_extractor_does_not_know(tmp_path):
    from spark_jobs.common.report import write_report

    with pytest.raises(contract.ReportError, match="unknown report field.*source_file"):
        write_report(tmp_path / "r.json", {"source_file": "/landing/f.parquet"})


@pytest.mark.parametrize(
    "content, problem",
    [
        ({"version": 99}, "report version 99"),
        ({"rows": 1}, "unknown report field"),
        ([1, 2], "JSON object"),
    ],
)
def test_a_report_of_another_version_or_shape_is_named_and_ignored_by_the_extractor(tmp_path, caplog, content, problem):
    path = tmp_path / "try-1.json"
    path.write_text(json.dumps(content))
    with pytest.raises(contract.ReportError, match=problem):
        contract.JobReport.read(path)
    with caplog.at_level(logging.WARNING, logger=extraction.log.name):
        assert extraction.read_report(path) == contract.JobReport()
    assert str(path) in caplog.text and problem.split()[0] in caplog.text


def test_the_operator_the_job_and_the_extractor_find_the_same_report_path(tmp_path, monkeypatch):
    from spark_jobs.common.runner import BAD_INPUT_EXIT_CODE, BadInputError, run

    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    ti = SimpleNamespace(
        dag_id="ingest_yellow_taxi_data",
        task_id="load_yellow_taxi_raw",
        run_id="manual__2025-02-01T00:00/x",
        try_number=2,
    )
    path = contract.report_path_for(ti)
    assert (
        path
        == tmp_path
        / "var/lineage/reports/ingest_yellow_taxi_data/load_yellow_taxi_raw/manual__2025-02-01T00:00_x/try-2.json"
    )
    job_args = ["--month", "2025-01", contract.REPORT_ARGUMENT, str(path)]  # what the project's operator passes

    def failing_job(argv):
        raise BadInputError("f.parquet: not a readable parquet file")

    with pytest.raises(SystemExit) as exit_info:
        run(failing_job, job_args)
    assert exit_info.value.code == BAD_INPUT_EXIT_CODE
    assert contract.report_location(job_args, ti) == path
    assert contract.report_location(["--month", "2025-01"], ti) == path, "without --report: the task try's path"
    assert extraction.read_report(contract.report_location(job_args, None)).error == {
        "kind": "bad_input",
        "message": "f.parquet: not a readable parquet file",
    }


def test_every_model_has_a_definition_the_extractor_reads_without_importing_the_jobs():
    from spark_jobs.common import models

    assert set(contract.MODEL_DEFINITIONS) == set(models.MODEL_PARAMS)
    for model, (file_name, function) in contract.MODEL_DEFINITIONS.items():
        definition = extraction.model_definition(model)
        assert f"def {function}(" in definition, f"{model}: {file_name} defines no {function}"
        assert definition.startswith(f"# model {model}: {{")
    assert extraction.model_definition("weather") != extraction.model_definition("seasonal_naive")


def test_weather_and_taxi_facts_have_one_definition():
    from include.sources import downloads, sample_data
    from spark_jobs.common import taxi, weather

    assert downloads.WEATHER_ELEMENTS is sample_data.WEATHER_ELEMENTS is contract.WEATHER_ELEMENTS
    assert sample_data.MISSING == contract.WEATHER_MISSING_VALUE
    assert sample_data.NYC_COUNTIES is contract.NYC_COUNTIES
    assert weather.KEY_COLUMNS + weather.DAY_COLUMNS == list(contract.WEATHER_COLUMNS)
    assert [(name, dtype.typeName()) for name, dtype in taxi.CANONICAL_COLUMNS] == list(contract.TAXI_COLUMNS)
