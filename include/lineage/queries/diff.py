"""``lineage diff``: two runs side by side (job and code version, parameters, state, error, input and output
versions, schema changes) and, with ``--upstream``, their provenances compared."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.engine import Connection

from include.lineage.queries.provenance import provenance_through_children
from include.lineage.queries.runs import details_of, with_job
from include.lineage.queries.sql import chunks
from include.lineage.store.schema import datasets_table, job_versions_table, jobs_table, nodes_table, runs_table


def compare_runs(conn: Connection, run_a, run_b, upstream: bool = False) -> dict:
    """The answer of ``LineageQueries.diff`` for two run rows. A run without datasets of its own (a DAG run) is
    compared through its child runs; ``upstream``: also their provenance, under ``"upstream"``."""
    upstream_changes = compare_provenance(conn, run_a, run_b) if upstream else None
    details = [_details_with_tasks(conn, row) for row in (run_a, run_b)]
    changes = _changes(*details)
    for info in details:
        info["tasks"] = sorted(info["tasks"])
    result = {"runs": details, "changes": changes}
    if upstream_changes is not None:
        result["upstream"] = upstream_changes
    return result


def _details_with_tasks(conn: Connection, row) -> dict:
    """A run's details; a DAG run's (no datasets of its own) with its task runs (not their Spark jobs) under
    ``tasks`` and their datasets as its own."""
    info = details_of(conn, with_job(conn, row))
    info["tasks"] = {}
    if not info["inputs"] and not info["outputs"]:
        children = conn.execute(
            select(runs_table, jobs_table.c.namespace, jobs_table.c.name)
            .join(jobs_table, jobs_table.c.id == runs_table.c.job_id)
            .where(runs_table.c.parent_run_id == row.id)
        ).all()
        for child in children:
            child_info = details_of(conn, child)
            info["tasks"][child_info["job"]["name"]] = child_info
            info["inputs"] += child_info["inputs"]
            info["outputs"] += child_info["outputs"]
    return info


def _changes(first: dict, second: dict) -> dict:
    changes: dict = {}
    for name in ("job", "jobVersion", "codeHash", "codeVersion", "state", "errorMessage"):
        if first[name] != second[name]:
            changes[name] = [first[name], second[name]]
    params = _parameter_changes(first["parameters"], second["parameters"])
    if params:
        changes["parameters"] = params
    schema_changes: dict = {}
    for direction in ("inputs", "outputs"):
        changes[direction] = compare_datasets(first[direction], second[direction], schema_changes)
    if schema_changes:
        changes["schema"] = schema_changes
    tasks = {}
    for name in sorted(set(first["tasks"]) | set(second["tasks"])):
        x, y = first["tasks"].get(name), second["tasks"].get(name)
        if x is None or y is None or x["jobVersion"] != y["jobVersion"] or x["state"] != y["state"]:
            tasks[name] = {
                "jobVersion": [x and x["jobVersion"], y and y["jobVersion"]],
                "codeHash": [x and x["codeHash"], y and y["codeHash"]],
                "state": [x and x["state"], y and y["state"]],
            }
    if tasks:
        changes["tasks"] = tasks
    return changes


def _parameter_changes(a: dict, b: dict) -> dict:
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def compare_datasets(first: list[dict], second: list[dict], schema_changes: dict) -> dict:
    """The datasets of two runs' one side (inputs or outputs): added, removed, at another version, the same; a
    dataset whose schema (by the same producer) differs is added to ``schema_changes``."""

    def by_key(items):
        out: dict = {}
        for item in items:
            out[(item["namespace"], item["name"])] = item
        return out

    a, b = by_key(first), by_key(second)
    result: dict = {"added": [], "removed": [], "changed": [], "same": []}
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x is None:
            result["added"].append(
                {"dataset": y["label"], "namespace": key[0], "name": key[1], "version": y["version"]}
            )
        elif y is None:
            result["removed"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "version": x["version"]}
            )
        elif x["version"] and y["version"] and x["version"] != y["version"]:  # unknown on one side is no change
            result["changed"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "from": x["version"], "to": y["version"]}
            )
        else:
            result["same"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "version": x["version"] or y["version"]}
            )
        comparable = x is not None and y is not None and x["schema"] and y["schema"]
        if comparable and x["schemaProducer"] == y["schemaProducer"] and x["schema"] != y["schema"]:
            old, new = dict(map(tuple, x["schema"])), dict(map(tuple, y["schema"]))
            schema_changes[x["label"]] = {
                "added": [f"{c} {t}" for c, t in new.items() if c not in old],
                "removed": [f"{c} {t}" for c, t in old.items() if c not in new],
                "changed": [f"{c} {old[c]} -> {new[c]}" for c in new if c in old and old[c] != new[c]],
            }
    return result


# ------------------------------------------------------------------------- the two provenances compared
def compare_provenance(conn: Connection, run_a, run_b) -> dict:
    """What differs between the provenance of two runs: the upstream runs of each job (re-run, only on one side),
    their job versions (inputs added or removed, code changed), parameters and states, the dataset versions read
    at every level, and the two runs' own job versions."""
    sides = [provenance_through_children(conn, row.id) for row in (run_a, run_b)]
    (first, reads_a), (second, reads_b) = (_jobs_and_reads(root_job, entries) for root_job, entries in sides)
    return {
        "jobVersion": version_change(conn, run_a.job_version_id, run_b.job_version_id),
        "jobs": _jobs_changed(conn, first, second),
        "datasetVersions": _versions_read_changed(reads_a, reads_b),
        "provenance": [
            [{k: v for k, v in entry.items() if k != "jobVersionId"} for entry in entries] for _, entries in sides
        ],
    }


