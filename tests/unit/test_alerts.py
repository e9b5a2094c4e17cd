"""Alerts (include/quality/alerts.py) through a real webhook receiver and a real SMTP server on loopback: sent once
to each channel, kept in the outbox and re-sent when a channel was down, bounded in time, no secret in the text."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time

import pytest

from include.quality import alerts
from tests.alert_receivers import smtp_server, webhook_receiver
from tests.support import free_port

IMPACT = {
    "datasets": [{"name": "nyc_taxi.yellow_rides_hourly_actuals", "owners": []}],
    "jobs": [{"name": "forecast_yellow_rides.compute_hourly_actuals", "owners": ["data-platform"]}],
    "dags": [{"dag_id": "forecast_yellow_rides", "owners": ["data-platform"]}],
}


def _alert(**kwargs):
    return alerts.compose(
        kwargs.pop("kind", "blocked"),
        dag_id="ingest_yellow_taxi_data",
        task_id="load_yellow_taxi_raw",
        run_id="manual__2025-02-01",
        table="yellow_taxi_raw",
        failures=["yellow_taxi_raw daily_rows_vs_trailing_months: FAILED (block): observed 0.6, expected >= 0.7"],
        impact=IMPACT,
        branch="audit_taxi_202502_x",
        published=False,
        **kwargs,
    )


def _smtp(port, password="s3cret-password"):
    return alerts.Smtp("127.0.0.1", port, "airflow@localhost", ("owner@localhost",), user=None, password=password)


def test_an_alert_reaches_the_webhook_and_the_mailbox_once_naming_run_failure_and_impact(tmp_path):
    with webhook_receiver() as (url, hook), smtp_server() as (port, mail):
        result = alerts.deliver(_alert(), [alerts.Webhook(url), _smtp(port)], alerts.Outbox(tmp_path))
    assert len(result["sent"]) == 1 and not result["kept"]
    assert len(hook.bodies) == 1 and len(mail.mails) == 1
    text = hook.bodies[0]["text"]
    for expected in (
        "BLOCKED: nyc_taxi.yellow_taxi_raw was not published",
        "ingest_yellow_taxi_data / load_yellow_taxi_raw / manual__2025-02-01",
        "observed 0.6, expected >= 0.7",
        "dataset nyc_taxi.yellow_rides_hourly_actuals",
        "job forecast_yellow_rides.compute_hourly_actuals (owners: data-platform)",
        "DAG forecast_yellow_rides (owners: data-platform)",
        "pipeline publish --table yellow_taxi_raw --branch audit_taxi_202502_x",
    ):
        assert expected in text
    assert mail.mails[0]["Subject"].startswith("[lineage-aware pipelines] BLOCKED")
    assert "s3cret-password" not in text and "s3cret-password" not in mail.mails[0].get_payload()
    assert not alerts.Outbox(tmp_path).pending()


def test_an_alert_a_channel_missed_is_kept_and_resent_to_that_channel_only(tmp_path):
    outbox = alerts.Outbox(tmp_path)
    webhook_port = free_port()
    with smtp_server() as (port, mail):
        down = [alerts.Webhook(f"http://127.0.0.1:{webhook_port}/hook"), _smtp(port)]
        first = alerts.deliver(_alert(), down, outbox)
        assert first["kept"] and len(mail.mails) == 1, "the mail went; the webhook was down"
        assert len(outbox.pending()) == 1
        with webhook_receiver(webhook_port) as (url, hook):
            second = alerts.deliver(_alert(kind="failed"), [alerts.Webhook(url), _smtp(port)], outbox)
    assert len(second["sent"]) == 2, second
    assert [b["text"].split("\n")[0][:7] for b in hook.bodies] == ["BLOCKED", "FAILED:"], "oldest first"
    assert len(mail.mails) == 2, "the kept alert was not mailed twice"
    assert not outbox.pending() and len(outbox.sent()) == 2


def test_a_channel_that_hangs_costs_the_caller_a_bounded_time(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)  # accepts connections, never answers
    stop = threading.Event()
    try:
        started = time.monotonic()
        result = alerts.deliver(
            _alert(), [alerts.Webhook(f"http://127.0.0.1:{listener.getsockname()[1]}/hook")], alerts.Outbox(tmp_path)
        )
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        listener.close()
    assert result["kept"] and elapsed < alerts.SEND_TIMEOUT_SECONDS + 2


@pytest.mark.parametrize("kind", ["bogus", "", "BLOCKED"])
def test_an_unknown_alert_kind_is_refused(kind):
    with pytest.raises(ValueError, match="alert kind"):
        _alert(kind=kind)


def test_impact_not_ready_in_time_is_said_in_the_alert_instead_of_waiting(monkeypatch):
    monkeypatch.setattr(alerts, "impact_of", lambda table, **kwargs: time.sleep(5))
    started = time.monotonic()
    impact = alerts.impact_within_budget("yellow_taxi_raw", budget=0.5)
    assert time.monotonic() - started < 2
    assert "did not answer within" in impact["error"]
    assert (
        "did not answer within"
        in alerts.compose(
            "failed", dag_id="d", task_id="t", run_id="r", table="yellow_taxi_raw", failures=["x"], impact=impact
        )["text"]
    )


def test_the_impact_budget_comes_from_its_setting_and_a_bad_one_is_named_in_the_alert(monkeypatch):
    monkeypatch.setattr(alerts, "impact_of", lambda table, **kwargs: time.sleep(3))
    monkeypatch.setenv("ALERT_IMPACT_BUDGET_SECONDS", "0.3")
    started = time.monotonic()
    assert "did not answer within" in alerts.impact_within_budget("yellow_taxi_raw")["error"]
    assert time.monotonic() - started < 2, "the setting's budget, not the default's 20 s"
    monkeypatch.setenv("ALERT_IMPACT_BUDGET_SECONDS", "soon")
    assert (
        "ALERT_IMPACT_BUDGET_SECONDS='soon' is not a number" in alerts.impact_within_budget("yellow_taxi_raw")["error"]
    )
    monkeypatch.setenv("ALERT_IMPACT_BUDGET_SECONDS", "-5")  # acted as 0 before: the impact set silently left out
    assert "ALERT_IMPACT_BUDGET_SECONDS='-5' is less than 0" in alerts.impact_within_budget("yellow_taxi_raw")["error"]


def test_impact_of_catches_up_with_only_the_runs_since_the_last_alert(tmp_path, monkeypatch):
    """The store keeps how far it read Airflow's event file: a second alert (another task process) reads only what
    was appended since, so its cost does not grow with the file's history; what was appended is in its answer."""
    from include.core import settings
    from include.lineage.store import LineageStore
    from tests.unit.test_lineage_page import _event as lineage_page_event

    def event(job: str, inputs: list[str], outputs: list[str]) -> str:
        return json.dumps(lineage_page_event(job, inputs, outputs)) + "\n"

    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path))
    paths = settings.Paths.current()
    paths.lineage_events.parent.mkdir(parents=True)
    paths.lineage_events.write_text("".join(event("ingest.load", ["landing"], ["yellow_taxi_raw"]) for _ in range(50)))
    read: list[int] = []
    ingest = LineageStore.ingest

    def counting_ingest(self, events, **kwargs):
        read.append(len(events))
        return ingest(self, events, **kwargs)

    monkeypatch.setattr(LineageStore, "ingest", counting_ingest)
    assert alerts.impact_of("yellow_taxi_raw")["datasets"] == []
    with paths.lineage_events.open("a") as stream:
        stream.write(event("forecast.actuals", ["yellow_taxi_raw"], ["yellow_rides_hourly_actuals"]))
    impact = alerts.impact_of("yellow_taxi_raw")
    assert read == [50, 1], "the second alert read the one appended event only"
    assert [d["name"] for d in impact["datasets"]] == ["nyc_taxi.yellow_rides_hourly_actuals"]


