"""Task-level lineage of a Spark task: what its applications were observed to read and write, enriched on completion.

Used by ``plugins/lakehouse_extractor.py``. On START: no datasets (nothing has run), the script's source, and the
DAG's declaration as the ``lineageDrift`` run facet. On COMPLETE and FAIL: the datasets the task's Spark applications
read and wrote, rolled up from the OpenLineage listener's events with what the job reported at run time
(``include/lineage/emit/observed.py``), each with the Iceberg table's facets (schema, snapshot as version, output
statistics, catalog) as the job's report carries them (pyiceberg only for a script that leaves none; the listener's
facets for anything else), the job's data-quality metrics and assertions, fingerprints, model metrics, schema drift,
the observed column lineage, and the drift of the declaration from what ran.
Every lookup runs under one time budget; what does not finish in time is left out, never waited for.
"""

from __future__ import annotations

import ast
import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from openlineage.client.facet_v2 import (
    catalog_dataset,
    data_quality_assertions_dataset,
    data_quality_metrics_input_dataset,
    dataset_version_dataset,
    output_statistics_output_dataset,
    schema_dataset,
    source_code_job,
    source_code_location_job,
)

from include.core import contract, naming, object_store, settings
from include.core.contract import JobReport, ReportError
from include.lineage.emit import column_lineage, observed, spark_forwarder
from include.lineage.emit.facets import (
    FileFingerprintDatasetFacet,
    ModelMetricsDatasetFacet,
    SchemaDriftRunFacet,
    input_dataset,
    lineage_drift_facet,
    output_dataset,
    write_audit_publish_facet,
)

log = logging.getLogger(__name__)


def time_budget_seconds() -> float:
    """The longest a task waits for its facets; LINEAGE_FACETS_BUDGET_SECONDS raises it (a loaded CI machine)."""
    return settings.LINEAGE_FACETS_BUDGET_SECONDS.number()


_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lineage-facets")


def declared_keys(operator) -> tuple[list[str], list[str]]:
    """Inputs and outputs of a project operator, or of a stock SparkSubmitOperator from its inlets/outlets."""
    if hasattr(operator, "lineage_keys"):
        return operator.lineage_keys()
    return [_asset_key(asset) for asset in operator.inlets or []], [
        _asset_key(asset) for asset in operator.outlets or []
    ]


def _asset_key(asset) -> str:
    """An Asset named ``<catalog>.<namespace>.<table>`` is that Iceberg table; any other is its URI."""
    name, uri = getattr(asset, "name", "") or "", getattr(asset, "uri", "") or ""
    prefix = f"{settings.CatalogSettings.current().name}.{settings.ICEBERG_NAMESPACE}."
    return name.removeprefix(prefix) if name.startswith(prefix) else uri


def read_report(path: Path | None) -> JobReport:
    """The job's report, or an empty one when there is none (a stock operator's script may write none)."""
    if path is None or not path.exists():
        return JobReport()
    try:
        return JobReport.read(path)
    except (OSError, ReportError) as error:
        log.warning("lineage: unreadable job report %s: %s", path, error)
        return JobReport()


def _argument(operator, name: str) -> str | None:
    args = [str(arg) for arg in operator.application_args or []]
    return args[args.index(name) + 1] if name in args[:-1] else None


def _top_level_source(path: Path, name: str) -> str:
    """The source text of the top-level function or assignment ``name`` in ``path``, read without importing it."""
    text = path.read_text()
    for node in ast.parse(text).body:
        defined = (
            [node.name]
            if isinstance(node, ast.FunctionDef)
            else [target.id for target in getattr(node, "targets", []) if isinstance(target, ast.Name)]
        )
        if name in defined:
            return ast.get_source_segment(text, node)
    raise LookupError(f"{path}: no top-level definition of {name}")


def model_definition(model: str) -> str:
    """The code that defines a forecast model and its parameters (``contract.MODEL_DEFINITIONS``)."""
    if model not in contract.MODEL_DEFINITIONS:
        return f"# model {model}: no definition declared in include/core/contract.py"
    file_name, function = contract.MODEL_DEFINITIONS[model]
    params_file, params_name = contract.MODEL_PARAMS_DEFINITION
    params = ast.parse(_top_level_source(settings.PROJECT_ROOT / params_file, params_name)).body[0].value
    model_params = next(
        (
            ast.unparse(value)
            for key, value in zip(params.keys, params.values, strict=True)
            if isinstance(key, ast.Constant) and key.value == model
        ),
        "{}",
    )
    return f"# model {model}: {model_params}\n{_top_level_source(settings.PROJECT_ROOT / file_name, function)}"


