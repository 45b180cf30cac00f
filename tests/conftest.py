"""One session-scoped local SparkSession for every Spark test (none at import time), and the
test tiers.

Every test gets exactly one tier marker, assigned here at collection, so a new test file is
tiered without edits:

* ``system``: slow or process-level tests: a standalone cluster, kill -9, Spark Connect,
  spark-submit subprocesses. A test is ``system`` if its module is in ``SYSTEM_MODULES``, if it
  (or its module, through ``pytestmark``) carries ``@pytest.mark.system``, or if its source or
  that of a fixture it uses runs spark-submit, starts a cluster or a Connect session or
  kills a process (``SYSTEM_WORDS``).
* ``spark``: integration tests that use the session ``spark`` fixture (directly or through
  another fixture).
* ``lint``: ruff and mypy (``LINT_MODULES``); the tier runner runs them as its first step.
* ``unit``: everything else: fast and Spark-free (core, explog, kernels, sklearn, ...).
* ``spark35``: ``tests/test_spark35.py``, marked so explicitly: run by the ``spark35`` step
  under a PySpark 3.5 venv, never by the other tiers.

An explicit ``@pytest.mark.unit`` / ``spark`` / ``system`` / ``lint`` on a test or module wins.

The tests' tables are small, and ``execution="auto"`` selects a small table in the driver
(:mod:`vmi_spark.spark.executions.driver`). In this process the tests keep them on the
executors, the paths they were written for (``limits.overridden``: no table fits the
driver), unless marked ``driver_auto`` (``tests/test_driver.py``, which checks that the
driver gives the executors' result bit for bit). Subprocesses (the job under
spark-submit, Connect, the cluster) use the real thresholds.
``tests/run_tiers.sh`` runs the tiers as separate steps; ``pytest -m unit`` is the fast tier.
"""

from __future__ import annotations

import inspect
import os
import sys
from contextlib import ExitStack

import pytest

from vmi_spark.core import limits

TIERS = ("lint", "system", "spark", "unit", "spark35")
SYSTEM_MODULES = frozenset({"test_cluster", "test_connect", "test_serverless"})
LINT_MODULES = frozenset({"test_code_health"})
# words in a test function's own source that make it a system test
SYSTEM_WORDS = ("spark-submit", "spark_submit", "SparkCluster", "SIGKILL", ".remote(")


@pytest.fixture(autouse=True)
def _executors_for_small_tables(request):
    """No driver execution under ``auto`` unless the test is marked ``driver_auto``."""
    if request.node.get_closest_marker("driver_auto") is not None or not any(
            request.node.get_closest_marker(t) for t in ("spark", "system")):
        yield  # unit and lint tests do not run Spark
        return
    with limits.overridden(driver_cells=1, probe_cells=1):  # every table is larger
        yield


# RDD id -> the test in which it became persisted (tests that use the session)
_PERSISTED_IN: dict[int, str] = {}


def _persisted(session) -> set[int]:
    return {int(k) for k in session.sparkContext._jsc.getPersistentRDDs().keys()}


@pytest.fixture(autouse=True)
def _note_what_stays_persisted(request):
    """Which test persisted each RDD, for the ``spark`` fixture's check at the end that the
    shared session keeps nothing cached (a selection must release what it persisted; a
    module fixture that caches unpersists at its end)."""
    if "spark" not in request.fixturenames:
        yield
        return
    session = request.getfixturevalue("spark")
    before = _persisted(session)
    yield
    for rdd in _persisted(session) - before:
        _PERSISTED_IN.setdefault(rdd, request.node.nodeid)


@pytest.fixture
def set_limits():
    """``set_limits(name=value, ...)``: the named :mod:`vmi_spark.core.limits` for the rest
    of the test (``limits.overridden``, undone at its end; calls stack)."""
    with ExitStack() as stack:
        yield lambda **changes: stack.enter_context(limits.overridden(**changes))


def _source(fn) -> str:
    try:
        return inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return ""


def _sources(item: pytest.Item) -> str:
    """The source of a test function and of every fixture it uses (directly or not)."""
    texts = [_source(getattr(item, "function", None))]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        texts += [_source(d.func) for d in defs if d.baseid]  # the project's, not pytest's
    return "\n".join(texts)


def tier_of(item: pytest.Item) -> str:
    """The tier of one collected test (see the module docstring for the rules)."""
    explicit = [m.name for m in item.iter_markers() if m.name in TIERS]
    if explicit:
        return explicit[0]  # the closest marker: the function's before the module's
    module = item.module.__name__.rpartition(".")[2] if getattr(item, "module", None) else ""
    if module in LINT_MODULES:
        return "lint"
    if module in SYSTEM_MODULES or any(w in _sources(item) for w in SYSTEM_WORDS):
        return "system"
    if "spark" in getattr(item, "fixturenames", ()):
        return "spark"
    return "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(item)))


#: the warnings filter of the spark fixture's Python workers (PYTHONWARNINGS: a literal
#: prefix of the message, matched without case; it cannot hold a colon)
WORKER_WARNINGS = "error:vmi_spark:RuntimeWarning"  # the only one: numba could not compile


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]")
               .appName("vmi_spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "4")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g")
               # a compiled loop falling back to numpy in a Python worker fails the task (as
               # pyproject's filterwarnings does in this process): the answers would not show it
               .config("spark.executorEnv.PYTHONWARNINGS", WORKER_WARNINGS)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    left = sorted(_persisted(session))
    session.stop()
    assert not left, ("RDDs left persisted in the shared session: " + ", ".join(
        f"{rdd} (from {_PERSISTED_IN.get(rdd, 'a test run before its check')})" for rdd in left))
