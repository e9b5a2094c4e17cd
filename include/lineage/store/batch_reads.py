"""What a batch reads of the store at once, before its first event is ingested: rows asked by ``IN (..)`` lists in
chunks, rows named by exact (a, b) pairs (``rows_of_pairs``: two value lists, never a row-value list, Trap 55), and
the batch's stored datasets, dataset versions and the datasets' names (``read_datasets``, ``read_aliases``). The
store's jobs and runs are read the same way (``store.LineageStore._read_jobs``, ``pending.PendingWrites.read_runs``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlalchemy import select
from sqlalchemy.engine import Connection

from include.lineage.store.ingest import FacetRow, StoreWriter
from include.lineage.store.schema import aliases_table, dataset_versions_table, datasets_table
from include.lineage.store.statements import UPDATE_DATASET_FACETS

CHUNK = 500  # values of one IN (...) list


def read_datasets(store: StoreWriter, conn: Connection, lineage_events: list[dict]) -> None:
    """What the transaction reads of the batch's datasets, read at once: the row of each dataset it names (its
    facets) and which of the dataset versions it names are stored, a query per 500 datasets and per 500 versions
    instead of one per dataset and one per version (``ingest.EventIngest._upsert_with_facets`` and
    ``_version_row``: each still reads what is not read here). A version not found is inserted without asking
    again (``_absent_rows``): the writers' lock is held, so no other writer can store it meanwhile. Measured on
    two 10^7 history days into PostgreSQL: 13,977 of the 20,731 statements, 22 s of the 48 s spent in them."""
    names: set[tuple[str, str]] = set()
    every_name: set[tuple[str, str]] = set()
    versions: set[tuple[str, str, str]] = set()
    for lineage_event in lineage_events:
        named = [lineage_event.get("dataset")]
        for direction in ("inputs", "outputs"):
            if isinstance(lineage_event.get(direction), list):
                named += lineage_event[direction]
        for dataset in named:
            # only what is well shaped: the event's own ingest reads the rest, and names the event if it is refused
            if not isinstance(dataset, dict):
                continue
            namespace, name, facets = dataset.get("namespace"), dataset.get("name"), dataset.get("facets") or {}
            if not (isinstance(namespace, str) and isinstance(name, str) and isinstance(facets, dict)):
                continue
            every_name.add((namespace, name))
            known = (datasets_table.name, namespace, name) in store._facet_rows
            if not known and (facets or ("dataset", namespace, name) not in store._ids):
                names.add((namespace, name))
            version_facet = facets.get("version")
            version = version_facet.get("datasetVersion") if isinstance(version_facet, dict) else None
            if version is not None:
                versions.add((namespace, name, str(version)))
    d, v = datasets_table.c, dataset_versions_table.c
    query = select(d.id, d.node_id, d.namespace, d.name, d.facets, d.facet_times, d.updated_at)
    for key, row in rows_of_pairs(conn, query, d.namespace, d.name, names):
        store._facet_rows[(datasets_table.name, *key)] = FacetRow(
            row.id, UPDATE_DATASET_FACETS, row.facets, row.facet_times, row.updated_at
        )
        store._ids[("dataset", *key)] = row.id
        store._ids[("node", "dataset", *key)] = row.node_id
    pairs = {
        (store._ids[("dataset", namespace, name)], version)
        for namespace, name, version in versions
        if ("dataset", namespace, name) in store._ids
        and ("version", store._ids[("dataset", namespace, name)], version) not in store._ids
    }
    query = select(v.id, v.dataset_id, v.version, v.schema, v.created_by_run_id)
    for key, row in rows_of_pairs(conn, query, v.dataset_id, v.version, pairs):
        pairs.discard(key)
        store._ids[("version", *key)] = row.id
        # what ``EventIngest._dataset_version`` would otherwise fill in (UPDATE_VERSION keeps a value set)
        if row.schema is not None:
            store._ids[("version_schema", row.id)] = 1
        if row.created_by_run_id is not None:
            store._ids[("version_creator", row.id)] = 1
    store._absent_rows.update(("version", *key) for key in pairs)
    read_aliases(store, conn, {store._ids.get(("node", "dataset", *key)) for key in every_name})


def read_aliases(store: StoreWriter, conn: Connection, nodes: set[int | None]) -> None:
    """The names of the stored nodes ``nodes`` the store has not read yet, a query per 500 nodes instead of one per
    node (``LineageStore.add_aliases`` reads a node's on its first sight in a process: 1,390 reads of 8,000 events
    into a new process, a ``lineage ingest`` command's every start)."""
    wanted = {node for node in nodes if node is not None and node not in store._aliases}
    if not wanted:
        return
    found: dict[int, set[str]] = {node: set() for node in wanted}
    a = aliases_table.c
    for node, alias in in_chunks(conn, select(a.node_id, a.alias), a.node_id, wanted):
        found[node].add(alias)
    store._aliases.update(found)


def pairs_among(first, second, pairs: list[tuple]) -> tuple:
    """Where clauses that keep the rows whose (``first``, ``second``) may be one of ``pairs``: each column in its own
    values (the caller drops the rows of other combinations). Not ``(a, b) IN ((..), ..)``: PostgreSQL plans a row
    list as an OR of every pair, in time growing with the square of its length: 56 ms of planning for 500 jobs,
    against 0.2 ms for two lists, a day's backlog reading ~12,000 jobs (Trap 55)."""
    return first.in_(sorted({pair[0] for pair in pairs})), second.in_(sorted({pair[1] for pair in pairs}))


def rows_of_pairs(conn: Connection, query, first, second, pairs: Iterable[tuple]) -> Iterator[tuple[tuple, object]]:
    """The rows of ``query`` whose (``first``, ``second``) is one of ``pairs``, each with that pair: asked 500 pairs a
    query by two value lists (``pairs_among``), the rows of the other combinations those bring dropped."""
    pairs = sorted(set(pairs))
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start : start + CHUNK]
        asked = set(chunk)
        for row in conn.execute(query.where(*pairs_among(first, second, chunk))):
            key = (getattr(row, first.name), getattr(row, second.name))
            if key in asked:  # not a name of the chunk in another of its namespaces
                yield key, row


def in_chunks(conn: Connection, query, column, values) -> Iterator:
    """The rows of ``query`` where ``column`` is one of ``values``, asked in chunks."""
    values = sorted(values)
    for start in range(0, len(values), CHUNK):
        yield from conn.execute(query.where(column.in_(values[start : start + CHUNK])))
