"""Decompose the fixed cost of a Spark step on a tiny input (100 rows x 5 features).

Times, on the same cached blocks: (a) ``SparkBackend.run``; (b) a bare ``mapInArrow``
pass that emits one small binary per block and is collected (the stateless-step
shape); (c) ``df.count()`` on the cached blocks (a plain job, no Python worker).

    PYSPARK_PYTHON=/work/main/.venv/bin/python .venv/bin/python benchmarks/proto_fixed.py
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from vmi_spark.core.bound import NAIVE, StepOps  # noqa: E402
from vmi_spark.core.tables import conditional  # noqa: E402
from vmi_spark.spark.backend import SparkBackend  # noqa: E402


def bare(batches):
    for rb in batches:
        yield pa.RecordBatch.from_pydict({"partial": pa.array([b"x"] * rb.num_rows, pa.binary())})


def main():
    codes, y = R.make_table(100, 5, R.STATES, informative=3)
    df = R.blocks_frame(codes, y, R.MAX_BLOCK_ROWS)
    be = SparkBackend(df, 5, R.STATES, R.CLASSES, NAIVE)
    cnt = be.feature_counts()
    prior, cond = cnt[0].sum(axis=0) / 100, conditional(cnt)
    res = {"run": [], "bare_mapInArrow": [], "count": []}
    for rep in range(6):
        ops = StepOps(NAIVE, prior, cond, np.ones(5, bool), reset=True, add=rep % 5)
        t = time.perf_counter(); be.run(ops); res["run"].append(time.perf_counter() - t)
        t = time.perf_counter(); df.mapInArrow(bare, "partial binary").collect()
        res["bare_mapInArrow"].append(time.perf_counter() - t)
        t = time.perf_counter(); df.count(); res["count"].append(time.perf_counter() - t)
    out = {k: {"median": statistics.median(v[1:]), "min": min(v[1:]), "all": v} for k, v in res.items()}
    print(json.dumps(out, indent=1))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_fixed_breakdown.json"), "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
