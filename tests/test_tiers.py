"""The tier rules of tests/conftest.py, on a throwaway test directory collected by pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]

FILES = {
    "test_plain.py": '''
        import pytest

        @pytest.fixture
        def table(spark):
            return 1

        def test_numpy_only():
            pass

        def test_uses_the_session(spark):
            pass

        def test_uses_it_through_a_fixture(table):
            pass

        def test_runs_spark_submit(tmp_path):
            cmd = ["spark-submit", "--master", "local[2]"]

        @pytest.fixture
        def submitted():
            return ["spark-submit", "job.py"]

        def test_uses_a_fixture_that_submits(submitted):
            pass

        @pytest.mark.system
        def test_marked_system(spark):
            pass

        @pytest.mark.unit
        def test_marked_unit_wins_over_the_words():
            cmd = ["spark-submit"]
    ''',
    "test_cluster.py": "def test_in_a_system_module():\n    pass\n",
    "test_marked_module.py": '''
        import pytest

        pytestmark = pytest.mark.system

        def test_in_a_marked_module():
            pass
    ''',
    "test_code_health.py": "def test_lint():\n    pass\n",
}

EXPECTED = {
    "unit": {"test_plain.py::test_numpy_only",
             "test_plain.py::test_marked_unit_wins_over_the_words"},
    "spark": {"test_plain.py::test_uses_the_session",
              "test_plain.py::test_uses_it_through_a_fixture"},
    "system": {"test_plain.py::test_runs_spark_submit", "test_plain.py::test_marked_system",
               "test_plain.py::test_uses_a_fixture_that_submits",
               "test_cluster.py::test_in_a_system_module",
               "test_marked_module.py::test_in_a_marked_module"},
    "lint": {"test_code_health.py::test_lint"},
}


# appended to the copied conftest: print every collected test's tier markers
REPORT_HOOK = """

def pytest_collection_finish(session):
    for item in session.items:
        tiers = sorted({m.name for m in item.iter_markers() if m.name in TIERS})
        print("TIER", item.nodeid.removeprefix("tests/"), ",".join(tiers))
"""


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> dict[str, str]:
    """Collect the throwaway suite once (one short subprocess): test id -> its tier markers."""
    root = tmp_path_factory.mktemp("tiers")
    tests = root / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text() + REPORT_HOOK)
    for name, text in FILES.items():
        (tests / name).write_text(textwrap.dedent(text))
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    markers = "".join(f"    {m}\n" for m in ini["markers"])
    (root / "pytest.ini").write_text(f"[pytest]\naddopts = {ini['addopts']}\nmarkers =\n{markers}")
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    # -m with every tier: under --strict-markers an unregistered tier name would be an error
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-s",
                           "-m", "unit or spark or system or lint", "-p", "no:cacheprovider",
                           "tests"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [ln.split(" ") for ln in proc.stdout.splitlines() if ln.startswith("TIER ")]
    return {test: tiers for _, test, tiers in rows}


def test_every_test_has_exactly_one_tier_and_the_right_one(collected):
    want = {test: tier for tier, tests in EXPECTED.items() for test in tests}
    assert len(want) == 10
    assert collected == want
