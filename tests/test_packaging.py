"""Packaging: PySpark is an extra, never a hard requirement (issue 20, item 1).

``pip install vmi_spark`` must not pull a PySpark over a Databricks runtime's own
(which pip cannot see), so the wheel's metadata requires pyspark only through the
``spark``/``connect``/``test`` extras; without PySpark, the Spark-free parts import
and work, and the Spark parts fail with one line naming the extra.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import python_after

ROOT = Path(__file__).resolve().parents[1]
HINT = "pip install 'vmi_spark[spark]'"

# a process in which pyspark (and py4j) cannot be imported, as after `pip install vmi_spark`
_BLOCKER = """
import sys

class _NoPySpark:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "py4j"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoPySpark())
"""


def _run_without_pyspark(code: str) -> subprocess.CompletedProcess:
    return python_after(_BLOCKER, code)


def test_spark_free_parts_work_without_pyspark():
    code = """
import numpy as np
import vmi_spark
import vmi_spark.core, vmi_spark.core.greedy, vmi_spark.report, vmi_spark.checkpoint
from vmi_spark.sklearn import VMIFeatureSelector
from vmi_spark.report import render_markdown

rng = np.random.default_rng(0)
X = rng.integers(0, 3, size=(300, 4))
y = (X[:, 2] + (X[:, 0] > 1)) % 3          # column 2 determines most of y
sel = VMIFeatureSelector(n_features_to_select=1).fit(X, y)
assert list(sel.selected_features_) == [2], sel.selected_features_
assert "VMI feature selection" in render_markdown(sel.report())
assert vmi_spark.InputError is not None
assert not [m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j")]
print("ok")
"""
    proc = _run_without_pyspark(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"


@pytest.mark.parametrize("statement, part", [
    ("import vmi_spark.ml", "vmi_spark.ml"),
    ("from vmi_spark import VMISelector", "vmi_spark.ml"),
    ("import vmi_spark.spark.select", "vmi_spark.spark"),
])
def test_spark_parts_say_which_extra_without_pyspark(statement, part):
    code = f"""
try:
    {statement}
except ImportError as exc:
    print(type(exc).__name__, exc)
else:
    print("imported")
"""
    proc = _run_without_pyspark(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip()
    assert "\n" not in line
    assert line.startswith(f"ImportError {part} needs PySpark"), line
    assert HINT in line


def test_job_without_pyspark_is_one_line_exit_2(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    code = f"""
from vmi_spark.job import main
sys.exit(main(["--input", {str(src)!r}, "--label", "y", "--output", {str(out)!r}]))
"""
    proc = _run_without_pyspark(code)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("select_features: error: select_features needs PySpark")
    assert HINT in lines[0]
    assert not out.exists()


def _requires_dist(metadata: str) -> list[str]:
    return [line.split(":", 1)[1].strip() for line in metadata.splitlines()
            if line.startswith("Requires-Dist:")]


@pytest.mark.system  # builds a wheel in a pip subprocess (tens of seconds)
def test_wheel_metadata_requires_pyspark_only_through_extras(tmp_path):
    """The built wheel (what a cluster library installs) has no unconditional pyspark:
    on a runtime that provides PySpark outside pip, installing it pulls no second one."""
    src = tmp_path / "src"  # a copy: setuptools builds in the source tree (build/, egg-info)
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "vmi_spark", src / "vmi_spark",
                    ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"),
                           str(src)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PIP_NO_INPUT": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("vmi_spark-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(name).decode()
    requires = _requires_dist(metadata)
    assert requires, "no Requires-Dist at all: not the metadata expected"
    pyspark = [r for r in requires if re.match(r"pyspark\b", r)]
    assert pyspark, requires
    for r in pyspark:
        assert "extra ==" in r, f"unconditional requirement {r!r}"
    extras = {re.search(r'extra == "([^"]+)"', r).group(1) for r in pyspark}
    assert {"spark", "connect", "test"} <= extras, extras
    assert any(r.startswith("numpy") and "extra" not in r for r in requires)


def test_examples_install_the_wheel_plainly():
    """The bundle and the notebook install the wheel like any library (no --no-deps),
    and build it with pip, which every Python has (not ``python -m build``, which nothing
    installs; issue 34)."""
    notebook = (ROOT / "examples" / "databricks_vmi_notebook.py").read_text()
    bundle = (ROOT / "examples" / "databricks.yml").read_text()
    installs = [line for text in (notebook, bundle) for line in text.splitlines()
                if "pip install" in line or "- whl:" in line]
    assert installs and not [line for line in installs if "--no-deps" in line]
    assert re.search(r"^# MAGIC %pip install \S+vmi_spark-\S+\.whl$", notebook, re.M)
    assert re.search(r"^\s+- whl: \S+\.whl$", bundle, re.M)
    assert re.search(r"^\s+build: python3 -m pip wheel --no-deps --wheel-dir dist \.$", bundle,
                     re.M)
    assert "-m build" not in bundle and "-m build" not in notebook


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements}


def test_the_spark_extra_is_the_fast_complete_install_and_the_plain_wheel_stays_lean():
    """``[spark]`` (the Quick start's install) brings the compiled loops, the plots and
    the scikit-learn selector; the plain wheel (a managed runtime's) none of them, nor
    PySpark (issue 44 item 4)."""
    project = _project()
    plain = _names(project["dependencies"])
    assert plain == {"numpy", "pandas", "pyarrow"}
    spark = _names(project["optional-dependencies"]["spark"])
    assert {"pyspark", "numba", "matplotlib", "scikit-learn"} <= spark
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    assert 'install -q -e ".[spark]"' in quick.strip().splitlines()[0]
