"""The documentation stays true to the repository: README.md is a short map, and neither it nor the pages under docs/
point at anything that does not exist.

- every relative Markdown link resolves to a file of the repository, and a ``#anchor`` into a Markdown file to one
  of its headings (GitHub's slugs);
- every trap cited anywhere (README, docs/, the code and its comments, the pins, Makefile, Dockerfile, compose file)
  names a trap of docs/versions-and-traps.md, whose traps are numbered 1..N without a gap;
- README.md stays a map (at most ``README_MAX_LINES`` lines) that links every page under docs/ and names every module
  of the library, the bench and the plugins;
- every repository path (``include/...py``, ``tests/...``) and dotted module path (``include.x.y``, optionally with
  one attribute) written in the README or docs/ exists.

No network, no Spark: pure file reading.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

from include.core.settings import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
DOCS = PROJECT_ROOT / "docs"
TRAPS_PAGE = DOCS / "versions-and-traps.md"
README_MAX_LINES = 260
TRAP = "Trap"  # the tests below build their citations from it, so this file itself cites no trap

# Where trap citations are looked for, besides README.md and docs/.
CODE_TREES = ("include", "plugins", "dags", "spark_jobs", "bench", "tests", "docker")
CODE_FILES = ("Makefile", "Dockerfile", "docker-compose.yml", "requirements.txt", "requirements-dev.txt")
TEXT_SUFFIXES = {".py", ".sh", ".txt", ".md", ".template", ".java", ".properties", ".yml", ".yaml", ".toml", ".sql"}
# Third-party text kept verbatim: not ours to cite traps in.
VENDORED = ("include/lineage/spec", "tests/specs", "include/lineage/api/static/vendor")
# The trees whose modules the README's layout must name.
MAPPED_TREES = ("include", "bench", "plugins")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
TRAP_HEADING = re.compile(r"^### Trap (\d+)\s*$")
TRAP_CITATION = re.compile(r"\btraps? #?(\d+)\b", re.IGNORECASE)
REPO_PATH = re.compile(r"(?<![\w/.-])((?:include|bench|spark_jobs|plugins|dags|tests|docker|jars)/[\w./-]*)")
DOTTED_MODULE = re.compile(r"(?<![\w.])include(?:\.[A-Za-z_]\w*)+")


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a fenced block's lines become empty, so line numbers hold)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else line)
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: its rendered text lowercased, punctuation but hyphens and underscores dropped,
    each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file offers: one per heading (``-1``, ``-2`` ... for repeats), plus ``<a id=...>``."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(path.read_text()):
        found.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link and image outside code blocks and code spans."""
    found = []
    for number, line in enumerate(prose_lines(path.read_text()), start=1):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            found.append((number, target))
    return found


def broken_links(path: Path, root: Path = PROJECT_ROOT) -> list[str]:
    """``file:line: target (why)`` for each relative link of ``path`` that leads nowhere inside ``root``."""
    broken = []
    for number, target in links(path):
        if SCHEME.match(target):
            continue  # http(s), mailto: not checked here (no network)
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / unquote(file_part)).resolve() if file_part else path.resolve()
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not destination.is_relative_to(root.resolve()):
            broken.append(f"{where} (outside the repository)")
        elif not destination.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and destination.suffix == ".md" and unquote(anchor) not in anchors(destination):
            broken.append(f"{where} (no heading with that anchor)")
    return broken


def trap_numbers(page: Path = TRAPS_PAGE) -> list[int]:
    """The traps of the page, in order: its ``### Trap N`` headings."""
    return [int(m.group(1)) for line in prose_lines(page.read_text()) if (m := TRAP_HEADING.match(line))]


def trap_citations(path: Path) -> list[tuple[int, int]]:
    """(line number, trap number) of every trap citation in ``path``."""
    return [
        (number, int(match.group(1)))
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        for match in TRAP_CITATION.finditer(line)
    ]


def cited_files() -> list[Path]:
    files = [*doc_files(), *(PROJECT_ROOT / name for name in CODE_FILES)]
    for tree in CODE_TREES:
        for path in sorted((PROJECT_ROOT / tree).rglob("*")):
            relative = path.relative_to(PROJECT_ROOT).as_posix()
            if (
                path.is_file()
                and path.suffix in TEXT_SUFFIXES
                and "__pycache__" not in path.parts
                and not relative.startswith(VENDORED)
            ):
                files.append(path)
    return [path for path in files if path.exists()]


