"""The Airflow notifier of every task (plugins/lakehouse_notifier.py): which alert a task's end makes, from its report,
and that a notifier never raises. Channels are the real loopback receivers (tests/alert_receivers.py)."""

from __future__ import annotations

import importlib
import logging
import sys
from types import SimpleNamespace

import pytest

from include.core import contract, settings
from include.quality import alerts
from tests.alert_receivers import webhook_receiver

AUDIT = {
    "table": "yellow_taxi_raw",
    "branch": "audit_taxi_202502_x",
    "published": False,
    "main_snapshot_id": 1,
    "branch_snapshot_id": 2,
    "blocking": ["yellow_taxi_raw days_missing: FAILED (block): observed 3, expected <= 0"],
    "warnings": ["yellow_taxi_raw fare_out_of_range: FAILED (warn): observed 0.05, expected <= 0.02"],
    "results": [],
}


@pytest.fixture
def notifier_module(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(settings.PROJECT_ROOT / "plugins"))
    module = importlib.import_module("lakehouse_notifier")
    monkeypatch.setattr(alerts, "impact_within_budget", lambda table, **kw: {"datasets": [], "jobs": [], "dags": []})
    monkeypatch.setattr(alerts, "outbox_dir", lambda paths=None: tmp_path / "alerts")
    yield module
    sys.modules.pop("lakehouse_notifier", None)


def _context(tmp_path, monkeypatch, report: contract.JobReport | None, error: Exception | None = None):
    ti = SimpleNamespace(dag_id="ingest_yellow_taxi_data", task_id="load_yellow_taxi_raw", run_id="r1", try_number=1)
    path = tmp_path / "report.json"
    if report is not None:
        report.write(path)
    monkeypatch.setattr(contract, "report_path_for", lambda task_instance: path)
    task = SimpleNamespace(
        lineage_keys=lambda: (
            ["/landing/yellow_tripdata_2025-01.parquet"],
            ["yellow_taxi_raw", "yellow_taxi_quarantine"],
        )
    )
    return {"ti": ti, "task": task, "exception": error}


@pytest.mark.parametrize(
    "on, audit, error, headline",
    [
        ("failure", AUDIT, None, "BLOCKED: nyc_taxi.yellow_taxi_raw was not published"),
        ("failure", None, RuntimeError("spark-submit exited 1"), "FAILED: task ingest_yellow_taxi_data.load_yellow"),
        (
            "success",
            {**AUDIT, "published": True, "blocking": []},
            None,
            "WARNING: nyc_taxi.yellow_taxi_raw was published",
        ),
        ("success", {**AUDIT, "published": True, "blocking": [], "warnings": []}, None, None),
        ("success", None, None, None),
    ],
)
def test_each_task_end_makes_the_alert_it_should(notifier_module, tmp_path, monkeypatch, on, audit, error, headline):
    with webhook_receiver() as (url, hook):
        monkeypatch.setattr(notifier_module, "channels", lambda: [alerts.Webhook(url)])
        context = _context(tmp_path, monkeypatch, contract.JobReport(audit=audit), error)
        notifier_module.LineageAlertNotifier(on=on).notify(context)
    if headline is None:
        assert hook.bodies == []
    else:
        assert len(hook.bodies) == 1 and hook.bodies[0]["text"].startswith(headline), hook.bodies
    if headline and headline.startswith("BLOCKED"):
        assert "days_missing: FAILED (block)" in hook.bodies[0]["text"]
        assert "fare_out_of_range: FAILED (warn)" in hook.bodies[0]["text"], "warnings are named too"
    if error is not None:
        assert "RuntimeError: spark-submit exited 1" in hook.bodies[0]["text"]


def test_a_notifier_never_raises_and_keeps_the_alert_when_nothing_answers(notifier_module, tmp_path, monkeypatch):
    monkeypatch.setattr(notifier_module, "channels", lambda: [alerts.Webhook("http://127.0.0.1:9/hook")])
    notifier_module.LineageAlertNotifier().notify(_context(tmp_path, monkeypatch, contract.JobReport(audit=AUDIT)))
    assert len(list((tmp_path / "alerts" / "outbox").glob("*.json"))) == 1


