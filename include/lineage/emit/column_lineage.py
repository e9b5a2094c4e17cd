"""OpenLineage's ``columnLineage`` facet of an output, built from the column lineage a task was observed to have
(``include/lineage/emit/observed.py``: the Spark listener's, and the job's own where Spark cannot see)."""

from __future__ import annotations

from openlineage.client.facet_v2 import column_lineage_dataset as cl

from include.core import naming


def facet_of(columns: dict[str, list[tuple[str, str, str, str]]]) -> cl.ColumnLineageDatasetFacet | None:
    """``columns``: output column -> [(input key, input column, transformation type, subtype)]."""
    fields = {}
    for column, sources in sorted(columns.items()):
        by_field: dict[tuple[str, str, str], list[cl.Transformation]] = {}
        for key, source_column, kind, subtype in sources:
            dataset_id, _ = naming.dataset_for_key(key)
            transformation = cl.Transformation(type=kind or "DIRECT", subtype=subtype or "")
            by_field.setdefault((dataset_id.namespace, dataset_id.name, source_column), []).append(transformation)
        if by_field:
            fields[column] = cl.Fields(
                inputFields=[
                    cl.InputField(namespace=namespace, name=name, field=field, transformations=transformations)
                    for (namespace, name, field), transformations in by_field.items()
                ]
            )
    return cl.ColumnLineageDatasetFacet(fields=fields) if fields else None
