"""Roll back what a bad run touched: every Iceberg table written by the run or downstream of its outputs.

``lineage rollback --run RUN_ID`` prints the plan and keeps it in ``var/lineage/rollback/<run>.json``: every table
written by the run, its child runs (whatever their times), or any later run that read the data they wrote
(transitively, from the lineage store), each with what will happen to it: back to snapshot S (the last one committed
before the first affected run that wrote it), already there, or, for a table with no snapshot before that write (the
affected runs created it), the user's choice ``--created drop|truncate|keep``; a table that cannot be handled
(gone from the catalog, its earlier snapshots expired) is listed with why. No table the runs touched is left out.
``--apply`` carries out the kept plan (or a fresh one) through pyiceberg, refuses before touching anything when a
table has moved on since the plan or a created table has no choice, commits each rollback with Iceberg's optimistic
check on the current snapshot, and records what it did as OpenLineage events (job ``lineage.rollback``) through the
configured transport and into the store. Datasets that are not Iceberg tables (model folders) are listed as to re-run.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import attr
from openlineage.client.event_v2 import Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import RunFacet, dataset_version_dataset
from sqlalchemy import select

from include.core import settings
from include.lineage.errors import LineageError, RollbackRefusedError
from include.lineage.events import table_of_symlink
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore
from include.lineage.store.schema import datasets_table

JOB_NAME = "lineage.rollback"
PRODUCER = "https://github.com/lineage-aware-pipelines/airflow-spark-iceberg/blob/main/include/lineage/rollback.py"
ROLLBACK_FACET_SCHEMA_URL = (
    "https://github.com/lineage-aware-pipelines/airflow-spark-iceberg/blob/main/"
    "include/lineage/schemas/RollbackRunFacet.json#/$defs/RollbackRunFacet"
)


@attr.define
class RollbackRunFacet(RunFacet):
    """What a rollback did: the bad run, and each table's snapshot before and after."""

    badRunId: str  # noqa: N815
    tables: list = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return ROLLBACK_FACET_SCHEMA_URL


@dataclass
class TableStep:
    table: str  # nyc_taxi.yellow_taxi_raw
    namespace: str  # the dataset's OpenLineage identity
    name: str
    current_snapshot_id: int | None
    target_snapshot_id: int | None
    target_committed_at: str | None
    first_affected_write: str  # start of the first affected run that wrote the table
    written_by: list[str]
    discarded_snapshot_ids: list[int] = field(default_factory=list)
    problem: str | None = None
    # the affected runs created the table (no snapshot before their first write): what to do with it
    created: bool = False
    created_action: str | None = None  # drop | truncate | keep; None: not chosen yet (apply refuses)

    @property
    def changes(self) -> bool:
        if self.problem is not None:
            return False
        if self.created:
            return self.created_action in ("drop", "truncate")
        return self.target_snapshot_id != self.current_snapshot_id

    @property
    def what(self) -> str:
        """What ``--apply`` will do to the table, in words."""
        if self.problem:
            return f"CANNOT ROLL BACK: {self.problem}"
        if self.created:
            made = f"created by the affected runs (no snapshot before their first write, {self.first_affected_write})"
            if self.created_action is None:
                return f"{made}: NOT CHOSEN, give --created drop|truncate|keep"
            return f"{made}: {CREATED_ACTIONS[self.created_action]}"
        if not self.changes:
            return f"already at snapshot {self.target_snapshot_id} (nothing to do)"
        return (
            f"back to snapshot {self.target_snapshot_id} (committed {self.target_committed_at}; from "
            f"{self.current_snapshot_id}, discards {len(self.discarded_snapshot_ids)} snapshot(s))"
        )


CREATED_ACTIONS = {
    "drop": "drop the table",
    "truncate": "truncate it (delete every row: a new empty snapshot)",
    "keep": "keep it as it is",
}


@dataclass
class RollbackPlan:
    run_id: str
    job: str
    planned_at: str
    tables: list[TableStep]
    not_iceberg: list[dict]
    affected_runs: list[dict]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> RollbackPlan:
        return cls(**{**data, "tables": [TableStep(**step) for step in data["tables"]]})


def _ms(timestamp: str) -> int:
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _check_choice(created: str | None) -> None:
    if created is not None and created not in CREATED_ACTIONS:
        raise LineageError(f"--created {created!r}: choose one of {', '.join(CREATED_ACTIONS)}")


def choose_created(rollback_plan: RollbackPlan, created: str | None) -> None:
    """Set (or change) what to do with the tables the affected runs created."""
    _check_choice(created)
    if created is None:
        return
    for step in rollback_plan.tables:
        if step.created:
            step.created_action = created


