"""Alembic's environment for the lineage store. ``include/lineage/store/migrate.py`` runs it with the connection it
holds (under the migration lock, inside its transaction) in ``config.attributes["connection"]``: there is no
alembic.ini and no URL here.

``target_metadata`` is the live schema for ``--autogenerate`` (``python -m include.lineage.store.migrations revision``)
only; a revision never imports it.
"""

from alembic import context

from include.lineage.store.migrate import VERSION_TABLE
from include.lineage.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "the lineage store's migrations run when a store is opened (include/lineage/store/migrate.py), "
        "not from the alembic command line"
    )

context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,  # SQLite changes a column by copying the table: batch mode writes that
)
with context.begin_transaction():
    context.run_migrations()
