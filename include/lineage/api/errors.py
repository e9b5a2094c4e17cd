"""The one mapping of the project's errors to HTTP answers, installed by both apps (``server.create_app`` for
``lineage serve`` and ``app.create_ui_app`` inside Airflow): the status is the error's own ``http_status``
(``include/core/errors.py``), the body Marquez's ``{"code": ..., "message": ...}`` plus FastAPI's ``detail``; the
apps' own ``HTTPException``s (401, 403, 413, 415, ...) are answered in the same shape. A store that cannot be
reached (PostgreSQL down, SQLite's lock held past its wait) is 503 with ``Retry-After``: the client's to retry or
spool, as the project's spooling transport does, not a server fault."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException

from include.core.errors import PipelineError

STORE_RETRY_AFTER_SECONDS = 5


def error_body(status: int, text: str) -> dict:
    """An error's JSON: Marquez's ``code`` and ``message``, and FastAPI's ``detail``."""
    return {"code": status, "message": text, "detail": text}


def error_response(error: PipelineError) -> JSONResponse:
    return JSONResponse(status_code=error.http_status, content=error_body(error.http_status, str(error)))


def store_unavailable_response() -> JSONResponse:
    """503 with ``Retry-After``. The driver's text is not returned: it may name the host, the user or the statement's
    values."""
    message = "the lineage store is unavailable; retry later"
    headers = {"Retry-After": str(STORE_RETRY_AFTER_SECONDS)}
    return JSONResponse(status_code=503, content=error_body(503, message), headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(PipelineError)
    async def pipeline_error(_request: Request, error: PipelineError):
        return error_response(error)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, error: HTTPException):
        """The app's own 4xx (a token, a body, a limit) in the same shape, its headers kept (WWW-Authenticate)."""
        content = {"code": error.status_code, "message": str(error.detail), "detail": error.detail}
        return JSONResponse(status_code=error.status_code, content=content, headers=error.headers)

    @app.exception_handler(OperationalError)
    async def store_unavailable(_request: Request, _error: OperationalError):
        return store_unavailable_response()
