"""The selections the Spark 3.5 tier compares bit for bit with Spark 4's.

The same code runs on both sides: under the main venv (PySpark 4) the tier's first part,

    python tests/spark_matrix.py DIR

writes ``DIR/data.parquet`` (pyarrow, no Spark) and ``DIR/spark4.json``; then
``tests/test_spark35.py``, under a venv with a Databricks LTS runtime's libraries
(PySpark 3.5), computes the same runs and compares them with ``spark4.json``.

The runs: the job (``vmi_spark.job.main``) on the Parquet file for every method, every
execution (driver, resident, passes) and both readers (``auto``: pyarrow; ``spark``);
the estimator (fit, save, load, transform, a Pipeline with a vector column, overwrite);
and the job's embedded demo. Floats are kept as ``float.hex`` strings, so equal means the
same bits.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

import numpy as np

METHODS = ("vmi_naive", "vmi_pairwise", "mim", "mrmr", "jmi", "cmim", "cife", "spec_cmi")
EXECUTIONS = ("driver", "resident", "passes")
READERS = ("auto", "spark")
K = 4
ROWS = 1200
FEATURES = ["c0", "c1", "c2", "c3", "f0", "i0", "s0", "b0"]
NUMERIC = ["c0", "c1", "c2", "c3", "f0", "i0"]


def write_data(path: str) -> None:
    """A small mixed table as two Parquet files (pyarrow; the same values on both sides):
    categorical ints related to the 3-class label ``y``, a continuous column with missing
    values, a many-valued int, a string with a null and a boolean."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(34)
    y = rng.integers(0, 3, ROWS)
    noise = rng.integers(0, 4, (4, ROWS))
    cols: dict[str, Any] = {"y": y}
    cols["c0"] = (y + noise[0] * (noise[1] == 0)) % 4
    cols["c1"] = (cols["c0"] + noise[2] * (noise[3] < 2)) % 4  # redundant with c0
    cols["c2"] = noise[1]
    cols["c3"] = (y * 2 + noise[3]) % 5
    f0 = y + rng.normal(0.0, 1.2, ROWS)
    f0[rng.random(ROWS) < 0.03] = np.nan
    cols["f0"] = f0
    cols["i0"] = (rng.integers(0, 500, ROWS) + 300 * (y == 2)).astype(np.int64)
    s0 = np.where(y == noise[0] % 3, "a", np.where(noise[1] < 2, "b", "c")).astype(object)
    s0[::97] = None
    cols["s0"] = s0
    cols["b0"] = (noise[2] + y) % 2 == 0
    table = pa.table({k: pa.array(v, from_pandas=True) for k, v in cols.items()})
    os.makedirs(path, exist_ok=True)
    half = ROWS // 2
    pq.write_table(table.slice(0, half), os.path.join(path, "part-0.parquet"))
    pq.write_table(table.slice(half), os.path.join(path, "part-1.parquet"))


def hexed(values: list[float] | None) -> list[str] | None:
    return None if values is None else [float(v).hex() for v in values]