def test_a_store_refresh_that_fails_is_logged_and_the_impact_set_is_the_stores_last(tmp_path, monkeypatch, caplog):
    """A refresh that raises must not cost the alert (the impact set is the store's as of its last refresh), but it
    is logged, with the file it read and the table the alert is about."""
    from include.core import settings
    from include.lineage.store.follower import StoreFollower
    from tests.unit.test_lineage_page import _event as lineage_page_event

    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path))
    paths = settings.Paths.current()
    paths.lineage_events.parent.mkdir(parents=True)
    paths.lineage_events.write_text(
        json.dumps(lineage_page_event("forecast.actuals", ["yellow_taxi_raw"], ["yellow_rides_hourly_actuals"])) + "\n"
    )
    assert [d["name"] for d in alerts.impact_of("yellow_taxi_raw")["datasets"]] == [
        "nyc_taxi.yellow_rides_hourly_actuals"
    ]

    def broken_refresh(self, files):
        raise OSError("event file unreadable")

    monkeypatch.setattr(StoreFollower, "refresh", broken_refresh)
    with caplog.at_level(logging.WARNING, logger="include.quality.alerts"):
        impact = alerts.impact_of("yellow_taxi_raw")
    assert [d["name"] for d in impact["datasets"]] == ["nyc_taxi.yellow_rides_hourly_actuals"], "the store's last"
    logged = [r for r in caplog.records if r.name == "include.quality.alerts"]
    assert [r.getMessage() for r in logged] == [
        f"lineage store not refreshed from {paths.lineage_events}: the impact set of yellow_taxi_raw is as of its "
        "last refresh"
    ]
    assert logged[0].levelno == logging.WARNING and str(logged[0].exc_info[1]) == "event file unreadable"


def test_an_alert_made_while_no_channel_was_configured_is_never_sent_later(tmp_path):
    outbox = alerts.Outbox(tmp_path)
    alerts.deliver(_alert(kind="failed"), [], outbox)
    assert not outbox.pending() and len(list((tmp_path / "unrouted").glob("*.json"))) == 1
    with webhook_receiver() as (url, hook):
        alerts.deliver(_alert(), [alerts.Webhook(url)], outbox)
    assert [body["text"][:7] for body in hook.bodies] == ["BLOCKED"], "only the alert made for this channel"
