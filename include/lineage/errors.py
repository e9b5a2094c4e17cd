"""Errors of the lineage package, all ``PipelineError``s (``include/core/errors.py``): the CLI turns them into exit
codes and the HTTP API into statuses through the class attributes, in one place each."""

from __future__ import annotations

from include.core.errors import BadInputError, NotFoundError, PipelineError


class LineageError(PipelineError):
    """A problem the user can fix in how they asked: the CLI exits 2, the API answers 400."""

    exit_code = 2
    http_status = 400


class InvalidEventError(LineageError, BadInputError):
    """Not an OpenLineage event, or one whose content the store refuses."""


class UnreadableEventFileError(LineageError, BadInputError):
    def __init__(self, file: str, line: int | None, reason: str):
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {reason}")
        self.file, self.line, self.reason = file, line, reason


class UnreadableStoredEventError(LineageError):
    """A stored event's packed text cannot be unpacked (a damaged row, or its dictionary row deleted by hand): not
    something the asker can fix, so a failure (exit 1, 500), naming the row."""

    exit_code = 1
    http_status = 500

    def __init__(self, event_id: int, reason: str):
        super().__init__(f"lineage_events row {event_id}: its packed text cannot be read ({reason})")
        self.event_id = event_id


class UnknownNodeError(LineageError, NotFoundError):
    http_status = 404

    def __init__(self, ref: str, suggestions: list[str], what: str = "node"):
        hint = ("; did you mean: " + ", ".join(suggestions)) if suggestions else ""
        shown = ref if len(ref) <= 200 else f"{ref[:197]}..."
        super().__init__(f"no {what} named {shown!r} in the lineage store{hint}")
        self.ref, self.suggestions = ref, suggestions


class EmptyStoreError(LineageError):
    def __init__(self, url: str):
        super().__init__(
            f"the lineage store {url} is empty: run `lineage ingest` first (or send events to `lineage serve`)"
        )


class RollbackRefusedError(LineageError):
    """A table moved on since the plan, or cannot be rolled back: nothing (more) is changed. Exit 2: the user can
    fix it (plan again)."""

    http_status = 409


class ConsumeError(PipelineError, RuntimeError):
    """``lineage consume`` cannot go on (broker unreachable, topic missing)."""


class KafkaDeliveryError(PipelineError, RuntimeError):
    """The broker did not acknowledge an event in time."""