def job_runs(data: str, out: str, methods=METHODS, executions=EXECUTIONS,
             readers=READERS, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """``selection.json`` of the job on ``data`` for every method x execution x reader
    (what it selected, its bits, and which execution and reader ran)."""
    from vmi_spark.job import main

    res: dict[str, Any] = {}
    for method in methods:
        for execution in executions:
            for reader in readers:
                key = f"{method}/{execution}/{reader}"
                o = os.path.join(out, key.replace("/", "_"))
                shutil.rmtree(o, ignore_errors=True)
                rc = main(["--input", data, "--label", "y", "--method", method,
                           "--num-features", str(K), "--execution", execution, "--reader",
                           reader, "--output", o, "--quiet", *extra])
                if rc != 0:
                    res[key] = {"rc": rc}
                    continue
                with open(os.path.join(o, "selection.json")) as fh:
                    rep = json.load(fh)
                res[key] = selection(rep)
    return res


#: the keys of :func:`selection` that must be the same bits everywhere (the others say
#: which paths ran)
BITS = ("selected", "scores", "gains", "blocks", "stop_reason", "num_rows")


def bits(run: dict[str, Any]) -> dict[str, Any]:
    """The :data:`BITS` of a :func:`selection`."""
    return {k: run[k] for k in BITS}


def selection(rep: dict[str, Any]) -> dict[str, Any]:
    """What must be the same bits everywhere (:data:`BITS`), and which paths ran."""
    return {"selected": rep["selected"], "scores": hexed(rep["scores"]),
            "gains": hexed(rep["gains"]), "blocks": rep["blocks"],
            "stop_reason": rep.get("stop_reason"), "num_rows": rep.get("num_rows"),
            "execution": rep.get("execution"), "reader": rep.get("reader"),
            "storage": rep.get("storage"), "warnings": rep.get("warnings", [])}


def estimator_runs(spark, data: str, out: str) -> dict[str, Any]:
    """The estimator on ``data``: ordinary columns (fit, save, overwrite, load, transform),
    the estimator's own save and load, and a Pipeline over a vector column."""
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import VectorAssembler

    from vmi_spark import VMISelector, VMISelectorModel

    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    df = spark.read.parquet(data)
    res: dict[str, Any] = {}
    sel = VMISelector(inputCols=FEATURES, labelCol="y", numTopFeatures=K,
                      method="vmi_pairwise")
    model = sel.fit(df)
    path = os.path.join(out, "model")
    model.write().save(path)
    model.write().overwrite().save(path)
    loaded = VMISelectorModel.load(path)
    res["columns"] = {"selected": loaded.selectedFeatureNames, "scores": hexed(loaded.scores),
                      "fitted": model.selectedFeatureNames == loaded.selectedFeatureNames,
                      "uid": loaded.uid == model.uid,
                      "transform": loaded.transform(df).columns}
    sel.write().save(os.path.join(out, "estimator"))
    again = VMISelector.load(os.path.join(out, "estimator"))
    res["estimator"] = {"method": again.getMethod(), "k": again.getNumTopFeatures(),
                        "inputCols": again.getInputCols(), "uid": again.uid == sel.uid}
    pipe = Pipeline(stages=[
        VectorAssembler(inputCols=NUMERIC, outputCol="v", handleInvalid="keep"),
        VMISelector(featuresCol="v", labelCol="y", numTopFeatures=3, method="cmim",
                    outputCol="sel")])
    pm = pipe.fit(df)
    ppath = os.path.join(out, "pipeline")
    pm.write().overwrite().save(ppath)
    back = PipelineModel.load(ppath)
    order = ["i0", "f0", "c0", "c1", "c2", "c3", "s0", "b0", "y"]  # a total order
    rows = back.transform(df).orderBy(*order).select("sel").limit(20).collect()
    res["pipeline"] = {"selected": back.stages[-1].selectedFeatureNames,
                       "scores": hexed(back.stages[-1].scores),
                       "rows": [[float(v).hex() for v in r[0].toArray()] for r in rows]}
    return res


def demo_run(spark) -> dict[str, Any]:
    """The job's embedded demo (the paper's tree model, 5,000 rows, K = 9)."""
    from vmi_spark.spark.select import run_selection
    from vmi_spark.synthetic import tree_model

    rep = run_selection(spark.createDataFrame(tree_model(5000, seed=0)), "y", num_features=9,
                        reader="spark").report()
    return selection(rep)


def spark4_side(base: str) -> None:
    """Write the data and the Spark 4 side's ``spark4.json`` under ``base``."""
    from pyspark.sql import SparkSession

    data = os.path.join(base, "data.parquet")
    write_data(data)
    spark = (SparkSession.builder.master("local[2]").appName("vmi_spark spark4 side")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        res = {"spark": spark.version, "jobs": job_runs(data, os.path.join(base, "jobs4")),
               "estimator": estimator_runs(spark, data, os.path.join(base, "ml4")),
               "demo": demo_run(spark)}
    finally:
        spark.stop()
    with open(os.path.join(base, "spark4.json"), "w") as fh:
        json.dump(res, fh, indent=1, default=lambda v: v.item())  # numpy scalars


if __name__ == "__main__":
    spark4_side(sys.argv[1])
