"""Wide sparse vectors (issue 47): a synthetic HashingTF-like table selected from its
non-zeros, against Spark's ``UnivariateFeatureSelector`` on the same vector in the same run.

The table: ``--rows`` rows of a ``--width``-element sparse vector, about ``--nnz``
non-zeros a row drawn with power-law (Zipf, exponent 1.1) element frequencies, counts 1
(2 with probability 0.1); ``--planted`` elements (spread over the frequency ranks) carry
the binary label: each is present in a row of class 1 with probability 0.5 and of class
0 with 0.05. Prints one JSON object: the load (``uptime``), the sparse fit's seconds per
step and in all, UnivariateFeatureSelector's fit seconds, the planted elements each
found among its top ``--k``, and the peak resident memory of the driver's Python and of
the child processes that have exited (not the running JVM: measure it with `ps`).

    .venv/bin/python benchmarks/sparse_wide.py --rows 100000 --width 262144
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def table(rows: int, width: int, nnz: int, planted: int, seed: int):
    """(labels, list of (indices, values)) and the planted elements."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    ranks = 1.0 / np.arange(1, width + 1) ** 1.1
    p = ranks / ranks.sum()
    perm = rng.permutation(width)  # hashed: frequent elements anywhere in the vector
    plant = perm[np.linspace(20, width // 8, planted).astype(int)]
    out = []
    draws = rng.choice(width, size=(rows, nnz), p=p)
    for r in range(rows):
        idx = set(perm[draws[r]].tolist()) - set(plant.tolist())
        for e in plant:
            if rng.random() < (0.5 if y[r] == 1 else 0.05):
                idx.add(int(e))
        ind = np.array(sorted(idx), dtype=np.int64)
        val = np.where(rng.random(len(ind)) < 0.1, 2.0, 1.0)
        out.append((ind, val))
    return y, out, sorted(int(e) for e in plant)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--width", type=int, default=2**18)
    ap.add_argument("--nnz", type=int, default=40)
    ap.add_argument("--planted", type=int, default=5)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--method", default="mrmr")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.ml.feature import UnivariateFeatureSelector
    from pyspark.ml.linalg import Vectors
    from pyspark.sql import SparkSession

    from vmi_spark import VMISelector

    spark = SparkSession.builder.master("local[2]").appName("sparse_wide").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    y, vecs, plant = table(a.rows, a.width, a.nnz, a.planted, a.seed)
    df = spark.createDataFrame([(int(y[r]), Vectors.sparse(a.width, i, v))
                                for r, (i, v) in enumerate(vecs)], ["label", "features"])
    df = df.repartition(4).cache()
    df.count()
    t = time.perf_counter()
    model = VMISelector(labelCol="label", method=a.method, numTopFeatures=a.k).fit(df)
    ours = time.perf_counter() - t
    t = time.perf_counter()
    uni = UnivariateFeatureSelector(featuresCol="features", labelCol="label",
                                    selectionMode="numTopFeatures").setFeatureType(
        "categorical").setLabelType("categorical").setSelectionThreshold(a.k).fit(df)
    theirs = time.perf_counter() - t
    rep = model.report
    print(json.dumps({
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "rows": a.rows, "width": a.width, "non_zeros": rep["sparse"]["non_zero_values"],
        "states": rep["sparse"]["states"], "method": a.method, "k": a.k,
        "execution": rep["execution"], "fit_seconds": round(ours, 2),
        "step_seconds": [round(s, 2) for s in rep["step_seconds"]],
        "univariate_fit_seconds": round(theirs, 2),
        "planted": plant,
        "planted_found": sorted(set(plant) & set(model.selectedFeatures)),
        "planted_found_univariate": sorted(set(plant) & set(uni.selectedFeatures)),
        "driver_python_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "exited_children_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024,
    }, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
