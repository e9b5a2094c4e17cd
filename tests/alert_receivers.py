"""Real alert endpoints on loopback: a webhook receiver (Slack's body) and an SMTP server (aiosmtpd)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes

from tests.support import QuietHandler, free_port, loopback_server

# The SMTP connection's password: an alert must never carry it (tests/integration/test_write_audit_publish.py).
SMTP_PASSWORD = "smtp-s3cret-never-in-an-alert"


@dataclass
class Received:
    bodies: list[dict] = field(default_factory=list)
    mails: list = field(default_factory=list)  # email.message.Message
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextlib.contextmanager
def webhook_receiver(port: int = 0) -> Iterator[tuple[str, Received]]:
    """Yield (the webhook URL, what it received); answers 200 "ok" as Slack does."""
    received = Received()

    class Handler(QuietHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with received.lock:
                received.bodies.append(json.loads(body))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok")

    with loopback_server(Handler, port) as base:
        yield f"{base}/services/T000/B000/hook", received


@contextlib.contextmanager
def smtp_server(port: int | None = None) -> Iterator[tuple[int, Received]]:
    """Yield (the SMTP port on 127.0.0.1, what it received): aiosmtpd's Controller, a real SMTP conversation."""
    from aiosmtpd.controller import Controller

    received = Received()

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802
            with received.lock:
                received.mails.append(message_from_bytes(envelope.content))
            return "250 Message accepted for delivery"

    controller = Controller(Handler(), hostname="127.0.0.1", port=port or free_port())
    controller.start()
    try:
        yield controller.port, received
    finally:
        controller.stop()


def alert_connections_env(webhook_url: str, smtp_port: int) -> dict[str, str]:
    """The project's two alert connections (``alerts_webhook``, ``alerts_smtp``) as ``AIRFLOW_CONN_*`` variables
    pointing at these receivers."""
    host_port, _, path = webhook_url.removeprefix("http://").partition("/")
    host, _, port = host_port.partition(":")
    return {
        "AIRFLOW_CONN_ALERTS_WEBHOOK": json.dumps(
            {"conn_type": "http", "host": host, "port": int(port), "schema": "http", "extra": {"endpoint": path}}
        ),
        "AIRFLOW_CONN_ALERTS_SMTP": json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": smtp_port,
                "password": SMTP_PASSWORD,
                "extra": {"from_email": "airflow@localhost", "to": "data-platform@localhost"},
            }
        ),
    }
