"""The lineage store's tables (SQLAlchemy Core). Their history is the Alembic revisions under
``include/lineage/store/migrations/``: a change here needs a new revision there."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
)

metadata = MetaData()

events_table = Table(
    "lineage_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dedup_key", String(255), nullable=False, unique=True),
    Column("run_id", String(64), index=True),
    Column("event_type", String(16)),
    Column("event_time", String(32)),
    Column("job_namespace", String(255)),
    Column("job_name", String(1024)),
    Column("source", String(1024)),
    # the event's text: "" when it is packed (below), its text for a row stored before migration 0010
    Column("payload", Text, nullable=False),
    # ``lineage serve`` keeps an event as received and stores what of it the spec lets the store read: ``payload`` is
    # that reading (invalid facets left out, a missing schemaURL inferred), ``received`` the event as it came when
    # the two differ (null when they do not), ``problems`` what the spec refuses in it (JSON: path, facet, rule)
    Column("received", Text),
    Column("problems", Text),
    # what Marquez's model reads of the payload, compact (store/marquez_view.py); null for rows stored before 0009
    Column("marquez", Text),
    # the payload as a zstd frame, packed with one of lineage_payload_dictionaries (store/packing.py)
    Column("packed", LargeBinary),
)

payload_dictionaries_table = Table(
    "lineage_payload_dictionaries",
    metadata,
    # zstd's dictionary id, written into each frame packed with it; drawn at random, never reused
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("trained_at", String(32), nullable=False),
    Column("events", Integer, nullable=False),  # the newest event id when it was trained
    Column("samples", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
)

store_state_table = Table(
    "lineage_store_state",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # one row, id 1 (migration 0012)
    # moved by whatever deletes events (lineage prune): store/change_key.py
    Column("events_deleted", Integer, nullable=False),
)

model_snapshots_table = Table(
    "lineage_model_snapshots",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("format", Integer, nullable=False),  # queries/model_snapshot.py FORMAT
    Column("events", Integer, nullable=False),  # how many events it is the replay of ...
    Column("last_event_id", Integer, nullable=False),  # ... all of those with an id up to this one
    Column("taken_at", String(32), nullable=False),
    Column("data", LargeBinary, nullable=False),
)

nodes_table = Table(
    "lineage_nodes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # Marquez's node id, dataset:<ns>:<name> | job:<ns>:<name>, for display and lookup: not unique, two datasets may
    # share one (pg://h:5432 + db.t and pg://h + 5432:db.t); a node is (kind, namespace, name).
    Column("key", String(2048), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(2048), nullable=False),
    Column("label", String(2048), nullable=False),
    UniqueConstraint("kind", "namespace", "name", name="uq_lineage_nodes_kind_namespace_name"),
    Index("ix_lineage_nodes_key", "key"),
)

aliases_table = Table(
    "lineage_node_aliases",
    metadata,
    Column("alias", String(2048), nullable=False),
    Column("node_id", Integer, nullable=False),
    PrimaryKeyConstraint("alias", "node_id"),
    # A node's own names are read once per node a transaction touches (``LineageStore.add_aliases``): without it
    # each read scanned every alias of the store (3.6 ms each on PostgreSQL two days into a 10^7-event year).
    Index("ix_lineage_node_aliases_node", "node_id"),
)

# The current graph: input dataset -> job -> output dataset for the inputs and outputs of each job's current version
# (the version of its latest run), as Marquez's lineage reads job_versions_io_mapping.is_current_job_version.
edges_table = Table(
    "lineage_edges",
    metadata,
    Column("source", Integer, nullable=False),
    Column("target", Integer, nullable=False),
    PrimaryKeyConstraint("source", "target"),
    Index("ix_lineage_edges_target", "target", "source"),
)

# Every edge any event showed, current or not, with the event times it was first and last seen at.
edge_history_table = Table(
    "lineage_edge_history",
    metadata,
    Column("source", Integer, nullable=False),
    Column("target", Integer, nullable=False),
    Column("first_seen", String(32), nullable=False),
    Column("last_seen", String(32), nullable=False),
    PrimaryKeyConstraint("source", "target"),
    Index("ix_lineage_edge_history_target", "target", "source"),
)

# The transitive closure of lineage_edges: (ancestor, descendant, shortest distance in edges), every node with itself.
closure_table = Table(
    "lineage_closure",
    metadata,
    Column("ancestor", Integer, nullable=False),
    Column("descendant", Integer, nullable=False),
    Column("depth", Integer, nullable=False),
    PrimaryKeyConstraint("ancestor", "descendant"),
    Index("ix_lineage_closure_upstream", "descendant", "depth", "ancestor"),
    Index("ix_lineage_closure_downstream", "ancestor", "depth", "descendant"),
)

# Each node's rows of lineage_closure as one blob, for the upstream read (include/lineage/store/ancestry.py).
ancestry_table = Table(
    "lineage_ancestry",
    metadata,
    Column("descendant", Integer, primary_key=True, autoincrement=False),
    Column("packed", LargeBinary, nullable=False),
)

# Jobs and datasets are few rows rewritten by every transaction that touches them (latest run, facets, current
# version). On PostgreSQL each rewrite is a new row version: where the page has no room for it, the version goes to
# another page and the table grows until a vacuum, and never shrinks (the 10^5 year left 1,200 jobs in 40 MB of
# pages, read whole by each draw of the page). Pages filled to 30 % keep each new version beside the old one (a HOT
# update, pruned in place: 1.3 MB, 99.6 % of updates HOT). Revision 0016 sets it on a store made before.
HOT_ROWS_FILLFACTOR = 30

jobs_table = Table(
    "lineage_jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_id", Integer, nullable=False, unique=True),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(1024), nullable=False),
    Column("created_at", String(32)),
    Column("updated_at", String(32)),
    Column("facets", Text),
    Column("current_version_id", Integer),  # the version of the latest run
    Column("latest_run_id", String(64)),  # the run of the latest first_event_time (then the greatest id)
    Column("latest_run_time", String(32)),  # its first_event_time; without runs, that of the latest runless events
    Column("facet_times", Text),  # {facet name: [event time, event id]} of the event each facet came from
    UniqueConstraint("namespace", "name"),
    postgresql_with={"fillfactor": HOT_ROWS_FILLFACTOR},
)

job_versions_table = Table(
    "lineage_job_versions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    Column("inputs", Text),
    Column("outputs", Text),
    Column("code_hash", String(64)),
    Column("code_version", String(255)),
    Column("created_at", String(32)),
    UniqueConstraint("job_id", "version"),
)

datasets_table = Table(
    "lineage_datasets",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_id", Integer, nullable=False, unique=True),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(2048), nullable=False),
    Column("created_at", String(32)),
    Column("updated_at", String(32)),
    Column("facets", Text),
    Column("current_version_id", Integer),
    Column("current_version_time", String(32)),
    Column("facet_times", Text),  # {facet name: [event time, event id]} of the event each facet came from
    UniqueConstraint("namespace", "name"),
    postgresql_with={"fillfactor": HOT_ROWS_FILLFACTOR},  # as the jobs'
)

dataset_versions_table = Table(
    "lineage_dataset_versions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset_id", Integer, nullable=False),
    Column("version", String(255), nullable=False),
    Column("schema", Text),
    Column("schema_producer", String(1024)),  # schemas are compared only between the same producer's reports
    Column("created_by_run_id", String(64)),
    Column("created_at", String(32)),
    UniqueConstraint("dataset_id", "version"),
)

# The columns a run's start is computed from, first set first (``queries.sql.run_start``, the runs' start indexes).
RUN_START_COLUMNS = ("started_at", "first_event_time", "state_time")

runs_table = Table(
    "lineage_runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("job_id", Integer, nullable=False, index=True),
    # indexed with when the run started (``ix_lineage_runs_version_start`` below)
    Column("job_version_id", Integer),
    Column("state", String(16)),
    Column("state_rank", Integer, nullable=False, default=0),
    Column("state_time", String(32)),
    Column("started_at", String(32)),
    Column("ended_at", String(32)),
    Column("nominal_start", String(64)),
    Column("nominal_end", String(64)),
    Column("parent_run_id", String(64), index=True),
    Column("root_run_id", String(64)),
    Column("error_message", Text),
    Column("code_hash", String(64)),
    Column("code_version", String(255)),
    Column("facets", Text),
    Column("facets_time", String(32)),
    Column("first_event_time", String(32)),  # the earliest event time of the run: its time among the job's runs
    Column("facet_times", Text),  # {facet name: [event time, event id]} of the event each facet came from
)


def _run_start():
    """When a run started, as the indexes below hold it: the first of ``RUN_START_COLUMNS`` set (the queries order
    by the same expression, ``queries.sql.run_start``, or the index is not theirs)."""
    return func.coalesce(*(runs_table.c[name] for name in RUN_START_COLUMNS))


# A job's latest run started by an instant (the as-of walk, ``lineage run-at``) is one seek: the index holds the very
# expression those queries order by (``queries.sql.run_start``); without it each question read every run of the job,
# which grows with history.
Index(
    "ix_lineage_runs_job_start",
    runs_table.c.job_id,
    _run_start(),
    runs_table.c.id,
)
# The runs of a job version, by when they started. ``statements.RUN_USING_VERSION`` asks whether any run still has a
# version a run has just left (a seek on the first column; a scan of every run without), and an impact's runs are
# those of the job versions that read the impacted data (a run's version is its inputs, outputs and code): counted
# and paged newest first from this index alone, never from each run's own input rows (a hub of a year's store was
# read by a million runs). On PostgreSQL the index also holds the start's columns: it reads an expression's value from
# an index only when the columns it is computed from are in it (else a row of the table a run: one page each, a
# run's row being KB of facets; Trap 66).
Index(
    "ix_lineage_runs_version_start",
    runs_table.c.job_version_id,
    _run_start(),
    runs_table.c.id,
    postgresql_include=RUN_START_COLUMNS,
)

# A run read (input) or wrote (output) a dataset, in a version when one was known. An output's ``written_at`` is when
# its run wrote it, ``coalesce(ended_at, state_time, started_at)`` of the run as it stands (kept so by
# ``store/pending.py`` as the run's events arrive; None on inputs): a run's provenance asks, for an input read without
# a version, for the dataset's latest write before the reading run started, one entry of
# ``ix_lineage_run_datasets_dataset`` where it was every write of the dataset, each joined to its run and sorted (a
# table written daily for a year: 365 rows sorted a read).
run_datasets_table = Table(
    "lineage_run_datasets",
    metadata,
    Column("run_id", String(64), nullable=False),
    Column("dataset_id", Integer, nullable=False),
    Column("direction", String(6), nullable=False),  # input | output
    Column("dataset_version_id", Integer),
    Column("written_at", String(32)),
    PrimaryKeyConstraint("run_id", "dataset_id", "direction"),
    Index("ix_lineage_run_datasets_dataset", "dataset_id", "direction", "written_at", "run_id"),
    Index("ix_lineage_run_datasets_version", "dataset_version_id"),
)

# The runs that carry a ``writeAuditPublish`` run facet (an audited write, a publish or a discard of a kept branch:
# include/lineage/api/audits.py), one row a run with the facet's table, branch and verdict, written with the run's
# merged facets (``store/run_audits.py``). The page asks for the blocked audits and the audits of their tables only:
# found among the runs' facets, its first draw read every run's facets (34 s on a year's store of 6.4 x 10^6
# events, 739,837 of whose runs were audits).
run_audits_table = Table(
    "lineage_run_audits",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("table_name", String(1024), nullable=False),
    Column("branch", Text),
    Column("published", Boolean, nullable=False),
    Column("facet", Text, nullable=False),  # the facet as merged, for the blocked audits' details
    Index("ix_lineage_run_audits_published_table", "published", "table_name"),
    Index("ix_lineage_run_audits_table", "table_name"),
)

column_edges_table = Table(
    "lineage_column_edges",
    metadata,
    Column("dataset_id", Integer, nullable=False),
    Column("field", String(512), nullable=False),
    Column("input_dataset_id", Integer, nullable=False),
    Column("input_field", String(512), nullable=False),
    Column("transformations", Text),
    PrimaryKeyConstraint("dataset_id", "field", "input_dataset_id", "input_field"),
    Index("ix_lineage_column_edges_input", "input_dataset_id", "input_field"),
)

# How far each event file under var/lineage/ has been read into this store (include/lineage/store/follower.py), so
# that a new process (an alert, a `lineage` command) reads only what was appended since, not the whole history again.
# ``head_sha256`` is the digest of the file's first min(read_bytes, 4096) bytes: a file replaced by another that is
# longer still is read again from its start.
# ``read_lines``: the lines before ``read_bytes``, so a bad line further on is named by its number; null for a cursor
# written before revision 0006 (a bad line past it is then named by its byte offset only).
file_cursors_table = Table(
    "lineage_file_cursors",
    metadata,
    Column("path", String(1024), primary_key=True),
    Column("read_bytes", BigInteger, nullable=False),
    Column("head_sha256", String(64), nullable=False),
    Column("read_lines", BigInteger),
)

# Lines of the event files the follower could not store: not UTF-8, not JSON, not an OpenLineage event, or refused by
# the store. The follower goes on past them (one bad line must not keep every later event out of the store), so they
# are kept here, named by file, byte offset and line, with why and the line itself (its first REJECTED_CONTENT_BYTES;
# ``length`` is the whole line's), to be mended and ingested again (`lineage rejected`). A line is one row however
# often it is read: the key holds its digest, so a replaced file's different line at the same offset is a row too.
rejected_lines_table = Table(
    "lineage_rejected_lines",
    metadata,
    Column("path", String(1024), nullable=False),
    Column("byte_offset", BigInteger, nullable=False),
    Column("line_sha256", String(64), nullable=False),
    Column("line_number", BigInteger),
    Column("length", BigInteger, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("error", Text, nullable=False),
    Column("rejected_at", String(32), nullable=False),
    PrimaryKeyConstraint("path", "byte_offset", "line_sha256"),
)

# What the spec refuses in an accepted event (``lineage_events.problems``), one row per problem, by the node it
# belongs to (a dataset's facet: the dataset; a run's or a job's facet and the event's own fields: the job), so that a
# node's invalid facets are one indexed read (``lineage show``, the lineage page). ``path`` is where in the event
# (``outputs[0].facets.schema``), ``facet`` the facet's key (null for the event's own fields), ``rule`` why.
facet_problems_table = Table(
    "lineage_facet_problems",
    metadata,
    Column("event_id", Integer, nullable=False),
    Column("node_id", Integer, nullable=False),
    Column("run_id", String(64)),
    Column("path", String(1024), nullable=False),
    Column("facet", String(255)),
    Column("rule", Text, nullable=False),
    Column("event_time", String(32), nullable=False),
    PrimaryKeyConstraint("event_id", "path"),
    Index("ix_lineage_facet_problems_node", "node_id", "event_time"),
)

# Bodies and events ``lineage serve`` refused (not JSON, over a limit, refused as Marquez refuses them), kept with why
# so that nothing a producer sent is lost unseen: ``lineage rejected`` lists them, ``lineage rejected --replay``
# stores what the server takes now (after an upgrade, or an operator's edit). ``content`` is the body (decompressed)
# or the one event of a batch it is about; a body refused for its size is not kept whole, only its first bytes
# (``length`` is the whole body's). One row per distinct content (``sha256``), ``times`` how often it came; bounded
# by ``LINEAGE_DEAD_LETTERS`` rows and ``LINEAGE_DEAD_LETTERS_BYTES`` of content, the oldest going first.
dead_letters_table = Table(
    "lineage_dead_letters",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("sha256", String(64), nullable=False, unique=True),
    Column("received_at", String(32), nullable=False),
    Column("last_received_at", String(32), nullable=False),
    Column("times", Integer, nullable=False),
    Column("endpoint", String(64), nullable=False),
    Column("status", Integer, nullable=False),
    Column("reason", Text, nullable=False),
    Column("client", String(255)),
    Column("length", BigInteger, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("replayed_at", String(32)),
    Column("replay_outcome", Text),
)
