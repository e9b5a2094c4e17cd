"""Alerts that follow lineage: on a blocked publish, a failed task or a failed ``warn`` expectation, one message
naming the run, what failed and everything downstream that would have consumed the data (the impact set from the
lineage store: datasets, jobs, DAGs, with their owners), kept in an outbox until every channel took it.

- ``compose``: the alert (a JSON-able dict) from what the notifier knows; ``impact_of``: the impact set.
- ``Outbox``: ``var/alerts/outbox/<id>.json`` until sent on every channel, then ``var/alerts/sent/``; an alert
  that could not be sent is re-sent with the next one.
- Channels: ``Webhook`` (Slack's incoming-webhook format, ``{"text": ...}``) and ``Smtp`` (e-mail). The notifier in
  ``plugins/lakehouse_notifier.py`` builds them from Airflow connections; no connection detail is ever put in an
  alert's text, and every send has a short timeout; the impact set has ``$ALERT_IMPACT_BUDGET_SECONDS`` (20 s), so
  a failed task is never held long.
"""

from __future__ import annotations

import json
import logging
import os
import smtplib
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

from include.core import naming, settings

log = logging.getLogger(__name__)

KINDS = ("blocked", "failed", "warn", "drift")
SEND_TIMEOUT_SECONDS = 2.0


def outbox_dir(paths: settings.Paths | None = None) -> Path:
    return (paths or settings.Paths.current()).var / "alerts"


# ---------------------------------------------------------------------------------------------------- impact set
def _owners(facets_json: str | None) -> list[str]:
    facets = json.loads(facets_json or "{}")
    return [owner.get("name") for owner in (facets.get("ownership") or {}).get("owners", []) if owner.get("name")]


def impact_of(table: str, store_url: str | None = None, paths: settings.Paths | None = None) -> dict:
    """Datasets, jobs and DAGs downstream of ``table`` (every edge ever seen: both models' jobs, though only the
    newest run of train_model is in the current graph), each with its owners (OpenLineage ``ownership`` facet; a
    job's and a DAG's from its DAG's), read from the lineage store after catching up with Airflow's event file. Only
    Airflow's: the alert names Airflow's tasks and DAGs and the datasets they declare, and the Spark listener's
    file (most of the lines, and the largest events) would cost the budget a task waits for. The store keeps how far
    it read the file, so an alert reads only the runs since the last one (or the last ``lineage`` command)."""
    from sqlalchemy import select

    from include.lineage.queries import LineageQueries
    from include.lineage.store import LineageStore
    from include.lineage.store.follower import StoreFollower
    from include.lineage.store.schema import datasets_table, jobs_table

    paths = paths or settings.Paths.current()
    with LineageStore(store_url) as store:
        try:  # only what was appended since the store last read the file
            StoreFollower(store, paths).refresh([paths.lineage_events])
        except Exception:  # a bad event file must not cost the alert; the store reports it to `lineage ingest`
            log.warning(
                "lineage store not refreshed from %s: the impact set of %s is as of its last refresh",
                paths.lineage_events,
                table,
                exc_info=True,
            )
        label = f"{settings.ICEBERG_NAMESPACE}.{table}" if naming.is_table_key(table) else table
        sub = LineageQueries(store).downstream(label, all_history=True)
        datasets = [n for n in sub.datasets() if sub.depths[n.id] > 0]
        jobs = sub.jobs()
        with store.engine.connect() as conn:
            job_facets = dict(conn.execute(select(jobs_table.c.name, jobs_table.c.facets)).all())
            dataset_facets = {
                (ns, name): facets
                for ns, name, facets in conn.execute(
                    select(datasets_table.c.namespace, datasets_table.c.name, datasets_table.c.facets)
                ).all()
            }
    # Airflow's jobs only (``<dag_id>.<task_id>``, their DAG's job carrying the ``ownership`` facet Airflow emits);
    # the Spark listener's application jobs under them would only repeat them.
    dag_owners = {job.name.split(".", 1)[0]: _owners(job_facets.get(job.name.split(".", 1)[0])) for job in jobs}
    tasks = [job for job in jobs if "." in job.name and dag_owners[job.name.split(".", 1)[0]]]
    dags = {job.name.split(".", 1)[0]: dag_owners[job.name.split(".", 1)[0]] for job in tasks}
    return {
        "datasets": [{"name": n.label, "owners": _owners(dataset_facets.get((n.namespace, n.name)))} for n in datasets],
        "jobs": [{"name": n.name, "owners": dags[n.name.split(".", 1)[0]]} for n in tasks],
        "dags": [{"dag_id": dag, "owners": owners} for dag, owners in sorted(dags.items())],
    }


