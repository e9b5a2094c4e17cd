"""Lineage inside the Airflow UI: the lineage store's page and API mounted in Airflow 3's api-server.

- ``fastapi_apps``: ``/lineage/`` (the page), ``/lineage/ui/...`` (its data) and ``/lineage/api/v1/lineage`` (the
  store's OpenLineage endpoint and Marquez-shaped queries), all behind Airflow's own login: the JWT the UI keeps in
  its ``_token`` cookie, or an ``Authorization: Bearer`` token from ``POST /auth/token``, validated by Airflow's auth
  manager; reading needs read access to assets, posting events needs write access. Without a login the page
  redirects to Airflow's login page and the API answers 401.
- ``external_views``: a "Lineage" entry in the Browse menu, and a "Lineage" tab on every DAG page showing that DAG's
  tasks and datasets (``?dag={DAG_ID}``).

The app (and its SQLite store) is built on the first request, so the scheduler and workers, which load plugins too,
never open the store.
"""

from __future__ import annotations

import threading

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/lineage"


def _read_access():
    from airflow.api_fastapi.core_api.security import requires_access_asset

    return requires_access_asset("GET")


def _write_access():
    from airflow.api_fastapi.core_api.security import requires_access_asset

    return requires_access_asset("POST")


async def _login_unless_authorized(request):
    """None for a logged-in user allowed to read assets; otherwise Airflow's login page (which comes back here)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import AssetDetails
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user
    from fastapi import HTTPException
    from fastapi.responses import RedirectResponse, Response

    try:
        user = await get_user(request, None, await bearer_scheme(request))
    except HTTPException:
        next_url = str(request.url)
        return RedirectResponse(get_auth_manager().get_url_login(next_url=next_url), status_code=303)
    if not get_auth_manager().is_authorized_asset(method="GET", user=user, details=AssetDetails()):
        return Response("Forbidden: reading lineage needs read access to assets", status_code=403)
    return None


class _LazyLineageApp:
    """An ASGI app that builds the lineage app on its first request."""

    def __init__(self):
        self._app = None
        self._lock = threading.Lock()

    def _build(self):
        from include.lineage.api.app import create_ui_app

        return create_ui_app(
            read_dependency=_read_access(), write_dependency=_write_access(), page_guard=_login_unless_authorized
        )

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = self._build()
        await self._app(scope, receive, send)


class LineageUiPlugin(AirflowPlugin):
    name = "lineage_ui"
    fastapi_apps = [{"app": _LazyLineageApp(), "url_prefix": URL_PREFIX, "name": "Lineage"}]
    external_views = [
        {
            "name": "Lineage",
            "href": f"{URL_PREFIX}/",
            "url_route": "lineage",
            "destination": "nav",
            "category": "browse",
        },
        {"name": "Lineage", "href": f"{URL_PREFIX}/?dag={{DAG_ID}}", "url_route": "dag-lineage", "destination": "dag"},
    ]