def plan(store: LineageStore, run_ref: str, catalog, created: str | None = None) -> RollbackPlan:
    """The plan: every Iceberg table the affected runs wrote and what will happen to it. ``created``: what to do
    with a table they created (drop, truncate or keep; None: the plan says a choice is needed)."""
    _check_choice(created)
    queries = LineageQueries(store)
    impact = queries.impact_of_run(run_ref)
    affected = _affected_runs(impact)
    writes = _writes_of(queries, affected)
    tables, not_iceberg = [], []
    with store.engine.connect() as conn:
        for (namespace, name), entry in sorted(writes.items(), key=lambda item: item[1]["label"]):
            symlinks = _iceberg_table_names(conn, namespace, name)
            if not symlinks:
                not_iceberg.append(
                    {"dataset": entry["label"], "namespace": namespace, "name": name, "writtenBy": entry["runs"]}
                )
                continue
            step = TableStep(
                table=symlinks[0],
                namespace=namespace,
                name=name,
                current_snapshot_id=None,
                target_snapshot_id=None,
                target_committed_at=None,
                first_affected_write=entry["first"],
                written_by=entry["runs"],
            )
            tables.append(_step_target(step, catalog, entry["first"], created))
    run = impact["run"]
    return RollbackPlan(
        run_id=run["id"],
        job=run["job"]["name"],
        planned_at=datetime.now(UTC).isoformat(),
        tables=tables,
        not_iceberg=not_iceberg,
        affected_runs=[{"id": r["id"], "job": r["job"]["name"], "state": r["state"]} for r in affected],
    )


def _affected_runs(impact: dict) -> list[dict]:
    """The runs of the impact set the rollback undoes: a later run that started before the bad one cannot have read
    what it wrote, whatever the version matching says; the run's own child runs are its own writes, whatever their
    times say."""
    bad_start = impact["run"]["startedAt"] or impact["run"]["endedAt"] or ""
    family = set(impact["family"])
    return [
        run for run in impact["runs"] if run["id"] in family or (run["startedAt"] or run["endedAt"] or "") >= bad_start
    ]


def _writes_of(queries: LineageQueries, affected: list[dict]) -> dict[tuple[str, str], dict]:
    """(namespace, name) of each dataset the affected runs wrote -> its label, the runs, the first write's time."""
    writes: dict[tuple[str, str], dict] = {}
    for run in affected:
        details = queries.run_details(run["id"])
        started = run["startedAt"] or run["endedAt"]
        for output in details["outputs"]:
            entry = writes.setdefault(
                (output["namespace"], output["name"]), {"label": output["label"], "runs": [], "first": started}
            )
            entry["runs"].append(run["id"])
            if started and (entry["first"] is None or started < entry["first"]):
                entry["first"] = started
    return writes


def _iceberg_table_names(conn, namespace: str, name: str) -> list[str]:
    """The catalog names of a dataset that is an Iceberg table (its TABLE symlinks), none for anything else."""
    facets = json.loads(
        conn.execute(
            select(datasets_table.c.facets).where(
                datasets_table.c.namespace == namespace, datasets_table.c.name == name
            )
        ).scalar()
        or "{}"
    )
    symlinks = [
        table_of_symlink(i["name"])
        for i in (facets.get("symlinks") or {}).get("identifiers") or []
        if i.get("type", "TABLE") == "TABLE"
    ]
    is_iceberg = (facets.get("catalog") or {}).get("framework") == "iceberg" or (facets.get("storage") or {}).get(
        "storageLayer"
    ) == "iceberg"
    return symlinks if is_iceberg else []