def source_code_facets(application: str, model: str | None = None) -> dict:
    """sourceCodeLocation (git) and sourceCode of the Spark script, with the chosen model's definition: a change of
    code or of model is a new job version."""
    from openlineage.client import git

    script = Path(application)
    facets: dict = {}
    if script.is_file():
        code = script.read_text()
        if model:
            code += "\n\n" + model_definition(model)
        facets["sourceCode"] = source_code_job.SourceCodeJobFacet(language="python", sourceCode=code)
    git_dir = git._find_git_dir(str(settings.PROJECT_ROOT))
    if git_dir is not None and script.is_file():
        facets["sourceCodeLocation"] = source_code_location_job.SourceCodeLocationJobFacet(
            type="git",
            url=script.resolve().as_uri(),
            repoUrl=git.get_git_repo_url(git_dir=git_dir) or settings.PROJECT_ROOT.as_uri(),
            path=str(script.resolve().relative_to(settings.PROJECT_ROOT)),
            version=git.get_git_version(git_dir),
            branch=git.get_git_branch(git_dir),
        )
    return facets


class _TableFacets:
    """Facets of one Iceberg table at a snapshot: from the job's report when it carries the table's metadata (no
    catalog round trip, no pyiceberg import in the task), else read through pyiceberg (a stock operator's script)."""

    def __init__(self, columns: list[tuple[str, str]], snapshot_id: int | None, summary: dict[str, str] | None):
        self.columns = columns
        self.snapshot_id = snapshot_id
        self.summary = summary
        self.settings = settings.CatalogSettings.current()

    @classmethod
    def from_report(cls, state: dict) -> _TableFacets | None:
        if not state.get("iceberg_schema"):
            return None
        return cls(
            [tuple(column) for column in state["iceberg_schema"]],
            state.get("snapshot_id"),
            state.get("snapshot_summary"),
        )

    @classmethod
    def from_catalog(cls, catalog, table_name: str, snapshot_id: int | None) -> _TableFacets:
        table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{table_name}")
        snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id else table.current_snapshot()
        summary = snapshot.summary.additional_properties if snapshot is not None and snapshot.summary else None
        columns = [(f.name, str(f.field_type)) for f in table.schema().fields]
        return cls(columns, snapshot_id or getattr(snapshot, "snapshot_id", None), summary)

    def dataset_facets(self) -> dict:
        fields = [
            schema_dataset.SchemaDatasetFacetFields(name=name, type=type_name, ordinal_position=i + 1)
            for i, (name, type_name) in enumerate(self.columns)
        ]
        facets = {
            "schema": schema_dataset.SchemaDatasetFacet(fields=fields),
            "catalog": catalog_dataset.CatalogDatasetFacet(
                framework="iceberg",
                type=self.settings.type,
                name=self.settings.name,
                metadataUri=_redact_uri(self.settings.uri),
                warehouseUri=self.settings.warehouse,
                source="spark",
            ),
        }
        if self.snapshot_id is not None:
            facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(self.snapshot_id))
        return facets

    def output_statistics(self):
        if self.summary is None:
            return None
        return output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=int(self.summary.get("added-records", 0)),
            size=int(self.summary.get("added-files-size", 0)),
            fileCount=int(self.summary.get("added-data-files", 0)),
        )


