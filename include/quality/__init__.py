"""Data quality: the expectations each published table must meet (``expectations.py``), write-audit-publish's
record of what was audited (``audits.py``), and the alerts a failed audit or task sends (``alerts.py``)."""
