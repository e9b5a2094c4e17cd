"""Column lineage of the transforms where columns map, by Spark script and output dataset."""

from __future__ import annotations

from openlineage.client.facet_v2 import column_lineage_dataset as cl

from include.core import naming
from include.core.contract import TAXI_COLUMN_NAMES, WEATHER_COLUMNS

IDENTITY = ("DIRECT", "IDENTITY")
TRANSFORMATION = ("DIRECT", "TRANSFORMATION")
AGGREGATION = ("DIRECT", "AGGREGATION")
GROUP_BY = ("INDIRECT", "GROUP_BY")

# script -> output table -> output column -> [(input table or "*file*", input column, (type, subtype))]
MAPPINGS: dict[str, dict[str, dict[str, list[tuple[str, str, tuple[str, str]]]]]] = {
    "load_taxi": {
        naming.TAXI_RAW: {
            **{c: [("*file*", c, IDENTITY)] for c in TAXI_COLUMN_NAMES},
            "unique_row_id": [("*file*", c, TRANSFORMATION) for c in TAXI_COLUMN_NAMES],
        }
    },
    "merge_weather": {naming.WEATHER_RAW: {c: [(naming.WEATHER_STAGING, c, IDENTITY)] for c in WEATHER_COLUMNS}},
    "compute_actuals": {
        naming.HOURLY_ACTUALS: {
            "year": [(naming.TAXI_RAW, "tpep_pickup_datetime", TRANSFORMATION)],
            "month": [(naming.TAXI_RAW, "tpep_pickup_datetime", TRANSFORMATION)],
            "day": [(naming.TAXI_RAW, "tpep_pickup_datetime", TRANSFORMATION)],
            "hour": [(naming.TAXI_RAW, "tpep_pickup_datetime", TRANSFORMATION)],
            "pulocationid": [(naming.TAXI_RAW, "PULocationID", IDENTITY)],
            "total_rides": [
                (naming.TAXI_RAW, "unique_row_id", AGGREGATION),
                (naming.TAXI_RAW, "tpep_pickup_datetime", GROUP_BY),
                (naming.TAXI_RAW, "PULocationID", GROUP_BY),
            ],
        }
    },
    "write_forecast": {
        naming.HOURLY_FORECAST: {
            "pulocationid": [(naming.HOURLY_ACTUALS, "pulocationid", IDENTITY)],
            "forecasted_total_rides": [
                (naming.HOURLY_ACTUALS, "total_rides", TRANSFORMATION),
                (naming.WEATHER_RAW, "day_01", TRANSFORMATION),
            ],
        }
    },
}


def facet_for(script: str, output_key: str, input_keys: list[str]) -> cl.ColumnLineageDatasetFacet | None:
    mapping = MAPPINGS.get(script, {}).get(output_key)
    if not mapping:
        return None
    file_inputs = [key for key in input_keys if key.startswith("/") or "://" in key]
    fields = {}
    for column, sources in mapping.items():
        input_fields = []
        for table, source_column, (kind, subtype) in sources:
            dataset_keys = file_inputs if table == "*file*" else [table] if table in input_keys else []
            for key in dataset_keys:
                dataset_id, _ = naming.dataset_for_key(key)
                input_fields.append(
                    cl.InputField(
                        namespace=dataset_id.namespace,
                        name=dataset_id.name,
                        field=source_column,
                        transformations=[cl.Transformation(type=kind, subtype=subtype)],
                    )
                )
        if input_fields:
            fields[column] = cl.Fields(inputFields=input_fields)
    return cl.ColumnLineageDatasetFacet(fields=fields) if fields else None
