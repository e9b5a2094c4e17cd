"""Airflow's own servers on loopback when Airflow's API is (``[api] host``, 127.0.0.1 in the project's airflow.cfg).

Airflow 3.3's log servers, started by the scheduler (``[logging] worker_log_server_port``, 8793) and the triggerer
(``trigger_log_server_port``, 8794), bind every interface: ``airflow/utils/serve_logs/core.py`` calls
``uvicorn.run(..., host="")`` and no setting names the host. The project's ``airflow_local_settings.py`` (imported
by every Airflow process, it is on PYTHONPATH) calls :func:`serve_logs_on_loopback` to hand uvicorn 127.0.0.1
instead, and airflow.cfg's ``[core] hostname_callable`` names :func:`hostname`, so the api-server reaches those log
servers (live logs of a running task) where they now listen. docker-compose.yml sets ``[api] host`` to 0.0.0.0:
its containers reach each other by name, and nothing is changed there.
"""

from __future__ import annotations

import socket
import sys

LOOPBACK = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def api_on_loopback() -> bool:
    from airflow.configuration import conf

    return conf.get("api", "host", fallback="0.0.0.0").strip() in LOOPBACK_NAMES


def hostname() -> str:
    """``[core] hostname_callable``: the address Airflow's components record and call each other's servers at."""
    return LOOPBACK if api_on_loopback() else socket.getfqdn()


class _LoopbackUvicorn:
    """uvicorn, with ``run`` bound to 127.0.0.1 whatever host the caller asked for."""

    def __init__(self, uvicorn) -> None:
        self._uvicorn = uvicorn

    def __getattr__(self, name: str):
        return getattr(self._uvicorn, name)

    def run(self, app, **kwargs):
        return self._uvicorn.run(app, **{**kwargs, "host": LOOPBACK})


LOG_SERVING_COMMANDS = ("scheduler", "triggerer")  # the Airflow commands that start a log server


def serve_logs_on_loopback(argv: list[str] | None = None) -> bool:
    """Make the log servers of this process bind 127.0.0.1; True when done: the process is ``airflow scheduler`` or
    ``airflow triggerer`` (whose log server is a forked child, patched with it) and the API is on loopback. Other
    Airflow processes (task runners, ``dags test``) skip it and the import it costs."""
    argv = sys.argv if argv is None else argv
    if len(argv) < 2 or argv[1] not in LOG_SERVING_COMMANDS or not api_on_loopback():
        return False
    from airflow.utils.serve_logs import core

    if not isinstance(core.uvicorn, _LoopbackUvicorn):
        core.uvicorn = _LoopbackUvicorn(core.uvicorn)
    return True
