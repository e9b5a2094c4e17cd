"""Idempotent set-up after the venv exists: jars, the ``var/`` layout and the generated Airflow home."""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import secrets
import subprocess
import sys
from string import Template

from include.core import jars, settings
from include.core.private_file import kept_secrets, write_private
from include.core.verified_download import verify_and_report
from include.spark import submit

TEMPLATE = settings.TEMPLATES_DIR / "airflow.cfg.template"
EXTRACTORS = "lakehouse_extractor.LakehouseSparkExtractor"


SECRET_NAMES = ("jwt_secret", "fernet_key", "api_secret_key")


def airflow_secrets(paths: settings.Paths) -> dict[str, str]:
    """The secrets every Airflow component must share, made once per ``var/`` and kept (mode 600) while it exists.

    Without one ``[api_auth] jwt_secret`` each component signs task tokens with a key of its own and every task
    fails under the scheduler (Trap 10 in docs/versions-and-traps.md); ``[core] fernet_key`` encrypts connection passwords in the metadata
    DB, and ``[api] secret_key`` signs the UI's sessions.
    """
    made = {
        "jwt_secret": secrets.token_urlsafe(48),
        "fernet_key": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "api_secret_key": secrets.token_urlsafe(32),
    }
    return kept_secrets(
        paths.secrets / "airflow.json",
        made,
        "connection passwords encrypted with the old fernet_key cannot be read any more, and running tasks lose "
        "their tokens",
    )


def lineage_tokens(paths: settings.Paths):
    """The bearer tokens of ``lineage serve`` (``var/secrets/lineage-tokens.json``, mode 600): a write and a read
    token made once per ``var/`` and kept while the file exists (``include/lineage/emit/tokens.py``)."""
    from include.lineage.emit import tokens

    return tokens.ensure_tokens(tokens.tokens_file(paths))


def render_airflow_cfg(paths: settings.Paths) -> str:
    return Template(TEMPLATE.read_text()).substitute(
        **airflow_secrets(paths),
        dags_folder=settings.DAGS_DIR,
        plugins_folder=settings.PLUGINS_DIR,
        airflow_home=paths.airflow_home,
        openlineage_namespace=settings.OPENLINEAGE_NAMESPACE,
        lineage_events=paths.lineage_events,
        extractors=EXTRACTORS,
    )


def write_airflow_cfg(paths: settings.Paths) -> bool:
    """Write airflow.cfg from the template unless the user has edited the generated file.

    The digest of the last generated file is kept beside it: a file that still matches it is ours to refresh; a
    file that does not is the user's (e.g. a lineage transport pasted from the README) and is left alone.
    """
    target = paths.airflow_home / "airflow.cfg"
    digest_file = paths.airflow_home / ".airflow.cfg.generated.sha256"
    rendered = render_airflow_cfg(paths)
    if target.exists():
        current = target.read_text()
        if current == rendered:
            return False
        if not digest_file.exists() or digest_file.read_text().strip() != _sha256(current):
            if _sha256(rendered) != _sha256(current):
                print(f"setup: keeping your edited {target}; the template has changes you may want to merge")
            return False
    write_private(target, rendered)
    digest_file.write_text(_sha256(rendered))
    return True


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def migrate_airflow_db(paths: settings.Paths) -> None:
    env = {**os.environ, **settings.airflow_env(paths)}
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)
    db_file = paths.airflow_home / "airflow.db"
    if db_file.exists():
        import sqlite3

        # WAL is a property of the file: readers (UI, scheduler loops) never block a writer (include/airflow/metadata_db.py).
        with sqlite3.connect(db_file) as connection:
            connection.execute("PRAGMA journal_mode=WAL")


def ensure_spark_connection(paths: settings.Paths) -> None:
    """``spark_default`` as a default in the metadata DB: created when missing, never overwritten, so a connection
    edited in the UI, or a user's own ``AIRFLOW_CONN_SPARK_DEFAULT``, wins."""
    env = {**os.environ, **settings.airflow_env(paths)}
    env.pop("AIRFLOW_CONN_SPARK_DEFAULT", None)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow",
            "connections",
            "add",
            "spark_default",
            "--conn-type",
            "spark",
            "--conn-host",
            submit.DEFAULT_SPARK_MASTER,
            "--conn-description",
            "Set by `make setup`; edit freely",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if completed.returncode != 0 and "already exist" not in completed.stdout + completed.stderr:
        raise RuntimeError(f"setup: could not create the spark_default connection:\n{completed.stderr[-2000:]}")


def setup(paths: settings.Paths | None = None, with_db: bool = True) -> settings.Paths:
    paths = (paths or settings.Paths.current()).ensure()
    jars.ensure_jars()
    from include.lineage.api import assets
    from include.services import catalog_server

    assets.ensure_assets()  # the lineage page's JS, pinned and verified like the jars

    catalog_server.launcher_jar()
    from include.spark import codeship

    codeship.ensure_built(paths)  # the --py-files zip every Spark job ships (rebuilt by a task when code changed)
    submit.ensure_driver_archive()  # once per JDK and class path: every Spark driver then starts in about half the time
    changed = write_airflow_cfg(paths)
    lineage_tokens(paths)
    db_file = paths.airflow_home / "airflow.db"
    marker = paths.airflow_home / ".spark_default.created"
    if with_db and (changed or not db_file.exists()):
        migrate_airflow_db(paths)
    if with_db and not marker.exists():
        ensure_spark_connection(paths)
        marker.touch()
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-db", action="store_true", help="skip `airflow db migrate`")
    args = parser.parse_args(argv)
    return verify_and_report(
        lambda: f"setup: ready (AIRFLOW_HOME={setup(with_db=not args.no_db).airflow_home})", jars.JarProvisioningError
    )


if __name__ == "__main__":
    sys.exit(main())
