"""Idempotent set-up after the venv exists: jars, the ``var/`` layout and the generated Airflow home."""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from string import Template

from include import config, jars

TEMPLATE = config.PROJECT_ROOT / "include" / "templates" / "airflow.cfg.template"
EXTRACTORS = "lakehouse_extractor.LakehouseSparkExtractor"


def render_airflow_cfg(paths: config.Paths) -> str:
    return Template(TEMPLATE.read_text()).substitute(
        dags_folder=config.DAGS_DIR,
        plugins_folder=config.PLUGINS_DIR,
        airflow_home=paths.airflow_home,
        openlineage_namespace=config.OPENLINEAGE_NAMESPACE,
        lineage_events=paths.lineage_events,
        extractors=EXTRACTORS,
    )


def write_airflow_cfg(paths: config.Paths) -> bool:
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
    target.write_text(rendered)
    digest_file.write_text(_sha256(rendered))
    return True


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def migrate_airflow_db(paths: config.Paths) -> None:
    env = {**os.environ, **config.airflow_env(paths)}
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)


def setup(paths: config.Paths | None = None, with_db: bool = True) -> config.Paths:
    paths = (paths or config.Paths.current()).ensure()
    jars.ensure_jars()
    changed = write_airflow_cfg(paths)
    db_file = paths.airflow_home / "airflow.db"
    if with_db and (changed or not db_file.exists()):
        migrate_airflow_db(paths)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-db", action="store_true", help="skip `airflow db migrate`")
    args = parser.parse_args(argv)
    try:
        paths = setup(with_db=not args.no_db)
    except jars.JarProvisioningError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"setup: ready (AIRFLOW_HOME={paths.airflow_home})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
