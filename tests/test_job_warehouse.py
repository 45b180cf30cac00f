"""Warehouse pruning in the job: --write-selected, --table/--output-table, --format."""

from __future__ import annotations

import json
import os
import uuid

import numpy as np
import pandas as pd
import pytest

from helpers import random_discrete
from vmi_spark import job
from vmi_spark.errors import InputError
from vmi_spark.job import main


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    """A labelled table with a partition column, as partitioned parquet and plain csv."""
    base = tmp_path_factory.mktemp("wh")
    pdf = random_discrete(31, n=200, d=6, classes=2)
    pdf["name"] = np.where(pdf["c0"] > 0, "high", "low")
    pdf["region"] = np.where(np.arange(len(pdf)) % 3 == 0, "north", "south")
    df = spark.createDataFrame(pdf)
    df.write.partitionBy("region").parquet(str(base / "part.parquet"))
    pdf.drop(columns="region").to_csv(base / "t.csv", index=False)
    return base, pdf


def _run(spark, capsys, *argv):
    rc = main(list(argv), spark=spark)
    return rc, capsys.readouterr()


def _one_error_line(rc, cap, needle):
    # progress lines (INFO vmi_spark) may precede an error raised after the selection
    lines = [ln for ln in cap.err.splitlines() if ln.strip() and " INFO vmi_spark: " not in ln]
    assert rc == 2, cap.err
    assert len(lines) == 1 and lines[0].startswith("select_features: error:"), cap.err
    assert needle in lines[0], lines[0]
    assert "Traceback" not in cap.err


def _rows(frame: pd.DataFrame, cols: list[str]) -> list[tuple]:
    """Rows as a sorted multiset, values normalised (csv/parquet types differ)."""
    return sorted(tuple(str(v) for v in r) for r in frame[cols].itertuples(index=False))


def _no_temp(parent) -> bool:
    return not [n for n in os.listdir(parent) if n.startswith(".vmi-tmp-")]


def test_write_selected_keeps_format_and_partitioning(spark, data, capsys, tmp_path):
    base, pdf = data
    dest = tmp_path / "pruned"
    feats = "c0,c1,c2,c3,c4,c5,name"
    rc, cap = _run(spark, capsys, "--input", str(base / "part.parquet"), "--label", "y",
                   "--features", feats, "--num-features", "3", "--output", str(tmp_path / "o"),
                   "--write-selected", str(dest))
    assert rc == 0, cap.err
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    assert len(rep["selected"]) == 3 and "region" not in rep["selected"]
    # Hive-style partition directories, the same partition column
    assert sorted(n for n in os.listdir(dest) if not n.startswith(("_", "."))) == \
        ["region=north", "region=south"]
    back = spark.read.parquet(str(dest))
    want = [c for c in pdf.columns if c in {*rep["selected"], "y", "region"}]
    assert sorted(back.columns) == sorted(want)
    assert back.columns[-1] == "region"  # partition columns come last, as Spark reads them
    assert _rows(back.toPandas(), want) == _rows(pdf, want)
    assert rep["pruned"]["partition_by"] == ["region"] and rep["pruned"]["format"] == "parquet"
    assert _no_temp(tmp_path)
    # a scheduled re-run to the same directory replaces the job's own earlier output
    # (its marker), without --overwrite (issue 44 item 7) ...
    args = ["--input", str(base / "part.parquet"), "--label", "y", "--features", feats,
            "--num-features", "2", "--write-selected", str(dest)]
    rc, cap = _run(spark, capsys, *args, "--output", str(tmp_path / "o3"))
    assert rc == 0, cap.err
    rep2 = json.loads((tmp_path / "o3" / "selection.json").read_text())
    want2 = [c for c in pdf.columns if c in {*rep2["selected"], "y", "region"}]
    assert sorted(spark.read.parquet(str(dest)).columns) == sorted(want2) and len(want2) == 4
    assert _no_temp(tmp_path)
    # ... never a file the user put there, with --overwrite or without
    (dest / "notes.txt").write_text("mine")
    before = sorted(os.listdir(dest))
    for extra in ([], ["--overwrite"]):
        rc, cap = _run(spark, capsys, *args, "--output", str(tmp_path / "o4"), *extra)
        _one_error_line(rc, cap, "is not a previous output of this job")
        assert sorted(os.listdir(dest)) == before and not (tmp_path / "o4").exists()
    assert (dest / "notes.txt").read_text() == "mine"


