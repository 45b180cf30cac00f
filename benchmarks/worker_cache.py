"""Naive step with and without the Python-worker block cache, same data, same run.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/worker_cache.py --scale 0.25
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402

import numpy as np  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    from vmi_spark.spark.backend import SparkBackend

    R.spark()
    n, d = int(1_000_000 * a.scale), 200
    codes, y = R.make_table(n, d, R.STATES)
    prior, cond, mi = R.tables(codes, y)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    df = R.blocks_frame(codes, y, R.block_rows_for(n, d))
    on = SparkBackend(df, d, R.STATES, R.CLASSES, R.NAIVE)
    off = SparkBackend(df, d, R.STATES, R.CLASSES, R.NAIVE, worker_cache=False)
    on.feature_counts()
    off.feature_counts()
    rows = []
    for m in (2, 6):
        ops = R.naive_ops(prior, cond, order[:m], d)
        on.run(ops)  # warm the worker caches
        t_on, t_off = [], []
        for _ in range(a.reps):
            t, s_on = R.timed(on.run, ops)
            t_on.append(t)
            t, s_off = R.timed(off.run, ops)
            t_off.append(t)
            assert (np.asarray(s_on) == np.asarray(s_off)).all()
        post = R.row_posterior(codes, order[:m], cond, prior)
        t_np, _ = R.timed(R.numpy_step, codes, y.astype(np.intp), post, cond, ops.candidates)
        row = {"m": m, "rows": n, "features": d, "cache_s": min(t_on), "no_cache_s": min(t_off),
               "numpy_s": t_np, "speedup_cache": min(t_off) / min(t_on),
               "cache_vs_numpy": t_np / min(t_on), "no_cache_vs_numpy": t_np / min(t_off),
               "hits_last": on.cache_hits[-1], "load": R.load()}
        rows.append(row)
        print(row, flush=True)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
