"""Benchmarks of the VMI step (issue 5).

    PYSPARK_PYTHON=/work/main/.venv/bin/python .venv/bin/python benchmarks/run.py \
        --bench naive pairwise fixed scaling prototypes --scale 1.0 --out benchmarks/results.json

Benchmarks (sizes at --scale 1; rows scale linearly with --scale):

* ``naive``      200k x 100, 8 states, 2 classes: plain numpy step vs ``score_block`` on one
                 core in-process vs ``SparkBackend.run`` through local[2]; cells/s and ratios.
* ``pairwise``   the same data: per-step time of naive and pairwise passes for steps 1..K
                 (plus the pairwise count pass), step 3 vs step K.
* ``fixed``      fixed cost of ``SparkBackend.run`` on 100 rows x 5 features.
* ``scaling``    Spark naive step time for 4 sizes of N and 4 of D; log-log slopes.
* ``prototypes`` ``score_block`` vs the prototypes in ``benchmarks/kernels.py`` on one block
                 (bit-identity checked), steps 1..K.

The runner (not the library) creates the SparkSession: master local[2], no UI, 4g driver.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import numpy as np  # noqa: E402

from data import make_table  # noqa: E402
from kernels import numpy_step, posterior_groups, score_patterns, score_vectorized  # noqa: E402
from vmi_spark.core.bound import (MAX_BLOCK_ROWS, NAIVE, PAIRWISE, SCALE, BlockState,  # noqa: E402
                                  StepOps, add_feature, feature_counts, run_block, score_block)
from vmi_spark.core.tables import conditional, pair_conditional, safe_log  # noqa: E402

STATES, CLASSES = 8, 2
_spark = None


def spark():
    global _spark
    if _spark is None:
        from pyspark.sql import SparkSession
        _spark = (SparkSession.builder.master("local[2]").appName("vmi-bench")
                  .config("spark.ui.enabled", "false")
                  .config("spark.ui.showConsoleProgress", "false")
                  .config("spark.driver.memory", "4g")
                  .config("spark.sql.shuffle.partitions", "2")
                  .getOrCreate())
        _spark.sparkContext.setLogLevel("ERROR")
    return _spark


def blocks_frame(codes: np.ndarray, y: np.ndarray, block_rows: int):
    """Encoded-blocks DataFrame (the schema of ``encode_blocks``), cached and materialised."""
    from pyspark import StorageLevel
    from vmi_spark.spark.encode import BLOCK_SCHEMA
    d, n = codes.shape
    rows = []
    for b, s in enumerate(range(0, n, block_rows)):
        e = min(n, s + block_rows)
        rows.append((b, e - s, np.ascontiguousarray(codes[:, s:e]).tobytes(),
                     y[s:e].astype(np.uint16).tobytes()))
    df = spark().createDataFrame(rows, BLOCK_SCHEMA).repartition(2).persist(StorageLevel.MEMORY_AND_DISK)
    df.count()
    return df


def tables(codes, y):
    cnt = feature_counts(codes, y, STATES, CLASSES)
    n = int(cnt[0].sum())
    return cnt[0].sum(axis=0) / n, conditional(cnt)


def order_by_mi(codes, y):
    from vmi_spark.core.tables import mutual_information
    return [int(i) for i in np.argsort(-mutual_information(feature_counts(codes, y, STATES, CLASSES)))]


def timed(fn, *a, **k):
    t = time.perf_counter()
    r = fn(*a, **k)
    return time.perf_counter() - t, r


def spark_steps(codes, y, method, k, block_rows=MAX_BLOCK_ROWS, order=None):
    """Run k passes (add order[0..k-1]); per pass its time and, for pairwise, the count pass."""
    from vmi_spark.spark.backend import SparkBackend
    d, n = codes.shape
    df = blocks_frame(codes, y, block_rows)
    be = SparkBackend(df, d, STATES, CLASSES, method)
    t_counts, cnt = timed(be.feature_counts)
    prior = cnt[0].sum(axis=0) / n
    cond = conditional(cnt)
    order = order or order_by_mi(codes, y)
    cands = np.ones(d, bool)
    out = {"step_seconds": [], "pair_count_seconds": [], "feature_count_seconds": t_counts}
    sums = None
    for m in range(k):
        f = order[m]
        cands[f] = False
        table = None
        if method == PAIRWISE:
            tp, pc = timed(be.pair_counts, f)
            table = safe_log(pair_conditional(pc))
            out["pair_count_seconds"].append(tp)
        ops = StepOps(method, prior, cond, cands.copy(), reset=(m == 0), add=f, pair_log_table=table)
        t, sums = timed(be.run, ops)
        out["step_seconds"].append(t)
    out["last_sums"] = [int(v) for v in sums[:5]]
    be.close()
    df.unpersist()
    return out


def inprocess_state(codes, y, prior, cond, order, m, block_rows=MAX_BLOCK_ROWS):
    """Per-block states after adding order[:m] (naive), and the candidate mask."""
    d, n = codes.shape
    cands = np.ones(d, bool)
    blocks = []
    for s in range(0, n, block_rows):
        c = np.ascontiguousarray(codes[:, s:s + block_rows])
        yb = y[s:s + block_rows].astype(np.intp)
        st = BlockState.initial(prior, c.shape[1], d, NAIVE)
        blocks.append((c, yb, st))
    for f in order[:m]:
        cands[f] = False
        ops = StepOps(NAIVE, prior, cond, cands.copy(), add=f, score=False)
        for c, yb, st in blocks:
            add_feature(c, st, ops)
    return blocks, cands


# ---------------------------------------------------------------------------------------------

def bench_naive(scale, reps=2):
    n, d = int(200_000 * scale), 100
    codes, y = make_table(n, d, STATES)
    prior, cond = tables(codes, y)
    order = order_by_mi(codes, y)
    m = 2
    blocks, cands = inprocess_state(codes, y, prior, cond, order, m)
    cells = n * int(cands.sum())
    post_all = np.concatenate([st.posterior for _, _, st in blocks])
    yi = y.astype(np.intp)
    t_np = min(timed(numpy_step, codes, yi, post_all, cond, cands)[0] for _ in range(reps))
    ops = StepOps(NAIVE, prior, cond, cands)

    def kernel():
        return sum(score_block(c, yb, st, ops) for c, yb, st in blocks)

    t_k = min(timed(kernel)[0] for _ in range(reps))
    # Spark: steps 1..4 naive; the step with m = 2 already folded in is the 3rd pass
    sp = spark_steps(codes, y, NAIVE, 4, order=order)
    t_sp = min(sp["step_seconds"][2:])
    res = {"rows": n, "features": d, "states": STATES, "cells": cells,
           "numpy_step_s": t_np, "kernel_1core_s": t_k, "spark_local2_step_s": t_sp,
           "spark_step_seconds": sp["step_seconds"],
           "numpy_cells_per_s": cells / t_np, "kernel_cells_per_s": cells / t_k,
           "spark_cells_per_s": cells / t_sp,
           "ratio_kernel_vs_numpy": t_np / t_k, "ratio_spark_vs_numpy": t_np / t_sp,
           "ratio_spark_vs_kernel": t_k / t_sp}
    return res


def bench_pairwise(scale, k=8):
    n, d = int(200_000 * scale), 100
    codes, y = make_table(n, d, STATES)
    order = order_by_mi(codes, y)
    block_rows = max(256, min(MAX_BLOCK_ROWS, (32 << 20) // (8 * d * CLASSES)))
    nv = spark_steps(codes, y, NAIVE, k, order=order)
    pw = spark_steps(codes, y, PAIRWISE, k, block_rows=block_rows, order=order)
    return {"rows": n, "features": d, "k": k, "pairwise_block_rows": block_rows,
            "naive_step_seconds": nv["step_seconds"], "pairwise_step_seconds": pw["step_seconds"],
            "pairwise_count_seconds": pw["pair_count_seconds"],
            "pairwise_over_naive_step3": (pw["step_seconds"][2] + pw["pair_count_seconds"][2])
            / nv["step_seconds"][2],
            "naive_stepK_over_step3": nv["step_seconds"][-1] / nv["step_seconds"][2],
            "pairwise_stepK_over_step3": pw["step_seconds"][-1] / pw["step_seconds"][2]}


def bench_fixed(scale, reps=3):
    codes, y = make_table(100, 5, STATES, informative=3)
    steps, counts = [], []
    for _ in range(reps):
        sp = spark_steps(codes, y, NAIVE, 4)
        steps += sp["step_seconds"]
        counts.append(sp["feature_count_seconds"])
    ts = steps[1:]
    return {"rows": 100, "features": 5, "step_seconds": steps,
            "feature_count_seconds": counts,
            "median_step_s": statistics.median(ts), "min_step_s": min(ts)}


def _slope(xs, ts):
    return float(np.polyfit(np.log(xs), np.log(ts), 1)[0])


def bench_scaling(scale, steps=3):
    base_n = int(200_000 * scale)
    res = {"N": [], "D": []}
    for frac in (0.125, 0.25, 0.5, 1.0):
        n = max(1000, int(base_n * frac))
        codes, y = make_table(n, 100, STATES)
        sp = spark_steps(codes, y, NAIVE, steps)
        res["N"].append({"rows": n, "features": 100, "step_s": min(sp["step_seconds"][1:]),
                         "steps": sp["step_seconds"]})
    for d in (25, 50, 100, 200):
        n = max(1000, base_n // 2)
        codes, y = make_table(n, d, STATES)
        sp = spark_steps(codes, y, NAIVE, steps)
        res["D"].append({"rows": n, "features": d, "step_s": min(sp["step_seconds"][1:]),
                         "steps": sp["step_seconds"]})
    res["slope_N"] = _slope([r["rows"] for r in res["N"]], [r["step_s"] for r in res["N"]])
    res["slope_D"] = _slope([r["features"] for r in res["D"]], [r["step_s"] for r in res["D"]])
    return res


def bench_prototypes(scale, k=6, reps=2):
    n, d = MAX_BLOCK_ROWS, 100
    codes, y = make_table(n, d, STATES)
    prior, cond = tables(codes, y)
    order = order_by_mi(codes, y)
    yi = y.astype(np.intp)
    st = BlockState.initial(prior, n, d, NAIVE)
    cands = np.ones(d, bool)
    rows = []
    for m in range(1, k + 1):
        f = order[m - 1]
        cands[f] = False
        ops = StepOps(NAIVE, prior, cond, cands.copy(), add=f)
        add_feature(codes, st, ops)
        cells = n * int(cands.sum())
        t_ref, ref = min((timed(score_block, codes, yi, st, ops) for _ in range(reps)), key=lambda r: r[0])
        t_vec, vec = min((timed(score_vectorized, codes, yi, st.posterior, cond, cands)
                          for _ in range(reps)), key=lambda r: r[0])
        t_grp, grp = timed(posterior_groups, st.posterior)
        t_pat, pat = min((timed(score_patterns, codes, yi, st.posterior, cond, cands, grp)
                          for _ in range(reps)), key=lambda r: r[0])
        rows.append({"selected": m, "groups": grp[0], "cells": cells,
                     "score_block_s": t_ref, "vectorized_s": t_vec,
                     "patterns_s": t_pat + t_grp, "group_s": t_grp,
                     "ns_per_cell_score_block": 1e9 * t_ref / cells,
                     "speedup_vectorized": t_ref / t_vec, "speedup_patterns": t_ref / (t_pat + t_grp),
                     "identical_vectorized": bool((vec == ref).all()),
                     "identical_patterns": bool((pat == ref).all())})
    return {"rows": n, "features": d, "steps": rows}


BENCHES = {"naive": bench_naive, "pairwise": bench_pairwise, "fixed": bench_fixed,
           "scaling": bench_scaling, "prototypes": bench_prototypes}


def machine():
    import pyarrow
    import pyspark
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            mem = fh.readline().split()[1] + " kB"
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "mem_total": mem, "python": platform.python_version(),
            "numpy": np.__version__, "pyarrow": pyarrow.__version__, "pyspark": pyspark.__version__,
            "platform": platform.platform()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", nargs="+", choices=list(BENCHES) + ["all"], default=["all"])
    ap.add_argument("--scale", type=float, default=1.0, help="row-count multiplier (1.0 = 200k rows)")
    ap.add_argument("--out", default=None, help="write results JSON here")
    a = ap.parse_args(argv)
    names = list(BENCHES) if "all" in a.bench else a.bench
    results = {"machine": machine(), "scale": a.scale, "argv": sys.argv, "results": {}}
    for name in names:
        t0 = time.perf_counter()
        r = BENCHES[name](a.scale)
        r["wall_s"] = time.perf_counter() - t0
        results["results"][name] = r
        print(f"== {name} ({r['wall_s']:.1f}s)")
        print(json.dumps(r, indent=1, default=float)[:4000])
        sys.stdout.flush()
        if a.out:
            with open(a.out, "w") as fh:
                json.dump(results, fh, indent=1, default=float)
    if _spark is not None:
        _spark.stop()


if __name__ == "__main__":
    main()
