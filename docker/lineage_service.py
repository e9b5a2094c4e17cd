"""docker-compose's ``lineage-serve`` service (the ``celery`` profile): ``lineage serve`` on every interface of the
container's network, over the Postgres store ``LINEAGE_STORE_URL``, with bearer tokens.

Its tokens file (``var/secrets/lineage-tokens.json`` of its own volume) holds the ``write`` token the Airflow
components and workers send (``LINEAGE_SERVE_TOKEN``, from ``.env``: docker/write_env.py) and a ``read`` token made
here; ``lineage serve`` refuses to listen beyond loopback without tokens.
"""

from __future__ import annotations

import json
import os
import sys

from include.core import settings
from include.core.private_file import write_private
from include.lineage.emit import tokens


def main() -> None:
    writer = settings.LINEAGE_SERVE_TOKEN.raw()
    if not writer:
        raise SystemExit("lineage-serve: set LINEAGE_SERVE_TOKEN (docker/write_env.py writes it into .env)")
    path = tokens.tokens_file(settings.Paths.current().ensure())
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    readers = [t for t in tokens.load_tokens(path) if "read" in t.scopes] if path.exists() else []
    reader = readers[0] if readers else tokens.new_token("reader", ["read"])
    document = {
        "tokens": [
            {"name": "writer", "scopes": ["write"], "token": writer},
            {"name": reader.name, "scopes": sorted(reader.scopes), "token": reader.value},
        ]
    }
    write_private(path, json.dumps(document, indent=2) + "\n")
    from include.lineage.cli import main as lineage  # the image has no `lineage` script: the project is not installed

    sys.exit(lineage(["serve", "--host", "0.0.0.0", "--port", "5050", "--allow-host", "lineage-serve"]))


if __name__ == "__main__":
    main()
