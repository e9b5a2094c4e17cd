"""The library's layers, enforced: every import of ``include`` (at module level or inside a function) points down.

    core  ->  spark | sources | airflow | services | lineage  ->  setup  ->  demo, lineage.cli  ->  cli

The five middle packages are peers and never import each other. Inside ``lineage`` the order is

    errors -> events, validation -> store -> queries -> render, emit -> rollback, consume -> api -> cli

and no module graph of ``include`` has a cycle. ``bench/``, ``plugins/``, ``dags/`` and ``spark_jobs/`` sit outside
the library and may import any of it; the library never imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from include.core.settings import PROJECT_ROOT

INCLUDE = PROJECT_ROOT / "include"
OUTSIDE_THE_LIBRARY = ("spark_jobs", "bench", "plugins", "dags", "tests")

# (rank, group): a module may import a module of lower rank, or of its own group.
PACKAGE_RANKS = {
    "include.core": (0, "core"),
    "include.spark": (1, "spark"),
    "include.sources": (1, "sources"),
    "include.airflow": (1, "airflow"),
    "include.services": (1, "services"),
    "include.lineage": (1, "lineage"),
    "include.quality": (1, "quality"),
    # follow lineage (the impact set of a failed run, the runs' expectation results): above it
    "include.quality.alerts": (2, "quality-lineage"),
    "include.quality.review": (2, "quality-lineage"),
    "include.setup": (2, "setup"),
    "include.demo": (3, "demo"),
    "include.lineage.cli": (3, "lineage-cli"),
    "include.cli": (4, "cli"),
}
LINEAGE_RANKS = {
    "include.lineage.errors": 0,
    "include.lineage.events": 1,
    "include.lineage.validation": 1,
    "include.lineage.store": 2,
    "include.lineage.queries": 3,
    "include.lineage.render": 4,
    "include.lineage.emit": 4,
    "include.lineage.rollback": 5,
    "include.lineage.consume": 5,
    "include.lineage.api": 6,
    "include.lineage.cli": 7,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of the code (functions included), resolved to module names:
    ``from include.core import naming`` is ``include.core.naming``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                as_module = PROJECT_ROOT.joinpath(*candidate.split("."))
                is_module = as_module.with_suffix(".py").exists() or (as_module / "__init__.py").exists()
                found.add(candidate if is_module else node.module)
    return found


def _longest_prefix(module: str, table: dict):
    for depth in range(module.count(".") + 1, 0, -1):
        prefix = ".".join(module.split(".")[:depth])
        if prefix in table:
            return table[prefix]
    return None


def violation(importer: str, imported: str) -> str | None:
    """Why ``importer`` may not import ``imported``, or None when the arrow points down."""
    top = imported.split(".")[0]
    if top in OUTSIDE_THE_LIBRARY:
        return f"the library imports {top}/, which sits outside it"
    if top != "include" or imported == "include":
        return None
    importer_rank, importer_group = _longest_prefix(importer, PACKAGE_RANKS)
    imported_rank, imported_group = _longest_prefix(imported, PACKAGE_RANKS)
    if importer_group == imported_group == "lineage":
        inner, target = _longest_prefix(importer, LINEAGE_RANKS), _longest_prefix(imported, LINEAGE_RANKS)
        if inner is None or target is None:
            return f"{importer if inner is None else imported} has no place in the lineage order"
        same_package = importer.startswith(imported.rsplit(".", 1)[0] + ".") and inner == target
        if target > inner or (target == inner and not same_package and _group(importer) != _group(imported)):
            return "points up (or across) the lineage order"
        return None
    if importer_group == imported_group:
        return None
    if imported_rank >= importer_rank:
        return f"{imported_group} is not below {importer_group}"
    return None


def _group(module: str) -> str:
    return ".".join(module.split(".")[:3])


def library_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(INCLUDE.rglob("*.py")) if "spec" not in path.parts}


def test_every_import_of_the_library_points_down_the_layers():
    offenders = {}
    for module, path in library_modules().items():
        wrong = {imported: why for imported in imports_of(path) if (why := violation(module, imported))}
        if wrong:
            offenders[module] = wrong
    assert offenders == {}
    assert len(library_modules()) > 40, "the walk must have found the library's modules"


def test_the_library_has_no_import_cycle_even_through_imports_inside_functions():
    modules = library_modules()
    graph = nx.DiGraph()
    for module, path in modules.items():
        graph.add_node(module)
        for imported in imports_of(path):
            if imported in modules and imported != module:
                graph.add_edge(module, imported)
    assert list(nx.simple_cycles(graph)) == []


@pytest.mark.parametrize(
    "importer, imported, allowed",
    [
        ("include.core.naming", "include.core.settings", True),
        ("include.core.settings", "include.spark.submit", False),  # the cycle the flat layout had
        ("include.lineage.consume", "include.services.kafka_broker", False),  # peers never import each other
        ("include.lineage.cli", "include.services.kafka_broker", True),  # the CLI sits on top
        ("include.lineage.rollback", "include.lineage.api.data", False),  # upward inside lineage
        ("include.lineage.api.server", "include.lineage.store.schema", True),
        ("include.lineage.store.store", "include.lineage.queries", False),
        ("include.lineage.emit.extraction", "include.lineage.emit.facets", True),
        ("include.lineage.render", "include.lineage.emit.facets", False),  # across: siblings of one rank
        ("include.setup.bootstrap", "include.lineage.api.assets", True),
        ("include.spark.submit", "include.setup.bootstrap", False),
        ("include.sources.downloads", "spark_jobs.common.session", False),
        ("include.cli", "bench.pipeline", False),
    ],
)
def test_the_rule_itself(importer, imported, allowed):
    assert (violation(importer, imported) is None) is allowed


def test_the_import_walk_sees_imports_inside_functions_and_resolves_modules(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from include.core import naming, settings\n    import include.spark.submit\n")
    assert imports_of(module) == {"include.core.naming", "include.core.settings", "include.spark.submit"}
