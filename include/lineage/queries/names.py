"""What the questions are about: nodes, the subgraphs answered, and how a user's name for a node (``namespace:name``,
a table name such as ``nyc_taxi.yellow_rides_hourly_forecast``, a URL, a job name, or Marquez's
``dataset:<ns>:<name>``) or an instant becomes one."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from include.lineage.errors import EmptyStoreError, LineageError, UnknownNodeError
from include.lineage.events import TimeOutOfRangeError, utc_time
from include.lineage.events import parse_node_id as parse_event_node_id
from include.lineage.queries.sql import chunks, fetch_rows, in_list
from include.lineage.store.schema import aliases_table, edges_table, nodes_table


class Node(NamedTuple):  # a tuple: thousands are made per answer, a frozen dataclass cost 1.6 µs each
    id: int
    key: str
    kind: str
    namespace: str
    name: str
    label: str


@dataclass
class Subgraph:
    focus: Node
    direction: str  # upstream | downstream | both
    nodes: dict[int, Node]
    depths: dict[int, int]
    edges: list[tuple[int, int]]
    as_of: str | None = None  # the graph as it was at this instant (UTC), not the current one
    # every edge ever seen: (source, target) -> (first seen, last seen); None for the current graph
    edge_times: dict[tuple[int, int], tuple[str | None, str | None]] | None = None

    def datasets(self) -> list[Node]:
        return sorted(
            (n for n in self.nodes.values() if n.kind == "dataset" and n.id != self.focus.id),
            key=lambda n: (self.depths[n.id], n.label),
        )

    def jobs(self) -> list[Node]:
        return sorted(
            (n for n in self.nodes.values() if n.kind == "job" and n.id != self.focus.id),
            key=lambda n: (self.depths[n.id], n.label),
        )


class NotYetSeenError(UnknownNodeError):
    """The node exists, but was first seen after the instant asked about: not in that graph (exit 2, HTTP 404)."""

    def __init__(self, ref: str, as_of: str, first_seen: str):
        LineageError.__init__(
            self, f"{ref!r} was first seen at {first_seen}, after {as_of}: it is not in the graph as of then"
        )
        self.ref, self.suggestions = ref, []


# ------------------------------------------------------------------------- instants and Marquez node ids
_OFFSET = re.compile(r"(?:[Zz]|[+-]\d\d(?::?\d\d)?)$")
_SPACE_FOR_PLUS = re.compile(r"^(.*T\d\d:\d\d(?::\d\d(?:\.\d+)?)?) (\d\d(?::?\d\d)?)$")


def parse_instant(value: str, what: str = "asOf") -> str:
    """An ISO-8601 instant *with* its UTC offset as the store's fixed-width UTC text; LineageError (CLI exit 2, HTTP
    400) for anything else: a time without an offset names no instant (whose midnight?)."""
    text_value = (value or "").strip()
    spaced = _SPACE_FOR_PLUS.match(text_value)
    if spaced:  # a "+" in a URL's query string arrives as a space: 2025-02-01T10:00:00 01:00
        text_value = f"{spaced.group(1)}+{spaced.group(2)}"
    example = "e.g. 2025-02-01T10:00:00+00:00 or 2025-02-01T10:00:00Z"
    if "T" not in text_value or not _OFFSET.search(text_value):
        raise LineageError(f"{what} {value!r} is not an ISO-8601 time with a UTC offset ({example})")
    try:
        return utc_time(text_value)
    except TimeOutOfRangeError as error:
        raise LineageError(f"{what} {error}") from None
    except ValueError:
        raise LineageError(f"{what} {value!r} is not an ISO-8601 time with a UTC offset ({example})") from None


def parse_node_id(value: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a Marquez dataset or job id, split as Marquez's ``NodeId.parts`` does
    (``events.parse_node_id``: ``dataset:postgres://host:5432:db.schema.table`` -> ``("dataset",
    "postgres://host:5432", "db.schema.table")``); None if ``value`` is not one, so it may be another kind of name."""
    try:
        parsed = parse_event_node_id(value)
    except (ValueError, LineageError):
        return None
    if not parsed or parsed[0] not in ("dataset", "job") or not parsed[1] or not parsed[2]:
        return None  # not an id, or a datasetField's
    return parsed[0], parsed[1], parsed[2]


def node_id(kind: str, namespace: str, name: str) -> str:
    return f"{kind}:{namespace}:{name}"


# ------------------------------------------------------------------------- a user's name for a node
_NODE_COLUMNS = "id, key, kind, namespace, name, label"  # Node's fields, in order
_NODE_BY_IDENTITY = (
    f"SELECT {_NODE_COLUMNS} FROM lineage_nodes WHERE kind = :kind AND namespace = :namespace AND name = :name"
)
# A node's key wins over its aliases (a name several nodes' aliases share may be one node's key); both asked at once,
# the key's match ranked first (one round trip where a key, then an alias, were two).
_NODE_BY_KEY_OR_ALIAS = (
    f"SELECT {_NODE_COLUMNS}, 0 AS rank FROM lineage_nodes WHERE key = :ref"
    " UNION SELECT n.id, n.key, n.kind, n.namespace, n.name, n.label, 1 FROM lineage_nodes n"
    " JOIN lineage_node_aliases a ON a.node_id = n.id WHERE a.alias = :ref"
)


