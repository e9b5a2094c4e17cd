"""``python -m include.lineage.store.migrations revision "what changed"``: write the next revision from what
``schema.py`` has that the revisions do not (``include/lineage/store/migrate.py`` says how a schema change goes)."""

from __future__ import annotations

import sys

from include.lineage.store.migrate import HEAD, new_revision

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "revision":
        sys.exit('usage: python -m include.lineage.store.migrations revision "what changed"')
    written = new_revision(sys.argv[2])
    revision = written.name.split("_")[0]
    print(
        f"wrote {written}\nread it, run `ruff format` on it, and set HEAD = {revision!r} (was {HEAD!r}) in migrate.py"
    )
