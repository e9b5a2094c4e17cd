"""Marquez's model as of a stored event, kept in the store (``lineage_model_snapshots``), so that a process starting
on a store of a year of events replays only the events stored since, not all of them.

Building the model replays every stored event (``model.py``): 1.6 s at 10^5 events, 26-30 s at 10^6, and so on in
proportion, before the first ``GET /api/v1/lineage`` after each start of ``lineage serve`` can answer. What a replay
leaves is small (on a store of 244,802 events: the model, the datasets of 111,706 runs and 2,095 job versions,
6.7 MB), and reading it back took 0.1 s against the 4.6 s of replaying those events (side by side).

What is kept is plain data, not a pickle: a store's rows are not code, and a process reading them must not run what
someone with write access to the database put there. The parts of a replay are written with msgpack, each dataset or
job name once (a table of names, referred to by index), compressed with zstd. ``decode`` refuses anything not
shaped as ``encode`` writes (``SnapshotUnreadableError``), and the caller then replays every event, as without a
snapshot.
"""

from __future__ import annotations

from typing import Any

import msgspec
import zstandard

FORMAT = 1  # bumped when what a snapshot holds changes: a snapshot of another format is not read
Ref = tuple[str, str]


class SnapshotUnreadableError(ValueError):
    """A snapshot that is not one ``encode`` wrote (damaged, or of another format)."""


def encode(parts: dict[str, Any]) -> bytes:
    """The parts of a replay (``model._Replay.parts``) as a snapshot's bytes."""
    refs: list[Ref] = []
    index: dict[Ref, int] = {}

    def ref(name: Ref) -> int:
        found = index.get(name)
        if found is None:
            found = index[name] = len(refs)
            refs.append(name)
        return found

    def refs_of(names) -> list[int]:
        return [ref(name) for name in names]

    document = {
        "format": FORMAT,
        "registry": [[ref(name), ref(primary)] for name, primary in parts["registry"].items()],
        "inputs": [[ref(job), refs_of(names)] for job, names in parts["inputs"].items()],
        "outputs": [[ref(job), refs_of(names)] for job, names in parts["outputs"].items()],
        "writer": [[ref(name), time, order, ref(job)] for name, (time, order, job) in parts["writer"].items()],
        "reader": [[ref(name), time, order, ref(job)] for name, (time, order, job) in parts["reader"].items()],
        "jobs": refs_of(parts["jobs"]),
        "run_io": [[run, refs_of(ins), refs_of(outs)] for run, (ins, outs) in parts["run_io"].items()],
        "versions": [
            [ref(job), refs_of(ins), refs_of(outs), location, time, order]
            for (job, ins, outs, location), (time, order) in parts["versions"].items()
        ],
        "applied": parts["applied"],
        "last": list(parts["last"]) if parts["last"] is not None else None,
    }
    document["refs"] = [list(name) for name in refs]  # last: every name above is in it by now
    return zstandard.ZstdCompressor(level=3).compress(msgspec.msgpack.encode(document))


def decode(data: bytes) -> dict[str, Any]:
    """The parts of a replay a snapshot holds; ``SnapshotUnreadableError`` for bytes ``encode`` did not write."""
    try:
        document = msgspec.msgpack.decode(zstandard.ZstdDecompressor().decompress(data))
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise SnapshotUnreadableError(f"not a snapshot of format {FORMAT}")
        refs = [_ref(name) for name in _list(document["refs"])]

        def at(index) -> Ref:
            if not 0 <= _int(index) < len(refs):
                raise SnapshotUnreadableError(f"name {index} of {len(refs)}")
            return refs[index]

        def refs_of(indexes) -> list[Ref]:
            return [at(i) for i in _list(indexes)]

        def timed(rows) -> dict[Ref, tuple[str, int, Ref]]:
            return {at(name): (_text(time), _int(order), at(job)) for name, time, order, job in _list(rows)}

        return {
            "registry": {at(name): at(primary) for name, primary in _list(document["registry"])},
            "inputs": {at(job): frozenset(refs_of(names)) for job, names in _list(document["inputs"])},
            "outputs": {at(job): frozenset(refs_of(names)) for job, names in _list(document["outputs"])},
            "writer": timed(document["writer"]),
            "reader": timed(document["reader"]),
            "jobs": set(refs_of(document["jobs"])),
            "run_io": {
                _text(run): (set(refs_of(ins)), set(refs_of(outs))) for run, ins, outs in _list(document["run_io"])
            },
            "versions": {
                (at(job), frozenset(refs_of(ins)), frozenset(refs_of(outs)), _optional_text(location)): (
                    _text(time),
                    _int(order),
                )
                for job, ins, outs, location, time, order in _list(document["versions"])
            },
            "applied": _int(document["applied"]),
            "last": None if document["last"] is None else (_text(document["last"][0]), _int(document["last"][1])),
        }
    except SnapshotUnreadableError:
        raise
    except (zstandard.ZstdError, msgspec.DecodeError, KeyError, IndexError, TypeError, ValueError) as error:
        raise SnapshotUnreadableError(f"{type(error).__name__}: {error}") from None


def _list(value) -> list:
    if not isinstance(value, list):
        raise SnapshotUnreadableError(f"a {type(value).__name__} where a list belongs")
    return value


def _text(value) -> str:
    if not isinstance(value, str):
        raise SnapshotUnreadableError(f"a {type(value).__name__} where a text belongs")
    return value


def _optional_text(value) -> str | None:
    return None if value is None else _text(value)


def _int(value) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SnapshotUnreadableError(f"a {type(value).__name__} where a number belongs")
    return value


def _ref(value) -> Ref:
    namespace, name = _list(value)
    return _text(namespace), _text(name)
