"""The project's one error family: every error a user can act on is a ``PipelineError``.

Each kind carries what the two front doors need to answer it the same way everywhere: ``exit_code`` for the command
lines (0 ok, 1 failure, 2 bad usage or unknown input; ``include/cli.py`` and ``include/lineage/cli/``) and
``http_status`` for the HTTP API (``include/lineage/api/errors.py`` maps it, once, for both apps). Errors keep
their older built-in base (``ValueError``, ``RuntimeError``) so code that caught those still does.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_USAGE = 2
EXIT_STATUS = "exit status: 0 ok, 1 failure, 2 bad usage or unknown input (the message says which)"


class PipelineError(Exception):
    """An error whose message says what to do. The CLI prints it without a traceback."""

    exit_code = EXIT_FAILURE
    http_status = 500


class ConfigurationError(PipelineError, ValueError):
    """A setting (environment variable, airflow.cfg option, file under ``var/``) has a value the project cannot
    use; the message names it."""

    exit_code = EXIT_BAD_USAGE
    http_status = 500


class BadInputError(PipelineError, ValueError):
    """The input itself is wrong (corrupt, empty, wrong schema, malformed event): retrying cannot help."""

    exit_code = EXIT_BAD_USAGE
    http_status = 400


class NotFoundError(PipelineError, LookupError):
    """The thing asked for does not exist (a node, a run, a table)."""

    exit_code = EXIT_BAD_USAGE
    http_status = 404


class ProvisioningError(PipelineError, RuntimeError):
    """A pinned artifact (jar, npm package) could not be fetched or failed its checksum."""


class ServiceError(PipelineError, RuntimeError):
    """A local service (the catalog server, the Kafka broker) could not start, or answered wrongly."""

    http_status = 503


class SourceError(PipelineError, RuntimeError):
    """A source (TLC, NOAA) could not be downloaded."""

    http_status = 502
