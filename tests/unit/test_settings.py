"""One settings module: every environment variable the project reads is declared there once, read nowhere else (but
through include/core/setting.py's ``Setting``, which it declares them with), and documented in docs/configuration.md
exactly as declared."""

from __future__ import annotations

import ast
import re
import socket
import threading
from pathlib import Path

import pytest

from include.core import setting as setting_module
from include.core import settings

CODE_TREES = ("include", "plugins", "dags", "spark_jobs", "bench")
# The modules that read the environment: the settings and what a setting is.
READERS = {Path(settings.__file__), Path(setting_module.__file__)}


def environment_reads(path: Path) -> list[str]:
    """Reads of the environment in ``path``: ``os.environ.get``, ``os.getenv``, ``os.environ[...]`` loads,
    ``... in os.environ`` and ``os.environ.setdefault``. Passing the whole environment on (``{**os.environ}``) or
    setting a variable for a child process is not a read."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call):
            function = ast.unparse(node.func)
            if function in ("os.environ.get", "os.getenv", "os.environ.setdefault", "environ.get", "getenv"):
                found.append(f"{path}:{node.lineno} {function}")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if ast.unparse(node.value) in ("os.environ", "environ"):
                found.append(f"{path}:{node.lineno} os.environ[...]")
        elif isinstance(node, ast.Compare) and any(
            ast.unparse(c) in ("os.environ", "environ") for c in node.comparators
        ):
            found.append(f"{path}:{node.lineno} in os.environ")
    return found


def test_no_module_but_settings_reads_the_environment():
    reads = [
        read
        for tree in CODE_TREES
        for path in sorted((settings.PROJECT_ROOT / tree).rglob("*.py"))
        if path not in READERS
        for read in environment_reads(path)
    ]
    assert reads == []


def test_the_settings_module_declares_through_setting_and_is_the_one_named_for_it():
    # one registry, one Setting class, whatever module a caller names them by
    assert settings.SETTINGS is setting_module.SETTINGS and settings.Setting is setting_module.Setting
    assert settings.SettingError is setting_module.SettingError and settings.truthy is setting_module.truthy
    assert all(isinstance(item, setting_module.Setting) for item in settings.SETTINGS.values())


def test_the_walk_finds_every_way_of_reading_the_environment(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n"
        "a = os.environ.get('A')\n"
        "b = os.getenv('B')\n"
        "c = os.environ['C']\n"
        "d = 'D' in os.environ\n"
        "os.environ.setdefault('E', '1')\n"
        "env = {**os.environ}\n"  # passing on, not reading
        "os.environ['F'] = '1'\n"  # setting, not reading
    )
    assert [read.split(" ", 1)[1] for read in environment_reads(module)] == [
        "os.environ.get",
        "os.getenv",
        "os.environ[...]",
        "in os.environ",
        "os.environ.setdefault",
    ]


def test_every_setting_is_declared_once_with_a_description():
    assert len(settings.SETTINGS) >= 30
    for name, setting in settings.SETTINGS.items():
        assert setting.name == name and setting.description.strip(), name
    with pytest.raises(RuntimeError, match="defined twice"):
        settings._define("PIPELINE_VAR_DIR", None, "again", "paths")


def test_the_configuration_page_holds_the_generated_table():
    page = (settings.PROJECT_ROOT / "docs" / "configuration.md").read_text()
    assert settings.configuration_table() in page, "run `python -m include.core.settings` and paste its table"


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("ICEBERG_REST_PORT", "http", "ICEBERG_REST_PORT='http' is not a TCP port"),
        ("ICEBERG_REST_PORT", "70000", "ICEBERG_REST_PORT='70000' is not a TCP port"),
        ("ICEBERG_CATALOG_TYPE", "hive", "ICEBERG_CATALOG_TYPE must be one of rest, jdbc, not 'hive'"),
        ("DEMO_ROWS_PER_MONTH", "many", "DEMO_ROWS_PER_MONTH='many' is not an integer"),
        ("DEMO_ROWS_PER_MONTH", "0", "DEMO_ROWS_PER_MONTH='0' is less than 1"),
        ("KAFKA_PORT", "-1", "KAFKA_PORT='-1' is not a TCP port"),
        ("AIRFLOW_UI_PORT", "70000", "AIRFLOW_UI_PORT='70000' is not a TCP port"),
        ("SAMPLE_SOURCE_PORT", "0", "SAMPLE_SOURCE_PORT='0' is not a TCP port"),
        # a negative budget acted as 0 (every alert sent without its impact set), without a word
        ("ALERT_IMPACT_BUDGET_SECONDS", "-1", "ALERT_IMPACT_BUDGET_SECONDS='-1' is less than 0"),
        ("ALERT_IMPACT_BUDGET_SECONDS", "nan", "ALERT_IMPACT_BUDGET_SECONDS='nan' is not a finite number"),
        ("LINEAGE_FACETS_BUDGET_SECONDS", "inf", "LINEAGE_FACETS_BUDGET_SECONDS='inf' is not a finite number"),
        # 0 in-flight requests per client would answer every request 429
        ("LINEAGE_MAX_CLIENT_REQUESTS", "0", "LINEAGE_MAX_CLIENT_REQUESTS='0' is less than 1"),
        ("BENCH_SCALE_MONTHS", "1", "BENCH_SCALE_MONTHS='1' is less than 2"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(monkeypatch, tmp_path, name, value, message):
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv(name, value)
    setting = settings.SETTINGS[name]
    with pytest.raises(settings.SettingError, match=re.escape(message)):
        if name.startswith("ICEBERG"):
            settings.CatalogSettings.current()
        elif name.endswith("_PORT"):
            settings.kafka_port() if name == "KAFKA_PORT" else setting.port()
        elif name.endswith("_SECONDS"):
            setting.number()
        else:
            setting.integer()


@pytest.mark.parametrize("name", [name for name, item in settings.SETTINGS.items() if item.minimum is not None])
def test_every_bounded_setting_takes_its_least_value_and_refuses_one_below(monkeypatch, name):
    setting = settings.SETTINGS[name]
    least = setting.minimum
    monkeypatch.setenv(name, f"{least:g}")
    assert setting.number() == least
    monkeypatch.setenv(name, f"{least - 1:g}")
    with pytest.raises(settings.SettingError, match=f"^{name}="):
        setting.number()
    if float(setting.default or least).is_integer():
        with pytest.raises(settings.SettingError, match=f"^{name}="):
            setting.integer()


def test_a_var_without_icebergs_port_set_gets_a_free_port_of_its_own_and_keeps_it(monkeypatch, tmp_path):
    monkeypatch.delenv("ICEBERG_REST_PORT", raising=False)
    first, second = settings.Paths(tmp_path / "a"), settings.Paths(tmp_path / "b")
    port_a = settings.CatalogSettings.current(first).rest_port
    port_b = settings.CatalogSettings.current(second).rest_port
    assert port_a != port_b, "two var/s side by side get two ports"
    assert (first.catalog_dir / "port").read_text().strip() == str(port_a), "recorded in the var/'s state"
    assert settings.CatalogSettings.current(first).uri == f"http://127.0.0.1:{port_a}", "and read back, unchanged"
    with socket.socket() as probe:  # the port was free when chosen
        probe.bind(("127.0.0.1", port_b))


def test_concurrent_first_reads_of_a_var_agree_on_one_port(monkeypatch, tmp_path):
    monkeypatch.delenv("ICEBERG_REST_PORT", raising=False)
    paths = settings.Paths(tmp_path / "var")
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(settings.rest_port(paths))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 1 and len(seen) == 8
    assert sorted(p.name for p in paths.catalog_dir.iterdir()) == ["port"], "no candidate file is left behind"


def test_an_explicit_port_wins_over_the_recorded_one(monkeypatch, tmp_path):
    monkeypatch.delenv("ICEBERG_REST_PORT", raising=False)
    paths = settings.Paths(tmp_path / "var")
    settings.rest_port(paths)
    monkeypatch.setenv("ICEBERG_REST_PORT", "18999")
    assert settings.CatalogSettings.current(paths).rest_port == 18999


def test_a_var_of_an_earlier_release_keeps_the_port_it_always_had(monkeypatch, tmp_path):
    monkeypatch.delenv("ICEBERG_REST_PORT", raising=False)
    paths = settings.Paths(tmp_path / "var")
    paths.catalog_dir.mkdir(parents=True)
    (paths.catalog_dir / "iceberg_catalog.db").write_bytes(b"")  # its catalog, made before ports were recorded
    assert settings.rest_port(paths) == settings.DEFAULT_REST_PORT
    assert (paths.catalog_dir / "port").read_text().strip() == str(settings.DEFAULT_REST_PORT)


@pytest.mark.parametrize(
    ("value", "expected"), [(None, "quick"), ("full", "full"), (" FULL ", "full"), ("c2", None), ("quick,full", None)]
)
def test_a_choice_is_one_of_its_choices_in_lower_case_or_refused_naming_the_setting_and_them(
    monkeypatch, value, expected
):
    if value is None:
        monkeypatch.delenv("SPARK_DRIVER_JIT", raising=False)
    else:
        monkeypatch.setenv("SPARK_DRIVER_JIT", value)
    if expected is not None:
        assert settings.SPARK_DRIVER_JIT.choice({"quick": 1, "full": 2}) == expected
    else:
        with pytest.raises(settings.SettingError, match=r"SPARK_DRIVER_JIT must be one of quick, full, not "):
            settings.SPARK_DRIVER_JIT.choice({"quick": 1, "full": 2})
