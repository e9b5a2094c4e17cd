"""What ``lineage serve`` does with an event: intake as liberal as Marquez, interpretation as strict as the spec.

:func:`admit` answers one event:

- **refused** (:class:`Refused`, a 4xx) where Marquez 0.51 refuses it (``marquez_intake.py``: 422 where it answers
  422, 400 where it answers 400, and 400 where it answers 500), past the server's own limits
  (``LINEAGE_MAX_EVENT_DATASETS``, ``LINEAGE_MAX_FACET_BYTES``: 400), or where the store cannot keep it at all (a time
  outside the years 1 to 9999 in UTC). The caller keeps it as a dead letter (``store/dead_letters.py``);
- **admitted** (:class:`Admitted`) otherwise, whatever the spec says of it: kept whole as received, beside what the
  store reads of it, which is Marquez's reading (a number where a name belongs read as its text, as Marquez does)
  with everything the spec refuses left out: a facet that does not match its schema (or is not an object), an
  ``eventType`` outside the spec's values, ``facets: null``, the members a ``schemaURL``'s kind does not have. A
  missing ``schemaURL`` is inferred from the event's shape: Marquez reads an event without one as a RunEvent, and
  it accepts only one that has a run and a job, so the inferred kind is ``RunEvent`` (another shape without
  ``schemaURL`` is refused, as Marquez refuses it: 422). Each problem is named with its path and the rule
  (:class:`include.lineage.validation.Problem`), and filed by node: ``lineage show`` and the lineage page list them.
  An invalid facet never feeds a typed column (schema, version, column lineage) and never breaks a read: the store
  never reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from include.core import settings
from include.lineage.api import marquez_intake
from include.lineage.errors import InvalidEventError
from include.lineage.events import SourcedEvent, check_event
from include.lineage.validation import Problem, check_limits, ingest_validator

KIND_MEMBERS = {  # what each kind of event has besides eventTime, producer and schemaURL (OpenLineage.json)
    "RunEvent": ("eventType", "run", "job", "inputs", "outputs"),
    "DatasetEvent": ("dataset",),
    "JobEvent": ("job", "inputs", "outputs"),
}
OTHER_MEMBERS = {"eventType", "run", "job", "inputs", "outputs", "dataset"}
_CONTAINERS = ("facets", "inputFacets", "outputFacets")


@dataclass
class Admitted:
    """An event the store keeps: ``event`` what it reads, ``received`` the event as it came, ``problems`` what the
    spec refuses in it (``{"path", "facet", "rule"}``)."""

    event: dict
    received: dict
    problems: list[dict] = field(default_factory=list)

    def sourced(self, source: str) -> SourcedEvent:
        return SourcedEvent(self.event, source, self.received, tuple(self.problems), checked=True)  # admit checked it


@dataclass
class Refused:
    """An event ``lineage serve`` does not store: the status it answers, why, and Marquez's own answer when Marquez
    refuses it too (None: a limit of this server, or what only the store cannot keep)."""

    status: int
    reason: str
    marquez: marquez_intake.Refusal | None = None

    def message(self) -> str:
        if self.marquez is None:
            return self.reason
        return f"{self.reason} (Marquez answers {self.marquez.status}: {self.marquez.rule})"


def admit(event) -> Admitted | Refused:
    """Admit or refuse one event (see the module's description)."""
    if isinstance(event, dict):
        try:
            check_limits(
                event, settings.LINEAGE_MAX_EVENT_DATASETS.integer(), settings.LINEAGE_MAX_FACET_BYTES.integer()
            )
        except InvalidEventError as error:
            return Refused(400, str(error))
    refusal, reading = marquez_intake.marquez_verdict(event)
    if refusal is not None:
        return Refused(refusal.status if refusal.status < 500 else 400, refusal.reason, refusal)
    kind = reading.kind
    problems: list[Problem] = []
    raw = {key: value for key, value in event.items() if key not in OTHER_MEMBERS or key in KIND_MEMBERS[kind]}
    read = {key: value for key, value in reading.event.items() if key in raw}
    for key in sorted(set(event) - set(raw)):
        problems.append(Problem(key, None, f"a {kind} (schemaURL) has no {key}; not read"))
    if "schemaURL" not in event or event["schemaURL"] is None:
        raw["schemaURL"] = read["schemaURL"] = marquez_intake.RUN_EVENT
        problems.append(
            Problem("schemaURL", None, "missing; a RunEvent inferred (Marquez reads an event without it as one)")
        )
    found = ingest_validator().problems(raw, kind)
    problems += [problem for problem in found if problem.path != "schemaURL" or "schemaURL" in event]
    problems += [Problem(path, _facet_of(path), note) for path, note in reading.notes]
    for problem in found:
        if _leave_out(read, problem):
            problems.append(Problem(problem.path, problem.facet, "left out of what the store reads"))
    try:
        check_event(read)
    except InvalidEventError as error:
        return Refused(400, f"the store cannot keep this event: {error}")
    return Admitted(read, event, _merged(problems))


def _leave_out(read: dict, problem: Problem) -> bool:
    """Take out of the store's reading what ``problem`` names, where it can go: an invalid facet, ``eventType``
    outside the spec's values, a ``null`` or mistyped list or facets object. Whether something was taken out."""
    owner, _, key = problem.path.rpartition(".")
    if problem.facet is None and not (
        key == "eventType" or (key in _CONTAINERS and owner) or key in ("inputs", "outputs")
    ):
        return False
    container = _at(read, owner) if owner else read
    return isinstance(container, dict) and container.pop(key, _ABSENT) is not _ABSENT


_ABSENT = object()


def _at(event: dict, dotted: str):
    """The value at a dotted path (``outputs[0].facets``) of ``event``, or None."""
    value = event
    for part in dotted.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("["):
            index = int(part[1:-1])
            value = value[index] if isinstance(value, list) and index < len(value) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value


def _facet_of(path: str) -> str | None:
    """The facet a path inside one names (``run.facets.nominalTime.nominalStartTime`` -> ``nominalTime``)."""
    parts = path.replace("[", ".[").split(".")
    for index, part in enumerate(parts[:-1]):
        if part in _CONTAINERS:
            return parts[index + 1]
    return None


def _merged(problems: list[Problem]) -> list[dict]:
    """One problem per path, its rules joined, in the order found."""
    by_path: dict[str, dict] = {}
    for problem in problems:
        known = by_path.get(problem.path)
        if known is None:
            by_path[problem.path] = problem.as_json()
        elif problem.rule not in known["rule"]:
            known["rule"] = f"{known['rule']}; {problem.rule}"
            known["facet"] = known["facet"] or problem.facet
    return list(by_path.values())
