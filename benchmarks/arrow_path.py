"""What moving rows from the JVM into Python costs per cell (issue 5, target 3).

Every pass of ``run_selection`` before the selection (column statistics, encoding)
moves the input's rows through ``mapInArrow``. This measures that path alone: a
``mapInArrow`` that only counts rows, over a cached table of ``k`` double columns
(no Parquet decoding), and a no-op write of the same rows (JVM only). With
``--parquet PATH`` it also times, on that file, the same counting ``mapInArrow`` over
all its columns against reading it in-process with pyarrow (row group by row group,
every column to float64 numpy), which is what a direct Parquet reader in the workers
would cost.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/arrow_path.py \\
        --rows 200000 --cols 10 100 300 --out benchmarks/results/arrow_path.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import pyarrow as pa  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import run as R  # noqa: E402


def _count_rows(batches):
    n = 0
    for rb in batches:
        n += rb.num_rows
    yield pa.RecordBatch.from_pydict({"n": [n]})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--cols", type=int, nargs="+", default=[10, 100, 300])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--parquet", default=None, help="also compare Spark and pyarrow on this file")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    s = R.spark()
    out = {"machine": R.machine(), "rows": a.rows, "load_start": R.load(), "results": []}
    for k in a.cols:
        df = s.range(a.rows, numPartitions=2).select(
            *[(F.col("id") * (j + 1) % 7).cast("double").alias(f"c{j}") for j in range(k)])
        df = df.cache()
        df.count()
        df.mapInArrow(_count_rows, "n long").collect()  # warm-up (Python workers)
        arrow, noop = [], []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            df.mapInArrow(_count_rows, "n long").collect()
            arrow.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            noop.append(time.perf_counter() - t0)
        df.unpersist()
        cells = a.rows * k
        row = {"cols": k, "cells": cells, "mapInArrow_s": min(arrow), "noop_s": min(noop),
               "mapInArrow_ns_per_cell": 1e9 * min(arrow) / cells,
               "noop_ns_per_cell": 1e9 * min(noop) / cells, "load": R.load()}
        out["results"].append(row)
        print(json.dumps(row), flush=True)
    if a.parquet:
        import numpy as np
        import pyarrow.parquet as pq

        df = s.read.parquet(a.parquet)
        cells = df.count() * len(df.columns)
        df.select(*[F.col(f"`{c}`").alias(f"_c{i}") for i, c in enumerate(df.columns)]) \
            .mapInArrow(_count_rows, "n long").collect()  # warm-up
        t0 = time.perf_counter()
        df.select(*[F.col(f"`{c}`").alias(f"_c{i}") for i, c in enumerate(df.columns)]) \
            .mapInArrow(_count_rows, "n long").collect()
        t_spark = time.perf_counter() - t0
        t0 = time.perf_counter()
        f = pq.ParquetFile(a.parquet)
        for g in range(f.num_row_groups):
            for col in f.read_row_group(g).columns:
                col.to_numpy().astype(np.float64)
        t_pa = time.perf_counter() - t0
        out["parquet"] = {"path": a.parquet, "cells": cells, "partitions": df.rdd.getNumPartitions(),
                          "row_groups": f.num_row_groups, "spark_mapInArrow_s": t_spark,
                          "pyarrow_1core_s": t_pa,
                          "spark_ns_per_cell": 1e9 * t_spark / cells,
                          "pyarrow_ns_per_cell": 1e9 * t_pa / cells, "load": R.load()}
        print(json.dumps(out["parquet"]), flush=True)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
