"""The report each job leaves for the lineage extractor (row counts, snapshots, metrics): ``contract.JobReport``."""

from __future__ import annotations

from pathlib import Path

from include.contract import Assertion, InputMetrics, JobReport


def write_report(path: str | Path | None, report: JobReport | dict) -> None:
    """Write the job's report where ``--report`` said; a dict must hold ``JobReport`` fields only."""
    if not path:
        return
    if not isinstance(report, JobReport):
        report = JobReport.from_dict(report)
    report.write(Path(path))


def column_metrics(df, columns: list[str]) -> InputMetrics:
    """Row count and null count of each column, in one pass: the dataQualityMetrics of an input."""
    from pyspark.sql import functions as F

    row = df.agg(
        F.count(F.lit(1)).alias("__rows"),
        *[F.sum(F.col(c).isNull().cast("long")).alias(c) for c in columns],
    ).first()
    return {"rowCount": row["__rows"], "columnMetrics": {c: {"nullCount": int(row[c] or 0)} for c in columns}}


def assertion(name: str, success: bool, column: str | None = None, actual=None, expected=None) -> Assertion:
    return {
        "assertion": name,
        "success": bool(success),
        "column": column,
        "actual": None if actual is None else str(actual),
        "expected": None if expected is None else str(expected),
    }
