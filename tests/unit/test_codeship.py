"""The zip of the project's code that every Spark job ships (``--py-files``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from include.core import settings
from include.spark import codeship, submit


def _copy_project(tmp_path):
    root = tmp_path / "project"
    for package in codeship.PACKAGES:
        shutil.copytree(settings.PROJECT_ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_zip_holds_every_module_of_both_packages_and_nothing_else(tmp_path):
    archive = codeship.ensure_built(settings.Paths(tmp_path / "var"))
    names = set(zipfile.ZipFile(archive).namelist())
    expected = {
        path.relative_to(settings.PROJECT_ROOT).as_posix()
        for package in codeship.PACKAGES
        for path in (settings.PROJECT_ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert names == expected
    assert {"include/core/settings.py", "spark_jobs/common/session.py", "spark_jobs/load_taxi.py"} <= names


def test_same_code_gives_the_same_bytes_and_a_change_gives_a_new_zip(tmp_path):
    root = _copy_project(tmp_path)
    first = codeship.ensure_built(settings.Paths(tmp_path / "a"), root)
    again = codeship.ensure_built(settings.Paths(tmp_path / "b"), root)
    assert first.name == again.name and first.read_bytes() == again.read_bytes()
    (root / "spark_jobs" / "load_taxi.py").write_text((root / "spark_jobs" / "load_taxi.py").read_text() + "\n# x\n")
    changed = codeship.ensure_built(settings.Paths(tmp_path / "a"), root)
    assert changed != first and b"# x" in zipfile.ZipFile(changed).read("spark_jobs/load_taxi.py")


def test_a_job_module_imports_from_the_zip_alone(tmp_path):
    """Without the project folder on the path (``-S``: no site-packages, so no editable install either), the zip
    alone provides the modules a job imports before Spark starts."""
    archive = codeship.ensure_built(settings.Paths(tmp_path / "var"))
    probe = "import include.core.contract, spark_jobs.common.runner as r; print(r.__file__)"
    completed = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = [{str(archive)!r}]; {probe}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"{archive}/spark_jobs/common/runner.py"


def test_operator_and_hooks_get_the_zip_as_py_files(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    launch = submit.spark_submit_kwargs(settings.Paths(tmp_path / "var"), lineage=False)
    assert launch["py_files"] == str(codeship.ensure_built(settings.Paths(tmp_path / "var")))
