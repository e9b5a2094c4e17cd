"""Write-audit-publish on the lineage page: the runs that audited a write (or published or discarded a kept branch),
and the tables waiting for review because of them, now or at any time. One rule for the page served, its exported
file and include/quality/review.py (``pipeline publish``/``discard``, ``lineage checks``, which import it through
``data``)."""

from __future__ import annotations

import threading
import weakref

from sqlalchemy import select

from include.core import naming, settings
from include.core.jsontext import loads
from include.lineage.queries.sql import chunks
from include.lineage.store.change_key import EventsKey, events_key
from include.lineage.store.schema import events_table, jobs_table, runs_table

# The operator's decisions about a kept audit branch (``pipeline publish`` / ``pipeline discard``, include/quality/
# review.py): runs of these jobs carry the ``writeAuditPublish`` facet of the branch they decided.
PUBLISH_JOB = "pipeline.publish"
DISCARD_JOB = "pipeline.discard"
DECISION_JOBS = (PUBLISH_JOB, DISCARD_JOB)


def audit_runs(store) -> list[dict]:
    """Every run that carries a ``writeAuditPublish`` run facet (an audited write, a publish or a discard of a kept
    branch), oldest first: its job, state, time (start, else its latest event) and the facet's facts. Kept per store
    between calls (``AuditCache``)."""
    with _caches_lock:
        cache = _caches.get(store)
        if cache is None:
            cache = _caches[store] = AuditCache()
    return cache.audits(store)


class AuditCache:
    """The audit runs of a store, kept until it has other events. Finding them reads every run's facets (a ``LIKE``
    over ``lineage_runs.facets``, then each match's JSON): 0.7 s on a store of 10^6 events, every time the page drew
    its graph. Kept, only the runs of events stored since are read again; a store whose events are not the ones seen
    plus new ones (``lineage prune`` deleted some: ``store/change_key.py``) is read whole again, as
    Marquez's model is (``queries/model.py``, ``ModelCache``). The audits handed out are the kept ones: callers read
    them and never change them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: EventsKey | None = None  # the store's change key when the audits were read (change_key.py)
        self._by_run: dict[str, dict] = {}
        self.full_reads = 0

    def audits(self, store) -> list[dict]:
        with self._lock, store.engine.connect() as conn:
            key = events_key(conn)  # (newest id, deletions): no count of the events (store/change_key.py)
            if key != self._key:
                self._catch_up(conn, key)
            found = list(self._by_run.values())
        found.sort(key=lambda item: (item["time"] or "", item["run_id"]))
        return found

    def _catch_up(self, conn, key: EventsKey) -> None:
        e = events_table
        seen = self._key
        if seen is not None and seen[0] is not None and seen[1] == key[1]:  # the events seen, plus new ones
            runs = conn.execute(select(e.c.run_id).distinct().where(e.c.id > seen[0], e.c.run_id.is_not(None)))
            for chunk in chunks(list(runs.scalars())):
                for run_id in chunk:
                    self._by_run.pop(run_id, None)
                self._by_run.update(_read_audits(conn, runs_table.c.id.in_(chunk)))
        else:
            self._by_run = dict(_read_audits(conn, None))
            self.full_reads += 1
        self._key = key


_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # store -> AuditCache
_caches_lock = threading.Lock()


def _read_audits(conn, where) -> list[tuple[str, dict]]:
    """(run id, audit) of each run carrying the facet, among the runs ``where`` selects (None: every run)."""
    r, j = runs_table, jobs_table
    query = (
        select(r.c.id, r.c.state, r.c.started_at, r.c.state_time, r.c.facets, j.c.name)
        .join(j, j.c.id == r.c.job_id)
        .where(r.c.facets.like('%"writeAuditPublish"%'))
    )
    if where is not None:
        query = query.where(where)
    found = []
    for row in conn.execute(query):
        facet = loads(row.facets or "{}").get("writeAuditPublish")
        if not isinstance(facet, dict) or not isinstance(facet.get("table"), str) or not facet["table"]:
            continue  # not a facet this project wrote: nothing to show
        found.append(
            (
                row.id,
                {
                    "run_id": row.id,
                    "job": row.name,
                    "state": row.state,
                    "time": row.started_at or row.state_time,
                    "table": facet["table"],
                    "branch": _text(facet.get("branch")),
                    "published": facet.get("published") is True,
                    "blocked": facet.get("published") is not True and row.name not in DECISION_JOBS,
                    "reason": _text(facet.get("reason")),
                    "blocking": _texts(facet.get("blocking")),
                    "warnings": _texts(facet.get("warnings")),
                    "results": [r for r in facet.get("results") or [] if isinstance(r, dict)]
                    if isinstance(facet.get("results"), list)
                    else [],
                },
            )
        )
    return found


def _text(value) -> str | None:
    return None if value is None else str(value)


def _texts(values) -> list[str]:
    return [str(value) for value in values] if isinstance(values, list) else []


def failed_expectations(results: list[dict]) -> list[dict]:
    """The failed entries of an audit's results, as the page lists them: name, observed, threshold, severity."""
    return [
        {
            "name": _text(result.get("name") or result.get("assertion")),
            "observed": _text(result.get("actual")),
            "threshold": _text(result.get("expected")),
            "severity": _text(result.get("severity")),
        }
        for result in results
        if result.get("success") is False
    ]


