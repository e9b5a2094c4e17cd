"""The lineage page: one HTML template, its stylesheet and script, and the vendored graph libraries.

``render_served`` gives the page that Airflow's api-server serves (scripts by URL, data over HTTP);
``render_standalone`` gives one self-contained file (scripts, styles and the data inlined) that opens from disk.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from include.lineage.api import assets

WEB_DIR = Path(__file__).resolve().parent / "static"
TEMPLATE = WEB_DIR / "page.html"
STYLESHEET = WEB_DIR / "lineage.css"
SCRIPT = WEB_DIR / "lineage.js"


def _inline_safe(text: str) -> str:
    """Text that cannot close the element it is inlined in."""
    return re.sub(r"</(script|style)", r"<\\/\1", text, flags=re.IGNORECASE)


def _without_source_map(text: str) -> str:
    return re.sub(r"^//# sourceMappingURL=.*$", "", text, flags=re.MULTILINE)


def script_files() -> list[Path]:
    """Every script of the page in load order: the vendored libraries, then the page's own."""
    return [*assets.page_scripts(), SCRIPT]


def _fill(styles: str, data: str, scripts: str) -> str:
    page = TEMPLATE.read_text()
    for marker, value in (("<!--STYLES-->", styles), ("<!--DATA-->", data), ("<!--SCRIPTS-->", scripts)):
        page = page.replace(marker, value, 1)
    return page


def render_served(api_base: str, asset_base: str) -> str:
    scripts = "\n".join(f'<script src="{asset_base}{path.name}"></script>' for path in script_files())
    data = f"<script>window.LINEAGE_API = {json.dumps(api_base)};</script>"
    return _fill(f'<link rel="stylesheet" href="{asset_base}{STYLESHEET.name}">', data, scripts)


def render_standalone(bundle: dict) -> str:
    scripts = "\n".join(
        f"<script>\n{_inline_safe(_without_source_map(path.read_text()))}\n</script>" for path in script_files()
    )
    data = f"<script>window.LINEAGE_BUNDLE = {_inline_safe(json.dumps(bundle, default=str))};</script>"
    return _fill(f"<style>\n{_inline_safe(STYLESHEET.read_text())}\n</style>", data, scripts)


def asset_path(name: str) -> Path | None:
    """The file served as ``assets/<name>``: one of the page's scripts or its stylesheet, nothing else."""
    for path in [*script_files(), STYLESHEET]:
        if path.name == name:
            return path
    return None
