"""The OpenLineage transport the project's own emitters use outside a task (``lineage replay``, ``lineage rollback``):
the very ``[openlineage] transport`` of this ``var/``'s airflow.cfg, read through the OpenLineage provider's ``conf``."""

from __future__ import annotations

import os

from include.core import settings


def configured_transport() -> dict:
    """The ``[openlineage] transport`` Airflow uses, read through the OpenLineage provider's own configuration."""
    os.environ.update({k: v for k, v in settings.airflow_env().items() if k.startswith("AIRFLOW_")})
    from airflow.providers.openlineage import conf

    return conf.transport()