def test_write_selected_drops_only_the_unselected_candidates(spark, capsys, tmp_path):
    """The pruned table keeps the label, the selected features and every column left out
    of the selection: a key (excluded), an array and a map (no feature type)."""
    from pyspark.sql import functions as F

    pdf = random_discrete(32, n=200, d=5, classes=2)
    pdf["key"] = np.arange(len(pdf))
    df = spark.createDataFrame(pdf).withColumn("tags", F.array(F.col("c0").cast("string"))) \
        .withColumn("attrs", F.create_map(F.lit("k"), F.col("c1")))
    df.write.parquet(str(tmp_path / "in.parquet"))
    dest = tmp_path / "pruned"
    rc, cap = _run(spark, capsys, "--input", str(tmp_path / "in.parquet"), "--label", "y",
                   "--exclude", "key", "--num-features", "2", "--output", str(tmp_path / "o"),
                   "--write-selected", str(dest))
    assert rc == 0, cap.err
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    assert rep["features"] == [f"c{j}" for j in range(5)] and len(rep["selected"]) == 2
    unselected = {f"c{j}" for j in range(5)} - set(rep["selected"])
    want = [c for c in df.columns if c not in unselected]
    assert {"key", "tags", "attrs", "y", *rep["selected"]} == set(want)
    back = spark.read.parquet(str(dest))
    assert back.columns == want == rep["pruned"]["columns"]
    assert sorted(r["key"] for r in back.select("key").collect()) == list(range(len(pdf)))


def test_csv_input_written_back_as_csv(spark, data, capsys, tmp_path):
    base, pdf = data
    dest = tmp_path / "pruned_csv"
    rc, cap = _run(spark, capsys, "--input", str(base / "t.csv"), "--format", "csv",
                   "--label", "y", "--num-features", "2", "--output", str(tmp_path / "o"),
                   "--write-selected", str(dest))
    assert rc == 0, cap.err
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    parts = [n for n in os.listdir(dest) if n.startswith("part-")]
    assert parts and all(".csv" in n for n in parts)
    want = [c for c in pdf.columns if c in {*rep["selected"], "y"}]
    back = pd.concat([pd.read_csv(dest / n) for n in parts])  # header row, read by pandas
    assert list(back.columns) == want
    assert _rows(back, want) == _rows(pdf, want)


def test_failure_after_selection_leaves_no_pruned_output(spark, data, capsys, tmp_path,
                                                          monkeypatch):
    base, _ = data

    def broken(*a, **k):
        raise InputError("cannot write report: disk full")

    monkeypatch.setattr(job, "write_report", broken)
    dest = tmp_path / "pruned"
    rc, cap = _run(spark, capsys, "--input", str(base / "part.parquet"), "--label", "y",
                   "--num-features", "2", "--output", str(tmp_path / "o"),
                   "--write-selected", str(dest))
    _one_error_line(rc, cap, "disk full")
    assert not dest.exists() and not (tmp_path / "o").exists() and _no_temp(tmp_path)


