"""``LineageQueries``: the one front of the questions asked of the lineage store, for the CLI, the API, the page and
the alerts. Each method opens a connection, turns the caller's names and instants into the store's, and hands the
question to the module that answers it (as Marquez's resources hand each question to one service); it holds no
query of its own."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext

from sqlalchemy.engine import Connection

from include.lineage.errors import LineageError
from include.lineage.queries import (
    columns,
    completeness,
    diff,
    drift,
    impact,
    marquez,
    problems,
    provenance,
    runs,
    shape,
    walks,
)
from include.lineage.queries.model import MarquezModel, ModelCache
from include.lineage.queries.names import Node, Subgraph, parse_instant, resolve
from include.lineage.queries.sql import DEFAULT_DEPTH
from include.lineage.store import LineageStore


class LineageQueries:
    def __init__(self, store: LineageStore):
        self.store = store
        self._models = ModelCache(store.packer, store.engine)

    # ------------------------------------------------------------------------- names
    def resolve(self, ref: str, conn: Connection | None = None) -> Node:
        """The node a user means by ``ref``; UnknownNodeError with close names, or EmptyStoreError.

        A Marquez id (``dataset:<ns>:<name>``, ``job:<ns>:<name>``) is parsed into (kind, namespace, name) and looked
        up by those three: the namespace may itself hold colons (``postgres://host:5432``)."""
        if conn is None:
            with self.store.engine.connect() as own:
                return resolve(own, ref, self.store.url)
        return resolve(conn, ref, self.store.url)

    # ------------------------------------------------------------------------- graph queries
    def upstream(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, all_history: bool = False
    ) -> Subgraph:
        return self._walk(ref, "upstream", depth, as_of, all_history)

    def downstream(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, all_history: bool = False
    ) -> Subgraph:
        return self._walk(ref, "downstream", depth, as_of, all_history)

    def neighbourhood(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, all_history: bool = False
    ) -> Subgraph:
        """Upstream and downstream together (the CLI's directed walks; Marquez's own graph is ``marquez_lineage``)."""
        return self._walk(ref, "both", depth, as_of, all_history)

    def _walk(
        self, ref: str, direction: str, depth: int, as_of: str | None, all_history: bool, conn: Connection | None = None
    ) -> Subgraph:
        as_of = parse_instant(as_of) if as_of is not None else None
        with nullcontext(conn) if conn is not None else self.store.engine.connect() as using:
            return walks.walk(using, self.resolve(ref, using), direction, depth, as_of, all_history)

    # ------------------------------------------------------------------------- Marquez's GET /api/v1/lineage
    def marquez_model(self) -> MarquezModel:
        with self.store.engine.connect() as conn:
            return self._models.model(conn)

    def marquez_lineage(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, history: str | None = None
    ) -> dict:
        """``GET /api/v1/lineage?nodeId=&depth=`` as Marquez 0.51 answers it (``LineageService.lineage``): the start
        job of the node (a job itself; for a dataset ``getJobFromInputOrOutput``), the jobs ``getLineage`` reaches
        from it through the datasets of their current versions, and those datasets, with Marquez's edges.

        Beyond Marquez: ``as_of`` (the graph at that instant: each job as the version of its latest run started by
        then, datasets first seen by then) and ``history="all"`` (every edge ever seen, each with ``firstSeen`` and
        ``lastSeen``)."""
        as_of = parse_instant(as_of) if as_of is not None else None
        if history not in (None, "", "current", "all"):
            raise LineageError(f"history={history!r}: use history=all (every edge ever seen) or leave it out")
        with self.store.engine.connect() as conn:
            model = self._models.model(conn)
            return marquez.marquez_lineage(conn, model, ref, depth, as_of, history == "all", self.store.url)

    def marquez_graph(self, subgraph: Subgraph) -> dict:
        """A subgraph in Marquez's lineage response shape: ``{"graph": [{"id", "type", "data", "inEdges",
        "outEdges"}]}``; edges of a history subgraph carry ``firstSeen``/``lastSeen``."""
        with self.store.engine.connect() as conn:
            return shape.marquez_graph(conn, subgraph)

    # ------------------------------------------------------------------------- impact
    def impact(
        self,
        ref: str,
        depth: int = DEFAULT_DEPTH,
        *,
        as_of: str | None = None,
        all_history: bool = False,
        since: str | None = None,
        runs: int | None = impact.RUNS_LISTED,
    ) -> dict:
        """Every dataset, job and run downstream of a node: what to recompute, re-run or roll back. ``as_of``: in the
        graph of that instant, and only runs started by then; ``all_history``: along every edge ever seen;
        ``since`` (a UTC instant, ``parse_instant``): only runs started at or after it. ``runs``: how many of the
        runs that read the data to list, newest first (None: all); ``runsTotal`` counts them all."""
        if runs is not None and runs < 0:
            raise LineageError(f"runs={runs}: list 0 or more runs (None: all of them)")
        with self.store.engine.connect() as conn:  # one connection: a checkout less of every answer
            sub = self._walk(ref, "downstream", depth, as_of, all_history, conn)
            listed, total = impact.runs_reading(conn, sub, since, runs)
        return {"subgraph": sub, "runs": listed, "runsTotal": total, "since": since}

    def impact_of_run(self, run_ref: str) -> dict:
        """What a run (and its child runs) wrote, every later run that read it, transitively, and what lies
        downstream of it in the graph."""
        with self.store.engine.connect() as conn:
            return impact.impact_of_run(conn, run_ref, self.store.url)

    # ------------------------------------------------------------------------- runs
    def runs(self, ref: str, limit: int = 20) -> dict:
        """Runs of a job, newest first (for a dataset: the runs that wrote it)."""
        with self.store.engine.connect() as conn:
            node = self.resolve(ref, conn)
            return {"node": node, "runs": runs.runs_of(conn, node, limit)}

    def run_details(self, run_ref: str) -> dict:
        with self.store.engine.connect() as conn:
            row = runs.resolve_run(conn, run_ref, self.store.url)
            return runs.details_of(conn, runs.with_job(conn, row))

    def run_at(self, ref: str, as_of: str | None = None) -> str:
        """The run ``ref`` names: a run id (or a prefix of 4+ characters), else the run of a job or dataset as it was
        at ``as_of`` (default: now): of a job, its latest run started by then; of a dataset, the run that wrote the
        version current then (the latest write that had ended by then; of a writer and its parent run that both
        report the write, the parent: a task rather than its Spark job). ``as_of`` with a run id is a usage error: a
        run's provenance does not change with time."""
        as_of = parse_instant(as_of, "--as-of") if as_of is not None else None
        with self.store.engine.connect() as conn:
            return runs.run_at(conn, ref, as_of, self.store.url)

    def merged_runs(
        self, run_ids: Iterable[str] | None = None, in_hand: dict[str, list[tuple]] | None = None
    ) -> list[dict]:
        """Run ids that hold the events of more than one run, each with why: a START after the run had finished
        (COMPLETE, FAIL or ABORT earlier), or Airflow facets of two DAG runs (other logical dates, clear numbers or
        Airflow run ids: the provider derives an OpenLineage run id from the DAG, logical date and clear number, so
        a DAG re-run at the same logical date reuses it). ``run_ids``: only these; ``in_hand``: runs judged from their
        events' facts (``IngestResult.created_runs``), not from the store."""
        with self.store.engine.connect() as conn:
            return runs.merged_runs(conn, self.store.packer, run_ids, in_hand)

    def child_runs(self, run_id: str) -> list[tuple[str, str]]:
        """(run id, job name) of a run's child runs (a DAG run's task runs), by job name."""
        with self.store.engine.connect() as conn:
            return runs.child_runs(conn, run_id)

    # ------------------------------------------------------------------------- run provenance
    def run_lineage(self, run_ref: str, depth: int = DEFAULT_DEPTH) -> dict:
        """``GET /api/v1/runlineage/upstream`` (Marquez's ``LineageDao.getUpstreamRuns``): the run, the dataset
        versions it read and the run that wrote each (``producedByRunId``), those runs' inputs and writers, and so on,
        ``depth`` levels (the run itself is level 0; a level-``depth`` run is listed, its writers are not). Runs come
        by level, then job name (``ORDER BY depth ASC, job_name ASC``), each once at its first level.

        A version comes from the input's ``version`` facet (the Iceberg snapshot id) and was written by the run that
        reported it as an output; an input without one is the latest write of that dataset before the reading run
        (whose version, if the writer reported one). Entries carry, besides Marquez's fields, ``depth``, the job
        version's row id and the run's parameters, and each input its ``label`` (``run_lineage_json`` drops them)."""
        with self.store.engine.connect() as conn:
            entries = provenance.run_lineage(conn, run_ref, depth)  # a whole run id: no lookup before
            if not entries:
                entries = provenance.run_lineage(conn, runs.resolve_run(conn, run_ref, self.store.url).id, depth)
            return {"runs": entries}

    # ------------------------------------------------------------------------- diff
    def diff(self, run_a: str, run_b: str, upstream: bool = False) -> dict:
        """Two runs side by side: job and code version, parameters, state, error, input and output versions, schema
        changes. A run without datasets of its own (a DAG run) is compared through its child runs. ``upstream``:
        also their provenance (``run_lineage``) compared, under ``"upstream"`` (see ``diff.compare_provenance``)."""
        with self.store.engine.connect() as conn:
            a, b = (runs.resolve_run(conn, ref, self.store.url) for ref in (run_a, run_b))
            return diff.compare_runs(conn, a, b, upstream)

    # ------------------------------------------------------------------------- drift
    def drift(self) -> list[dict]:
        """The tasks whose newest run did not read and write what their DAG declares (``lineageDrift``)."""
        with self.store.engine.connect() as conn:
            return drift.drifted_tasks(conn)

    # ------------------------------------------------------------------------- columns
    def columns(self, ref: str, depth: int = DEFAULT_DEPTH) -> dict:
        """Column-level upstream of ``DATASET.COLUMN`` from the columnLineage facets."""
        with self.store.engine.connect() as conn:
            return columns.column_lineage(conn, ref, depth, self.store.url)

    def column_graph(self, result: dict) -> dict:
        """Marquez's column-lineage response shape (``DATASET_FIELD`` nodes)."""
        return columns.column_graph(result)

    # ------------------------------------------------------------------------- what is missing, what was refused
    def completeness(
        self,
        dag_run: str | None = None,
        limit: int = 10,
        grace: float = completeness.GRACE_SECONDS,
        torn: Iterable[tuple[str, bytes]] = (),
    ) -> list[dict]:
        """Each DAG run's lineage (one run id, or the ``limit`` newest DAG runs) as complete, or what is missing
        named (``completeness.completeness``): runs without a terminal event ``grace`` seconds after their parent
        ended, terminal events without a START, Spark applications without COMPLETE, a Spark task without its
        application, lines set aside and posts refused that name its runs, torn event files (``torn``)."""
        torn = list(torn)
        with self.store.engine.connect() as conn:
            if dag_run is not None:
                ids = [runs.resolve_run(conn, dag_run, self.store.url).id]
            else:
                ids = completeness.dag_runs(conn, limit)
            return [completeness.completeness(conn, run_id, grace=grace, torn=torn) for run_id in ids]

    def facet_problems(self, ref: str, limit: int = 50) -> dict:
        """What the spec refused in the events of a node (``problems.facet_problems``): ``{"node", "problems"}``."""
        with self.store.engine.connect() as conn:
            node = self.resolve(ref, conn)
            return {"node": node, "problems": problems.facet_problems(conn, node, limit)}
