"""Lineage-aware operators of the project.

``LakehouseSparkSubmitOperator`` is a ``SparkSubmitOperator`` that runs a script of ``spark_jobs/`` (or any PySpark
script by path) with the project's Spark settings (built in ``execute``, never at parse time). Its lineage is what
its Spark application did (include/lineage/emit/observed.py); the datasets it may declare as lineage keys (table
names, ``model:<name>``, URIs; templated so they may depend on params) are what the author expects, checked against
what ran (the ``lineageDrift`` run facet and the notifier's drift alert), and make the Airflow Assets it updates.

``LandSourceOperator`` downloads one month of a source into ``var/landing/`` and reports the source URL and the
landed file as OpenLineage datasets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator

from include.core import contract, naming, settings
from include.spark import submit


class LakehouseSparkSubmitOperator(SparkSubmitOperator):
    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "inputs", "outputs")
    ui_color = "#e8f4fa"

    def __init__(
        self,
        *,
        script: str,
        job_args: list[str] | None = None,
        inputs: list[str] | None = None,
        outputs: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", kwargs.get("task_id"))
        kwargs.setdefault("outlets", [naming.table_asset(key) for key in outputs or [] if naming.is_table_key(key)])
        # A name of spark_jobs/ (the project's jobs), or a path to any PySpark script ("bring your own job")
        application = script if script.endswith(".py") else str(settings.SPARK_JOBS_DIR / f"{script}.py")
        super().__init__(application=application, application_args=list(job_args or []), **kwargs)
        self.script = script.rsplit("/", 1)[-1].removesuffix(".py")
        self.inputs = list(inputs or [])
        self.outputs = list(outputs or [])

    def lineage_keys(self) -> tuple[list[str], list[str]]:
        """Declared inputs and outputs (a rendered template may hold several, comma-separated, or none)."""
        split = lambda keys: [part.strip() for key in keys for part in str(key).split(",") if part.strip()]  # noqa: E731
        return split(self.inputs), split(self.outputs)

    def execute(self, context) -> None:
        from airflow.providers.openlineage.conf import is_disabled

        from include.services import catalog_server

        catalog_server.ensure_running()
        # [openlineage] disabled turns lineage off everywhere, the Spark listener included.
        # The master spark_default names (the hook resolves the connection): local mode binds the driver to loopback.
        master = self._get_hook()._connection["master"]
        launch = submit.spark_submit_kwargs(lineage=not is_disabled(), master=master)
        self.conf = {**launch["conf"], **(self.conf or {})}
        self.jars = self.jars or launch["jars"]
        self.py_files = ",".join(filter(None, [launch["py_files"], self.py_files]))
        self.env_vars = {**launch["env_vars"], **(self.env_vars or {})}
        report = contract.report_path_for(context["ti"])
        self.application_args = [*self.application_args, contract.REPORT_ARGUMENT, str(report)]
        outbox = self._spark_lineage_outbox(context)
        try:
            super().execute(context)
        except Exception as error:
            raise self._explained(report, error) from error
        finally:
            if outbox is not None:
                from include.lineage.emit import spark_forwarder

                # Read before the forward, which deletes the file once it is sent: the task's own listener events
                # are what its COMPLETE reports (include/lineage/emit/observed.py).
                self.spark_lineage_events = spark_forwarder.events_of(outbox)
                spark_forwarder.after_task(outbox)  # bounded, never raises
            self._observe(report)

    def _observe(self, report) -> None:
        """What the task did, against what it declares: kept for the extractor, and the drift written into the job's
        report for the notifier's alert. Never raises: lineage must not fail the task."""
        import logging
        from dataclasses import asdict

        from include.lineage.emit import extraction, observed

        try:
            job_report = extraction.read_report(report)
            self.observed_lineage = extraction.observe(self, job_report)
            declared_inputs, declared_outputs = self.lineage_keys()
            if declared_inputs or declared_outputs:
                found = observed.drift(declared_inputs, declared_outputs, self.observed_lineage)
                if found or report.exists():  # a plain script leaves no report: one is written for the drift
                    job_report.lineage_drift = asdict(found) if found else None
                    job_report.write(report)
        except Exception:
            logging.getLogger(__name__).warning("lineage: what %s did was not observed", self.task_id, exc_info=True)

    def _spark_lineage_outbox(self, context):
        """The Spark listener writes this application's own file (include/lineage/emit/spark_forwarder.py), whose
        events are forwarded to airflow.cfg's transport once the application ended; None when the listener is off
        or the task's own ``conf`` chose where it writes."""
        from include.lineage.emit import spark_forwarder

        if self.conf.get("spark.openlineage.transport.type") != "file":
            return None
        if self.conf.get(spark_forwarder.LISTENER_LOCATION) != str(settings.Paths.current().spark_lineage_events):
            return None
        ti = context["ti"]
        label = f"{ti.dag_id}.{ti.task_id}.{getattr(ti, 'try_number', 0)}"
        outbox = spark_forwarder.Outbox.for_launch(settings.Paths.current(), label)
        self.conf = {**self.conf, spark_forwarder.LISTENER_LOCATION: str(outbox.path)}
        return outbox

    @staticmethod
    def _explained(report, error: Exception) -> Exception:
        """Bad input and a blocked publish fail without retry and with the job's own message; anything else keeps
        its retries."""
        from airflow.sdk.exceptions import AirflowFailException

        try:
            failure = contract.JobReport.read(report).error or {}
        except (OSError, contract.ReportError):
            return error
        if failure.get("kind") == "bad_input":
            return AirflowFailException(f"bad input: {failure['message']}")
        if failure.get("kind") == "blocked":  # retrying would audit the same data again
            return AirflowFailException(failure["message"])
        return error


