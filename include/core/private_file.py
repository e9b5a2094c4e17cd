"""Files that hold secrets (generated passwords, bearer tokens, a catalog's credentials): written one way."""

from __future__ import annotations

import os
from pathlib import Path


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