def _redact_uri(uri: str) -> str:
    """A catalog URI without credentials or query parameters."""
    from urllib.parse import urlsplit, urlunsplit

    if uri.startswith("jdbc:"):
        return "jdbc:" + _redact_uri(uri.removeprefix("jdbc:"))
    parts = urlsplit(uri)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _dataset_facets(key: str, role: str, report: JobReport, catalog) -> tuple[dict, dict]:
    """(dataset facets, input/output facets) of one key; ``catalog()`` opens the pyiceberg catalog when needed."""
    facets: dict = {}
    io_facets: dict = {}
    section = (report.inputs if role == "input" else report.outputs).get(key, {})
    if naming.is_table_key(key):
        table = _TableFacets.from_report(section) or _TableFacets.from_catalog(
            catalog(), key, section.get("snapshot_id")
        )
        facets.update(table.dataset_facets())
        if role == "output":
            statistics = table.output_statistics()
            if statistics is not None:
                io_facets["outputStatistics"] = statistics
    elif key.startswith(naming.MODEL_PREFIX) and report.model:
        model = report.model
        facets["modelMetrics"] = ModelMetricsDatasetFacet(
            modelName=model["model_name"],
            modelVersion=model["model_version"],
            mae=model["mae"],
            baselineMae=model["baseline_mae"],
            holdoutRows=model.get("holdout_rows"),
        )
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=model["model_version"])
    fingerprint = report.source_fingerprints.get(key)
    if fingerprint:
        facets["fileFingerprint"] = FileFingerprintDatasetFacet(
            fingerprint=fingerprint,
            sizeBytes=object_store.size(key),  # a landed file here, or on the object store
        )
    if role == "input" and key in report.input_metrics:
        metrics = report.input_metrics[key]
        io_facets["dataQualityMetrics"] = data_quality_metrics_input_dataset.DataQualityMetricsInputDatasetFacet(
            rowCount=metrics["rowCount"],
            columnMetrics={
                column: data_quality_metrics_input_dataset.ColumnMetrics(nullCount=values["nullCount"])
                for column, values in metrics["columnMetrics"].items()
            },
        )
    if key in report.assertions:
        # OpenLineage defines dataQualityAssertions as an input facet (its schema extends InputDatasetFacet; the Java
        # client's InputDatasetInputFacets and DataHub read it from inputFacets), like the file's dataQualityMetrics
        # above. The spec has no output place for it: a table's checks after its write stay among its facets.
        assertions = data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
            assertions=[data_quality_assertions_dataset.Assertion(**a) for a in report.assertions[key]]
        )
        (io_facets if role == "input" else facets)["dataQualityAssertions"] = assertions
    return facets, io_facets


