"""The lineage page exported as ONE self-contained HTML file: the graph libraries, the page's script and style, and
every answer the page can ask for (graph, node details, impact, column lineage, run comparisons) inlined.

It opens from disk with no network. ``write_report(paths)`` first brings the lineage store up to date with the event
files under ``var/lineage/`` (idempotent), then writes ``var/lineage/index.html``; `make demo` and `lineage report`
call it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from include.core import settings
from include.lineage.api import data, page
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore, default_store_url
from include.lineage.store.follower import StoreFollower


def render_report(queries: LineageQueries) -> str:
    bundle = data.bundle(queries)
    bundle["exportedAt"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return page.render_standalone(bundle)


def write_report(paths: settings.Paths | None = None, target: Path | None = None) -> Path:
    paths = paths or settings.Paths.current()
    target = target or paths.lineage / "index.html"
    store = LineageStore(default_store_url(paths))
    try:
        StoreFollower(store, paths).refresh()
        html = render_report(LineageQueries(store))
    finally:
        store.close()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_text(html)
    partial.replace(target)
    return target
