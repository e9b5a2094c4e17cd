"""The OpenLineage extractor of the project's Spark tasks, registered in airflow.cfg under ``[openlineage] extractors``.

Covers the stock ``SparkSubmitOperator`` (datasets from its inlets/outlets) and ``LakehouseSparkSubmitOperator``
(datasets from its declared lineage keys). The work lives in ``include/lineage/emit/extraction.py``.
"""

from __future__ import annotations

from airflow.providers.openlineage.extractors.base import BaseExtractor, OperatorLineage


class LakehouseSparkExtractor(BaseExtractor):
    @classmethod
    def get_operator_classnames(cls) -> list[str]:
        return ["SparkSubmitOperator", "LakehouseSparkSubmitOperator"]

    def _execute_extraction(self) -> OperatorLineage | None:
        from include.lineage.emit.extraction import lineage_of

        return lineage_of(self.operator, complete=False)

    def extract_on_complete(self, task_instance) -> OperatorLineage | None:
        from include.lineage.emit.extraction import lineage_of

        return lineage_of(self.operator, task_instance, complete=True)

    def extract_on_failure(self, task_instance) -> OperatorLineage | None:
        return self.extract_on_complete(task_instance)
