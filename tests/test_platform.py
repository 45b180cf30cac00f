"""Scores as data (issue 20, item 6): the model's ``stepsDF`` and the job's ``steps.csv``
hold the steps of the selection, checked against the scikit-learn selector (the in-memory
engine) and against the report's own lists."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from helpers import random_discrete
from vmi_spark.job import main

K = 6
TOL = 0.02  # large enough for a restart on this data (asserted below)


@pytest.fixture(scope="module")
def data():
    return random_discrete(31, n=300, d=8, states=3, classes=3)


def _sklearn_steps(pdf, method):
    from vmi_spark.sklearn import VMIFeatureSelector

    cols = [c for c in pdf.columns if c != "y"]
    sel = VMIFeatureSelector(n_features_to_select=K, method=method, restart_tolerance=TOL)
    sel.fit(pdf[cols].to_numpy(), pdf["y"].to_numpy())
    return [(s + 1, cols[i], int(i), float(v), float(g), int(b)) for s, (i, v, g, b) in
            enumerate(zip(sel.selected_features_, sel.scores_, sel.gains_, sel.blocks_))]


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise"])
def test_steps_dataframe_matches_the_in_memory_selector(spark, data, method):
    from vmi_spark import VMISelector

    cols = [c for c in data.columns if c != "y"]
    model = VMISelector(inputCols=cols, labelCol="y", numTopFeatures=K, method=method,
                        restartTolerance=TOL).fit(spark.createDataFrame(data))
    steps = model.stepsDF
    assert steps.columns == ["step", "feature", "index", "score", "gain", "block"]
    assert [f.dataType.simpleString() for f in steps.schema.fields] == \
        ["int", "string", "int", "double", "double", "int"]
    rows = [tuple(r) for r in steps.orderBy("step").collect()]
    want = _sklearn_steps(data, method)
    assert [r[:3] + r[5:] for r in rows] == [w[:3] + w[5:] for w in want]
    np.testing.assert_allclose([r[3:5] for r in rows], [w[3:5] for w in want], rtol=0, atol=1e-12)
    assert len({r[5] for r in rows}) > 1, "no restart: the block column is not exercised"
    # the same as the model's lists
    assert [r[1] for r in rows] == model.selectedFeatureNames
    assert [r[2] for r in rows] == model.selectedFeatures
    assert [r[3] for r in rows] == model.scores and [r[5] for r in rows] == model.blocks


def test_job_writes_steps_csv_and_candidates(spark, data, tmp_path, capsys):
    src = tmp_path / "t.parquet"
    spark.createDataFrame(data).write.parquet(str(src))
    out = tmp_path / "out"
    rc = main(["--input", str(src), "--label", "y", "--num-features", str(K),
               "--restart-tolerance", str(TOL), "--report-candidates", "3",
               "--output", str(out), "--quiet"], spark=spark)
    assert rc == 0, capsys.readouterr().err
    rep = json.loads((out / "selection.json").read_text())
    with open(out / "steps.csv", newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    assert table[0] == ["step", "feature", "index", "score", "gain", "block"]
    body = table[1:]
    assert [int(r[0]) for r in body] == list(range(1, len(rep["selected"]) + 1))
    assert [r[1] for r in body] == rep["selected"]
    assert [int(r[2]) for r in body] == rep["selected_indices"]
    assert [float(r[3]) for r in body] == rep["scores"]  # full precision: equal, not close
    assert [float(r[4]) for r in body] == rep["gains"]
    assert [int(r[5]) for r in body] == rep["blocks"]
    assert [tuple(r[1:3]) for r in body] == [(f, str(i)) for _, f, i, *_ in
                                             _sklearn_steps(data, "vmi_naive")]
    md = (out / "report.md").read_text()
    assert "## Candidates" in md and "The best 3 candidates at each step" in md
    first = rep["candidates"][0]
    assert len(first) == 3 and first[0]["feature"] == rep["selected"][0]
    assert f"| 1 | 1 | {first[0]['feature']} | {first[0]['index']} |" in md


@pytest.mark.system
def test_spark_submit_with_remote_local(spark, data, tmp_path, capsys):
    """``spark-submit jobs/select_features.py --remote local[2] ...`` (as the README shows it)
    runs through Spark Connect, writes the classic job's selection, and exits: spark-submit's
    own master is set aside, and its JVM is not kept alive by the in-process server."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or \
        shutil.which("spark-submit")
    if submit is None:
        pytest.skip("spark-submit is not installed (pip install 'vmi_spark[spark]')")
    src = tmp_path / "t.parquet"
    spark.createDataFrame(data).write.parquet(str(src))
    classic = tmp_path / "classic"
    assert main(["--input", str(src), "--label", "y", "--num-features", "3",
                 "--output", str(classic), "--quiet"], spark=spark) == 0
    out = tmp_path / "connect"
    env = {**os.environ, "PYTHONPATH": str(root), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_TESTING": "1"}
    for key in ("SPARK_REMOTE", "MASTER", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    proc = subprocess.Popen([submit, str(root / "jobs" / "select_features.py"), "--remote",
                             "local[2]", "--input", str(src), "--label", "y", "--num-features",
                             "3", "--output", str(out), "--quiet"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        stdout, _ = proc.communicate(timeout=1200)
    finally:
        if proc.poll() is None:  # a hang (or an interrupted test): stop the whole group
            os.killpg(proc.pid, 9)
            proc.wait()
    assert proc.returncode == 0, stdout[-4000:]
    assert "CANNOT_CONFIGURE_SPARK_CONNECT_MASTER" not in stdout
    got = json.loads((out / "selection.json").read_text())
    want = json.loads((classic / "selection.json").read_text())
    for key in ("selected", "selected_indices", "scores", "gains", "blocks"):
        assert got[key] == want[key], key
    assert (out / "steps.csv").read_text() == (classic / "steps.csv").read_text()
