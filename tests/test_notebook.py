"""The Databricks notebook example runs, as a plain Python file, under a local Spark Connect
session with ``dbutils`` absent (issue 20, item 8), for a VMI method and a comparison
criterion, and selects what the in-memory selector selects on the same data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import random_discrete

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "databricks_vmi_notebook.py"
METHODS = ("vmi_pairwise", "mrmr")
K = 3

pytestmark = pytest.mark.system

_SIDE = textwrap.dedent('''
    import json, os, runpy, sys

    import pandas as pd
    from pyspark.sql import SparkSession
    from vmi_spark.report import render_markdown

    data, notebook, out = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    spark.createDataFrame(pd.read_csv(data)).createOrReplaceTempView("vmi_demo")
    res = {{}}
    for method in sys.argv[4:]:
        os.environ.update(VMI_TABLE="vmi_demo", VMI_LABEL="y", VMI_METHOD=method,
                          VMI_NUM_FEATURES=str({k}), VMI_OUTPUT_TABLE=f"pruned_{{method}}")
        ns = runpy.run_path(notebook, init_globals={{"spark": spark}})
        assert "dbutils" not in ns and ns["widgets"] is None
        res[method] = {{
            "selected": ns["model"].selectedFeatureNames,
            "steps": [list(r) for r in ns["steps"].orderBy("step").collect()],
            "markdown": render_markdown(ns["report"]),
            "pruned": spark.read.table(f"pruned_{{method}}").columns,
            "methods": ns["CHOICES"]["method"],
            "connect": type(spark).__module__,
        }}
    with open(out, "w") as fh:
        json.dump(res, fh)
''').format(k=K)


def _expected(pdf, method):
    from vmi_spark.sklearn import VMIFeatureSelector

    cols = [c for c in pdf.columns if c != "y"]
    sel = VMIFeatureSelector(n_features_to_select=K, method=method)
    sel.fit(pdf[cols].to_numpy(), pdf["y"].to_numpy())
    return [cols[i] for i in sel.selected_features_]


def test_notebook_runs_under_local_connect_without_dbutils(tmp_path):
    pytest.importorskip("grpc")
    from vmi_spark.params import METHOD_NAMES

    pdf = random_discrete(17, n=240, d=7)
    data = tmp_path / "data.csv"
    pdf.to_csv(data, index=False)
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
           "PYSPARK_PYTHON": sys.executable, "SPARK_TESTING": "1"}
    for key in ("SPARK_REMOTE", "MASTER", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    proc = subprocess.Popen([sys.executable, "-c", _SIDE, str(data), str(NOTEBOOK), str(out),
                             *METHODS], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        stdout, _ = proc.communicate(timeout=1500)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stdout[-4000:]
    res = json.loads(out.read_text())
    for method in METHODS:
        got = res[method]
        assert got["connect"].startswith("pyspark.sql.connect")
        assert got["methods"] == list(METHOD_NAMES)  # the widget offers every method
        assert got["selected"] == _expected(pdf, method)
        assert [r[1] for r in got["steps"]] == got["selected"]
        assert [r[0] for r in got["steps"]] == list(range(1, K + 1))
        assert f"# VMI feature selection: {method}" in got["markdown"]
        assert got["pruned"] == [c for c in pdf.columns if c in {*got["selected"], "y"}]
    assert f"selected {K} of 7 features" in stdout


_WRITER = textwrap.dedent('''
    import sys

    import pandas as pd
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false") \\
        .getOrCreate()
    spark.createDataFrame(pd.read_csv(sys.argv[1])).write.saveAsTable("training_data")
    spark.stop()
''')

_READER = textwrap.dedent('''
    import json, os, runpy, sys

    notebook, out = sys.argv[1], sys.argv[2]
    os.environ.update(VMI_TABLE="training_data", VMI_LABEL="y", VMI_METHOD="mrmr",
                      VMI_NUM_FEATURES="3", VMI_EXCLUDE=" c0, c4 ")
    ns = runpy.run_path(notebook)  # the notebook makes its own session (SPARK_REMOTE)
    res = {"selected": ns["model"].selectedFeatureNames, "features": ns["features"],
           "connect": type(ns["spark"]).__module__}
    os.environ["VMI_EXCLUDE"] = "c2,nope"
    try:
        runpy.run_path(notebook, init_globals={"spark": ns["spark"]})
    except ValueError as exc:
        res["unknown"] = str(exc)
    with open(out, "w") as fh:
        json.dump(res, fh)
''')


def test_notebook_reads_an_earlier_process_table_and_leaves_columns_out(tmp_path):
    """Run as a plain file under local Connect (``SPARK_REMOTE=local[2]``), the notebook
    finds a table that an earlier process saved in the same working directory (a local
    session's catalog dies with its process), and its ``exclude`` widget leaves columns
    out: the selection is the in-memory selector's over the other columns; an excluded
    name that is no column is an error naming it."""
    pytest.importorskip("grpc")
    pdf = random_discrete(23, n=240, d=6)
    data = tmp_path / "data.csv"
    pdf.to_csv(data, index=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
           "PYSPARK_PYTHON": sys.executable, "SPARK_TESTING": "1"}
    for key in ("SPARK_REMOTE", "MASTER", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    subprocess.run([sys.executable, "-c", _WRITER, str(data)], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=600)
    assert (tmp_path / "spark-warehouse" / "training_data").is_dir()
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-c", _READER, str(NOTEBOOK), str(out)],
                          cwd=tmp_path, env={**env, "SPARK_REMOTE": "local[2]"},
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["connect"].startswith("pyspark.sql.connect")
    kept = [c for c in pdf.columns if c not in ("y", "c0", "c4")]
    assert res["features"] == kept
    from vmi_spark.sklearn import VMIFeatureSelector

    sel = VMIFeatureSelector(n_features_to_select=K, method="mrmr")
    sel.fit(pdf[kept].to_numpy(), pdf["y"].to_numpy())
    assert res["selected"] == [kept[i] for i in sel.selected_features_]
    assert "selected 3 of 4 features (2 columns left out)" in proc.stdout
    assert "nope" in res["unknown"] and "c2" not in res["unknown"]


# ------------------------------------------- issue 44 item 8: db.table names outside Databricks


def _run_notebook(spark, monkeypatch, table: str, **env: str):
    import runpy

    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    for k, v in {"VMI_TABLE": table, "VMI_LABEL": "y", "VMI_METHOD": "vmi_pairwise",
                 "VMI_NUM_FEATURES": "2", "VMI_OUTPUT_TABLE": "", **env}.items():
        monkeypatch.setenv(k, v)
    return runpy.run_path(str(NOTEBOOK), init_globals={"spark": spark})


def test_a_missing_db_table_is_one_line_not_schema_not_found(spark, monkeypatch):
    """`db.table` of a schema the local session does not have raised Spark's
    SCHEMA_NOT_FOUND traceback; now the run ends with one line saying where it looked."""
    with pytest.raises(SystemExit) as exc:
        _run_notebook(spark, monkeypatch, "nodb_vmi44.nothere")
    msg = str(exc.value.code)
    warehouse = spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")
    assert msg.startswith(f"table 'nodb_vmi44.nothere' not found: not in this session's "
                          f"catalog, nor saved in its warehouse directory "
                          f"({os.path.join(warehouse, 'nodb_vmi44.db', 'nothere')})"), msg
    assert "\n" not in msg and "SCHEMA_NOT_FOUND" not in msg


def test_a_db_table_saved_in_the_warehouse_is_registered_with_its_schema(spark, monkeypatch):
    """A `db.t` an earlier local process saved (warehouse/db.db/t) is read, its schema
    registered again, and selects what the in-memory selector selects."""
    import shutil

    from vmi_spark.sklearn import VMIFeatureSelector

    warehouse = spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")
    location = os.path.join(warehouse, "vmi44_db.db", "t")
    pdf = random_discrete(11, n=300, d=5)
    spark.createDataFrame(pdf).write.parquet(location)
    try:
        ns = _run_notebook(spark, monkeypatch, "vmi44_db.t")
        cols = [c for c in pdf.columns if c != "y"]
        want = VMIFeatureSelector(n_features_to_select=2, method="vmi_pairwise").fit(
            pdf[cols], pdf["y"])
        assert list(ns["model"].selectedFeatureNames) == list(want.selected_feature_names_)
    finally:
        spark.sql("DROP DATABASE IF EXISTS vmi44_db CASCADE")
        shutil.rmtree(os.path.dirname(location), ignore_errors=True)