def blocked_spans(store) -> list[dict]:
    """Each blocked audit with the span of time its table was waiting for review: from the audit until the
    operator published or discarded its branch, or a newer audit of the table (``until`` None: still waiting).
    One rule for the page served now, as of a time, and in the exported file (``lineage.js`` reads the spans)."""
    audits = audit_runs(store)
    spans = []
    for index, audit in enumerate(audits):
        if not audit["blocked"]:
            continue
        ends = [
            later["time"]
            for later in audits[index + 1 :]
            if later["table"] == audit["table"]
            and (later["job"] not in DECISION_JOBS or later["branch"] == audit["branch"])
        ]
        spans.append(
            {
                "table": audit["table"],
                "label": f"{settings.ICEBERG_NAMESPACE}.{audit['table']}",
                "since": audit["time"],
                "until": min(ends) if ends else None,
                "decided": next(
                    (
                        "published" if later["job"] == PUBLISH_JOB else "discarded"
                        for later in audits[index + 1 :]
                        if later["job"] in DECISION_JOBS
                        and later["table"] == audit["table"]
                        and later["branch"] == audit["branch"]
                    ),
                    None,
                ),
                **{name: audit[name] for name in ("branch", "run_id", "blocking", "warnings", "results")},
                "failed": failed_expectations(audit["results"]),
            }
        )
    return spans


def blocked_tables(store, as_of: str | None = None) -> dict[str, dict]:
    """{table label (``nyc_taxi.yellow_taxi_raw``): its blocked audit} for each table waiting for review (now, or as
    of ``as_of``): its newest audit was blocked, and its branch was neither published nor discarded since."""
    blocked = {}
    for span in blocked_spans(store):
        since_ok = as_of is None or (span["since"] or "") <= as_of
        open_then = span["until"] is None if as_of is None else (span["until"] is None or span["until"] > as_of)
        if since_ok and open_then:
            blocked[span["label"]] = span
    return blocked


def blocked_of(node, blocked: dict[str, dict]) -> dict | None:
    """The blocked audit of a dataset node: by its table name, or by the dataset the table's key names."""
    if node.label in blocked:
        return blocked[node.label]
    for span in blocked.values():
        dataset_id, _ = naming.dataset_for_key(span["table"])
        if (node.namespace, node.name) == (dataset_id.namespace, dataset_id.name):
            return span
    return None


def blocked_summary(span: dict) -> dict:
    """What the page shows of a blocked audit beside its table."""
    return {
        "branch": span["branch"],
        "since": span["since"],
        "runId": span["run_id"],
        "failed": span["failed"],
        "blocking": span["blocking"],
    }
