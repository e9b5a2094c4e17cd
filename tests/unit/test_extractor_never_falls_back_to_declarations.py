"""The provider's ExtractorManager (airflow/providers/openlineage/extractors/manager.py, run here as it is) falls
back to an operator's inlets/outlets when an extractor answers with no inputs and no outputs ("Last resort - check
manual annotations"). The project's extractor answers with what it observed, even nothing: a START, or a task that
touched nothing, never carries its declaration as lineage (include/lineage/emit/extraction.py ObservedDatasets)."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
from airflow.providers.openlineage.extractors.manager import ExtractorManager
from airflow.utils.state import TaskInstanceState

from include.core import naming, settings


@pytest.fixture
def operator(monkeypatch, paths):
    monkeypatch.syspath_prepend(str(settings.PROJECT_ROOT / "plugins"))
    operators = importlib.import_module("lakehouse_operators")
    task = operators.LakehouseSparkSubmitOperator(
        task_id="declares", script="merge_weather", inputs=[naming.WEATHER_STAGING], outputs=[naming.WEATHER_RAW]
    )
    assert task.outlets, "the declared table is the task's outlet (its Asset)"
    # nothing observed: no listener events since START, no job report
    task.conf = {
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": str(paths.var / "none.jsonl"),
    }
    return task


def _manager() -> ExtractorManager:
    extractor = importlib.import_module("lakehouse_extractor").LakehouseSparkExtractor
    manager = ExtractorManager()
    manager.add_extractor("LakehouseSparkSubmitOperator", extractor)
    return manager


@pytest.mark.parametrize("state", [TaskInstanceState.RUNNING, TaskInstanceState.SUCCESS, TaskInstanceState.FAILED])
def test_no_declared_dataset_appears_when_nothing_was_observed(operator, state):
    ti = SimpleNamespace(dag_id="d", task_id="declares", run_id="r", try_number=1)
    lineage = _manager().extract_metadata(SimpleNamespace(run_id="r"), operator, state, ti)
    assert list(lineage.inputs) == [] and list(lineage.outputs) == []
    drift = lineage.run_facets["lineageDrift"]
    assert drift.observed is (state != TaskInstanceState.RUNNING)
    assert [ref["name"] for ref in drift.declaredOutputs] == [naming.table_id(naming.WEATHER_RAW).name]
    if state != TaskInstanceState.RUNNING:
        assert drift.drifted and [r["name"] for r in drift.declaredNotWritten] == [
            naming.table_id(naming.WEATHER_RAW).name
        ]


def test_the_fallback_is_real_for_an_extractor_that_answers_nothing(operator):
    """The rule the class exists for, seen on the provider itself: a plain empty answer gets the declaration."""
    from airflow.providers.openlineage.extractors.base import BaseExtractor, OperatorLineage

    class Empty(BaseExtractor):
        @classmethod
        def get_operator_classnames(cls):
            return ["LakehouseSparkSubmitOperator"]

        def _execute_extraction(self):
            return OperatorLineage()

    manager = ExtractorManager()
    manager.add_extractor("LakehouseSparkSubmitOperator", Empty)
    lineage = manager.extract_metadata(SimpleNamespace(run_id="r"), operator, TaskInstanceState.RUNNING, None)
    assert lineage.outputs, "the provider filled in the outlets"
