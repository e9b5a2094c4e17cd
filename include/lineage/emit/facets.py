"""OpenLineage datasets and facets of the project, built with openlineage-python's facet_v2 classes."""

from __future__ import annotations

from pathlib import Path

import attr
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import DatasetFacet, RunFacet, ownership_dataset, symlinks_dataset

from include.core import contract, naming

FINGERPRINT_FACET_SCHEMA_URL = (
    "https://github.com/lineage-aware-pipelines/airflow-spark-iceberg/blob/main/"
    "include/lineage/schemas/FileFingerprintDatasetFacet.json#/$defs/FileFingerprintDatasetFacet"
)


@attr.define
class FileFingerprintDatasetFacet(DatasetFacet):
    """xxhash64 of a source file's bytes: the same fingerprint means the same content was ingested."""

    fingerprint: str
    sizeBytes: int  # noqa: N815
    algorithm: str = "xxhash64"
    sourceUrl: str | None = None  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return FINGERPRINT_FACET_SCHEMA_URL


def _identity(key: str) -> tuple[str, str, dict]:
    dataset_id, symlink = naming.dataset_for_key(key)
    facets: dict = {}
    if symlink is not None:
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[symlinks_dataset.Identifier(namespace=symlink.namespace, name=symlink.name, type="TABLE")]
        )
    return dataset_id.namespace, dataset_id.name, facets


def input_dataset(key: str, facets: dict | None = None, input_facets: dict | None = None) -> InputDataset:
    namespace, name, base = _identity(key)
    return InputDataset(
        namespace=namespace, name=name, facets={**base, **(facets or {})}, inputFacets=input_facets or {}
    )


def ownership_facet(key: str) -> ownership_dataset.OwnershipDatasetFacet:
    """OpenLineage's ``ownership`` of a table, from its owners' declaration (``include/core/contract.py``)."""
    return ownership_dataset.OwnershipDatasetFacet(
        owners=[ownership_dataset.Owner(name=owner, type="MAINTAINER") for owner in contract.table_owners(key)]
    )


def output_dataset(key: str, facets: dict | None = None, output_facets: dict | None = None) -> OutputDataset:
    """An output; an Iceberg table's carries its ``ownership`` (what an alert names as its owners)."""
    namespace, name, base = _identity(key)
    if naming.is_table_key(key):
        base["ownership"] = ownership_facet(key)
    return OutputDataset(
        namespace=namespace, name=name, facets={**base, **(facets or {})}, outputFacets=output_facets or {}
    )


def land_source_lineage(pairs: list[tuple[str, Path]], downloads: list):
    """Source URL(s) -> landed file(s) of a LandSourceOperator (``pairs``, from ``include.sources.downloads``); each
    file's fingerprint where its download (``downloads``, given on complete) has one. On complete, only the files
    the operator fetched (observed): a source it did not reach is not a dataset of the run."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    by_url = {download.url: download for download in downloads}
    inputs, outputs = [], []
    for url, path in pairs:
        download = by_url.get(url)
        if downloads and download is None:
            continue
        inputs.append(input_dataset(url))
        facets = {}
        if download is not None and download.fingerprint:
            facets["fileFingerprint"] = FileFingerprintDatasetFacet(
                fingerprint=download.fingerprint, sizeBytes=download.size_bytes, sourceUrl=url
            )
        outputs.append(output_dataset(str(path), facets))
    return OperatorLineage(inputs=inputs, outputs=outputs)


MODEL_METRICS_FACET_SCHEMA_URL = FINGERPRINT_FACET_SCHEMA_URL.replace(
    "FileFingerprintDatasetFacet.json#/$defs/FileFingerprintDatasetFacet",
    "ModelMetricsDatasetFacet.json#/$defs/ModelMetricsDatasetFacet",
)
SCHEMA_DRIFT_FACET_SCHEMA_URL = FINGERPRINT_FACET_SCHEMA_URL.replace(
    "FileFingerprintDatasetFacet.json#/$defs/FileFingerprintDatasetFacet",
    "SchemaDriftRunFacet.json#/$defs/SchemaDriftRunFacet",
)


@attr.define
class ModelMetricsDatasetFacet(DatasetFacet):
    """Holdout evaluation of a trained forecast model (mean absolute error, rides per zone-hour)."""

    modelName: str  # noqa: N815
    modelVersion: str  # noqa: N815
    mae: float
    baselineMae: float  # noqa: N815
    holdoutRows: int | None = None  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return MODEL_METRICS_FACET_SCHEMA_URL


@attr.define
class SchemaDriftRunFacet(RunFacet):
    """How a source file's columns differed from the canonical schema, and what the job did about it."""

    renamed: dict = attr.field(factory=dict)
    filledWithNull: list = attr.field(factory=list)  # noqa: N815
    unexpected: list = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_DRIFT_FACET_SCHEMA_URL