def _jobs_and_reads(root_job: str | None, entries: list[dict]) -> tuple[dict[str, list[dict]], dict[tuple, set]]:
    """(job name -> its provenance entries, (reader, label, namespace, name) -> the (version, writer) read)."""
    jobs: dict[str, list[dict]] = {}
    read: dict[tuple, set] = {}
    for entry in entries:
        # the run itself is "(the run)"; a DAG run's task runs are jobs of their own, compared like upstream ones
        itself = entry["depth"] == 0 and entry["job"]["name"] == root_job
        if not itself:
            jobs.setdefault(entry["job"]["name"], []).append(entry)
        reader = "(the run)" if itself else entry["job"]["name"]
        for item in entry["inputs"]:
            read.setdefault((reader, item["label"], item["namespace"], item["name"]), set()).add(
                (item["version"], item["producedByRunId"])
            )
    return jobs, read


def _jobs_changed(conn: Connection, first: dict[str, list[dict]], second: dict[str, list[dict]]) -> list[dict]:
    level = {name: min(e["depth"] for e in first.get(name, []) + second.get(name, [])) for name in {*first, *second}}
    jobs_changed = []
    for name in sorted(level, key=lambda k: (level[k], k)):
        a, b = first.get(name, []), second.get(name, [])
        item: dict = {
            "job": name,
            "depth": level[name],
            "runs": [[e["run"]["id"] for e in a], [e["run"]["id"] for e in b]],
        }
        if not a or not b:
            item["change"] = "only in B" if not a else "only in A"
        elif {e["run"]["id"] for e in a} == {e["run"]["id"] for e in b}:
            item["change"] = "same runs"
        else:
            item["change"] = "other runs"
            item.update(_newest_runs_compared(conn, a, b))
        jobs_changed.append(item)
    return jobs_changed


def _newest_runs_compared(conn: Connection, a: list[dict], b: list[dict]) -> dict:
    """How the newest run of a job on each side differ: job version, parameters, state."""
    newest_a = max(a, key=lambda e: (e["run"]["start"] or "", e["run"]["id"]))
    newest_b = max(b, key=lambda e: (e["run"]["start"] or "", e["run"]["id"]))
    item: dict = {"jobVersion": version_change(conn, newest_a["jobVersionId"], newest_b["jobVersionId"])}
    params = _parameter_changes(newest_a["parameters"], newest_b["parameters"])
    if params:
        item["parameters"] = params
    if newest_a["run"]["status"] != newest_b["run"]["status"]:
        item["state"] = [newest_a["run"]["status"], newest_b["run"]["status"]]
    return item


def _versions_read_changed(reads_a: dict[tuple, set], reads_b: dict[tuple, set]) -> list[dict]:
    def listed(values):
        return [{"version": v, "producedByRunId": w} for v, w in sorted(values, key=lambda x: (str(x[0]), str(x[1])))]

    changed = []
    for key in sorted(set(reads_a) | set(reads_b)):
        a, b = reads_a.get(key, set()), reads_b.get(key, set())
        if a == b:
            continue
        reader, label, namespace, name = key
        changed.append(
            {"reader": reader, "dataset": label, "namespace": namespace, "name": name, "A": listed(a), "B": listed(b)}
        )
    return changed


def version_change(conn: Connection, version_a: int | None, version_b: int | None) -> dict | None:
    """How two job versions differ: inputs and outputs added or removed, source code changed; None if the same."""
    if version_a == version_b:
        return None
    jv = job_versions_table
    rows = {
        row.id: row
        for row in conn.execute(select(jv).where(jv.c.id.in_([v for v in (version_a, version_b) if v is not None])))
    }
    a, b = rows.get(version_a), rows.get(version_b)

    def names(row, column: str) -> set[str]:
        return set(json.loads(getattr(row, column) or "[]")) if row is not None else set()

    labels = _labels_of_keys(conn, names(a, "inputs") | names(b, "inputs") | names(a, "outputs") | names(b, "outputs"))

    def listed(values: set[str]) -> list[str]:
        return sorted(labels.get(value, value) for value in values)

    return {
        "from": a.version if a is not None else None,
        "to": b.version if b is not None else None,
        "inputsAdded": listed(names(b, "inputs") - names(a, "inputs")),
        "inputsRemoved": listed(names(a, "inputs") - names(b, "inputs")),
        "outputsAdded": listed(names(b, "outputs") - names(a, "outputs")),
        "outputsRemoved": listed(names(a, "outputs") - names(b, "outputs")),
        "codeChanged": (a is not None and b is not None)
        and ((a.code_hash, a.code_version) != (b.code_hash, b.code_version)),
    }


def _labels_of_keys(conn: Connection, keys: set[str]) -> dict[str, str]:
    """``namespace:name`` (how a job version lists its datasets) -> the dataset's label."""
    d, n = datasets_table, nodes_table
    out = {}
    for chunk in chunks(keys):
        for namespace, name, label in conn.execute(
            select(d.c.namespace, d.c.name, n.c.label)
            .join(n, n.c.id == d.c.node_id)
            .where((d.c.namespace + ":" + d.c.name).in_(chunk))
        ):
            out[f"{namespace}:{name}"] = label
    return out