class LandSourceOperator(BaseOperator):
    """Download one month of ``source`` ("tlc" or "noaa"); skip downstream when there is nothing new."""

    template_fields: Sequence[str] = ("month", "force")
    ui_color = "#fdf3e1"

    def __init__(self, *, source: str, month: str, force: bool | str = False, **kwargs: Any) -> None:
        if source not in ("tlc", "noaa"):
            raise ValueError(f"source must be 'tlc' or 'noaa', not {source!r}")
        super().__init__(**kwargs)
        self.source = source
        self.month = month
        self.force = force
        self.downloads: list = []

    def _force(self) -> bool:
        return settings.truthy(self.force)

    def execute(self, context) -> list[dict]:
        from airflow.sdk.exceptions import AirflowSkipException

        from include.sources import downloads

        if self.source == "tlc":
            self.downloads = [downloads.fetch_tlc_month(self.month, self._force())]
        else:
            self.downloads = downloads.fetch_noaa_month(self.month, self._force())
        statuses = {download.status for download in self.downloads}
        if "not_published" in statuses:
            raise AirflowSkipException(f"{self.source} {self.month} is not published yet (HTTP 404); nothing to ingest")
        if statuses == {"already_ingested"}:
            raise AirflowSkipException(f"{self.source} {self.month}: every file is already ingested (same xxhash64)")
        return [download.to_dict() for download in self.downloads]

    def _source_files(self) -> list:
        from include.sources import downloads

        if self.source == "tlc":
            return [(downloads.tlc_url(self.month), downloads.tlc_landed_path(self.month))]
        return [
            (downloads.noaa_url(element, self.month), downloads.noaa_landed_path(element, self.month))
            for element in downloads.WEATHER_ELEMENTS
        ]

    def get_openlineage_facets_on_start(self):
        from include.lineage.emit.facets import land_source_lineage

        return land_source_lineage(self._source_files(), [])

    def get_openlineage_facets_on_complete(self, task_instance):
        from include.lineage.emit.facets import land_source_lineage

        return land_source_lineage(self._source_files(), self.downloads)
