"""Prototype: a *stateless* naive Spark step vs ``SparkBackend.run``.

``SparkBackend.run`` maps the previous pass's state (codes + y + posterior + partials)
into a new persisted state every step, so every step re-serialises the codes (D bytes
per row) and the posterior through Arrow and the block manager. For ``vmi_naive`` the
posterior is a function of the block's selected features only,
q(y | x_S) ~ p(y) prod_{j in S} p(x_j | y), so a step can instead map over the cached
encoded blocks, rebuild the posterior with m gathers (m = block size, << D), score, and
emit only the (D,) int64 partial sums: nothing is persisted per step. The posterior is
rebuilt with the same float operations as ``add_feature`` (multiply, normalise, in the
order of selection), so the sums are bit-identical (checked below).

    PYSPARK_PYTHON=/work/main/.venv/bin/python .venv/bin/python benchmarks/proto_stateless.py --scale 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (sets sys.path / PYSPARK_PYTHON, creates the session)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from vmi_spark.core.bound import NAIVE, BlockState, StepOps, add_feature, score_block  # noqa: E402
from vmi_spark.spark.backend import SparkBackend, _exact_sum  # noqa: E402


def stateless_fn(prior, cond, block, candidates, num_features):
    def fn(batches):
        for rb in batches:
            ns = rb.column("n").to_pylist()
            codes_col, y_col = rb.column("codes"), rb.column("y")
            outs, secs = [], []
            for k, n in enumerate(ns):
                t0 = time.perf_counter()
                codes = np.frombuffer(codes_col[k].as_py(), dtype=np.uint8).reshape(num_features, n)
                y = np.frombuffer(y_col[k].as_py(), dtype=np.uint16).astype(np.intp)
                st = BlockState.initial(prior, n, num_features, NAIVE)
                for f in block:  # same operations as the incremental state
                    add_feature(codes, st, StepOps(NAIVE, prior, cond, candidates, add=f, score=False))
                outs.append(score_block(codes, y, st, StepOps(NAIVE, prior, cond, candidates)).tobytes())
                secs.append(time.perf_counter() - t0)
            yield pa.RecordBatch.from_pydict({"partial": pa.array(outs, pa.binary()),
                                              "secs": pa.array(secs, pa.float64())})
    return fn


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    n, d = int(200_000 * a.scale), a.features
    codes, y = R.make_table(n, d, R.STATES)
    order = R.order_by_mi(codes, y)
    df = R.blocks_frame(codes, y, R.MAX_BLOCK_ROWS)
    be = SparkBackend(df, d, R.STATES, R.CLASSES, NAIVE)
    cnt = be.feature_counts()
    prior = cnt[0].sum(axis=0) / n
    from vmi_spark.core.tables import conditional
    cond = conditional(cnt)
    cands = np.ones(d, bool)
    rows = []
    for m in range(a.steps):
        f = order[m]
        cands[f] = False
        ops = StepOps(NAIVE, prior, cond, cands.copy(), reset=(m == 0), add=f)
        t0 = time.perf_counter()
        ref = be.run(ops)
        t_ref = time.perf_counter() - t0
        fn = stateless_fn(prior, cond, order[:m + 1], cands.copy(), d)
        t0 = time.perf_counter()
        got_rows = df.mapInArrow(fn, "partial binary, secs double").collect()
        got = _exact_sum([r[0] for r in got_rows], d)
        t_new = time.perf_counter() - t0
        # the same per-block work in this process, one core (the ideal for 1 worker)
        t1 = time.perf_counter()
        for s0 in range(0, n, R.MAX_BLOCK_ROWS):
            cb = np.ascontiguousarray(codes[:, s0:s0 + R.MAX_BLOCK_ROWS])
            st = BlockState.initial(prior, cb.shape[1], d, NAIVE)
            for g in order[:m + 1]:
                add_feature(cb, st, StepOps(NAIVE, prior, cond, cands, add=g, score=False))
            score_block(cb, y[s0:s0 + R.MAX_BLOCK_ROWS].astype(np.intp), st, StepOps(NAIVE, prior, cond, cands))
        t_local = time.perf_counter() - t1
        rows.append({"step": m + 1, "backend_run_s": t_ref, "stateless_s": t_new,
                     "speedup": t_ref / t_new,
                     "in_worker_block_s": sum(r[1] for r in got_rows), "inprocess_1core_s": t_local, "identical": bool((got == ref).all())})
        print(rows[-1], flush=True)
    be.close()
    res = {"rows": n, "features": d, "steps": rows}
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
