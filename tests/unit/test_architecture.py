"""The library's layers, enforced: every import of ``include`` (at module level or inside a function) points down.

    core  ->  spark | sources | airflow | services | lineage  ->  setup  ->  demo, lineage.cli  ->  cli

The five middle packages are peers and never import each other. Inside ``lineage`` the order is

    errors -> events, validation -> store -> queries -> render, emit -> rollback, consume -> api -> cli

and inside ``queries`` (one module per kind of question, under the ``LineageQueries`` front)

    sql -> names, model -> walks, shape, runs, columns, drift -> marquez, impact, provenance -> diff -> front

No module graph of ``include`` has a cycle. ``bench/``, ``plugins/``, ``dags/`` and ``spark_jobs/`` sit outside
the library and may import any of it; the library never imports them. No module of the library imports another's
private (underscore) name, and none is over ``MAX_MODULE_LINES`` lines or has a function over ``MAX_FUNCTION_LINES``.
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
# Inside include/lineage/queries/: a module imports only modules of lower rank (siblings of one rank are peers).
QUERIES = "include.lineage.queries"
QUERIES_RANKS = {
    f"{QUERIES}.sql": 0,
    f"{QUERIES}.model_snapshot": 0,
    f"{QUERIES}.names": 1,
    f"{QUERIES}.model": 1,
    f"{QUERIES}.walks": 2,
    f"{QUERIES}.shape": 2,
    f"{QUERIES}.runs": 2,
    f"{QUERIES}.columns": 2,
    f"{QUERIES}.marquez": 3,
    f"{QUERIES}.impact": 3,
    f"{QUERIES}.drift": 2,
    f"{QUERIES}.provenance": 3,
    f"{QUERIES}.completeness": 3,
    f"{QUERIES}.problems": 2,
    f"{QUERIES}.diff": 4,
    f"{QUERIES}.front": 5,
    QUERIES: 6,  # the package re-exports the front and what callers import from it
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
        ("include.lineage.store.store", "include.lineage.queries.sql", False),
        ("include.lineage.queries.walks", "include.lineage.store.schema", True),
        ("include.lineage.queries.walks", "include.lineage.render", False),
        ("include.lineage.render", "include.lineage.queries.names", True),
        ("include.lineage.api.data", "include.lineage.queries.walks", True),
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


# ----------------------------------------------------------------------------- inside include/lineage/queries/
def queries_violation(importer: str, imported: str) -> str | None:
    """Why one module of the queries package may not import another, or None when the arrow points down."""
    if importer not in QUERIES_RANKS or imported not in QUERIES_RANKS:
        return f"{importer if importer not in QUERIES_RANKS else imported} has no place in QUERIES_RANKS"
    if QUERIES_RANKS[imported] >= QUERIES_RANKS[importer]:
        return "points up (or across) the queries package's order"
    return None


def test_every_module_of_the_queries_package_has_its_place_and_imports_point_down_it():
    package = {
        module: path for module, path in library_modules().items() if module.split(".")[:3] == QUERIES.split(".")
    }
    assert set(package) == set(QUERIES_RANKS), "each module of include/lineage/queries/ needs a rank in QUERIES_RANKS"
    offenders = {}
    for module, path in package.items():
        wrong = {
            imported: why
            for imported in imports_of(path)
            if imported.startswith(QUERIES + ".")
            and imported != module
            and (why := queries_violation(module, imported))
        }
        if wrong:
            offenders[module] = wrong
    assert offenders == {}


@pytest.mark.parametrize(
    "importer, imported, allowed",
    [
        ("include.lineage.queries.walks", "include.lineage.queries.sql", True),
        ("include.lineage.queries.sql", "include.lineage.queries.walks", False),
        ("include.lineage.queries.walks", "include.lineage.queries.runs", False),  # peers
        ("include.lineage.queries.front", "include.lineage.queries.diff", True),
        ("include.lineage.queries.diff", "include.lineage.queries.front", False),
    ],
)
def test_the_queries_rule_itself(importer, imported, allowed):
    assert (queries_violation(importer, imported) is None) is allowed


# ----------------------------------------------------------------------------- private names stay in their module
# Modules that still import another's private name, with why; an entry that no longer applies fails the test below.
PRIVATE_IMPORTS_FOR_NOW: dict[str, str] = {}


def private_imports(path: Path) -> list[str]:
    """``module.name`` of every underscore-prefixed name ``path`` imports from another module (``from x import _y``),
    at any depth of the code."""
    return [
        f"{node.module}.{alias.name}"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
        if alias.name.startswith("_")
    ]


def _private_imports_of_the_library() -> dict[str, list[str]]:
    return {module: names for module, path in library_modules().items() if (names := private_imports(path))}


def test_no_module_imports_a_private_name_of_another():
    found = _private_imports_of_the_library()
    assert {module: names for module, names in found.items() if module not in PRIVATE_IMPORTS_FOR_NOW} == {}, (
        "make the name public where it is defined (or move it to its one user) instead"
    )


def test_the_private_import_allow_list_names_only_modules_that_still_need_it():
    assert sorted(set(PRIVATE_IMPORTS_FOR_NOW) - set(_private_imports_of_the_library())) == [], "remove them"


def test_the_private_import_walk_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from __future__ import annotations\ndef f():\n    from include.x import _y, z\n")
    assert private_imports(module) == ["include.x._y"]


# ----------------------------------------------------------------------------- sizes
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# Over the limits for now, each with why: a module by its name (its line count), a function by ``module:function``.
# An entry that no longer applies fails the test, so this only shrinks.
TOO_LONG_FOR_NOW = {
    # not split yet, each one piece today: an app factory with its routes as closures, a consumer's loop
    "include.lineage.api.app:create_ui_app": "the page's routes, declared inside the app factory",
    "include.lineage.api.server:create_app": "the Marquez API's routes, declared inside the app factory",
    # applied migrations are history: rewriting one would change what it did to stores already migrated
    "include.lineage.store.migrations.versions.0001_initial_schema:upgrade": "an applied migration",
    "include.lineage.store.migrations.versions.0003_current_graph_and_facet_times:_fill": "an applied migration",
}


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """``Class.function`` (or ``function``; a nested function counts in its outer one) -> its lines, from its
    ``def`` to its last line, of each function of ``path`` over ``limit`` lines."""
    found = {}

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                length = child.end_lineno - child.lineno + 1
                if length > limit:
                    found[prefix + child.name] = length

    visit(ast.parse(path.read_text(), filename=str(path)), "")
    return found


def _too_long_in_the_library() -> dict[str, int]:
    """``module`` -> its lines, ``module:function`` -> the function's, of whatever is over the limits."""
    too_long = {}
    for module, path in library_modules().items():
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            too_long[module] = lines
        too_long.update({f"{module}:{name}": length for name, length in long_functions(path).items()})
    return too_long


def test_no_module_is_over_600_lines_and_no_function_over_80():
    too_long = _too_long_in_the_library()
    assert {name: size for name, size in too_long.items() if name not in TOO_LONG_FOR_NOW} == {}, (
        "split it into named steps (a function) or by concern (a module)"
    )


def test_the_size_allow_list_names_only_what_is_still_too_long():
    assert sorted(set(TOO_LONG_FOR_NOW) - set(_too_long_in_the_library())) == [], "no longer too long: remove them"


def test_the_size_walk_counts_a_nested_function_in_its_outer_one_and_names_methods(tmp_path):
    module = tmp_path / "m.py"
    inner = "".join(f"        x{i} = {i}\n" for i in range(3))
    module.write_text(
        f"class C:\n    def f(self):\n        def g():\n            pass\n{inner}\n\ndef h():\n    pass\n"
    )
    assert long_functions(module, limit=2) == {"C.f": 6}
