"""The KRaft cluster id given to ``kafka-storage format -t``: never one the tool reads as an option.

One random id in 64 starts with ``-`` (URL-safe base64 of the first byte's top six bits); the suite failed once on
such an id ("argument --cluster-id/-t: expected one argument"). Kafka's own ``Uuid.randomUuid`` draws again."""

from __future__ import annotations

import base64
import uuid

from hypothesis import given
from hypothesis import strategies as st

from include.services import kafka_broker


def _encoded(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_an_id_that_would_start_with_a_dash_is_drawn_again(monkeypatch):
    dashed = uuid.UUID(bytes=b"\xf8" + bytes(15))  # top six bits 111110: base64 index 62, "-"
    plain = uuid.UUID(bytes=b"\x10" + bytes(15))
    assert _encoded(dashed.bytes).startswith("-")
    drawn = iter([dashed, dashed, plain])
    monkeypatch.setattr(kafka_broker.uuid, "uuid4", lambda: next(drawn))
    assert kafka_broker.new_cluster_id() == _encoded(plain.bytes)


@given(st.binary(min_size=16, max_size=16))
def test_any_other_id_is_the_sixteen_bytes_in_url_safe_base64(raw):
    """Every id is what Kafka's Uuid.toString gives for its 16 bytes: 22 characters that decode back to them."""
    candidate = uuid.UUID(bytes=raw)
    fallback = uuid.UUID(bytes=b"\x10" + raw[1:])
    drawn = iter([candidate, fallback])
    original = kafka_broker.uuid.uuid4
    kafka_broker.uuid.uuid4 = lambda: next(drawn)
    try:
        cluster_id = kafka_broker.new_cluster_id()
    finally:
        kafka_broker.uuid.uuid4 = original
    assert not cluster_id.startswith("-") and len(cluster_id) == 22
    expected = fallback if _encoded(raw).startswith("-") else candidate
    assert base64.urlsafe_b64decode(cluster_id + "==") == expected.bytes
