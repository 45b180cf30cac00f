"""The first hour (issue 37, items 1, 6 and 7): help that renders in every front end, and
errors that say how to fix them, before Spark starts where the arguments tell."""

from __future__ import annotations

import io
import json
import os
import pydoc
import sys

import numpy as np
import pandas as pd
import pytest

from vmi_spark import hints
from vmi_spark.errors import InputError
from vmi_spark.job import build_parser, main

pytestmark = pytest.mark.unit


def test_cli_help_renders_every_flag(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    from vmi_spark.params import SPEC

    for p in SPEC:
        if p.flag:
            assert p.flag in out, p.flag
    assert "0.5% and 99.5%" in " ".join(out.split())  # the binning help's literal % signs
    assert build_parser().format_help() == out


def test_sklearn_help_renders():
    from vmi_spark.sklearn import VMIFeatureSelector

    text = pydoc.render_doc(VMIFeatureSelector, renderer=pydoc.plaintext)
    for name in ("n_features_to_select", "exclude", "label_type", "max_categories"):
        assert name in text
    assert "exclude" in str(VMIFeatureSelector().get_params())


def _parquet(path, df: pd.DataFrame) -> str:
    df.to_parquet(path)
    return str(path)


@pytest.fixture
def files(tmp_path):
    df = pd.DataFrame({"a": [1, 2, 3], "y": [0, 1, 0]})
    out = {"parquet": _parquet(tmp_path / "t.parquet", df)}
    df.to_csv(tmp_path / "t.csv", index=False)
    out["csv"] = str(tmp_path / "t.csv")
    df.to_json(tmp_path / "t.json", orient="records", lines=True)
    out["json"] = str(tmp_path / "t.json")
    d = tmp_path / "dir"
    d.mkdir()
    (d / "README.txt.bak").write_text("notes")
    (d / "_SUCCESS").write_text("")
    df.to_parquet(d / "part-00000.parquet")
    out["dir"] = str(d)
    return out


def test_an_input_in_another_format_is_named_before_spark(files, capsys):
    for path, fmt, needle in (
            (files["parquet"], "csv", "holds Parquet data"),
            (files["json"], "parquet", "holds JSON data"),
            (files["csv"], None, "is not Parquet"),
            (files["dir"], "csv", "holds Parquet data")):
        argv = ["--input", path, "--label", "y", "--output", str(files["csv"]) + ".out"]
        if fmt:
            argv += ["--format", fmt]
        rc = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        err = [ln for ln in err if "INFO" not in ln]
        assert rc == 2 and len(err) == 1 and needle in err[0], err
        assert "--format" in err[0] and "Traceback" not in err[0]
        assert not os.path.exists(str(files["csv"]) + ".out")
    # the right format, a directory of part files and a URI are not refused here
    for path, fmt in ((files["parquet"], None), (files["csv"], "csv"), (files["dir"], None),
                      ("hdfs://nn/x", "csv")):
        hints.check_format(path, fmt)


def test_a_worker_python_without_the_package_names_pyspark_python(tmp_path):
    class Ctx:
        master = "local[2]"

        def getConf(self):
            return {"spark.pyspark.python": None}

    class Session:
        sparkContext = Ctx()

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'vmi_spark'\" >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    old = os.environ.get("PYSPARK_PYTHON")
    try:
        os.environ["PYSPARK_PYTHON"] = str(fake)
        with pytest.raises(InputError, match="cannot import vmi_spark .*set PYSPARK_PYTHON"):
            hints.check_worker_python(Session())
        os.environ["PYSPARK_PYTHON"] = str(tmp_path / "missing")
        with pytest.raises(InputError, match="cannot start .*set PYSPARK_PYTHON"):
            hints.check_worker_python(Session())
        os.environ["PYSPARK_PYTHON"] = sys.executable
        hints.check_worker_python(Session())  # this one has it
        Session.sparkContext.master = "spark://host:7077"  # elsewhere: not checked here
        os.environ["PYSPARK_PYTHON"] = str(tmp_path / "missing")
        hints.check_worker_python(Session())
    finally:
        if old is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = old


def test_spark_failures_are_explained_in_one_line():
    worker = RuntimeError("org.apache.spark.api.python.PythonException: Traceback ...\n"
                          "ModuleNotFoundError: No module named 'vmi_spark'\n\tat ...")
    assert "set PYSPARK_PYTHON" in hints.explain(worker)
    assert hints.explain(RuntimeError("No module named 'foo'")) is None

    class Conf:
        def get(self, key):
            return "in-memory"

    class Session:
        conf = Conf()

    missing = RuntimeError("[TABLE_OR_VIEW_NOT_FOUND] The table or view `db`.`t` cannot be found")
    line = hints.explain(missing, Session(), "db.t")
    assert "--table 'db.t' not found" in line and "spark.sql.catalogImplementation=hive" in line
    assert "\n" not in line


def test_report_md_shows_wall_time_step_milliseconds_and_states():
    from vmi_spark.report import render_markdown
    from vmi_spark.sklearn import VMIFeatureSelector

    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame({"const": np.ones(n), "colour": rng.choice(["red", "green", "blue"], n),
                      "x": rng.normal(size=n)})
    y = (X["colour"] == "red").astype(int) ^ (rng.random(n) < 0.1)
    with pytest.warns(RuntimeWarning, match="no remaining feature"):  # const: nothing
        rep = VMIFeatureSelector(n_features_to_select=3).fit(X, y).report()
    assert rep["selected"] == ["colour", "x"]
    rep.update(job_seconds=20.5, total_seconds=0.47, step_seconds=[0.0012, 0.25])
    md = render_markdown(rep)
    assert "| job, start to end (Spark's start included) | 20.50 s |" in md
    rows = [ln for ln in md.splitlines() if ln.startswith(("| 1 |", "| 2 |"))]
    assert rows[0].endswith("| 1.2 |") and rows[1].endswith("| 250 |")
    states = md.split("## States of the selected columns")[1]
    assert "| colour | category |  | blue; green; red |" in states
    cols = {c["name"]: c for c in rep["columns"]}
    assert cols["const"]["constant"] and cols["const"]["state_names"] == ["1"]
    assert not cols["colour"]["constant"]
    rep["selected"].append("const")
    assert "| const | constant |" in render_markdown(rep)
    assert json.dumps(rep)  # JSON-ready


def test_the_label_decision_is_the_same_in_memory(capsys):
    """The scikit-learn selector decides the label by the same rule as the job and says
    why (a whole-number target with 214 values, more than labelBins, is continuous; 442
    rows hold floor(sqrt(442 / 5)) = 9 label classes at 5 rows a cell)."""
    from sklearn.datasets import load_diabetes

    from vmi_spark.sklearn import VMIFeatureSelector

    data = load_diabetes()
    sel = VMIFeatureSelector(n_features_to_select=3).fit(data.data, data.target)
    assert sel.label_decision_.kind == "continuous"
    assert "214 distinct values, more than label_bins (10)" in sel.label_decision_.reason
    assert sel.report()["label_decision"]["type"] == "continuous"
    assert len(sel.classes_) == 9


def test_stream_of_help_has_no_format_error():
    buf = io.StringIO()
    build_parser().print_help(buf)
    text = " ".join(buf.getvalue().split())
    assert "0.5% and 99.5%" in text and "significant at 5% by" in text  # literal % signs
