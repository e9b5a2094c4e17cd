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
