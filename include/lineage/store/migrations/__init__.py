"""The lineage store's schema history: Alembic's environment (``env.py``) and one revision a schema change
(``versions/``). ``include/lineage/store/migrate.py`` runs them when a store is opened; there is no alembic.ini."""