def declared_consumers(table: str) -> list[dict]:
    """The DAGs and tasks the DAG files declare will consume ``table`` (``include/airflow/declared.py``), or none
    (logged) when the DAG folder cannot be read: the observed impact set is sent all the same."""
    from include.airflow.declared import consumers_of

    try:
        return [{"dag_id": c.dag_id, "task_id": c.task_id, "how": c.how} for c in consumers_of(table)]
    except Exception:
        log.warning("declared consumers of %s not read from the DAG folder", table, exc_info=True)
        return []


def impact_within_budget(table: str, budget: float | None = None, **kwargs) -> dict:
    """``impact_of``, or a note saying it was not ready in time (the alert is sent anyway); ``budget`` defaults to
    ``$ALERT_IMPACT_BUDGET_SECONDS``."""
    if budget is None:
        try:
            budget = settings.ALERT_IMPACT_BUDGET_SECONDS.number()
        except settings.SettingError as error:  # the alert goes out all the same, saying why it has no impact set
            return {"error": f"impact not computed ({error}): see `lineage impact {table}`"}
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alert-impact")
    future = pool.submit(impact_of, table, **kwargs)
    try:
        # The DAG files are parsed here, on the caller's thread: Airflow's DAG import sets signal handlers
        return {**future.result(timeout=budget), "declared": declared_consumers(table)}
    except FutureTimeout:
        return {"error": f"the lineage store did not answer within {budget:.0f} s: see `lineage impact {table}`"}
    except Exception as error:
        return {"error": f"impact not computed ({type(error).__name__}: {error}): see `lineage impact {table}`"}
    finally:
        pool.shutdown(wait=False)


def drift_failures(drift: dict) -> list[str]:
    """What a task's drift (``JobReport.lineage_drift``: include/lineage/emit/observed.py) means, one line each, with
    the Airflow Assets it leaves wrong: a declared output is an outlet, so its Asset is updated (and the DAGs scheduled
    on it run) whether or not the task wrote it; a table written but not declared updates no Asset."""
    catalog = settings.CatalogSettings.current()

    def asset(key: str) -> str:
        if not naming.is_table_key(key):
            return ""
        scheduled = sorted({c["dag_id"] for c in declared_consumers(key) if c["task_id"] is None})
        on = f"; scheduled on it: {', '.join(scheduled)}" if scheduled else ""
        return f" (Asset {catalog.table(key)}{on})"

    lines = [f"declared input {key} was not read" for key in drift.get("declared_not_read", [])]
    lines += [f"read {key}, which the DAG does not declare" for key in drift.get("read_not_declared", [])]
    lines += [
        f"declared output {key} was not written, yet its Asset is updated as the task's outlet{asset(key)}"
        for key in drift.get("declared_not_written", [])
    ]
    lines += [
        f"wrote {key}, which the DAG does not declare: no Asset is updated for it{asset(key)}"
        for key in drift.get("written_not_declared", [])
    ]
    return lines


# ---------------------------------------------------------------------------------------------------- the alert
def compose(
    kind: str,
    *,
    dag_id: str,
    task_id: str,
    run_id: str,
    table: str | None,
    failures: list[str],
    impact: dict | None = None,
    branch: str | None = None,
    published: bool | None = None,
) -> dict:
    """The alert: what happened, to which run, what failed, and the impact set."""
    if kind not in KINDS:
        raise ValueError(f"alert kind {kind!r}, expected one of {KINDS}")
    target = f"{settings.ICEBERG_NAMESPACE}.{table}" if table and naming.is_table_key(table) else table
    headline = {
        "blocked": f"BLOCKED: {target} was not published (main unchanged; branch {branch} kept for review)",
        "failed": f"FAILED: task {dag_id}.{task_id}" + (f" writing {target}" if target else ""),
        "warn": f"WARNING: {target} was published with failed warn expectations",
        "drift": f"DRIFT: task {dag_id}.{task_id} did not read and write what its DAG declares",
    }[kind]
    impact = impact or {}
    lines = [headline, f"run: {dag_id} / {task_id} / {run_id}", "what failed:"]
    lines += [f"  - {failure}" for failure in failures] or ["  - (no message)"]
    if impact.get("error"):
        lines.append(f"downstream: {impact['error']}")
    elif kind == "drift" and not impact:
        pass  # the datasets and Assets the drift leaves wrong are its failures
    else:
        lines.append("downstream that would have consumed it:")
        owned = lambda item: f" (owners: {', '.join(item['owners'])})" if item.get("owners") else ""  # noqa: E731
        lines += [f"  dataset {item['name']}{owned(item)}" for item in impact.get("datasets", [])]
        lines += [f"  job {item['name']}{owned(item)}" for item in impact.get("jobs", [])]
        lines += [f"  DAG {item['dag_id']}{owned(item)}" for item in impact.get("dags", [])]
        ran = {item["dag_id"] for item in impact.get("dags", [])}
        lines += [
            f"  DAG {item['dag_id']}"
            + (f" task {item['task_id']}" if item.get("task_id") else "")
            + f" ({item['how']}; declared, not yet run)"
            for item in impact.get("declared", [])
            if item["dag_id"] not in ran
        ]
    if kind == "blocked" and table and branch:
        lines.append(
            f'to publish after review: pipeline publish --table {table} --branch {branch} --reason "..."; '
            f"to drop it: pipeline discard --table {table} --branch {branch}"
        )
    created = datetime.now(UTC)
    return {
        "id": f"{created.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}",
        "created": created.isoformat(),
        "kind": kind,
        "dag_id": dag_id,
        "task_id": task_id,
        "run_id": run_id,
        "table": target,
        "branch": branch,
        "published": published,
        "failures": list(failures),
        "impact": impact,
        "subject": f"[lineage-aware pipelines] {headline}"[:200],
        "text": "\n".join(lines),
    }


