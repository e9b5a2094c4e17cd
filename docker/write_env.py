"""Write ``.env`` for docker-compose: the secrets Airflow's components must share, taken from this ``var/``.

``make setup`` makes them once per ``var/`` (``var/secrets/airflow.json``, mode 600); this copies them into ``.env``
(mode 600, git-ignored) as AIRFLOW_JWT_SECRET, AIRFLOW_FERNET_KEY and AIRFLOW_API_SECRET_KEY, which
docker-compose.yml passes to the api-server, scheduler, dag-processor and triggerer; and LINEAGE_SERVE_TOKEN, the
``write`` token of the ``celery`` profile's ``lineage serve`` (made here). An existing ``.env`` is kept; a variable it
lacks is appended.
"""

from __future__ import annotations

import os
import sys
from secrets import token_urlsafe

from include.core import settings
from include.setup import bootstrap

ENV_FILE = settings.PROJECT_ROOT / ".env"
VARIABLES = {
    "jwt_secret": "AIRFLOW_JWT_SECRET",
    "fernet_key": "AIRFLOW_FERNET_KEY",
    "api_secret_key": "AIRFLOW_API_SECRET_KEY",
}


LINEAGE_TOKEN = "LINEAGE_SERVE_TOKEN"


def main() -> int:
    if ENV_FILE.exists():
        if f"{LINEAGE_TOKEN}=" not in ENV_FILE.read_text():
            with ENV_FILE.open("a") as stream:
                stream.write(f"{LINEAGE_TOKEN}={token_urlsafe(32)}\n")
            print(f"{ENV_FILE} exists; added {LINEAGE_TOKEN}")
            return 0
        print(f"{ENV_FILE} exists; keeping it")
        return 0
    secrets = bootstrap.airflow_secrets(settings.Paths.current().ensure())
    text = "".join(f"{VARIABLES[name]}={secrets[name]}\n" for name in bootstrap.SECRET_NAMES)
    text += f"{LINEAGE_TOKEN}={token_urlsafe(32)}\n"
    descriptor = os.open(ENV_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(text)
    print(f"wrote {ENV_FILE} ({', '.join([*VARIABLES.values(), LINEAGE_TOKEN])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
