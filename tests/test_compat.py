"""The PySpark 3.5 compatibility layer (issue 34): ``vmi_spark._deps`` refuses a PySpark
below 3.5 in one line naming the version, and ``vmi_spark.spark.compat`` gives 3.5 what
it lacks (``toArrow``, ML metadata through the session) and turns the pyarrow reader off
with a note where pyarrow is older than the reader runs with.

These run in the main tiers (PySpark 4) and again under PySpark 3.5 in the ``spark35``
step of ``tests/run_tiers.sh``, where the 3.5 branches are the ones taken.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from helpers import python_after
from vmi_spark._deps import MIN_SPARK, spark_version


@pytest.mark.parametrize("text, want", [
    ("3.5.2", (3, 5)), ("4.1.0.dev0", (4, 1)), ("3.4.1", (3, 4)), ("10.0", (10, 0)),
    ("", None), ("unknown", None),
])
def test_spark_version_reads_major_and_minor(text, want):
    assert spark_version(text) == want


def _with_version(version: str, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` where the installed PySpark reports ``version``."""
    return python_after(f"import pyspark, sys\npyspark.__version__ = {version!r}\n", code)


@pytest.mark.parametrize("statement", ["import vmi_spark.spark.select",
                                       "from vmi_spark import VMISelector"])
def test_pyspark_below_35_is_refused_in_one_line(statement):
    proc = _with_version("3.4.1", f"""
try:
    {statement}
except ImportError as exc:
    print(type(exc).__name__, exc)
else:
    print("imported")
""")
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip()
    assert "\n" not in line, line
    assert line.startswith("ImportError vmi_spark.spark needs PySpark >= 3.5, found PySpark "
                           "3.4.1"), line


def test_job_refuses_pyspark_below_35_with_exit_2(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    proc = _with_version("3.3.0", f"""
from vmi_spark.job import main
sys.exit(main(["--input", {str(src)!r}, "--label", "y", "--output", {str(out)!r}]))
""")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(
        "select_features: error: select_features needs PySpark >= 3.5, found PySpark 3.3.0")
    assert not out.exists()


def test_this_pyspark_is_accepted():
    assert spark_version() >= MIN_SPARK
    import vmi_spark.spark.select  # noqa: F401 - imports without the version error


def test_collected_arrow_is_to_arrow(spark):
    """The 3.5 route (Arrow batches collected as ``toPandas`` does) gives the table that
    ``toArrow`` (4.x) gives, rows, types and all; with no rows, the typed columns."""
    from vmi_spark.spark.compat import collected_arrow, to_arrow

    df = spark.createDataFrame(
        [(1, 2.5, "a", True), (None, float("nan"), None, False), (3, -0.0, "c", None)],
        "i long, d double, s string, b boolean").repartition(2)
    got = collected_arrow(df.orderBy("s"))
    assert got.schema.names == ["i", "d", "s", "b"]
    assert got.to_pylist()[1:] == [{"i": 1, "d": 2.5, "s": "a", "b": True},
                                   {"i": 3, "d": -0.0, "s": "c", "b": None}]
    def same(a, b):  # NaN and -0.0 as they are (Table.equals has NaN != NaN)
        return a.schema == b.schema and repr(a.to_pylist()) == repr(b.to_pylist())

    if hasattr(df, "toArrow"):  # PySpark 4: the same table as toArrow's
        assert same(got, df.orderBy("s").toArrow())
    assert same(to_arrow(df.orderBy("s")), got)
    empty = collected_arrow(df.where("i > 10"))
    assert empty.num_rows == 0
    assert [str(t) for t in empty.schema.types] == ["int64", "double", "string", "bool"]


def test_old_pyarrow_reads_with_spark_and_says_so(spark, tmp_path, set_limits):
    """Where pyarrow is older than the pyarrow reader runs with (Databricks 14.3 LTS has
    8.0.0), a Parquet input is read with Spark's reader, with a note in the warnings, and
    the selection is the same bits."""
    from helpers import random_discrete
    from vmi_spark.spark.select import run_selection

    path = str(tmp_path / "t.parquet")
    spark.createDataFrame(random_discrete(5, n=300, d=6)).write.parquet(path)
    df = spark.read.parquet(path)
    kw = dict(num_features=3, method="mrmr", execution="passes")
    fast = run_selection(df, "y", **kw).report()
    assert fast["reader"] == "pyarrow" and not fast["warnings"]
    set_limits(arrow_reader_min=(999, 0))
    with pytest.warns(UserWarning, match="pyarrow .* is older than 999.0"):
        slow = run_selection(df, "y", **kw).report()
    assert slow["reader"] == "spark"
    assert any("read with Spark's reader instead" in w for w in slow["warnings"])
    assert json.dumps([slow[k] for k in ("selected", "scores", "gains")]) == \
        json.dumps([fast[k] for k in ("selected", "scores", "gains")])
    # an input the pyarrow reader would not read anyway gets no such note
    other = run_selection(df.where("y >= 0"), "y", **kw).report()
    assert other["reader"] == "spark" and not other["warnings"]