def _step_target(step: TableStep, catalog, first_write: str | None, created: str | None) -> TableStep:
    """Where the table goes back to: its newest snapshot before the first affected write, or why there is none."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.table.snapshots import ancestors_of

    try:
        table = catalog.load_table(step.table)
    except NoSuchTableError:
        step.problem = "the table no longer exists in the catalog"
        return step
    current = table.metadata.current_snapshot()
    step.current_snapshot_id = current.snapshot_id if current else None
    before = _ms(first_write) if first_write else None
    for snapshot in ancestors_of(current, table.metadata):
        if before is not None and snapshot.timestamp_ms < before:
            step.target_snapshot_id = snapshot.snapshot_id
            step.target_committed_at = _iso(snapshot.timestamp_ms)
            return step
        step.discarded_snapshot_ids.append(snapshot.snapshot_id)
    # the table existed before the write (its snapshots since expired, or rewritten away, or it was empty): nothing
    # to return to. Iceberg's metadata log remembers the table's earlier metadata files after their snapshots expired.
    older = [s.timestamp_ms for s in table.metadata.snapshots]
    older += [entry.timestamp_ms for entry in table.metadata.snapshot_log or []]
    older += [entry.timestamp_ms for entry in table.metadata.metadata_log or []]
    if before is not None and any(ms < before for ms in older):
        step.problem = (
            "no snapshot of it before the first affected write is left to return to (the table existed "
            "then: its snapshots of then expired, or it was empty)"
        )
    else:
        step.created, step.created_action = True, created
    return step


def render_plan(rollback_plan: RollbackPlan) -> str:
    lines = [
        f"rollback plan for run {rollback_plan.run_id} ({rollback_plan.job}): "
        f"{len(rollback_plan.affected_runs)} affected runs, {len(rollback_plan.tables)} Iceberg tables written"
    ]
    for step in rollback_plan.tables:
        lines.append(f"  {step.table:<40} {step.what}")
    if rollback_plan.not_iceberg:
        lines.append("not Iceberg tables, re-run what wrote them:")
        lines += [
            f"  {item['dataset']}  (written by {', '.join(run[:8] for run in item['writtenBy'])})"
            for item in rollback_plan.not_iceberg
        ]
    lines.append("affected runs:")
    lines += [f"  {run['id']}  {run['job']}  {run['state']}" for run in rollback_plan.affected_runs]
    return "\n".join(lines)


def plan_file(paths: settings.Paths, run_id: str) -> Path:
    return paths.lineage / "rollback" / f"{run_id}.json"


def apply(rollback_plan: RollbackPlan, catalog, store: LineageStore | None = None, transport=None) -> list[TableStep]:
    """Roll back every table of the plan; refuse (changing nothing) if one has moved on since the plan."""
    from pyiceberg.exceptions import CommitFailedException

    blocked = [f"{step.table}: {step.problem}" for step in rollback_plan.tables if step.problem]
    blocked += [
        f"{step.table} was created by the affected runs: give --created drop|truncate|keep"
        for step in rollback_plan.tables
        if step.created and step.created_action is None
    ]
    tables = {}
    for step in rollback_plan.tables:
        if step.problem or (step.created and step.created_action is None):
            continue
        table = catalog.load_table(step.table)
        current = table.metadata.current_snapshot_id
        if current != step.current_snapshot_id:
            blocked.append(
                f"{step.table} moved on since the plan (current snapshot {current}, planned from {step.current_snapshot_id})"
            )
        tables[step.table] = table
    if blocked:
        raise RollbackRefusedError(
            "rollback refused, nothing was changed: " + "; ".join(blocked) + ". Plan again to see the new state."
        )
    done = []
    for step in rollback_plan.tables:
        if not step.changes:
            continue
        try:
            if step.created and step.created_action == "drop":
                catalog.drop_table(step.table)
            elif step.created and step.created_action == "truncate":
                from pyiceberg.expressions import AlwaysTrue

                tables[step.table].delete(AlwaysTrue())
            else:
                tables[step.table].manage_snapshots().rollback_to_snapshot(step.target_snapshot_id).commit()
        except CommitFailedException as error:
            rolled = ", ".join(s.table for s in done) or "none"
            raise RollbackRefusedError(
                f"{step.table} moved on while rolling back ({error}); rolled back so far: {rolled}"
            ) from error
        done.append(step)
    _record(rollback_plan, done, store, transport)
    return done


def _record(rollback_plan: RollbackPlan, done: list[TableStep], store: LineageStore | None, transport) -> None:
    run_id = str(uuid.uuid4())
    job = Job(namespace=settings.OPENLINEAGE_NAMESPACE, name=JOB_NAME)
    facet = RollbackRunFacet(
        badRunId=rollback_plan.run_id,
        tables=[
            {
                "table": s.table,
                "action": s.created_action if s.created else "rollback",
                "fromSnapshotId": s.current_snapshot_id,
                "toSnapshotId": s.target_snapshot_id,
            }
            for s in done
        ],
    )
    outputs = [
        OutputDataset(
            namespace=s.namespace,
            name=s.name,
            facets=(
                {}
                if s.target_snapshot_id is None
                else {
                    "version": dataset_version_dataset.DatasetVersionDatasetFacet(
                        datasetVersion=str(s.target_snapshot_id)
                    )
                }
            ),
        )
        for s in done
    ]
    events = []
    for state in (RunState.START, RunState.COMPLETE):
        events.append(
            RunEvent(
                eventType=state,
                eventTime=datetime.now(UTC).isoformat(),
                producer=PRODUCER,
                run=Run(runId=run_id, facets={"rollback": facet}),
                job=job,
                inputs=[],
                outputs=outputs,
            )
        )
    if transport is not None:
        for lineage_event in events:
            transport.emit(lineage_event)
    if store is not None:
        from openlineage.client.serde import Serde

        store.ingest([json.loads(Serde.to_json(lineage_event)) for lineage_event in events])
