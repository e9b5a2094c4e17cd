"""The project's Airflow notifier: alerts that follow lineage (``include/quality/alerts.py``).

``LineageAlertNotifier`` is a ``BaseNotifier`` (Airflow 3's task SDK), set as every task's ``on_failure_callback``
and ``on_success_callback`` (``dags/``). It sends:

- on failure: ``blocked`` when the task's report says its write-audit-publish kept the data on a branch, else
  ``failed`` with the task's error;
- on success: ``drift`` when the task did not read and write what its DAG declares (the drift its operator wrote into
  the job's report: include/lineage/emit/observed.py), and ``warn`` when the published data failed ``warn``
  expectations; nothing otherwise.

Each alert names the run, what failed and the impact set from the lineage store, and goes through two channels,
each an Airflow connection (absent: not used): ``alerts_webhook`` (a webhook in Slack's format: an ``http``
connection, host/port/schema and ``{"endpoint": "/path"}`` in extra, or a ``slackwebhook`` connection whose password
is the webhook URL) and ``alerts_smtp`` (an ``smtp`` connection: host, port, login, password; extra ``from_email``,
``to`` (comma-separated), ``starttls``). The alert is kept in ``var/alerts/outbox/`` first and re-sent with the next
one when a channel is down (an alert made while no channel is configured waits in ``var/alerts/unrouted/``);
a notifier never raises.

The maintained notifiers (``SlackWebhookNotifier``, ``SmtpNotifier``) send once and raise or log on failure; neither
keeps what it could not send, which is why the channels are the project's own.
"""

from __future__ import annotations

import logging

from airflow.sdk import BaseNotifier

log = logging.getLogger(__name__)

WEBHOOK_CONN_ID = "alerts_webhook"
SMTP_CONN_ID = "alerts_smtp"


def _connection(conn_id: str):
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return Connection.get(conn_id)
    except AirflowNotFoundException:  # not defined: the channel is not used
        return None
    except Exception:  # defined or not, it could not be read: the channel is not used for this alert, said here
        log.warning("alert channel %s not used: its connection could not be read", conn_id, exc_info=True)
        return None


def channels() -> list:
    from include.quality.alerts import Smtp, Webhook

    found = []
    webhook = _connection(WEBHOOK_CONN_ID)
    if webhook is not None:
        extra = webhook.extra_dejson or {}
        if webhook.password and str(webhook.password).startswith(("http://", "https://")):
            url = webhook.password
        else:
            port = f":{webhook.port}" if webhook.port else ""
            url = f"{webhook.schema or 'https'}://{webhook.host}{port}/{str(extra.get('endpoint', '')).lstrip('/')}"
        found.append(Webhook(url))
    smtp = _connection(SMTP_CONN_ID)
    if smtp is not None:
        extra = smtp.extra_dejson or {}
        recipients = tuple(r.strip() for r in str(extra.get("to", "")).split(",") if r.strip())
        found.append(
            Smtp(
                host=smtp.host,
                port=int(smtp.port or 25),
                sender=extra.get("from_email") or "airflow@localhost",
                recipients=recipients or ("data-platform@localhost",),
                user=smtp.login or None,
                password=smtp.password or None,
                starttls=str(extra.get("starttls", "false")).lower() == "true",
            )
        )
    return found


def _task(context) -> str:
    """``dag_id.task_id run_id`` of the context's task instance, for a log line; never raises."""
    try:
        ti = context["ti"]
        return f"{ti.dag_id}.{ti.task_id} {ti.run_id}"
    except Exception:
        return f"an unknown task (context {sorted(context) if isinstance(context, dict) else type(context).__name__})"


def _report(context):
    from include.core import contract

    ti, path = context["ti"], None
    try:
        path = contract.report_path_for(ti)
        return contract.JobReport.read(path)
    except FileNotFoundError:  # no report (not a Spark task, or it died before writing one)
        return None
    except Exception:  # a report that cannot be read: the alert is made without it (a warn alert is lost), said here
        log.warning("report of %s not read (%s): alert made without its audit", _task(context), path, exc_info=True)
        return None


class LineageAlertNotifier(BaseNotifier):
    """One alert per failed task, blocked publish or published-with-warnings; see the module's docstring."""

    def __init__(self, on: str = "failure"):
        super().__init__()
        if on not in ("failure", "success"):
            raise ValueError(f"on must be 'failure' or 'success', not {on!r}")
        self.on = on

    def notify(self, context) -> None:
        try:
            self._notify(context)
        except Exception as error:  # an alert must never fail or hold a task
            log.warning("alert not sent on %s of %s: %s", self.on, _task(context), error, exc_info=True)

    def _notify(self, context) -> None:
        from include.quality import alerts

        task = context["task"]
        report = _report(context)
        audit = (report.audit if report is not None else None) or {}
        outputs = task.lineage_keys()[1] if hasattr(task, "lineage_keys") else []
        table = audit.get("table") or next(iter(outputs), None)
        if self.on == "success":
            if report is not None and report.lineage_drift:
                self._send(alerts, "drift", context, None, alerts.drift_failures(report.lineage_drift), {})
            if not audit.get("warnings"):
                return
            kind, failures = "warn", list(audit["warnings"])
        elif audit and not audit.get("published"):
            kind, failures = "blocked", list(audit.get("blocking", [])) + list(audit.get("warnings", []))
        else:
            error = context.get("exception")
            kind, failures = "failed", [f"{type(error).__name__}: {error}" if error else "the task failed"]
        impact = alerts.impact_within_budget(table) if table else {}
        self._send(alerts, kind, context, table, failures, impact, audit)

    @staticmethod
    def _send(alerts, kind: str, context, table, failures: list[str], impact: dict, audit: dict | None = None):
        ti, audit = context["ti"], audit or {}
        alert = alerts.compose(
            kind,
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            table=table,
            failures=failures,
            impact=impact,
            branch=audit.get("branch"),
            published=audit.get("published"),
        )
        result = alerts.deliver(alert, channels())
        log.info("alert %s (%s): sent %s, kept %s", alert["id"], kind, result["sent"], result["kept"])
