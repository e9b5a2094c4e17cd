"""The SparkSession every job and test uses, built from include/core/settings.py and include/spark/submit.py."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from include.core import settings
from include.services import catalog_server
from include.spark import submit


def spark_session(app_name: str, extra_conf: dict[str, str] | None = None):
    """Under spark-submit the settings came with the command (the operator's choice, e.g. no lineage listener when
    OpenLineage is disabled) and are kept as they are; elsewhere (tests, a plain ``python job.py``) they are applied
    here, and this ``var/``'s catalog server is started if it is not running."""
    from pyspark.sql import SparkSession

    paths = settings.Paths.current().ensure()  # the listener's file and the catalog's folder must exist first
    catalog = settings.CatalogSettings.current(paths)
    builder = SparkSession.builder.appName(app_name)
    spark_settings = dict(extra_conf or {})
    if not settings.PYSPARK_GATEWAY_PORT.raw():
        catalog_server.ensure_running(paths, catalog)
        spark_settings = {
            "spark.jars": submit.spark_submit_jars(),
            **submit.spark_conf(paths, catalog),
            **spark_settings,
        }
    for key, value in spark_settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@contextlib.contextmanager
def running_beside(work: Callable[[], object], name: str) -> Iterator[None]:
    """Run ``work`` (Spark jobs of this session) in a thread while the block runs; on leaving, wait for it and raise
    its error, if any (the block's own error first). Spark schedules the two threads' jobs on the same executors,
    first come first served: the thread's tasks fill cores the block's jobs leave idle (a write with fewer input
    splits than cores, or unevenly sized ones). An ``InheritableThread``: in PySpark's pinned-thread mode it runs on a
    JVM thread of its own that inherits the caller's local properties."""
    from pyspark import InheritableThread

    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # re-raised in the caller's thread below
            failures.append(error)

    thread = InheritableThread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if failures:
        raise failures[0]