def test_a_notifier_that_fails_logs_what_failed_instead_of_raising(notifier_module, caplog):
    broken = {"ti": None, "task": None}
    with caplog.at_level(logging.WARNING, logger="lakehouse_notifier"):
        notifier_module.LineageAlertNotifier().notify(broken)  # logged, not raised
    sent = [r for r in caplog.records if r.name == "lakehouse_notifier" and "alert not sent" in r.getMessage()]
    assert len(sent) == 1, [r.getMessage() for r in caplog.records]
    assert sent[0].levelno == logging.WARNING
    assert "alert not sent on failure of an unknown task" in sent[0].getMessage()
    assert "'NoneType' object has no attribute 'dag_id'" in sent[0].getMessage()
    assert sent[0].exc_info and sent[0].exc_info[0] is AttributeError, "the traceback is kept"


def test_a_connection_that_cannot_be_read_is_logged_and_an_undefined_one_is_not(notifier_module, monkeypatch, caplog):
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    def undefined(conn_id):
        raise AirflowNotFoundException(f"The conn_id `{conn_id}` isn't defined")

    monkeypatch.setattr(Connection, "get", staticmethod(undefined))
    with caplog.at_level(logging.WARNING, logger="lakehouse_notifier"):
        assert notifier_module.channels() == []
    assert caplog.records == [], "a channel not configured is not news"

    def unreadable(conn_id):
        raise RuntimeError("secrets backend unreachable")

    monkeypatch.setattr(Connection, "get", staticmethod(unreadable))
    with caplog.at_level(logging.WARNING, logger="lakehouse_notifier"):
        assert notifier_module.channels() == [], "the channel is still left out (behaviour unchanged)"
    messages = {r.getMessage() for r in caplog.records if r.name == "lakehouse_notifier"}
    assert messages == {
        f"alert channel {conn_id} not used: its connection could not be read"
        for conn_id in (notifier_module.WEBHOOK_CONN_ID, notifier_module.SMTP_CONN_ID)
    }
    assert all("secrets backend unreachable" in str(r.exc_info[1]) for r in caplog.records)


def test_an_unreadable_report_is_logged_with_its_path_and_a_missing_one_is_not(
    notifier_module, tmp_path, monkeypatch, caplog
):
    with webhook_receiver() as (url, hook):
        monkeypatch.setattr(notifier_module, "channels", lambda: [alerts.Webhook(url)])
        context = _context(tmp_path, monkeypatch, None)  # no report: a task that is not a Spark job
        with caplog.at_level(logging.WARNING, logger="lakehouse_notifier"):
            notifier_module.LineageAlertNotifier(on="success").notify(context)
        assert caplog.records == [] and hook.bodies == []
        (tmp_path / "report.json").write_text('{"audit": {"warnings": ["cut short')  # a report half written
        with caplog.at_level(logging.WARNING, logger="lakehouse_notifier"):
            notifier_module.LineageAlertNotifier(on="success").notify(context)
    assert hook.bodies == [], "no warn alert without the report (behaviour unchanged)"
    logged = [r for r in caplog.records if r.name == "lakehouse_notifier"]
    assert len(logged) == 1, f"the unreadable report is logged once: {[r.getMessage() for r in logged]}"
    record = logged[0]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        f"report of ingest_yellow_taxi_data.load_yellow_taxi_raw r1 not read ({tmp_path / 'report.json'}): "
        "alert made without its audit"
    )
    assert isinstance(record.exc_info[1], contract.ReportError)


def test_a_notifier_refuses_an_unknown_moment():
    sys.path.insert(0, str(settings.PROJECT_ROOT / "plugins"))
    try:
        module = importlib.import_module("lakehouse_notifier")
        with pytest.raises(ValueError, match="on must be"):
            module.LineageAlertNotifier(on="retry")
    finally:
        sys.path.remove(str(settings.PROJECT_ROOT / "plugins"))