WRITE_AUDIT_PUBLISH_FACET_SCHEMA_URL = FINGERPRINT_FACET_SCHEMA_URL.replace(
    "FileFingerprintDatasetFacet.json#/$defs/FileFingerprintDatasetFacet",
    "WriteAuditPublishRunFacet.json#/$defs/WriteAuditPublishRunFacet",
)


@attr.define
class WriteAuditPublishRunFacet(RunFacet):
    """A write-audit-publish of an Iceberg table: the branch the run wrote, whether main was moved to it, and every
    expectation's result (each also an entry of the dataset's ``dataQualityAssertions``)."""

    table: str
    branch: str
    published: bool
    blocking: list = attr.field(factory=list)
    warnings: list = attr.field(factory=list)
    dataset: str | None = None
    mainSnapshotId: int | None = None  # noqa: N815
    branchSnapshotId: int | None = None  # noqa: N815
    reason: str | None = None
    results: list = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return WRITE_AUDIT_PUBLISH_FACET_SCHEMA_URL


def write_audit_publish_facet(audit: dict, reason: str | None = None) -> WriteAuditPublishRunFacet:
    """The run facet of a job report's ``audit`` section (``spark_jobs/common/wap.py``)."""
    dataset_id, _ = naming.dataset_for_key(audit["table"])
    return WriteAuditPublishRunFacet(
        table=audit["table"],
        dataset=dataset_id.name,
        branch=audit["branch"],
        published=bool(audit["published"]),
        blocking=list(audit.get("blocking", [])),
        warnings=list(audit.get("warnings", [])),
        mainSnapshotId=audit.get("main_snapshot_id"),
        branchSnapshotId=audit.get("branch_snapshot_id"),
        reason=reason,
        results=list(audit.get("results", [])),
    )


LINEAGE_DRIFT_FACET_SCHEMA_URL = FINGERPRINT_FACET_SCHEMA_URL.replace(
    "FileFingerprintDatasetFacet.json#/$defs/FileFingerprintDatasetFacet",
    "LineageDriftRunFacet.json#/$defs/LineageDriftRunFacet",
)


@attr.define
class LineageDriftRunFacet(RunFacet):
    """What the DAG declared a task reads and writes, and (on COMPLETE/FAIL, ``observed`` true) where that differs
    from what the task was observed to do. Datasets as ``{"namespace", "name"}``."""

    declaredInputs: list = attr.field(factory=list)  # noqa: N815
    declaredOutputs: list = attr.field(factory=list)  # noqa: N815
    observed: bool = False
    drifted: bool = False
    declaredNotRead: list = attr.field(factory=list)  # noqa: N815
    declaredNotWritten: list = attr.field(factory=list)  # noqa: N815
    readNotDeclared: list = attr.field(factory=list)  # noqa: N815
    writtenNotDeclared: list = attr.field(factory=list)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return LINEAGE_DRIFT_FACET_SCHEMA_URL


def _dataset_refs(keys: list[str]) -> list[dict]:
    refs = []
    for key in keys:
        namespace, name, _ = _identity(key)
        refs.append({"namespace": namespace, "name": name})
    return refs


def lineage_drift_facet(declared_inputs: list[str], declared_outputs: list[str], seen=None) -> LineageDriftRunFacet:
    """The declaration of a task; with ``seen`` (``observed.Observed``), its drift from what the task did."""
    facet = LineageDriftRunFacet(
        declaredInputs=_dataset_refs(declared_inputs), declaredOutputs=_dataset_refs(declared_outputs)
    )
    if seen is None:
        return facet
    from include.lineage.emit.observed import drift

    found = drift(declared_inputs, declared_outputs, seen)
    facet.observed = True
    facet.drifted = bool(found)
    facet.declaredNotRead = _dataset_refs(found.declared_not_read)
    facet.declaredNotWritten = _dataset_refs(found.declared_not_written)
    facet.readNotDeclared = _dataset_refs(found.read_not_declared)
    facet.writtenNotDeclared = _dataset_refs(found.written_not_declared)
    return facet
