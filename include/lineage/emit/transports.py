"""The OpenLineage transport the project's own emitters use outside a task (``lineage replay``, ``lineage rollback``):
the very ``[openlineage] transport`` of this ``var/``'s airflow.cfg, read through the OpenLineage provider's ``conf``;
and the inner transports the spooling transport drives where openlineage-python's own would lose events (Amazon
DataZone's: ``DataZoneTransport``)."""

from __future__ import annotations

import json
import os

from include.core import settings


def configured_transport() -> dict:
    """The ``[openlineage] transport`` Airflow uses, read through the OpenLineage provider's own configuration."""
    os.environ.update({k: v for k, v in settings.airflow_env().items() if k.startswith("AIRFLOW_")})
    from airflow.providers.openlineage import conf

    return conf.transport()


class UndeliverableEventError(Exception):
    """An event a backend will never take, whatever the retries (too large for it, a kind it does not know): the
    spooling transport sets it aside, with this reason, instead of retrying it before every other event."""


class DataZoneTransport:
    """openlineage-python's ``amazon_datazone_api`` transport as the spooling transport drives it (an inner
    ``{"type": "amazon_datazone_api", "domainId": ..., "region"/"endpointOverride": ...}``).

    The stock transport takes only ``RunEvent`` objects and returns quietly for anything else, so an event the spool
    hands it as JSON (every replayed one) was dropped as if sent. This one posts the event's JSON unchanged through
    the stock transport's own boto3 client (``PostLineageEvent``, SigV4), and raises ``UndeliverableEventError`` for what
    DataZone's API can never take, read from botocore's own service model: an event past the ``event`` blob's
    ``max`` (300,000 bytes), or one that is not a RunEvent."""

    takes_text = True  # the spool hands it the event's JSON as received

    def __init__(self, config: dict):
        from openlineage.client.transport.amazon_datazone import AmazonDataZoneConfig, AmazonDataZoneTransport

        self.stock = AmazonDataZoneTransport(AmazonDataZoneConfig.from_dict(config))
        self.domain_id = self.stock.config.domain_id
        operation = self.stock.datazone.meta.service_model.operation_model("PostLineageEvent")
        self.max_bytes = int(operation.input_shape.members["event"].metadata["max"])

    def emit(self, event) -> None:
        from openlineage.client.serde import Serde

        text = (
            event if isinstance(event, str) else json.dumps(event) if isinstance(event, dict) else Serde.to_json(event)
        )
        document = json.loads(text)
        if not (isinstance(document.get("run"), dict) and isinstance(document.get("job"), dict)):
            raise UndeliverableEventError("Amazon DataZone's PostLineageEvent takes RunEvents only (a run and a job)")
        body = text.encode()
        if len(body) > self.max_bytes:
            raise UndeliverableEventError(
                f"the event is {len(body):,} bytes; DataZone's PostLineageEvent takes at most {self.max_bytes:,}"
            )
        self.stock.datazone.post_lineage_event(domainIdentifier=self.domain_id, event=body)

    def close(self, timeout: float = -1) -> bool:
        self.stock.datazone.close()
        return True