def test_a_task_that_drifted_from_its_declaration_sends_a_drift_alert_naming_datasets_and_assets(
    notifier_module, tmp_path, monkeypatch
):
    """The drift its operator wrote into the report (include/lineage/emit/observed.py) makes one alert on success,
    naming the task, each dataset, and the Asset left wrong with the DAG scheduled on it (read from the DAG files)."""
    monkeypatch.setattr(
        alerts,
        "declared_consumers",
        lambda key: (
            [{"dag_id": "forecast_yellow_rides", "task_id": None, "how": "scheduled on its Asset"}]
            if key == "weather_raw"
            else []
        ),
    )
    drift = {
        "declared_not_read": ["weather_staging"],
        "declared_not_written": ["weather_raw"],
        "read_not_declared": ["yellow_taxi_raw"],
        "written_not_declared": [],
    }
    with webhook_receiver() as (url, hook):
        monkeypatch.setattr(notifier_module, "channels", lambda: [alerts.Webhook(url)])
        context = _context(tmp_path, monkeypatch, contract.JobReport(lineage_drift=drift))
        notifier_module.LineageAlertNotifier(on="success").notify(context)
        notifier_module.LineageAlertNotifier(on="success").notify(
            _context(tmp_path, monkeypatch, contract.JobReport(lineage_drift=None))
        )
    assert len(hook.bodies) == 1, "no drift, no alert"
    text = hook.bodies[0]["text"]
    assert text.startswith("DRIFT: task ingest_yellow_taxi_data.load_yellow_taxi_raw")
    assert "declared input weather_staging was not read" in text
    assert "read yellow_taxi_raw, which the DAG does not declare" in text
    catalog = settings.CatalogSettings.current()
    assert "declared output weather_raw was not written, yet its Asset is updated as the task's outlet " in text
    assert f"(Asset {catalog.table('weather_raw')}; scheduled on it: forecast_yellow_rides)" in text


def test_the_declared_consumers_of_a_table_are_read_from_the_dag_files(monkeypatch):
    """A fresh deployment: the forecast DAG never ran, yet it is scheduled on raw's Asset and its first task declares
    raw as input. Read from the project's own DAG folder (a DagBag parse, no database)."""
    from airflow.dag_processing.dagbag import DagBag

    from include.airflow.declared import consumers_of

    monkeypatch.syspath_prepend(str(settings.PROJECT_ROOT / "plugins"))  # as Airflow puts its plugins folder
    bag = DagBag(dag_folder=str(settings.PROJECT_ROOT / "dags"))
    assert bag.import_errors == {}
    dags = bag.dags
    found = {(c.dag_id, c.task_id, c.how) for c in consumers_of("yellow_taxi_raw", dags)}
    assert found == {
        ("forecast_yellow_rides", None, "scheduled on its Asset"),
        ("forecast_yellow_rides", "compute_hourly_actuals", "declares it as an input"),
    }
    assert consumers_of("yellow_rides_hourly_forecast", dags) == [], "nothing declares the forecast as input"


def test_a_blocked_alert_names_declared_consumers_that_have_not_run_yet():
    impact = {
        "datasets": [],
        "jobs": [],
        "dags": [],
        "declared": [{"dag_id": "forecast_yellow_rides", "task_id": None, "how": "scheduled on its Asset"}],
    }
    alert = alerts.compose(
        "blocked",
        dag_id="d",
        task_id="t",
        run_id="r",
        table="yellow_taxi_raw",
        failures=["x"],
        impact=impact,
        branch="b",
    )
    assert "  DAG forecast_yellow_rides (scheduled on its Asset; declared, not yet run)" in alert["text"]
    ran = {**impact, "dags": [{"dag_id": "forecast_yellow_rides", "owners": []}]}
    alert = alerts.compose(
        "blocked", dag_id="d", task_id="t", run_id="r", table="yellow_taxi_raw", failures=["x"], impact=ran, branch="b"
    )
    assert "declared, not yet run" not in alert["text"], "a DAG lineage saw run is named as observed, once"
