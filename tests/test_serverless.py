"""Databricks serverless, emulated: a Spark Connect session whose client refuses
``persist``, ``cache``, ``checkpoint`` and ``localCheckpoint`` with serverless's own
error. The selection must still run, with a staging directory (read once, removed
afterwards) or by recomputing the blocks per pass, and give the same selection and
scores as a classic session.

Like ``test_connect``, the Connect side runs in a fresh interpreter (a process cannot
hold a classic and an in-process Connect session), and writes its results as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_connect import _child_env, _write_data, needs_connect

_SERVERLESS_SIDE = textwrap.dedent('''
    import json, os, sys, warnings

    data, out = sys.argv[1], sys.argv[2]
    from pyspark.errors.exceptions.connect import AnalysisException
    from pyspark.sql.connect.dataframe import DataFrame

    def refuse(self, *args, **kwargs):
        raise AnalysisException(
            message="[NOT_SUPPORTED_WITH_SERVERLESS] PERSIST TABLE is not supported on "
                    "serverless compute. SQLSTATE: 0A000",
            errorClass="NOT_SUPPORTED_WITH_SERVERLESS", sql_state="0A000")

    for name in ("persist", "cache", "checkpoint", "localCheckpoint"):
        setattr(DataFrame, name, refuse)

    from pyspark.sql import SparkSession
    from vmi_spark.spark.select import run_selection

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    df = spark.read.parquet(data)
    res = {}
    try:
        df.persist()
        res["refused"] = False
    except AnalysisException:
        res["refused"] = True
    staging = os.path.join(out, "staging")
    os.makedirs(staging)
    # the executions over Spark (execution "auto" would select this small table in the
    # driver: the last case)
    for name, kw in (("staged", {"staging_dir": staging}), ("recomputed", {}),
                     ("pairwise", {"staging_dir": staging, "method": "vmi_pairwise"}),
                     ("cmim", {"method": "cmim"}), ("driver", {"execution": "auto"})):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = run_selection(df, "y", num_features=4,
                                **{"method": "vmi_naive", "execution": "passes", **kw})
        rep = run.report()
        res[name] = {"selected": rep["selected"], "scores": rep["scores"],
                     "storage": rep["storage"], "execution": rep["execution"],
                     "warnings": [str(w.message) for w in caught],
                     "staging_left": sorted(os.listdir(staging))}
    # a staging directory inside the input (a Parquet directory) is refused before reading
    # (the client's plan names the input's path), and nothing is written there
    inside = os.path.join(out, "dir")
    df.write.parquet(inside)
    before = sorted(os.listdir(inside))
    try:
        run_selection(spark.read.parquet(inside), "y", num_features=2, execution="passes",
                      staging_dir=inside)
        res["inside"] = None
    except Exception as exc:  # the one-line ParameterError
        res["inside"] = [type(exc).__name__, str(exc), before == sorted(os.listdir(inside))]
    with open(os.path.join(out, "serverless.json"), "w") as fh:
        json.dump(res, fh)
    spark.stop()
''')


@pytest.fixture(scope="module")
def serverless_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("serverless")
    data, out = str(base / "data.parquet"), base / "out"
    out.mkdir()
    _write_data(data)
    script = base / "serverless_side.py"
    script.write_text(_SERVERLESS_SIDE)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, str(script), data, str(out)], env=_child_env(repo),
                          cwd=str(base), capture_output=True, text=True, timeout=900)
    result = out / "serverless.json"
    if proc.returncode != 0 or not result.exists():
        pytest.fail(f"the serverless side failed (exit {proc.returncode}):\n"
                    f"{proc.stderr[-6000:]}")
    return data, json.loads(result.read_text())


@needs_connect
def test_serverless_selection_matches_classic(serverless_run, spark):
    from vmi_spark.spark.select import run_selection

    data, res = serverless_run
    assert res["refused"], "the emulation must refuse persist like serverless"
    df = spark.read.parquet(data)
    for name, method in (("staged", "vmi_naive"), ("recomputed", "vmi_naive"),
                         ("pairwise", "vmi_pairwise"), ("cmim", "cmim"), ("driver", "vmi_naive")):
        classic = run_selection(df, "y", method=method, num_features=4,
                                execution="resident").report()
        got = res[name]
        # a classic session's resident tasks encode the Parquet rows they hold
        assert classic["storage"] == "in_tasks"
        assert got["selected"] == classic["selected"], name
        np.testing.assert_array_equal(got["scores"], classic["scores"])  # bit-identical
        # Connect: no resident tasks; a small table in the driver (no cache needed)
        assert got["execution"] == ("driver" if name == "driver" else "passes")


@needs_connect
def test_serverless_storage_is_reported_and_staging_removed(serverless_run):
    _, res = serverless_run
    assert res["staged"]["storage"] == "staging"
    assert res["pairwise"]["storage"] == "staging"
    assert res["recomputed"]["storage"] == "recompute"
    assert res["cmim"]["storage"] == "recompute"
    assert res["driver"]["storage"] == "driver" and not res["driver"]["warnings"]
    # the staging copies were removed; the user's directory itself stays
    assert res["staged"]["staging_left"] == [] and res["pairwise"]["staging_left"] == []
    # without a staging directory the user is told how to avoid re-reading the input
    assert any("staging directory" in w for w in res["recomputed"]["warnings"])
    assert not any("staging directory" in w for w in res["staged"]["warnings"])


@needs_connect
def test_serverless_staging_inside_the_input_is_refused(serverless_run):
    """Issue 33 item 4 under Connect: the input's root comes from the client's plan."""
    _, res = serverless_run
    kind, message, untouched = res["inside"]
    assert kind == "ParameterError" and untouched
    # run_selection names its keywords (the estimator says stagingDir, the job --staging-dir)
    assert "staging_dir" in message and "lies inside the input" in message
    assert "\n" not in message