def resolve(conn: Connection, ref: str, store_url: str) -> Node:
    """The node a user means by ``ref``; UnknownNodeError with close names, or EmptyStoreError (naming
    ``store_url``).

    A Marquez id (``dataset:<ns>:<name>``, ``job:<ns>:<name>``) is parsed into (kind, namespace, name) and looked
    up by those three: the namespace may itself hold colons (``postgres://host:5432``)."""
    rows = []
    parsed = parse_node_id(ref)
    if parsed:
        kind, namespace, name = parsed
        rows = fetch_rows(conn, _NODE_BY_IDENTITY, {"kind": kind, "namespace": namespace, "name": name})
    if not rows:
        ranked = fetch_rows(conn, _NODE_BY_KEY_OR_ALIAS, {"ref": ref})
        best = min((rank for *_, rank in ranked), default=None)
        rows = list({row[0]: row[:-1] for row in ranked if row[-1] == best}.values())  # a node once, by its id
    if len(rows) == 1:
        return Node(*rows[0])
    if len(rows) > 1:
        raise LineageError(
            f"{ref!r} names {len(rows)} nodes; use one of: " + ", ".join(sorted(Node(*r).key for r in rows))
        )
    if conn.execute(select(nodes_table.c.id).limit(1)).first() is None:
        raise EmptyStoreError(store_url)
    raise UnknownNodeError(ref, suggest(conn, ref))


def suggest(conn: Connection, ref: str, limit: int = 5) -> list[str]:
    """Names close to ``ref`` that the store knows (never Marquez ids: the user typed a name)."""
    a = aliases_table
    last = ref.replace(":", "/").rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[-1]
    like = [
        r
        for r in conn.execute(
            select(a.c.alias)
            .where(func.lower(a.c.alias).contains(last.lower()[:200], autoescape=True))  # % and _ literal
            .where(~a.c.alias.like("dataset:%"), ~a.c.alias.like("job:%"))
            .limit(200)
        ).scalars()
    ]
    candidates = like or list(
        conn.execute(select(a.c.alias).where(~a.c.alias.like("dataset:%"), ~a.c.alias.like("job:%"))).scalars()
    )
    close = difflib.get_close_matches(ref, candidates, n=limit, cutoff=0.5)
    for alias in sorted(like, key=len):
        if len(close) >= limit:
            break
        if alias not in close:
            close.append(alias)
    return close


def check_existed(conn: Connection, node: Node, as_of: str) -> int | None:
    """NotYetSeenError if the node was first seen after ``as_of``; else the id of its job or dataset row."""
    table = "lineage_datasets" if node.kind == "dataset" else "lineage_jobs"
    rows = fetch_rows(conn, f"SELECT id, created_at FROM {table} WHERE node_id = :node", {"node": node.id})
    row_id, first_seen = rows[0] if rows else (None, None)
    if first_seen is not None and first_seen > as_of:
        raise NotYetSeenError(node.label, as_of, first_seen)
    return row_id


# ------------------------------------------------------------------------- nodes by id, by (kind, namespace, name)
def _nodes_where(conn: Connection, column: str, values: Iterable) -> Iterator[Node]:
    """The nodes whose ``column`` is one of ``values``, a statement per chunk, as Nodes straight from the driver's
    rows (SQLAlchemy's rows, read by their mappings, cost ≈ 10 µs a node: 12 ms of a 1,264-node Marquez answer under
    cProfile)."""
    for chunk in chunks(values):
        placeholders, params = in_list(chunk)
        for row in fetch_rows(
            conn, f"SELECT {_NODE_COLUMNS} FROM lineage_nodes WHERE {column} IN ({placeholders})", params
        ):
            yield Node(*row)


def nodes_of(conn: Connection, ids: Iterable[int]) -> dict[int, Node]:
    return {node.id: node for node in _nodes_where(conn, "id", ids)}


def edges_among(conn: Connection, ids: set[int]) -> list[tuple[int, int]]:
    """The current graph's edges between nodes of ``ids``, sorted."""
    edges = []
    for chunk in chunks(ids):
        for source, target in conn.execute(
            select(edges_table.c.source, edges_table.c.target).where(edges_table.c.target.in_(chunk))
        ):
            if source in ids:
                edges.append((source, target))
    return sorted(edges)


def refs_of(conn: Connection, ids: Iterable[int]) -> dict[int, tuple[str, str, str]]:
    """node id -> (kind, namespace, name)."""
    out = {}
    for chunk in chunks(ids):
        for row in conn.execute(
            select(nodes_table.c.id, nodes_table.c.kind, nodes_table.c.namespace, nodes_table.c.name).where(
                nodes_table.c.id.in_(chunk)
            )
        ):
            out[row.id] = (row.kind, row.namespace, row.name)
    return out


def nodes_by_ref(conn: Connection, refs: set[tuple[str, str, str]]) -> dict[tuple[str, str, str], Node]:
    """(kind, namespace, name) -> its node, for those of ``refs`` the store has."""
    out = {}
    for node in _nodes_where(conn, "name", {ref[2] for ref in refs}):
        ref = (node.kind, node.namespace, node.name)
        if ref in refs:
            out[ref] = node
    return out