# ---------------------------------------------------------------------------------------------------- channels
@dataclass(frozen=True)
class Webhook:
    """A webhook taking Slack's incoming-webhook body (``{"text": ...}``): Slack, Mattermost, Rocket.Chat, ..."""

    url: str
    name: str = "webhook"

    def send(self, alert: dict, timeout: float = SEND_TIMEOUT_SECONDS) -> None:
        body = json.dumps({"text": alert["text"]}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (an operator's connection)
            if response.status >= 300:
                raise OSError(f"webhook answered HTTP {response.status}")


@dataclass(frozen=True)
class Smtp:
    host: str
    port: int
    sender: str
    recipients: tuple[str, ...]
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    starttls: bool = False
    name: str = "smtp"

    def send(self, alert: dict, timeout: float = SEND_TIMEOUT_SECONDS) -> None:
        message = EmailMessage()
        message["Subject"] = alert["subject"]
        message["From"] = self.sender
        message["To"] = ", ".join(self.recipients)
        message["X-Alert-Id"] = alert["id"]
        message.set_content(alert["text"])
        with smtplib.SMTP(self.host, self.port, timeout=timeout) as client:
            if self.starttls:
                client.starttls()
            if self.user:
                client.login(self.user, self.password or "")
            client.send_message(message)


# ---------------------------------------------------------------------------------------------------- the outbox
class Outbox:
    """Alerts not yet taken by every channel. Each file records the channels that took it, so a re-send never
    sends twice to a channel that already has it."""

    def __init__(self, root: Path | None = None):
        self.root = root or outbox_dir()
        self.pending_dir = self.root / "outbox"
        self.sent_dir = self.root / "sent"

    def put(self, alert: dict, channels=()) -> Path:
        """Keep ``alert`` for the ``channels`` configured now: a channel configured later never gets it (an alert
        made while no channel was configured goes to ``unrouted/``, read there)."""
        folder = self.pending_dir if channels else self.root / "unrouted"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{alert['id']}.json"
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        record = {"sent_to": [], **alert, "channels": [channel.name for channel in channels]}
        partial.write_text(json.dumps(record, indent=2, sort_keys=True))
        os.replace(partial, path)
        return path

    def pending(self) -> list[Path]:
        return sorted(self.pending_dir.glob("*.json")) if self.pending_dir.exists() else []

    def sent(self) -> list[dict]:
        return (
            [json.loads(p.read_text()) for p in sorted(self.sent_dir.glob("*.json"))] if self.sent_dir.exists() else []
        )

    def flush(self, channels, deadline_seconds: float = 2 * SEND_TIMEOUT_SECONDS + 1) -> dict[str, list[str]]:
        """Send every pending alert, oldest first, to each channel that has not taken it, until the deadline;
        returns {"sent": ids, "kept": ids}. A channel that fails is not tried again in this flush."""
        started, down, result = time.monotonic(), set(), {"sent": [], "kept": []}
        for path in self.pending():
            alert = json.loads(path.read_text())
            wanted = [channel for channel in channels if channel.name in alert.get("channels", [])]
            for channel in wanted:
                if channel.name in alert["sent_to"] or channel.name in down:
                    continue
                if time.monotonic() - started > deadline_seconds:
                    break
                try:
                    channel.send(alert)
                    alert["sent_to"].append(channel.name)
                except (OSError, smtplib.SMTPException) as error:
                    down.add(channel.name)
                    alert["last_error"] = f"{channel.name}: {type(error).__name__}"
            if all(name in alert["sent_to"] for name in alert.get("channels", [])):
                self.sent_dir.mkdir(parents=True, exist_ok=True)
                (self.sent_dir / path.name).write_text(json.dumps(alert, indent=2, sort_keys=True))
                path.unlink()
                result["sent"].append(alert["id"])
            else:
                path.write_text(json.dumps(alert, indent=2, sort_keys=True))
                result["kept"].append(alert["id"])
        return result


def deliver(alert: dict, channels, outbox: Outbox | None = None) -> dict[str, list[str]]:
    """Keep the alert, then send it and anything still waiting."""
    outbox = outbox or Outbox()
    outbox.put(alert, channels)
    return outbox.flush(channels)
