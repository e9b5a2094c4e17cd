"""Unit tests that need the local SparkSession are marked ``spark``, so ``make test-fast`` can leave them out."""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and item.path.is_relative_to(UNIT_DIR):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="module")
def empty_store_file(tmp_path_factory) -> Path:
    """A lineage store made once (its migrations are most of a new store's time), for tests that copy it for each
    hypothesis example."""
    from include.lineage.store import LineageStore

    path = tmp_path_factory.mktemp("empty") / "store.db"
    LineageStore(f"sqlite:///{path}").close()
    return path
