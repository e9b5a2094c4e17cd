"""The innermost cause of a Spark failure, as one line a user can act on.

A failed Spark call reaches Python as a Py4J wrapper (``An error occurred while calling o52.parquet.``), as a
PySpark exception whose first line is the outermost Java error (``Job aborted due to stage failure: ...``), or, on
Spark 4, often as the PySpark exception of the cause itself, without a wrapper (an unreadable Parquet type is an
``AnalysisException`` of ``spark.read.parquet()``). The reason sits at the bottom of the Java cause chain, e.g.
``AnalysisException: Illegal Parquet type: INT64 (TIMESTAMP(NANOS,false)).``. ``root_cause`` walks that chain and
drops what Spark adds around the message: the error class prefix (``[PARQUET_TYPE_ILLEGAL] ``) and, on Spark 4, the
SQL state suffix (`` SQLSTATE: 42846``).
"""

from __future__ import annotations

import re

MAX_LENGTH = 500
# Spark prefixes some messages with its error class, e.g. "[CANNOT_READ_FILE_FOOTER] Could not read footer ...".
_ERROR_CLASS = re.compile(r"^\[[A-Z0-9_.]+\]\s*")
# Spark 4 appends the SQL state to the message, e.g. "... (TIMESTAMP(NANOS,false)). SQLSTATE: 42846".
_SQL_STATE = re.compile(r"\s*SQLSTATE: [0-9A-Z]{5}\s*$")
# The last "Caused by:" of a Java stack trace printed as text.
_CAUSED_BY = re.compile(r"^Caused by: (?P<cause>.+)$", re.MULTILINE)


def _java_chain(throwable) -> list:
    chain, seen = [], set()
    while throwable is not None and id(throwable) not in seen:
        seen.add(id(throwable))
        chain.append(throwable)
        try:
            throwable = throwable.getCause()
        except Exception:  # a Java object we cannot introspect: stop at what we have
            break
    return chain


def _describe_java(throwable) -> str:
    name = str(throwable.getClass().getSimpleName())
    message = throwable.getMessage()
    message = _first_line(str(message)) if message is not None else ""
    return f"{name}: {message}" if message else name


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return _SQL_STATE.sub("", _ERROR_CLASS.sub("", lines[0])) if lines else ""


def _java_throwable(error: BaseException):
    """The Java throwable behind a Py4J or PySpark exception, if there is one."""
    for attribute in ("java_exception", "_origin"):
        throwable = getattr(error, attribute, None)
        if throwable is not None and hasattr(throwable, "getCause"):
            return throwable
    return None


def root_cause(error: BaseException) -> str:
    """One line naming the innermost cause of ``error`` (class and message), at most ``MAX_LENGTH`` characters."""
    throwable = _java_throwable(error)
    if throwable is not None:
        try:
            described = [_describe_java(t) for t in _java_chain(throwable)]
        except Exception:
            described = []
        # The innermost cause with a message; a bare wrapper class name says little.
        for description in reversed(described):
            if ": " in description:
                return description[:MAX_LENGTH]
        if described:
            return described[-1][:MAX_LENGTH]
    causes = _CAUSED_BY.findall(str(error))
    if causes:
        return _first_line(causes[-1])[:MAX_LENGTH]
    innermost = error
    while innermost.__cause__ is not None and innermost.__cause__ is not innermost:
        innermost = innermost.__cause__
    message = _first_line(str(innermost))
    return (f"{type(innermost).__name__}: {message}" if message else type(innermost).__name__)[:MAX_LENGTH]