def _listener_facets(key: str, facets: dict) -> dict:
    """The facets of a dataset that is not an Iceberg table of the catalog (a file, a table of another namespace) as
    the listener gave them: its schema and version."""
    result: dict = {}
    schema = facets.get("schema") or {}
    if isinstance(schema.get("fields"), list):
        result["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(name=str(f.get("name")), type=f.get("type"))
                for f in schema["fields"]
                if isinstance(f, dict) and f.get("name")
            ]
        )
    version = (facets.get("version") or {}).get("datasetVersion")
    if version is not None:
        result["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(version))
    return result


def _enriched(seen: observed.Observed, report: JobReport):
    catalog = functools.cache(settings.pyiceberg_catalog)
    enriched_inputs = []
    for key in seen.input_keys():
        facets, input_facets = _dataset_facets(key, "input", report, catalog)
        enriched_inputs.append(input_dataset(key, {**_listener_only(key, seen.inputs[key]), **facets}, input_facets))
    enriched_outputs = []
    for key in seen.output_keys():
        facets, output_facets = _dataset_facets(key, "output", report, catalog)
        facets = {**_listener_only(key, seen.outputs[key]), **facets}
        column_facet = column_lineage.facet_of(seen.columns.get(key, {}))
        if column_facet is not None:
            facets["columnLineage"] = column_facet
        enriched_outputs.append(output_dataset(key, facets, output_facets))
    return enriched_inputs, enriched_outputs


def _listener_only(key: str, facets: dict) -> dict:
    """An Iceberg table's facets come from the job's report or the catalog (``_TableFacets``); any other dataset's
    from the listener."""
    return {} if naming.is_table_key(key) else _listener_facets(key, facets)


def task_run_id(operator) -> str | None:
    """The OpenLineage run id of the task, as the provider gave it to the Spark listener as its parent."""
    return (getattr(operator, "conf", None) or {}).get(observed.PARENT_RUN_ID_PROPERTY)


def listener_file(operator) -> Path:
    """Where the listener of a stock operator's application writes: its ``conf``'s file, else the project's."""
    conf = getattr(operator, "conf", None) or {}
    if conf.get("spark.openlineage.transport.type") == "file" and conf.get(spark_forwarder.LISTENER_LOCATION):
        return Path(conf[spark_forwarder.LISTENER_LOCATION])
    return settings.Paths.current().spark_lineage_events


def remember_listener_offset(operator) -> None:
    """On START, before the application runs: where the listener's shared file ends now, so that COMPLETE reads
    only what came after (a stock operator has no outbox of its own)."""
    if getattr(operator, "spark_lineage_events", None) is not None:
        return
    try:
        operator.listener_offset = listener_file(operator).stat().st_size
    except OSError:
        operator.listener_offset = 0


def observe(operator, report: JobReport) -> observed.Observed:
    """What the task did: its applications' listener events (the project operator keeps its outbox's events; a stock
    operator's are read from the listener's file since START) with what the job reported at run time."""
    own = getattr(operator, "spark_lineage_events", None)
    if own is not None:
        events, run_id = own, None
    else:
        events = observed.events_after(listener_file(operator), getattr(operator, "listener_offset", None))
        run_id = task_run_id(operator)
    return observed.with_report(observed.roll_up(events, run_id), report)


def _declared_facet(operator, seen: observed.Observed | None) -> dict:
    """The run facet of a task that declares datasets: the declaration, and on COMPLETE/FAIL its drift."""
    inputs, outputs = declared_keys(operator)
    if not inputs and not outputs:
        return {}
    return {"lineageDrift": lineage_drift_facet(inputs, outputs, seen)}


class ObservedDatasets(list):
    """The datasets the extractor answers with, true even when empty. The provider's ExtractorManager falls back to
    the operator's ``inlets``/``outlets`` when an extractor returns no inputs and no outputs
    (``extractors/manager.py``: "Last resort - check manual annotations"): a START, or a task that touched nothing,
    would then carry the declaration as if it were lineage. An empty answer of this extractor is an answer."""

    def __bool__(self) -> bool:
        return True


def lineage_of(operator, task_instance=None, complete: bool = False):
    """OperatorLineage of a Spark task. START: no datasets (nothing ran yet) and the declaration as a run facet.
    COMPLETE and FAIL: the datasets the task was observed to read and write, with rich facets, and the drift of the
    declaration from them."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    started = time.monotonic()
    job_facets = source_code_facets(str(operator.application), _argument(operator, "--model"))
    if not complete:
        remember_listener_offset(operator)
        return OperatorLineage(
            inputs=ObservedDatasets(),
            outputs=ObservedDatasets(),
            job_facets=job_facets,
            run_facets=_declared_facet(operator, None),
        )
    report = read_report(contract.report_location(operator.application_args, task_instance))

    def extract():
        seen = getattr(operator, "observed_lineage", None) or observe(operator, report)
        return seen, *_enriched(seen, report)

    future = _executor.submit(extract)
    try:
        seen, enriched_inputs, enriched_outputs = future.result(timeout=time_budget_seconds())
    except FutureTimeout:
        log.warning(
            "lineage: facets of %s not ready within %.1fs; emitting no datasets",
            operator.task_id,
            time_budget_seconds(),
        )
        return OperatorLineage(inputs=ObservedDatasets(), outputs=ObservedDatasets(), job_facets=job_facets)
    except Exception as error:  # lineage must never fail the task
        log.warning("lineage: could not observe the datasets of %s: %s", operator.task_id, error, exc_info=True)
        return OperatorLineage(inputs=ObservedDatasets(), outputs=ObservedDatasets(), job_facets=job_facets)
    run_facets = _declared_facet(operator, seen)
    drift = report.schema_drift
    if drift and (drift.get("renamed") or drift.get("filled_with_null") or drift.get("unexpected")):
        run_facets["schemaDrift"] = SchemaDriftRunFacet(
            renamed=drift.get("renamed", {}),
            filledWithNull=drift.get("filled_with_null", []),
            unexpected=drift.get("unexpected", []),
        )
    if report.audit:
        run_facets["writeAuditPublish"] = write_audit_publish_facet(report.audit)
    log.info("lineage: extracted %s in %.3fs", operator.task_id, time.monotonic() - started)
    return OperatorLineage(
        inputs=ObservedDatasets(enriched_inputs),
        outputs=ObservedDatasets(enriched_outputs),
        job_facets=job_facets,
        run_facets=run_facets,
    )
