"""Files that hold secrets (generated passwords, bearer tokens, a catalog's credentials): written one way, and read
one way."""

from __future__ import annotations

import json
import os
from pathlib import Path

from include.core.errors import ConfigurationError


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only: the folder mode 700, the file created with mode 600 (so
    it is never readable by others, not even between its creation and a chmod) and swapped in whole, so a reader never
    sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    partial = path.with_name(path.name + ".tmp")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(text)
    os.chmod(partial, 0o600)  # O_CREAT's mode applies to a new file only; a stale .tmp keeps its own
    os.replace(partial, path)


def read_secrets(path: Path, names: tuple[str, ...], lost_if_made_anew: str) -> dict[str, str]:
    """The secrets kept in ``path`` (a JSON object of strings), or {} when there is no such file yet (they are then
    made). A file that is there but unreadable or not that shape is a ConfigurationError naming it: making new
    secrets over it would lose what the old ones protect (``lost_if_made_anew``), so that is the user's choice."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigurationError(f"{path}: cannot read the secrets kept there ({error.strerror})") from None
    try:
        stored = json.loads(content)
    except ValueError:  # not JSON, or not UTF-8
        stored = None
    if not isinstance(stored, dict) or not all(isinstance(stored.get(name, ""), str) for name in names):
        raise ConfigurationError(
            f"{path}: not the secrets file it should be (a JSON object of {', '.join(names)}). Restore it, or delete "
            f"it to make new secrets: {lost_if_made_anew}"
        )
    return stored


def kept_secrets(path: Path, made: dict[str, str], lost_if_made_anew: str) -> dict[str, str]:
    """The secrets named by ``made``'s keys as ``path`` keeps them (``read_secrets``), each one missing or empty taken
    from ``made`` (freshly generated values) and the file written again (mode 600) only when that changed anything."""
    stored = read_secrets(path, tuple(made), lost_if_made_anew)
    values = {name: stored.get(name) or value for name, value in made.items()}
    if values != stored:
        write_private(path, json.dumps(values, indent=2))
    return values
