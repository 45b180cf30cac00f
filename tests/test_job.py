"""The job's contract: selection.json, and exit 2 with one line for every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import random_discrete
from vmi_spark.core.report_schema import SelectionReport
from vmi_spark.job import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    """A small parquet and csv table with a binary label and mixed column types."""
    base = tmp_path_factory.mktemp("job")
    pdf = random_discrete(11, n=200, d=6, classes=2)
    pdf["name"] = np.where(pdf["c0"] > 0, "high", "low")
    pdf["cont"] = np.random.default_rng(0).normal(pdf["y"], 1.0)
    spark.createDataFrame(pdf).write.parquet(str(base / "t.parquet"))
    pdf.to_csv(base / "t.csv", index=False)
    return base, pdf


def _run(spark, capsys, *argv):
    rc = main(list(argv), spark=spark)
    return rc, capsys.readouterr()


def test_parquet_and_csv_give_the_same_report(spark, table, capsys, tmp_path):
    base, pdf = table
    reports = []
    for fmt, path in (("parquet", base / "t.parquet"), ("csv", base / "t.csv")):
        out = tmp_path / fmt
        rc, _ = _run(spark, capsys, "--input", str(path), "--format", fmt, "--label", "y",
                     "--method", "vmi_pairwise", "--num-features", "4", "--output", str(out))
        assert rc == 0
        reports.append(json.loads((out / "selection.json").read_text()))
    a, b = reports
    for key in ("method", "label", "features", "selected", "selected_indices", "scores", "blocks",
                "stopped_early", "num_rows", "rows_dropped"):
        assert key in a
    assert a["features"] == [c for c in pdf.columns if c != "y"]
    assert a["selected"] == [a["features"][i] for i in a["selected_indices"]]
    assert len(a["step_seconds"]) == len(a["selected"]) and a["total_seconds"] > 0
    assert a["parameters"]["method"] == "vmi_pairwise" and a["num_rows"] == 200
    assert a["selected"] == b["selected"] and a["scores"] == b["scores"]


def test_features_option_and_k_capped(spark, table, capsys, tmp_path):
    base, _ = table
    out = tmp_path / "o"
    rc, cap = _run(spark, capsys, "--input", str(base / "t.parquet"), "--label", "y",
                   "--features", "c0,c1,name", "--num-features", "10", "--output", str(out))
    assert rc == 0
    rep = json.loads((out / "selection.json").read_text())
    assert rep["features"] == ["c0", "c1", "name"]
    assert len(rep["selected"]) <= 3
    assert "--num-features 10 is more than the 3 features" in cap.err


def test_existing_output_refused_then_overwritten(spark, table, capsys, tmp_path):
    base, _ = table
    out = tmp_path / "existing"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    args = ["--input", str(base / "t.parquet"), "--label", "y", "--num-features", "2", "--output", str(out)]
    rc, cap = _run(spark, capsys, *args)
    assert rc == 2 and "exists and is not empty" in cap.err
    assert os.listdir(out) == ["keep.txt"]
    # --overwrite replaces only a previous output of the job, never a file it did not write
    rc, cap = _run(spark, capsys, *args, "--overwrite")
    assert rc == 2 and "is not a previous output of this job" in cap.err
    assert os.listdir(out) == ["keep.txt"]
    (out / "keep.txt").unlink()
    rc, _ = _run(spark, capsys, *args, "--overwrite")
    assert rc == 0 and "selection.json" in os.listdir(out)
    rep = json.loads((out / "selection.json").read_text())
    assert f"`{rep['selected'][0]}`" in (out / "report.md").read_text() or \
        rep["selected"][0] in (out / "report.md").read_text()


def _bad_inputs(base: Path, spark, tmp: Path):
    one = pd.DataFrame({"a": [1, 2, 1, 2], "y": [0, 0, 0, 0]})
    spark.createDataFrame(one).write.parquet(str(tmp / "single.parquet"))
    many = pd.DataFrame({"a": np.arange(50) % 3, "y": np.arange(50) * 0.37})
    spark.createDataFrame(many).write.parquet(str(tmp / "many.parquet"))
    nolab = pd.DataFrame({"a": [1.0, 2.0], "y": [None, None]})
    spark.createDataFrame(nolab, "a double, y double").write.parquet(str(tmp / "nolab.parquet"))
    (tmp / "empty.csv").write_text("a,y\n")
    (tmp / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet at all")
    t = str(base / "t.parquet")
    return {
        "missing input path": (["--input", str(tmp / "nope.parquet"), "--label", "y"], "does not exist"),
        "missing label": (["--input", t, "--label", "nolabel"], "label column 'nolabel' not found"),
        "missing feature": (["--input", t, "--label", "y", "--features", "c0,zz"], "feature column 'zz' not found"),
        "corrupt file": (["--input", str(tmp / "corrupt.parquet"), "--label", "y"], "error"),
        "empty input": (["--input", str(tmp / "empty.csv"), "--format", "csv", "--label", "y"], "no rows"),
        "single class": (["--input", str(tmp / "single.parquet"), "--label", "y"], "has one class"),
        "too many classes": (["--input", str(tmp / "many.parquet"), "--label", "y", "--max-classes", "10",
                              "--label-type", "categorical"], "set --label-type continuous to bin it"),
        "no labelled rows": (["--input", str(tmp / "nolab.parquet"), "--label", "y"], "no labelled rows"),
        "k zero": (["--input", t, "--label", "y", "--num-features", "0"],
                   "--num-features must be >= 1, got 0"),
        "k negative": (["--input", t, "--label", "y", "--num-features", "-3"],
                       "--num-features must be >= 1, got -3"),
        "unknown method": (["--input", t, "--label", "y", "--method", "magic"], "invalid choice"),
        "bad number": (["--input", t, "--label", "y", "--num-features", "ten"], "invalid int value"),
        "no label arg": (["--input", t], "--label is required"),
        "nan restart tolerance": (["--input", t, "--label", "y", "--restart-tolerance", "nan"],
                                  "--restart-tolerance must be a number"),
    }


def test_every_bad_input_is_one_line_and_exit_2(spark, table, capsys, tmp_path):
    base, _ = table
    cases = _bad_inputs(base, spark, tmp_path)
    for name, (argv, needle) in cases.items():
        out = tmp_path / f"out-{name.replace(' ', '_')}"
        rc, cap = _run(spark, capsys, *argv, "--output", str(out))
        lines = [ln for ln in cap.err.splitlines() if ln.strip()]
        assert rc == 2, name
        assert len(lines) == 1, (name, cap.err)
        assert lines[0].startswith("select_features: error:"), (name, lines)
        assert needle in lines[0], (name, lines[0])
        assert "Traceback" not in cap.err and not out.exists(), name


def test_demo_runs_with_no_arguments(spark, capsys):
    rc, cap = _run(spark, capsys)
    assert rc == 0
    rows = [ln.split() for ln in cap.out.splitlines() if ln.strip()[:1].isdigit()]
    assert [r[1] for r in rows[:3]] == ["x1", "x2", "x3"]
    assert [int(r[3]) for r in rows[:4]] == [0, 0, 0, 1]  # the 4th step starts a new block


def test_spark_submit_end_to_end(table, tmp_path):
    base, _ = table
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        pytest.skip("spark-submit not on the virtual environment's path")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT))
    out = tmp_path / "sub"
    cmd = [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           str(ROOT / "jobs" / "select_features.py"), "--input", str(base / "t.parquet"),
           "--label", "y", "--num-features", "3", "--output", str(out), "--quiet"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rep = json.loads((out / "selection.json").read_text())
    assert len(rep["selected"]) == 3
    # every key the job writes is declared in the one schema readers type against
    assert set(rep) <= set(SelectionReport.__annotations__), \
        set(rep) - set(SelectionReport.__annotations__)
    bad = subprocess.run(cmd[:-5] + ["--label", "nolabel", "--output", str(tmp_path / "x")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert "label column 'nolabel' not found" in bad.stdout + bad.stderr
    assert "Traceback" not in bad.stdout + bad.stderr


def test_spark_submit_console_and_worker_python(table, tmp_path):
    """Under spark-submit's defaults: no Spark INFO line (Spark's start-up included), the
    job's first line says what it reads before Spark starts; a worker Python without the
    package is one line naming PYSPARK_PYTHON, before anything is read."""
    base, _ = table
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        pytest.skip("spark-submit not on the virtual environment's path")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT))
    cmd = [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           str(ROOT / "jobs" / "select_features.py"), "--input", str(base / "t.parquet"),
           "--label", "y", "--num-features", "2"]
    proc = subprocess.run(cmd + ["--output", str(tmp_path / "a")], env=env,
                          capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    lines = text.splitlines()
    spark_info = [ln for ln in lines if " INFO " in ln and " vmi_spark: " not in ln]
    assert spark_info == [], spark_info[:5]
    ours = [ln for ln in lines if " INFO vmi_spark: " in ln]
    assert "t.parquet (parquet); starting Spark" in ours[0]
    assert any(" step 2/2 " in ln for ln in ours)
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'vmi_spark'\""
                      " >&2\nexit 1\n")
    broken.chmod(0o755)
    proc = subprocess.run(cmd + ["--output", str(tmp_path / "b")],
                          env=dict(env, PYSPARK_PYTHON=str(broken)), capture_output=True,
                          text=True, timeout=300)
    text = proc.stdout + proc.stderr
    errors = [ln for ln in text.splitlines() if "select_features: error:" in ln]
    assert proc.returncode == 2 and len(errors) == 1, text[-3000:]
    assert "set PYSPARK_PYTHON" in errors[0] and "Traceback" not in text
    assert errors[0] in proc.stdout.splitlines()  # spark-submit merges the driver's on stdout
    assert not (tmp_path / "b").exists()
    # a file whose column has another type than Spark's schema (taken from the other file)
    # fails a task: one line naming the file, not the task's Java trace (dozens of lines)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    one = pd.DataFrame({"x1": [0.5, 1.5, 2.5, 3.5] * 50, "y": [0, 1] * 100})
    one.to_parquet(mixed / "p1.parquet", index=False)
    one.assign(x1=one.x1.astype(str)).to_parquet(mixed / "p2.parquet", index=False)
    cmd[cmd.index("--input") + 1] = str(mixed)
    proc = subprocess.run(cmd + ["--output", str(tmp_path / "c")], env=env,
                          capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    errors = [ln for ln in text.splitlines() if "select_features: error:" in ln]
    assert proc.returncode == 2 and len(errors) == 1, text[-3000:]
    assert ("p1.parquet" in errors[0] or "p2.parquet" in errors[0]) and "[x1]" in errors[0], errors
    assert not [ln for ln in text.splitlines() if ln.lstrip().startswith("at ")], text[-3000:]
    assert not (tmp_path / "c").exists()


def _step_fields(line: str) -> dict[str, str]:
    msg = line.split(" vmi_spark: ", 1)[1]
    head, rest = msg.split(" ", 2)[1], msg.split(" ", 2)[2]
    return {"step": head, **dict(f.split("=", 1) for f in rest.split())}


def test_progress_lines_quiet_and_verbose(spark, table, capsys, tmp_path):
    base, _ = table
    args = ["--input", str(base / "t.parquet"), "--label", "y", "--num-features", "4",
            "--features", "c0,c1,c2,c3,c4,c5,name,cont"]
    rc, cap = _run(spark, capsys, *args, "--output", str(tmp_path / "a"))
    assert rc == 0
    rep = json.loads((tmp_path / "a" / "selection.json").read_text())
    steps = [ln for ln in cap.err.splitlines() if " INFO vmi_spark: step " in ln]
    assert len(steps) == len(rep["selected"]) == 4
    for j, line in enumerate(steps):
        f = _step_fields(line)
        assert f["step"] == f"{j + 1}/4"
        assert f["feature"] == rep["selected"][j]
        assert f["bound"] == f"{rep['scores'][j]:.4f}" and f["gain"] == f"{rep['gains'][j]:.4f}"
        assert int(f["block"]) == rep["blocks"][j]
        assert f["elapsed"].endswith("s") and f["eta"].endswith("s")
    assert "DEBUG" not in cap.err
    rc, cap = _run(spark, capsys, *args, "--output", str(tmp_path / "b"), "--quiet")
    assert rc == 0 and "step " not in cap.err and "INFO" not in cap.err
    rc, cap = _run(spark, capsys, *args, "--output", str(tmp_path / "c"), "--verbose")
    assert rc == 0
    assert len([ln for ln in cap.err.splitlines() if " INFO vmi_spark: step " in ln]) == 4
    assert " DEBUG vmi_spark: " in cap.err


#: the estimator's names of parameters the job has as flags (issue 33 item 10)
ML_NAMES = ("numTopFeatures", "labelType", "maxCategories", "maxClasses", "handleInvalid",
            "stagingDir", "numBins", "labelBins")


def test_messages_and_warnings_use_the_flag_names(spark, table, capsys, tmp_path):
    """Errors and warnings raised below the job (the plan, the selection) named the
    estimator's params: 'labelType' for --label-type, 'numTopFeatures' in the warnings."""
    base, _ = table
    t = str(base / "t.parquet")
    spark.createDataFrame(pd.DataFrame({"a": np.arange(60) % 4, "y": np.arange(60)})) \
        .write.parquet(str(tmp_path / "wide_label.parquet"))
    holes = str(tmp_path / "holes.parquet")
    spark.createDataFrame(pd.DataFrame({"a": [1.0, None] * 20, "b": [None] * 40,
                                        "y": [0, 1] * 20}).astype({"b": "float64"})) \
        .write.parquet(holes)
    for argv, needle in (
            (["--input", t, "--label", "name", "--label-type", "continuous"],
             "--label-type is 'continuous' but the label column is not numeric (label column "
             "'name')"),
            (["--input", holes, "--label", "y", "--features", "a", "--handle-invalid", "error"],
             "feature column 'a' has 20 missing values (null or NaN) and --handle-invalid is "
             "'error'"),
            (["--input", holes, "--label", "y", "--handle-invalid", "skip"],
             "no rows left after dropping rows with missing feature values (--handle-invalid "
             "is 'skip')"),
            (["--input", str(tmp_path / "wide_label.parquet"), "--label", "y",
              "--max-classes", "10", "--label-type", "categorical"],
             "label column 'y' has more than 10 distinct values (--max-classes); set "
             "--label-type continuous to bin it, or raise --max-classes")):
        rc, cap = _run(spark, capsys, *argv, "--output", str(tmp_path / "never"))
        lines = [ln for ln in cap.err.splitlines() if ln.strip()]
        assert rc == 2 and len(lines) == 1 and needle in lines[0], cap.err
    out = tmp_path / "o"
    rc, cap = _run(spark, capsys, "--input", t, "--label", "y", "--features", "c0,c1,name",
                   "--num-features", "10", "--output", str(out))
    assert rc == 0
    rep = json.loads((out / "selection.json").read_text())
    assert "--num-features 10 is more than the 3 features; selecting at most 3" in rep["warnings"]
    out2 = tmp_path / "o2"
    rc, cap2 = _run(spark, capsys, "--input", str(tmp_path / "wide_label.parquet"), "--label",
                    "y", "--num-features", "1", "--label-type", "categorical", "--output",
                    str(out2))
    assert rc == 0
    rep2 = json.loads((out2 / "selection.json").read_text())
    assert any("looks like a regression target; set --label-type to continuous or auto to "
               "bin it" in w for w in rep2["warnings"]), rep2["warnings"]
    assert "looks like a regression target; set --label-type to continuous" in cap2.err
    assert rep2["label_decision"]["reason"] == "--label-type is 'categorical'"
    # ("numTopFeatures" is also a value of --selection-mode, in the report's parameters)
    for text in (cap.err, cap2.err, json.dumps(rep["warnings"]), json.dumps(rep2["warnings"]),
                 json.dumps(rep2["label_decision"])):
        assert not [n for n in ML_NAMES if n in text], text

def test_a_selection_that_cannot_fit_is_one_line_before_any_pass(spark, table, capsys,
                                                                 tmp_path, monkeypatch,
                                                                 set_limits):
    """SPEC_CMI's D x D tables larger than the memory available: exit 2, one line naming
    --method, no pass over the rows (the planner is never called), nothing written."""
    from vmi_spark.spark import select as spark_select

    base, _ = table
    set_limits(driver_available_bytes=1000)

    def no_pass(*a, **k):
        raise AssertionError("the rows were read")

    monkeypatch.setattr(spark_select, "_plan", no_pass)
    out = tmp_path / "o"
    rc, cap = _run(spark, capsys, "--input", str(base / "t.parquet"), "--label", "y",
                   "--method", "spec_cmi", "--output", str(out))
    assert rc == 2 and not out.exists()
    err = [ln for ln in cap.err.splitlines() if "error" in ln]
    assert len(err) == 1 and "spec_cmi on 8 features needs at least" in err[0]
    assert "--exclude" in err[0] and "another --method" in err[0]
