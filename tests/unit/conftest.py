"""Unit tests that need the local SparkSession are marked ``spark``, so ``make test-fast`` can leave them out."""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and item.path.is_relative_to(UNIT_DIR):
            item.add_marker(pytest.mark.spark)