def test_format_is_passed_to_spark(spark, data, capsys, tmp_path):
    _, pdf = data
    spark.createDataFrame(pdf.drop(columns="region")).write.orc(str(tmp_path / "t.orc"))
    rc, cap = _run(spark, capsys, "--input", str(tmp_path / "t.orc"), "--format", "orc",
                   "--label", "y", "--num-features", "2", "--output", str(tmp_path / "o"),
                   "--write-selected", str(tmp_path / "p"))
    assert rc == 0, cap.err
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    want = [c for c in pdf.columns if c in {*rep["selected"], "y"}]
    assert _rows(spark.read.orc(str(tmp_path / "p")).toPandas(), want) == _rows(pdf, want)
    assert rep["format"] == "orc"
    rc, cap = _run(spark, capsys, "--input", str(tmp_path / "t.orc"), "--format", "nosuchformat",
                   "--label", "y", "--output", str(tmp_path / "o4"))
    _one_error_line(rc, cap, "unknown format 'nosuchformat'")
    assert not (tmp_path / "o4").exists()


def test_bad_warehouse_arguments_are_one_line(spark, data, capsys, tmp_path):
    base, _ = data
    (tmp_path / "afile").write_text("x")
    t = str(base / "part.parquet")
    cases = {
        "write-selected is a file": (["--input", t, "--label", "y", "--write-selected",
                                      str(tmp_path / "afile")], "is not a directory"),
        "demo with write-selected": (["--write-selected", str(tmp_path / "w")],
                                     "--input or --table is required"),
        "output table is the input": (["--table", "db.src", "--label", "y", "--output-table",
                                       "DB.src"], "is the input table"),
        # the session's catalog is in-memory: the line says how to reach a metastore
        "missing table": (["--table", f"vmi_missing_{uuid.uuid4().hex[:8]}", "--label", "y"],
                          "not found in the session's catalog (this session's catalog is "
                          "in-memory"),
    }
    for name, (argv, needle) in cases.items():
        out = tmp_path / f"out-{name.replace(' ', '_')}"
        rc, cap = _run(spark, capsys, *argv, "--output", str(out))
        _one_error_line(rc, cap, needle)
        assert not out.exists() and not (tmp_path / "w").exists(), name


@pytest.fixture
def database(spark, tmp_path):
    """A uniquely named database whose tables live in tmp_path (the warehouse dir of the
    shared session cannot be changed); dropped afterwards."""
    name = f"vmi_test_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{tmp_path / 'db'}'")
    try:
        yield name
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


def test_catalog_table_in_and_out(spark, data, database, capsys, tmp_path):
    _, pdf = data
    src, dst = f"{database}.src", f"{database}.dst"
    spark.createDataFrame(pdf).write.format("orc").partitionBy("region").saveAsTable(src)
    common = ["--table", src, "--label", "y", "--features", "c0,c1,c2,c3,c4,c5,name",
              "--output-table", dst]
    args = [*common, "--num-features", "3"]
    rc, cap = _run(spark, capsys, *args, "--output", str(tmp_path / "o"))
    assert rc == 0, cap.err
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    assert rep["input"] == src
    want = [c for c in pdf.columns if c in {*rep["selected"], "y", "region"}]
    out = spark.table(dst)
    assert sorted(out.columns) == sorted(want)
    assert _rows(out.toPandas(), want) == _rows(pdf, want)
    cols = spark.catalog.listColumns(dst)
    assert [c.name for c in cols if c.isPartition] == ["region"]
    provider = [r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {dst}").collect()
                if r[0] == "Provider"]
    assert provider == ["orc"]
    # an existing table is refused unless --overwrite
    rc, cap = _run(spark, capsys, *args, "--output", str(tmp_path / "o2"))
    _one_error_line(rc, cap, "already exists")
    assert not (tmp_path / "o2").exists()
    rc, cap = _run(spark, capsys, *common, "--num-features", "2", "--output", str(tmp_path / "o3"),
                   "--overwrite")
    assert rc == 0, cap.err
    rep3 = json.loads((tmp_path / "o3" / "selection.json").read_text())
    assert rep3["selected"] == rep["selected"][:2]  # greedy: the first two steps agree
    want3 = [c for c in pdf.columns if c in {*rep3["selected"], "y", "region"}]
    assert _rows(spark.table(dst).toPandas(), want3) == _rows(pdf, want3)