def unknown_traps(files: list[Path], known: set[int], root: Path = PROJECT_ROOT) -> list[str]:
    return [
        f"{path.relative_to(root)}:{line}: cites trap number {number}"
        for path in files
        for line, number in trap_citations(path)
        if number not in known
    ]


@cache
def top_level_names(module_file: Path) -> frozenset[str]:
    """Names a module defines at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(module_file.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return frozenset(names)


def dotted_module_exists(dotted: str, root: Path = PROJECT_ROOT) -> bool:
    """``include.a.b`` is a module or package of ``root``, or ``include.a.b.name`` one of its top-level names."""
    parts = dotted.split(".")
    for depth in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:depth])
        module_file = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not module_file.is_file():
            continue
        rest = parts[depth:]
        if not rest:
            return True
        return len(rest) == 1 and rest[0] in top_level_names(module_file)
    return False


def missing_paths(path: Path, root: Path = PROJECT_ROOT) -> list[str]:
    """Repository paths and dotted ``include`` modules written in ``path`` (code blocks included) that do not exist."""
    missing = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for written in REPO_PATH.findall(line):
            written = written.rstrip(".")
            if not (root / written).exists():
                missing.append(f"{path.relative_to(root)}:{number}: {written}")
        for dotted in DOTTED_MODULE.findall(line):
            if not dotted_module_exists(dotted, root):
                missing.append(f"{path.relative_to(root)}:{number}: {dotted}")
    return missing


def named_in_table(module: str, rows: list[str]) -> bool:
    """``module`` (``include/a/b.py``) is in a table row as itself, or as a folder (``include/a/``) and the rest of its
    path (``b.py``) written in the same row; a sub-folder written that way (``include/a/`` and ``c/``) stands for every
    module under it (e.g. a folder of migration revisions)."""
    for row in rows:
        tokens = re.findall(r"`([^`]+)`", row)
        folders = [token for token in tokens if token.endswith("/")]
        names = set(tokens) | {folder + token for folder in folders for token in tokens if token != folder}
        if module in names:
            return True
        if any(name.endswith("/") and name not in folders and module.startswith(name) for name in names):
            return True
    return False


# -- (a) links


@pytest.mark.parametrize("page", doc_files(), ids=lambda page: page.relative_to(PROJECT_ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_link_checker_finds_broken_links_and_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Where the ingest's time went, and what changed\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# Title\n\n"
        "[fine](docs/other.md) [fine anchor](docs/other.md#where-the-ingests-time-went-and-what-changed) "
        "[same page](#title) [web](https://example.org/nowhere)\n"
        "[gone](docs/missing.md) and [bad anchor](docs/other.md#nowhere) and [bad local](#no-such-heading)\n"
        "[outside](../../elsewhere.md)\n"
        "`[in code](docs/missing.md)`\n"
        "```\n[in a block](docs/missing.md)\n```\n"
    )
    assert broken_links(page, root=tmp_path) == [
        "README.md:4: docs/missing.md (no such file)",
        "README.md:4: docs/other.md#nowhere (no heading with that anchor)",
        "README.md:4: #no-such-heading (no heading with that anchor)",
        "README.md:5: ../../elsewhere.md (outside the repository)",
    ]


@pytest.mark.parametrize(
    "heading, slug",
    [
        (f"{TRAP} 3", "trap-3"),
        ("The `lineage` command", "the-lineage-command"),
        ("airflow.cfg", "airflowcfg"),
        ("Where the ingest's time went, and what changed", "where-the-ingests-time-went-and-what-changed"),
        ("An object-store warehouse (S3, MinIO, any S3 API)", "an-object-store-warehouse-s3-minio-any-s3-api"),
        ("Bad values under Spark 4's ANSI mode", "bad-values-under-spark-4s-ansi-mode"),
        ("The move to Spark 4: what the spike proved", "the-move-to-spark-4-what-the-spike-proved"),
    ],
)
def test_github_slugs(heading, slug):
    assert github_slug(heading) == slug


def test_repeated_headings_get_numbered_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Kafka\n\n## Kafka\n\n```\n# not a heading\n```\n")
    assert anchors(page) == {"kafka", "kafka-1"}


# -- (b) traps


def test_the_traps_are_numbered_from_one_without_a_gap():
    numbers = trap_numbers()
    assert numbers, f"{TRAPS_PAGE.name} holds no '### Trap N' heading"
    assert numbers == list(range(1, len(numbers) + 1))


def test_every_cited_trap_exists():
    assert unknown_traps(cited_files(), set(trap_numbers())) == []


def test_the_trap_check_finds_a_citation_of_a_missing_trap(tmp_path):
    page = tmp_path / "traps.md"
    page.write_text(f"# Traps\n\n### {TRAP} 1\n\ntext\n\n### {TRAP} 2\n\n```\n### {TRAP} 9\n```\n")
    assert trap_numbers(page) == [1, 2]
    code = tmp_path / "job.py"
    code.write_text(f"# see {TRAP.lower()} 2\n# see {TRAP.lower()} 3\n# {TRAP.upper()}S 4\n")
    assert unknown_traps([code], set(trap_numbers(page)), root=tmp_path) == [
        "job.py:2: cites trap number 3",
        "job.py:3: cites trap number 4",
    ]


def test_the_citation_scan_covers_the_code_and_the_pins():
    scanned = {path.relative_to(PROJECT_ROOT).as_posix() for path in cited_files()}
    assert {"README.md", "requirements.txt", "Dockerfile", "include/setup/bootstrap.py"} <= scanned
    assert "tests/unit/test_docs.py" in scanned
    assert not any(path.startswith(VENDORED) for path in scanned)


# -- (c) and the map


def test_the_readme_is_a_short_map():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_the_readme_links_every_page():
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in links(README)}
    assert [page.name for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked] == []


def test_the_readme_layout_names_every_module():
    rows = [line for line in prose_lines(README.read_text()) if line.startswith("|")]
    modules = [
        path.relative_to(PROJECT_ROOT).as_posix()
        for tree in MAPPED_TREES
        for path in sorted((PROJECT_ROOT / tree).rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py") and "__pycache__" not in path.parts
    ]
    assert modules
    assert [module for module in modules if not named_in_table(module, rows)] == []


def test_a_grouped_row_names_its_modules():
    rows = ["| `include/lineage/store/` | `schema.py` (tables), `ingest.py` |", "| `include/cli.py` | x |"]
    assert named_in_table("include/lineage/store/schema.py", rows)
    assert named_in_table("include/cli.py", rows)
    assert not named_in_table("include/lineage/store/follower.py", rows)
    assert not named_in_table("include/core/schema.py", rows)
    grouped = ["| `include/lineage/store/` | `migrate.py` and `migrations/` (revisions) |"]
    assert named_in_table("include/lineage/store/migrations/versions/0001_initial.py", grouped)
    assert not named_in_table("include/lineage/store/store.py", grouped)


# -- (d) paths


@pytest.mark.parametrize("page", doc_files(), ids=lambda page: page.relative_to(PROJECT_ROOT).as_posix())
def test_every_module_path_written_exists(page):
    assert missing_paths(page) == []


def test_the_path_check_finds_missing_modules(tmp_path):
    (tmp_path / "include" / "core").mkdir(parents=True)
    (tmp_path / "include" / "__init__.py").write_text("")
    (tmp_path / "include" / "core" / "__init__.py").write_text("")
    (tmp_path / "include" / "core" / "settings.py").write_text("PROJECT_ROOT = 1\n\n\ndef table():\n    pass\n")
    page = tmp_path / "page.md"
    page.write_text(
        "`include/core/settings.py` and `include.core.settings.table()`, `include.core.settings.PROJECT_ROOT`.\n"
        "`include/config.py`, `include.lineage.spool.SpoolingTransport`, `include.core.settings.nothing`,\n"
        "https://example.org/include/gone.py is a URL, not a path.\n"
    )
    assert missing_paths(page, root=tmp_path) == [
        "page.md:2: include/config.py",
        "page.md:2: include.lineage.spool.SpoolingTransport",
        "page.md:2: include.core.settings.nothing",
    ]


# -- (e) figures

FIGURES_PAGE = DOCS / "figures.md"
# Logs of dated measurements, each figure as it was taken (with its date and commit): the figures page names the
# current ones and links each to its run there. Every other page links to the figures page instead of writing a
# measured figure again, so that no two pages give one figure two values.
DATED_LOGS = (FIGURES_PAGE, DOCS / "performance.md", TRAPS_PAGE)
NUMBER = r"\d[\d,]*(?:\.\d+)?"
RATE = re.compile(rf"(?<![\w.,])({NUMBER}) ?(?:events/s|events per second|/s)\b")
DURATION = re.compile(rf"(?<![\w.,–-])({NUMBER}(?:–{NUMBER})?) ?(?:s|min|minutes|seconds)\b")


def table_rows(path: Path) -> list[list[str]]:
    """The cells of every table row of ``path`` but the header and separator rows."""
    rows = []
    for line in prose_lines(path.read_text()):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells and cells[0] != "figure" and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


def current_figures(page: Path = FIGURES_PAGE) -> tuple[set[str], dict[str, set[str]]]:
    """The figures page's rates (numbers, commas dropped) and, per subject (the first code span of the figure's
    description: ``make demo``), its durations as written."""
    rates: set[str] = set()
    durations: dict[str, set[str]] = {}
    for figure, _key, value, *_ in table_rows(page):
        rates.update(number.replace(",", "") for number in RATE.findall(value))
        subject = re.search(r"`([^`]+)`", figure)
        if subject and DURATION.search(value):
            durations.setdefault(subject.group(1), set()).update(_durations(value))
    return rates, durations


def _durations(text: str) -> list[str]:
    """Each duration of ``text``; ``18.2, 19.7 and 19.8 min`` is three."""
    found = []
    for match in DURATION.finditer(text):
        found.append(match.group(1))
        before = text[: match.start()]
        listed = re.search(rf"((?:{NUMBER}, )*{NUMBER},? and )$", before)  # the list the unit ends
        if listed:
            found += re.findall(NUMBER, listed.group(1))
    return found


def paragraphs(path: Path) -> list[tuple[int, str]]:
    """(first line, text) of each paragraph of ``path`` outside code blocks; a table row is a paragraph of its own."""
    found: list[tuple[int, str]] = []
    lines: list[str] = []
    for number, line in enumerate([*prose_lines(path.read_text()), ""], start=1):
        if line.strip() and not line.startswith("|"):
            lines.append(line)
            continue
        if lines:
            found.append((number - len(lines), " ".join(lines)))
            lines = []
        if line.startswith("|"):
            found.append((number, line))
    return found


def figures_disagreeing(path: Path, figures=None, root: Path = PROJECT_ROOT) -> list[str]:
    """``file:line: figure`` of each rate ``path`` writes that is not one of the figures page's, and of each duration
    written in a paragraph about a subject of the figures page (``make demo``) that is not its figure."""
    rates, durations = figures or current_figures()
    found = []
    for line, text in paragraphs(path):
        where = f"{path.relative_to(root)}:{line}"
        found += [f"{where}: {rate} events/s" for rate in RATE.findall(text) if rate.replace(",", "") not in rates]
        for subject, written in durations.items():
            if f"`{subject}`" in text:
                found += [f"{where}: `{subject}` {value}" for value in _durations(text) if value not in written]
    return found


def test_the_figures_page_has_the_rates_and_durations_the_other_pages_are_checked_against():
    rates, durations = current_figures()
    assert {"395", "802"} <= rates
    assert durations["make demo"] == {"87.0"}
    assert durations["make test"] == {"18.2", "19.7", "19.8", "36.1", "34.8"}


@pytest.mark.parametrize(
    "page",
    [page for page in doc_files() if page not in DATED_LOGS],
    ids=lambda page: page.relative_to(PROJECT_ROOT).as_posix(),
)
def test_no_page_gives_a_measured_figure_other_than_the_figures_pages(page):
    assert figures_disagreeing(page) == [], f"link to {FIGURES_PAGE.name} instead (or update it, with the run)"


def test_the_figure_check_finds_a_stale_rate_and_a_stale_duration(tmp_path):
    figures = tmp_path / "figures.md"
    figures.write_text(
        "| figure | key | value |\n|---|---|---|\n| `make demo` | `first_hour.demo.total` | 87.0 s |\n"
        "| `lineage serve`, one per request | `k` | 395 events/s |\n| `make test` | | 18.2, 19.7 and 19.8 min |\n"
    )
    assert current_figures(figures) == ({"395"}, {"make demo": {"87.0"}, "make test": {"18.2", "19.7", "19.8"}})
    page = tmp_path / "page.md"
    page.write_text(
        "`make demo` takes a minute and a half\n(80.6 s on 27 November; 87.0 s later).\n\n"
        "Ingest: 87 events/s, and 1,395 events/s; 395 events/s is right.\n\n"
        "The catalog starts in 1.1 s.\n\n`make test` took 18.2 and 21.0 min.\n\n```\nmake demo: 99 s\n```\n"
    )
    assert figures_disagreeing(page, current_figures(figures), root=tmp_path) == [
        "page.md:1: `make demo` 80.6",
        "page.md:4: 87 events/s",
        "page.md:4: 1,395 events/s",
        "page.md:8: `make test` 21.0",
    ]
