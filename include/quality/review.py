"""The operator decides about a blocked branch: ``pipeline publish``, ``pipeline discard``, ``lineage checks``.

``publish`` follows Iceberg's ``fast_forward`` rule (``UpdateSnapshotReferencesOperation.replaceBranch(main, branch,
true)``): ``main`` moves to the branch's snapshot only when ``main``'s snapshot is an ancestor of it, in one metadata
commit that asserts ``main`` is still where it was read (a concurrent commit fails it, nothing changes); the branch is
dropped in the same commit. It runs through pyiceberg, without starting Spark. The publish is recorded as an
OpenLineage run (job ``pipeline.publish``, the ``writeAuditPublish`` run facet with the reason, the table as output at
its new version), and an Airflow Asset event of the table is registered, so the forecast is scheduled as after any
publish. ``discard`` drops the branch and records that too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime

from include.core import naming, settings
from include.core.errors import BadInputError, NotFoundError, PipelineError

PRODUCER = "https://github.com/lineage-aware-pipelines/airflow-spark-iceberg/blob/main/include/quality/review.py"
AUDITED_TABLES = (naming.TAXI_RAW, naming.WEATHER_RAW, naming.HOURLY_FORECAST)


def _job_names() -> tuple[str, str]:
    """The jobs ``publish`` and ``discard`` are recorded as, named where the lineage page reads them back
    (``include/lineage/api/data.py``; imported when needed: every ``pipeline`` command loads this module)."""
    from include.lineage.api.data import DISCARD_JOB, PUBLISH_JOB

    return PUBLISH_JOB, DISCARD_JOB


def __getattr__(name: str):
    if name in ("PUBLISH_JOB", "DISCARD_JOB"):  # review.PUBLISH_JOB, as before, without the import at load
        return dict(zip(("PUBLISH_JOB", "DISCARD_JOB"), _job_names(), strict=True))[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class PublishRefusedError(PipelineError):
    """main moved since the branch was made: the branch must be audited again (re-run the task)."""


def _table_key(table: str) -> str:
    key = table.removeprefix(f"{settings.CatalogSettings.current().name}.").removeprefix(
        f"{settings.ICEBERG_NAMESPACE}."
    )
    if key not in AUDITED_TABLES:
        raise BadInputError(
            f"--table {table!r}: not a table published through an audit branch; one of {', '.join(AUDITED_TABLES)}"
        )
    return key


def _load(catalog, key: str):
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{key}")
    except NoSuchTableError as error:
        raise NotFoundError(
            f"table {settings.ICEBERG_NAMESPACE}.{key} does not exist in this var/'s catalog"
        ) from error


def _branch_snapshot(table, key: str, branch: str) -> int:
    ref = table.metadata.refs.get(branch)
    if branch == "main" or ref is None or ref.snapshot_ref_type != "branch":
        branches = sorted(
            name for name, r in table.metadata.refs.items() if name != "main" and r.snapshot_ref_type == "branch"
        )
        raise NotFoundError(
            f"{settings.ICEBERG_NAMESPACE}.{key} has no audit branch {branch!r} (its branches: {', '.join(branches) or 'none'})"
        )
    return ref.snapshot_id


def _is_ancestor(table, ancestor: int | None, snapshot_id: int) -> bool:
    if ancestor is None:
        return True
    current = table.metadata.snapshot_by_id(snapshot_id)
    while current is not None:
        if current.snapshot_id == ancestor:
            return True
        current = table.metadata.snapshot_by_id(current.parent_snapshot_id) if current.parent_snapshot_id else None
    return False


def publish(table: str, branch: str, reason: str, catalog=None, transport=None, store=None) -> dict:
    from pyiceberg.exceptions import CommitFailedException

    if not (reason or "").strip():
        raise BadInputError("--reason is required: say why this branch may be published despite its audit")
    key = _table_key(table)
    iceberg = _load(catalog or settings.pyiceberg_catalog(), key)
    target = _branch_snapshot(iceberg, key, branch)
    main = iceberg.metadata.current_snapshot_id
    if not _is_ancestor(iceberg, main, target):
        raise PublishRefusedError(
            f"Cannot fast-forward: main is not an ancestor of {branch} ({settings.ICEBERG_NAMESPACE}.{key} main moved "
            f"to snapshot {main} after the branch was made): nothing changed; re-run the task to audit the data again"
        )
    try:
        iceberg.manage_snapshots().set_current_snapshot(snapshot_id=target).remove_branch(branch).commit()
    except CommitFailedException as error:
        raise PublishRefusedError(
            f"{settings.ICEBERG_NAMESPACE}.{key}: main moved while publishing {branch} ({error}); nothing changed"
        ) from error
    outcome = {"table": key, "branch": branch, "published": True, "previous": main, "snapshot": target}
    _record(_job_names()[0], outcome, reason, transport, store)
    return outcome


def discard(table: str, branch: str, reason: str | None = None, catalog=None, transport=None, store=None) -> dict:
    key = _table_key(table)
    iceberg = _load(catalog or settings.pyiceberg_catalog(), key)
    target = _branch_snapshot(iceberg, key, branch)
    iceberg.manage_snapshots().remove_branch(branch).commit()
    outcome = {"table": key, "branch": branch, "published": False, "previous": None, "snapshot": target}
    _record(_job_names()[1], outcome, reason, transport, store)
    return outcome


def _record(job_name: str, outcome: dict, reason: str | None, transport, store) -> None:
    from openlineage.client.event_v2 import Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import dataset_version_dataset
    from openlineage.client.serde import Serde

    from include.lineage.emit.facets import write_audit_publish_facet

    dataset, _ = naming.dataset_for_key(outcome["table"])
    facet = write_audit_publish_facet(
        {
            "table": outcome["table"],
            "branch": outcome["branch"],
            "published": outcome["published"],
            "main_snapshot_id": outcome["snapshot"] if outcome["published"] else None,
            "branch_snapshot_id": outcome["snapshot"],
        },
        reason=reason,
    )
    outputs = []
    if outcome["published"]:
        version = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(outcome["snapshot"]))
        outputs = [OutputDataset(namespace=dataset.namespace, name=dataset.name, facets={"version": version})]
    run_id = str(uuid.uuid4())
    events = [
        RunEvent(
            eventType=state,
            eventTime=datetime.now(UTC).isoformat(),
            producer=PRODUCER,
            run=Run(runId=run_id, facets={"writeAuditPublish": facet}),
            job=Job(namespace=settings.OPENLINEAGE_NAMESPACE, name=job_name),
            inputs=[],
            outputs=outputs,
        )
        for state in (RunState.START, RunState.COMPLETE)
    ]
    if transport is not None:
        for event in events:
            transport.emit(event)
    if store is not None:
        store.ingest([json.loads(Serde.to_json(event)) for event in events])
    outcome["run_id"] = run_id


def register_asset_event(table: str, extra: dict | None = None) -> None:
    """An Airflow Asset event of ``table``, as a task's outlet would have made: the DAGs it schedules are queued.
    Runs Airflow in a child process with this var/'s AIRFLOW_HOME (the same call as the REST API's
    ``POST /assets/events``: ``asset_manager.register_asset_change``)."""
    asset = naming.table_asset(table)
    code = (
        "import json, sys\n"
        "from sqlalchemy import select\n"
        "from airflow.assets.manager import asset_manager\n"
        "from airflow.models.asset import AssetModel\n"
        "from airflow.utils.session import create_session\n"
        "name, uri, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])\n"
        "with create_session() as session:\n"
        "    model = session.scalar(select(AssetModel).where(AssetModel.name == name, AssetModel.uri == uri))\n"
        "    if model is None:\n"
        "        sys.exit(f'no Airflow asset {name} ({uri}): is a DAG scheduled on it parsed?')\n"
        "    asset_manager.register_asset_change(asset=model, extra=extra, source_is_api=True, session=session)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, asset.name, asset.uri, json.dumps(extra or {})],
        env=settings.airflow_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise PipelineError(f"the Asset event of {asset.name} was not registered: {done.stderr.strip()[-500:]}")


def checks(table: str, store, limit: int = 10) -> list[dict]:
    """The last runs' expectation results of ``table`` (newest first), from the ``writeAuditPublish`` run facets
    (read by ``include/lineage/api/data.py``, which the lineage page shares)."""
    from include.lineage.api.data import audit_runs

    key = _table_key(table)
    found = audit_runs(store, [key])
    found.reverse()
    return found[:limit]


def render_checks(table: str, found: list[dict]) -> str:
    lines = [f"expectation results of {settings.ICEBERG_NAMESPACE}.{_table_key(table)} (newest first):"]
    for item in found:
        verdict = "PUBLISHED" if item["published"] else ("BLOCKED" if item["blocked"] else "DISCARDED")
        lines.append(
            f"  {item['time'] or '—'}  {verdict:<9}  {item['job']}  run {item['run_id']}  branch {item['branch']}"
        )
        if item["reason"]:
            lines.append(f"      reason: {item['reason']}")
        for result in item["results"]:
            mark = "ok  " if result.get("success") else ("FAIL" if result.get("severity") == "error" else "warn")
            lines.append(
                f"      {mark} {result.get('name') or result.get('assertion')}: observed {result.get('actual')}, "
                f"expected {result.get('expected')}"
            )
    if not found:
        lines.append("  (no audited run yet)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- command line
def _transport():
    from openlineage.client.transport import get_default_factory

    from include.lineage.emit.transports import configured_transport

    return get_default_factory().create(configured_transport())


def cli_publish(options) -> int:
    """``pipeline publish --table T --branch B --reason "..."``."""
    from include.lineage.store import LineageStore
    from include.services import catalog_server

    catalog_server.ensure_running()
    with LineageStore() as store:
        outcome = publish(options.table, options.branch, options.reason, transport=_transport(), store=store)
    if not options.no_asset_event:
        register_asset_event(outcome["table"], {"published_branch": outcome["branch"], "reason": options.reason})
    print(
        f"published {settings.ICEBERG_NAMESPACE}.{outcome['table']}: main {outcome['previous']} -> {outcome['snapshot']} "
        f"(branch {outcome['branch']} dropped; lineage run {outcome['run_id']}"
        + ("" if options.no_asset_event else "; Asset event registered: the DAGs it schedules are queued")
        + ")"
    )
    return 0


def cli_discard(options) -> int:
    """``pipeline discard --table T --branch B [--reason "..."]``."""
    from include.lineage.store import LineageStore
    from include.services import catalog_server

    catalog_server.ensure_running()
    with LineageStore() as store:
        outcome = discard(options.table, options.branch, options.reason, transport=_transport(), store=store)
    print(
        f"discarded branch {outcome['branch']} of {settings.ICEBERG_NAMESPACE}.{outcome['table']} (snapshot "
        f"{outcome['snapshot']}); main unchanged (lineage run {outcome['run_id']})"
    )
    return 0


def add_publish_commands(commands) -> None:
    """The ``publish`` and ``discard`` subcommands of ``pipeline``."""
    for name, handler, help_text in (
        ("publish", cli_publish, "publish a reviewed audit branch: fast-forward main to it (Iceberg's rule)"),
        ("discard", cli_discard, "drop an audit branch; main unchanged"),
    ):
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--table", required=True, help=f"one of {', '.join(AUDITED_TABLES)}")
        sub.add_argument("--branch", required=True, help="the branch the blocked task named (audit_...)")
        sub.add_argument("--reason", required=name == "publish", default=None, help="why (recorded in lineage)")
        if name == "publish":
            sub.add_argument("--no-asset-event", action="store_true", help="do not schedule the downstream DAGs")
        sub.set_defaults(handler=handler)


def cli_checks(options) -> int:
    """``lineage checks TABLE``."""
    from include.lineage.store import LineageStore, default_store_url
    from include.lineage.store.follower import StoreFollower

    with LineageStore(getattr(options, "store", None) or default_store_url()) as store:
        StoreFollower(store).refresh()
        found = checks(options.table, store, options.limit)
    if options.json:
        print(
            json.dumps({"table": f"{settings.ICEBERG_NAMESPACE}.{_table_key(options.table)}", "runs": found}, indent=2)
        )
    else:
        print(render_checks(options.table, found))
    return 0


def pending_reviews(store) -> dict[str, dict]:
    """For the lineage page: each audited table whose newest audit was blocked and whose branch was neither
    published nor discarded since: {dataset name: {"blocked": True, "branch", "run_id", "time", "blocking",
    "warnings", "results", "failed"}}. A table absent from the answer has nothing waiting for review. The page reads
    the same rule from ``include/lineage/api/data.py`` (``blocked_tables``)."""
    from include.lineage.api.data import blocked_tables

    return {
        label: {
            "blocked": True,
            "time": span["since"],
            **{name: span[name] for name in ("branch", "run_id", "blocking", "warnings", "results", "failed")},
        }
        for label, span in blocked_tables(store).items()
        if span["table"] in AUDITED_TABLES
    }
