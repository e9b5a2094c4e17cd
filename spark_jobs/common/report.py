"""The small JSON report each job leaves for the lineage extractor (row counts, snapshots, metrics)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_report(path: str | None, report: dict) -> None:
    if not path:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".tmp")
    partial.write_text(json.dumps(report, indent=2, sort_keys=True, default=str))
    os.replace(partial, target)


def column_metrics(df, columns: list[str]) -> dict:
    """Row count and null count of each column, in one pass: the dataQualityMetrics of an input."""
    from pyspark.sql import functions as F

    row = df.agg(
        F.count(F.lit(1)).alias("__rows"),
        *[F.sum(F.col(c).isNull().cast("long")).alias(c) for c in columns],
    ).first()
    return {"rowCount": row["__rows"], "columnMetrics": {c: {"nullCount": int(row[c] or 0)} for c in columns}}


def assertion(name: str, success: bool, column: str | None = None, actual=None, expected=None) -> dict:
    return {
        "assertion": name,
        "success": bool(success),
        "column": column,
        "actual": None if actual is None else str(actual),
        "expected": None if expected is None else str(expected),
    }
