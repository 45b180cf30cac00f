"""Benchmarks of the VMI engine (issue 5). Not part of the test suite.

    cd /work/main
    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/run.py \\
        --bench naive pairwise fixed scaling --scale 1 --out benchmarks/results/core.json

Every comparison is a ratio of two timings taken in the same run, and every Spark
result that computes the same thing as the in-memory core (``InMemoryBackend`` with
the same kernels, ``select_vmi`` / ``select_classic``) is asserted equal bit for bit.
The 1-minute load average is recorded next to every measurement.

Benchmarks (sizes at ``--scale 1``; row counts scale linearly with ``--scale``):

``naive``     1M x 200, 8 states, 2 classes. ``SparkBackend.run`` on local[2] at block
              sizes m = 1, 2, 3 (pattern kernel) and 6 (per-row kernel) against the plain
              numpy step (``kernels.numpy_step``) in the same run; cells/s and ratios; the
              kernel each block used; the float64 agreement of the exact sums.
``pairwise``  250k x 200: pairwise step (count pass + state pass) against the naive step on
              the same blocks, for m = 1..30; step 30 / step 3 for both; state size.
``fixed``     fixed cost of a step on 100 rows x 5 features (median over repetitions).
``scaling``   naive step time against N (125k..1M at D = 200) and D (125..1,000 at
              N = 250k); log-log slopes.
``peers``     mrmr-selection's Spark backend (20 of 100 on 100k rows) and scikit-feature's
              MRMR/JMI/CMIM (20 of 200 on 20k rows) against ``run_selection`` with
              mrmr/jmi/cmim/vmi_naive on the same data.
``e2e``       a mixed Parquet table (1M x 1,000) through ``run_selection`` (vmi_naive,
              50), and vmi_pairwise (20 of the first 200 columns): time, peak driver RSS,
              Spark's storage figures for the cached blocks.
``cluster``   the same ``run_selection`` on local[2] and on a 2-worker standalone cluster
              on loopback (``vmi_spark.testing.cluster.SparkCluster``).

The runner (not the library) creates the SparkSession: local[2], no UI, 6g driver. Only
one session exists at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import numpy as np  # noqa: E402

from data import arrow_table, make_table, write_coded_parquet, write_mixed_parquet  # noqa: E402
from kernels import numpy_step, row_posterior  # noqa: E402
from vmi_spark.core.bound import (NAIVE, PAIRWISE, PATTERN_RATIO,  # noqa: E402
                                  SCALE, StepOps, feature_counts, naive_own,
                                  naive_posterior)
from vmi_spark.core import kernels as core_kernels  # noqa: E402
from vmi_spark.core.inmemory import InMemoryBackend  # noqa: E402
from vmi_spark.core.tables import (conditional, mutual_information, pair_conditional,  # noqa: E402
                                   safe_log)

STATES, CLASSES = 8, 2
MASTER = "local[2]"
#: executor memory on a standalone cluster (bench cluster / e2e_cluster)
EXECUTOR_MEMORY = "3g"
_spark = None


# -- session and helpers ----------------------------------------------------------------

def spark(master: str | None = None):
    global _spark
    if _spark is None:
        from pyspark.sql import SparkSession
        b = (SparkSession.builder.master(master or MASTER).appName("vmi-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "6g")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.sql.shuffle.partitions", "4"))
        if master and master.startswith("spark://"):
            b = (b.config("spark.executor.memory", EXECUTOR_MEMORY).config("spark.cores.max", "2")
                 .config("spark.driver.host", "127.0.0.1"))
        _spark = b.getOrCreate()
        _spark.sparkContext.setLogLevel("ERROR")
    return _spark


def stop_spark():
    global _spark
    if _spark is not None:
        _spark.stop()
        _spark = None


#: how steps run: "resident" (long-running barrier tasks, the default of run_selection) or
#: "passes" (one Spark job per pass, SparkBackend)
EXECUTION = "resident"


def make_backend(df, d, method):
    """The backend ``run_selection`` would use for ``EXECUTION`` over cached blocks ``df``."""
    if EXECUTION == "resident":
        from vmi_spark.spark.executions.resident import ResidentBackend
        return ResidentBackend(df, d, STATES, CLASSES, method)
    from vmi_spark.spark.executions.passes import SparkBackend
    return SparkBackend(df, d, STATES, CLASSES)


def load():
    return round(os.getloadavg()[0], 2)


def save(res, path):
    """Write a benchmark's result dict as JSON to ``path`` (nothing when it is None)."""
    if path:
        with open(path, "w") as fh:
            json.dump(res, fh, indent=1)


def timed(fn, *a, **k):
    t = time.perf_counter()
    r = fn(*a, **k)
    return time.perf_counter() - t, r


def slots() -> int:
    return max(1, int(spark().sparkContext.defaultParallelism))


def chunk_rows_for(n: int, d: int, method: str = NAIVE) -> int:
    """The block size ``run_selection`` picks (about 4 blocks per task slot)."""
    from vmi_spark.spark.chunks.memory import chunk_rows_for as rows_for
    return rows_for(n, slots(), d, method, CLASSES)


def chunks_frame(codes: np.ndarray, y: np.ndarray, chunk_rows: int):
    """Encoded-blocks DataFrame with the schema of ``encode_chunks``, range-repartitioned
    over the task slots and cached like ``run_selection`` does; materialised."""
    from pyspark import StorageLevel
    from vmi_spark.spark.chunks.codes import CHUNK_SCHEMA
    d, n = codes.shape
    rows = []
    for b, s in enumerate(range(0, n, chunk_rows)):
        e = min(n, s + chunk_rows)
        rows.append((b, e - s, np.ascontiguousarray(codes[:, s:e]).tobytes(),
                     y[s:e].astype(np.uint16).tobytes()))
    import pandas as pd
    pdf = pd.DataFrame(rows, columns=["chunk_id", "n", "codes", "y"])
    # through Arrow: much faster than pickling Python rows for ~1 GB of block bytes
    df = (spark().createDataFrame(pdf, CHUNK_SCHEMA).repartitionByRange(slots(), "chunk_id")
          .persist(StorageLevel.MEMORY_AND_DISK))
    df.count()
    return df


def storage_info():
    """Spark's storage figures of every cached RDD: name, partitions, memory/disk bytes."""
    out = []
    for info in spark().sparkContext._jsc.sc().getRDDStorageInfo():
        out.append({"id": info.id(), "name": info.name(),
                    "cached_partitions": info.numCachedPartitions(),
                    "mem_bytes": int(info.memSize()), "disk_bytes": int(info.diskSize())})
    return out


def tables(codes, y):
    cnt = feature_counts(codes, y.astype(np.intp), STATES, CLASSES)
    n = int(cnt[0].sum())
    return cnt[0].sum(axis=0) / n, conditional(cnt), mutual_information(cnt)


def naive_ops(prior, cond, block, d):
    cands = np.ones(d, bool)
    cands[list(block)] = False
    return StepOps(NAIVE, prior, cond, cands, block=tuple(block), label=f"bench m={len(block)}")


class numpy_kernels:
    """Run the in-process kernels with the numpy loops (the fallback) inside the block."""

    names = core_kernels.LOOPS

    def __enter__(self):
        self.saved = {k: getattr(core_kernels, k) for k in self.names}
        for k in self.names:
            setattr(core_kernels, k, getattr(core_kernels, k + "_np"))

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            setattr(core_kernels, k, v)


def kernel_used(codes, y, block, cond, prior, chunk_rows) -> dict:
    """Which naive kernel ``naive_partials`` runs on each block (same decision rule)."""
    counts = {"pattern": 0, "per_row": 0}
    patterns = []
    for s in range(0, codes.shape[1], chunk_rows):
        c = codes[:, s:s + chunk_rows]
        n = c.shape[1]
        limit = max(1, n // (PATTERN_RATIO * STATES))
        _, post, rest = naive_posterior(c, tuple(block), cond, prior, limit)
        if not rest:
            counts["pattern"] += 1
            patterns.append(int(post.shape[0]))
        else:
            counts["per_row"] += 1
    kind = ("pattern" if counts["per_row"] == 0 else
            "per_row" if counts["pattern"] == 0 else "mixed")
    return {"kernel": kind, "blocks": counts, "max_patterns": max(patterns, default=None)}


def slope(xs, ts):
    return float(np.polyfit(np.log(xs), np.log(ts), 1)[0])


def _check(name, ok, res):
    res.setdefault("checks", {})[name] = bool(ok)
    if not ok:
        print(f"!! CHECK FAILED: {name}", flush=True)


# -- a. naive step throughput ------------------------------------------------------------

def bench_naive(scale, reps=3, ms=(1, 2, 3, 6)):
    from vmi_spark.spark.executions.passes import SparkBackend
    n, d = int(1_000_000 * scale), 200
    codes, y = make_table(n, d, STATES)
    yi = y.astype(np.intp)
    prior, cond, mi = tables(codes, y)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    br = chunk_rows_for(n, d)
    df = chunks_frame(codes, y, br)
    be = make_backend(df, d, NAIVE)
    mem = InMemoryBackend(codes, y, STATES, CLASSES, chunk_rows=br)
    res = {"rows": n, "features": d, "states": STATES, "classes": CLASSES, "block_rows": br,
           "blocks": -(-n // br), "load_start": load(), "steps": []}
    _check("feature_counts equal", np.array_equal(be.feature_counts(),
                                                  mem.feature_counts()), res)
    be.run(naive_ops(prior, cond, order[:1], d))  # warm-up (Python workers, first broadcast)
    np_times = []
    for m in ms:
        block = order[:m]
        ops = naive_ops(prior, cond, block, d)
        cells = n * int(ops.candidates.sum())
        times, sums = [], None
        for _ in range(reps):
            t, s = timed(be.run, ops)
            times.append(t)
            if sums is not None:
                _check(f"m={m} repeatable", np.array_equal(s, sums), res)
            sums = s
        t_mem, ref = timed(mem.run, ops)
        _check(f"m={m} spark == in-memory", np.array_equal(np.asarray(sums, dtype=np.int64), ref), res)
        with numpy_kernels():
            t_mem_np, ref_np = timed(mem.run, ops)
        _check(f"m={m} numpy kernels == {core_kernels.BACKEND} kernels",
               np.array_equal(ref_np, ref), res)
        row = {"m": m, "cells": cells, "spark_s": min(times), "spark_all_s": times,
               "inmemory_1core_s": t_mem, "inmemory_1core_numpy_kernels_s": t_mem_np,
               "load": load(),
               **kernel_used(codes, yi, block, cond, prior, br)}
        if m in (1, ms[-1]):
            post = row_posterior(codes, block, cond, prior)
            t_np, ref64 = timed(numpy_step, codes, yi, post, cond, ops.candidates)
            np_times.append(t_np)
            exact = (np.asarray(sums) + naive_own(feature_counts(codes, yi, STATES, CLASSES),
                                                  cond)).astype(np.float64) / SCALE / n
            c = ops.candidates
            row["numpy_s"] = t_np
            row["max_abs_diff_vs_float64"] = float(np.max(np.abs(exact[c] - ref64[c])))
            del post
        res["steps"].append(row)
        print(f"  naive m={m}: spark {min(times):.2f}s  in-mem {t_mem:.2f}s "
              f"(numpy loops {t_mem_np:.2f}s)  "
              f"{row['kernel']}  load {row['load']}", flush=True)
    t_np = min(np_times)
    res["numpy_step_s"] = t_np
    for row in res["steps"]:
        row["spark_cells_per_s"] = row["cells"] / row["spark_s"]
        row["numpy_cells_per_s"] = row["cells"] / t_np
        row["spark_vs_numpy"] = t_np / row["spark_s"]
        row["inmemory_vs_numpy"] = t_np / row["inmemory_1core_s"]
        row["spark_ns_per_cell"] = 1e9 * row["spark_s"] / row["cells"]
    res["numpy_ns_per_cell"] = 1e9 * t_np / res["steps"][0]["cells"]
    res["load_end"] = load()
    be.close()
    df.unpersist()
    return res


def bench_overhead(scale, m=6, reps=3):
    """Where a naive Spark step's time goes: the full ``SparkBackend.run``, a bare pass over
    the cached blocks (decode, emit one tiny row), and the kernel seconds summed inside the
    Python workers, against the same kernel in-process on one core."""
    import pyarrow as pa
    from vmi_spark.core.bound import naive_partials
    from vmi_spark.spark.executions.passes import SparkBackend
    from vmi_spark.spark.chunks.codes import decode_chunks as _chunks
    n, d = int(1_000_000 * scale), 200
    codes, y = make_table(n, d, STATES)
    prior, cond, mi = tables(codes, y)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    br = chunk_rows_for(n, d)
    df = chunks_frame(codes, y, br)
    be = SparkBackend(df, d, STATES, CLASSES)
    ops = naive_ops(prior, cond, order[:m], d)
    be.run(ops)

    def bare(batches):
        for rb in batches:
            k = sum(1 for _ in _chunks(rb, d))
            yield pa.RecordBatch.from_pydict({"k": pa.array([k], pa.int64())})

    def kernel(batches):
        for rb in batches:
            for _, _, c, yy in _chunks(rb, d):
                t = time.perf_counter()
                naive_partials(c, ops)
                yield pa.RecordBatch.from_pydict({"s": pa.array([time.perf_counter() - t])})

    res = {"rows": n, "features": d, "m": m, "block_rows": br, "load_start": load()}
    res["run_s"] = [timed(be.run, ops)[0] for _ in range(reps)]
    res["bare_pass_s"] = [timed(lambda: df.mapInArrow(bare, "k long").collect())[0] for _ in range(reps)]
    ks = []
    for _ in range(reps):
        t, rows = timed(lambda: df.mapInArrow(kernel, "s double").collect())
        ks.append({"wall_s": t, "kernel_sum_s": sum(r[0] for r in rows)})
    res["kernel_pass"] = ks
    mem = InMemoryBackend(codes, y, STATES, CLASSES, chunk_rows=br)
    res["inmemory_1core_s"] = [timed(mem.run, ops)[0] for _ in range(reps)]
    res["load_end"] = load()
    be.close()
    df.unpersist()
    return res


# -- b. pairwise vs naive ----------------------------------------------------------------

def bench_pairwise(scale, k=30):
    from vmi_spark.spark.executions.passes import SparkBackend
    n, d = int(250_000 * scale), 200
    codes, y = make_table(n, d, STATES)
    prior, cond, mi = tables(codes, y)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    res = {"rows": n, "features": d, "k": k, "load_start": load()}
    # naive: stateless passes over the cached blocks
    br = chunk_rows_for(n, d)
    df = chunks_frame(codes, y, br)
    nv = make_backend(df, d, NAIVE)
    nv.run(naive_ops(prior, cond, order[:1], d))  # warm-up
    naive_s, naive_sums = [], {}
    for m in range(1, k + 1):
        t, s = timed(nv.run, naive_ops(prior, cond, order[:m], d))
        naive_s.append(t)
        if m in (3, k):
            naive_sums[m] = np.asarray(s, dtype=np.int64)
    nv.close()
    df.unpersist()
    res.update(naive_block_rows=br, naive_step_s=naive_s, load_after_naive=load())
    # pairwise: the persisted state chain, with the count pass of the chosen feature
    brp = chunk_rows_for(n, d, PAIRWISE)
    dfp = chunks_frame(codes, y, brp)
    pw = make_backend(dfp, d, PAIRWISE)
    pw.feature_counts()
    tabs = {}
    count_s, pass_s, pw_sums, state_bytes = [], [], {}, None
    for m in range(1, k + 1):
        f = order[m - 1]
        tc, pc = timed(pw.pair_counts, f)
        tabs[f] = safe_log(pair_conditional(pc))
        block = order[:m]
        cands = np.ones(d, bool)
        cands[block] = False
        ops = StepOps(PAIRWISE, prior, cond, cands, block=tuple(block), pair_log_tables=dict(tabs))
        t, s = timed(pw.run, ops)
        count_s.append(tc)
        pass_s.append(t)
        if m in (3, k):
            pw_sums[m] = np.asarray(s, dtype=np.int64)
        if m == 3:
            info = storage_info()
            state_bytes = sum(r["mem_bytes"] + r["disk_bytes"] for r in info)
            res["storage_after_step3"] = info
        print(f"  pairwise m={m}: count {tc:.2f}s pass {t:.2f}s | naive {naive_s[m-1]:.2f}s "
              f"load {load()}", flush=True)
    pw.close()
    dfp.unpersist()
    step_s = [a + b for a, b in zip(count_s, pass_s)]
    res.update(pairwise_block_rows=brp, pairwise_count_s=count_s, pairwise_pass_s=pass_s,
               pairwise_step_s=step_s, cached_bytes_with_state=state_bytes,
               state_bytes_per_row_theory=8 * d * (CLASSES - 1) + 8 * CLASSES, load_end=load())
    # exactness against the in-memory core (fresh backends fold the whole block in)
    for m in (3, k):
        block = order[:m]
        ops = naive_ops(prior, cond, block, d)
        ref = InMemoryBackend(codes, y, STATES, CLASSES).run(ops)
        _check(f"naive m={m} spark == in-memory", np.array_equal(naive_sums[m], ref), res)
        mem = InMemoryBackend(codes, y, STATES, CLASSES)
        mtabs = {f: safe_log(pair_conditional(mem.pair_counts(f))) for f in block}
        _check(f"pair tables m={m} equal", all(np.array_equal(mtabs[f], tabs[f]) for f in block), res)
        ops = StepOps(PAIRWISE, prior, cond, ops.candidates, block=tuple(block), pair_log_tables=mtabs)
        ref = mem.run(ops)
        _check(f"pairwise m={m} spark == in-memory", np.array_equal(pw_sums[m], ref), res)
        del mem
    med = lambda xs: statistics.median(xs)  # noqa: E731
    res["ratios"] = {
        "pairwise_over_naive_m3": step_s[2] / naive_s[2],
        "pairwise_over_naive_m30": step_s[k - 1] / naive_s[k - 1],
        "pairwise_over_naive_median_m4_30": med([p / q for p, q in zip(step_s[3:], naive_s[3:])]),
        "naive_step30_over_step3": naive_s[k - 1] / naive_s[2],
        "pairwise_step30_over_step3": step_s[k - 1] / step_s[2],
        "pairwise_median_m26_30_over_median_m3_7": med(step_s[k - 5:]) / med(step_s[2:7]),
        "naive_median_m26_30_over_median_m4_8": med(naive_s[k - 5:]) / med(naive_s[3:8]),
    }
    return res


# -- c. fixed cost -----------------------------------------------------------------------

def bench_fixed(scale, reps=15):
    from vmi_spark.spark.executions.passes import SparkBackend
    codes, y = make_table(100, 5, STATES, informative=3)
    prior, cond, mi = tables(codes, y)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    df = chunks_frame(codes, y, chunk_rows_for(100, 5))
    res = {"rows": 100, "features": 5, "load_start": load()}
    be = make_backend(df, 5, NAIVE)
    ops = naive_ops(prior, cond, order[:2], 5)
    ref = InMemoryBackend(codes, y, STATES, CLASSES).run(ops)
    naive = []
    for _ in range(reps):
        t, s = timed(be.run, ops)
        naive.append(t)
    _check("naive spark == in-memory", np.array_equal(np.asarray(s, dtype=np.int64), ref), res)
    be.close()  # resident tasks hold every task slot until closed
    pw = make_backend(df, 5, PAIRWISE)
    tabs = {f: safe_log(pair_conditional(pw.pair_counts(f))) for f in order[:2]}
    pair = []
    for r in range(reps):
        # alternate the block so every pass is a real state pass (fold in, or rebuild)
        block = order[:1] if r % 2 == 0 else order[:2]
        cands = np.ones(5, bool)
        cands[block] = False
        t, _ = timed(pw.run, StepOps(PAIRWISE, prior, cond, cands, tuple(block),
                                     {f: tabs[f] for f in block}))
        pair.append(t)
    pw.close()
    counts = [timed(df.count)[0] for _ in range(reps)]
    res.update(naive_step_s=naive, pairwise_step_s=pair, bare_count_job_s=counts,
               naive_median_s=statistics.median(naive[1:]), naive_min_s=min(naive[1:]),
               pairwise_median_s=statistics.median(pair[1:]),
               bare_count_median_s=statistics.median(counts[1:]), load_end=load())
    df.unpersist()
    return res


# -- d. scaling --------------------------------------------------------------------------

def _scaling_point(n, d, ms=(2, 6), reps=3):
    from vmi_spark.spark.executions.passes import SparkBackend
    codes, y = make_table(n, d, STATES)
    prior, cond, mi = tables(codes, y)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    br = chunk_rows_for(n, d)
    df = chunks_frame(codes, y, br)
    be = make_backend(df, d, NAIVE)
    be.run(naive_ops(prior, cond, order[:1], d))  # warm-up
    out = {"rows": n, "features": d, "block_rows": br, "load": load()}
    for m in ms:
        ops = naive_ops(prior, cond, order[:m], d)
        ts = []
        for _ in range(reps):
            t, s = timed(be.run, ops)
            ts.append(t)
        out[f"m{m}_s"] = min(ts)
        out[f"m{m}_all_s"] = ts
        out[f"m{m}_kernel"] = kernel_used(codes, y.astype(np.intp), order[:m], cond, prior, br)["kernel"]
        if m == ms[-1]:
            ref = InMemoryBackend(codes, y, STATES, CLASSES, chunk_rows=br).run(ops)
            out[f"m{m}_equal_inmemory"] = bool(np.array_equal(np.asarray(s, dtype=np.int64), ref))
    be.close()
    df.unpersist()
    print(f"  scaling N={n} D={d}: " + " ".join(f"m{m} {out[f'm{m}_s']:.2f}s" for m in ms)
          + f" load {out['load']}", flush=True)
    return out


def bench_scaling(scale, ms=(2, 6)):
    res = {"N": [], "D": [], "load_start": load()}
    for n in (125_000, 250_000, 500_000, 1_000_000):
        res["N"].append(_scaling_point(int(n * scale), 200, ms))
    for d in (125, 250, 500, 1000):
        res["D"].append(_scaling_point(int(250_000 * scale), d, ms))
    for m in ms:
        res[f"slope_N_m{m}"] = slope([r["rows"] for r in res["N"]], [r[f"m{m}_s"] for r in res["N"]])
        res[f"slope_D_m{m}"] = slope([r["features"] for r in res["D"]], [r[f"m{m}_s"] for r in res["D"]])
    for r in res["N"] + res["D"]:
        _check(f"N={r['rows']} D={r['features']} spark == in-memory", r[f"m{ms[-1]}_equal_inmemory"], res)
    res["load_end"] = load()
    return res


# -- e. peers ----------------------------------------------------------------------------

class _Timeout(Exception):
    pass


def capped(limit, fn, *a, **k):
    """(seconds, result, finished): ``fn`` stopped (and its Spark jobs cancelled) after
    ``limit`` seconds; then the time is a lower bound and the result None."""
    import signal

    fired = []

    def on_alarm(signum, frame):
        fired.append(True)
        raise _Timeout()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(limit))
    t0 = time.perf_counter()
    try:
        r = fn(*a, **k)
        return time.perf_counter() - t0, r, True
    except Exception:  # py4j wraps the interrupted call in its own error
        if not fired:
            raise
        t = time.perf_counter() - t0
        signal.alarm(0)
        if _spark is not None:
            _spark.sparkContext.cancelAllJobs()
        return t, None, False
    except _Timeout:
        t = time.perf_counter() - t0
        if _spark is not None:
            _spark.sparkContext.cancelAllJobs()
        return t, None, False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _ours(df, codes, y, method, k):
    """run_selection on Spark, and the same selection by the in-memory core."""
    from vmi_spark.core.greedy import select_classic, select_vmi
    from vmi_spark.spark.select import run_selection
    try:
        t, run = timed(run_selection, df, "label", method=method, num_features=k,
                        execution=EXECUTION)
    except Exception as exc:
        return {"method": method, "error": repr(exc), "identical_to_inmemory": False}
    sel = run.selection
    names = run.plan.features
    idx = [int(names[i][1:]) for i in sel.selected]
    mem = InMemoryBackend(codes, y, STATES, CLASSES)
    tm, ref = timed(select_vmi if method in (NAIVE, PAIRWISE) else select_classic, mem, method, k)
    same = ([int(i) for i in ref.selected] == idx and list(ref.scores) == list(sel.scores))
    return {"method": method, "seconds": t, "prepare_s": run.prepare_seconds,
            "step_seconds": list(sel.step_seconds), "selected": idx,
            "inmemory_core_s": tm, "identical_to_inmemory": bool(same), "load": load()}


def capped_spark(limit, fn, *a, **k):
    """Like :func:`capped` for a function that runs Spark jobs: it runs in a thread, and
    after ``limit`` seconds its jobs are cancelled until it gives up (no signal reaches py4j)."""
    import threading
    box = {}

    def target():
        try:
            box["r"] = fn(*a, **k)
        except BaseException as exc:  # noqa: BLE001
            box["e"] = exc
    th = threading.Thread(target=target, daemon=True)
    t0 = time.perf_counter()
    th.start()
    th.join(limit)
    if not th.is_alive():
        if "e" in box:
            raise box["e"]
        return time.perf_counter() - t0, box["r"], True
    t = time.perf_counter() - t0
    for _ in range(120):
        spark().sparkContext.cancelAllJobs()
        th.join(1.0)
        if not th.is_alive():
            break
    return t, None, False


PEER_LIMIT_S = {"mrmr_spark": 420, "skfeature": 150}


def bench_peers(scale, k=20):
    import pandas as pd
    res = {"load_start": load()}
    # mrmr-selection's Spark backend: 20 of 100 features, 100k rows
    n1, d1 = int(100_000 * scale), 100
    codes, y = make_table(n1, d1, STATES, seed=1)
    df = spark().createDataFrame(arrow_table(codes, y).to_pandas()).cache()
    df.count()
    from mrmr import spark as mrmr_spark
    t, sel, done = capped_spark(PEER_LIMIT_S["mrmr_spark"], mrmr_spark.mrmr_classif, df, K=k,
                          target_column="label", show_progress=False)
    peer = {"seconds": t, "finished": done, "selected": [int(s[1:]) for s in sel or []],
            "load": load()}
    print(f"  mrmr.spark: {t:.1f}s", flush=True)
    ours = {}
    for m in ("mrmr", "jmi", "cmim", NAIVE):
        ours[m] = _ours(df, codes, y, m, k)
        print(f"  ours {m}: {ours[m].get('seconds')}s", flush=True)
        _check(f"mrmr.spark data: {m} spark == in-memory", ours[m]["identical_to_inmemory"], res)
    df.unpersist()
    inf = set(range(10))
    res["mrmr_spark"] = {"rows": n1, "features": d1, "k": k, "peer": peer, "ours": ours,
                         "speedup": {m: t / o["seconds"] for m, o in ours.items() if "seconds" in o},
                         "informative_in_first10": {
                             "peer": len(inf & set(peer["selected"][:10])),
                             **{m: len(inf & set(o.get("selected", [])[:10])) for m, o in ours.items()}}}
    # scikit-feature in memory: 20 of 200 features, 20k rows
    n2, d2 = int(20_000 * scale), 200
    codes, y = make_table(n2, d2, STATES, seed=2)
    X = np.ascontiguousarray(codes.T.astype(np.int64))
    from skfeature.function.information_theoretical_based import CMIM, JMI, MRMR
    peers = {}
    for name, fn in (("mrmr", MRMR.mrmr), ("jmi", JMI.jmi), ("cmim", CMIM.cmim)):
        t, sel, done = capped(PEER_LIMIT_S["skfeature"], fn, X, y.astype(np.int64), mode="index",
                              n_selected_features=k)
        peers[name] = {"seconds": t, "finished": done, "selected": [int(i) for i in sel if True]
                       if sel is not None else [], "load": load()}
        print(f"  skfeature {name}: {t:.1f}s", flush=True)
    df = spark().createDataFrame(arrow_table(codes, y).to_pandas()).cache()
    df.count()
    ours = {}
    for m in ("mrmr", "jmi", "cmim", NAIVE):
        ours[m] = _ours(df, codes, y, m, k)
        print(f"  ours {m}: {ours[m].get('seconds')}s", flush=True)
        _check(f"skfeature data: {m} spark == in-memory", ours[m]["identical_to_inmemory"], res)
    df.unpersist()

    def agree(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n
    res["skfeature"] = {
        "rows": n2, "features": d2, "k": k, "peer": peers, "ours": ours,
        "speedup": {m: peers[m]["seconds"] / ours[m]["seconds"] for m in peers if "seconds" in ours[m]},
        "speedup_vmi_naive_vs_each": {m: peers[m]["seconds"] / ours[NAIVE]["seconds"] for m in peers
                                      if "seconds" in ours[NAIVE]},
        "same_prefix_len": {m: agree(peers[m]["selected"], ours[m].get("selected", [])) for m in peers},
        "same_set": {m: len(set(peers[m]["selected"]) & set(ours[m].get("selected", []))) for m in peers},
        "informative_in_first10": {
            **{f"peer_{m}": len(inf & set(p["selected"][:10])) for m, p in peers.items()},
            **{m: len(inf & set(o.get("selected", [])[:10])) for m, o in ours.items()}}}
    res["load_end"] = load()
    return res


# -- f. end to end -----------------------------------------------------------------------

def _jvm_pid():
    return int(spark().sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def _hwm_kb(pid="self"):
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(("VmHWM", "VmRSS")) and line.startswith("VmHWM"):
                return int(line.split()[1])
    return None


def _reset_hwm(pid="self"):
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


E2E_PAIRWISE = True
#: e2e: run the vmi_naive part (False: pairwise only)
E2E_NAIVE = True
#: e2e: "auto" reads the Parquet files with pyarrow in the workers (the job's default for a
#: Parquet --input), "spark" with Spark's reader (the ML API on an arbitrary DataFrame)
E2E_READER = "auto"
#: e2e: an existing table written by data.write_mixed_parquet with the same rows (else a new one)
E2E_PATH = None


def bench_e2e(scale, k_naive=50, k_pair=20):
    from vmi_spark.spark.sources.arrow_source import parquet_source
    from vmi_spark.spark.select import run_selection
    n, d = int(1_000_000 * scale), 1000
    tmp = tempfile.mkdtemp(prefix="vmi-e2e-")
    path = E2E_PATH or os.path.join(tmp, "table.parquet")
    res = {"rows": n, "features": d, "reader": E2E_READER, "load_start": load()}
    try:
        if E2E_PATH is None:
            t, _ = timed(write_mixed_parquet, path, n, d)
            res["write_parquet_s"] = t
        res["parquet_bytes"] = os.path.getsize(path)
        s = spark()
        jpid = _jvm_pid()
        res["hwm_reset"] = _reset_hwm() and _reset_hwm(jpid)
        seen = {}

        def on_step(sel):
            if "storage" not in seen:
                seen["storage"] = storage_info()

        df = s.read.parquet(path)
        assert df.count() == n, f"{path} has {df.count()} rows, not {n}"

        def source(cols):  # what the job does for a Parquet --input (timed with the run)
            return parquet_source(df, cols) if E2E_READER == "auto" else None

        if not E2E_NAIVE:
            return _e2e_pairwise(res, df, source, jpid, k_pair)
        t, run = timed(lambda: run_selection(df, "label", method=NAIVE, num_features=k_naive, execution=EXECUTION,
                                             on_step=on_step, source=source(df.columns)))
        info = seen.get("storage", [])
        cached = sum(r["mem_bytes"] + r["disk_bytes"] for r in info)
        res["naive"] = {"k": k_naive, "seconds": t, "prepare_s": run.prepare_seconds,
                        "execution": run.execution,
                        "step_seconds": list(run.selection.step_seconds),
                        "selected": run.report()["selected"][:k_naive], "restarts": run.selection.restarts,
                        "storage": info, "cached_bytes": cached,
                        "bytes_per_cell": cached / (n * d) if cached else None,
                        "driver_python_peak_rss_mb": _hwm_kb() / 1024,
                        "driver_jvm_peak_rss_mb": _hwm_kb(jpid) / 1024, "load": load()}
        print(f"  e2e naive: {t:.1f}s load {load()}", flush=True)
        print("  " + json.dumps({k: v for k, v in res["naive"].items() if k != "storage"}), flush=True)
        print("  storage: " + json.dumps([{k: v for k, v in r.items() if k != "name"} for r in info]), flush=True)
        if not E2E_PAIRWISE:
            return res
        _e2e_pairwise(res, df, source, jpid, k_pair)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["load_end"] = load()
    return res


def _e2e_pairwise(res, df, source, jpid, k_pair):
    from vmi_spark.spark.select import run_selection
    _reset_hwm()
    _reset_hwm(jpid)
    seen = {}
    cols = ["label"] + [c for c in df.columns if c != "label"][:200]
    t, run = timed(lambda: run_selection(
        df, "label", features=cols[1:], method=PAIRWISE, num_features=k_pair, execution=EXECUTION,
        on_step=lambda sel: seen.setdefault("storage", storage_info())
        if len(sel.selected) == 3 else None, source=source(cols)))
    info = seen.get("storage", [])
    res["pairwise"] = {"k": k_pair, "features": 200, "seconds": t, "prepare_s": run.prepare_seconds,
                       "execution": run.execution,
                       "step_seconds": list(run.selection.step_seconds),
                       "selected": run.report()["selected"], "storage_at_step3": info,
                       "cached_bytes_with_state": sum(r["mem_bytes"] + r["disk_bytes"] for r in info),
                       "driver_python_peak_rss_mb": _hwm_kb() / 1024,
                       "driver_jvm_peak_rss_mb": _hwm_kb(jpid) / 1024, "load": load()}
    print(f"  e2e pairwise: {t:.1f}s load {load()}", flush=True)
    res["load_end"] = load()
    return res


# -- target 6: standalone cluster --------------------------------------------------------

def bench_cluster(scale, k=10):
    from vmi_spark.spark.select import run_selection
    from vmi_spark.testing.cluster import SparkCluster
    n, d = int(250_000 * scale), 200
    codes, y = make_table(n, d, STATES, seed=3)
    tmp = tempfile.mkdtemp(prefix="vmi-cluster-")
    path = os.path.join(tmp, "table.parquet")
    write_coded_parquet(path, codes, y)
    res = {"rows": n, "features": d, "k": k, "load_start": load()}

    def one(tag):
        out = {}
        for method in (NAIVE, PAIRWISE):
            df = spark().read.parquet(path)
            t, run = timed(run_selection, df, "label", method=method, num_features=k,
                           execution=EXECUTION)
            out[method] = {"seconds": t, "prepare_s": run.prepare_seconds, "execution": run.execution,
                           "step_seconds": list(run.selection.step_seconds),
                           "selected": run.report()["selected"], "scores": list(run.selection.scores),
                           "load": load()}
            print(f"  {tag} {method}: {t:.1f}s load {load()}", flush=True)
        return out
    try:
        stop_spark()
        spark(MASTER)
        res["local2"] = one("local[2]")
        stop_spark()
        with SparkCluster(num_workers=2, cores=1, memory="3g") as cluster:
            res["master_url"] = cluster.master_url
            spark(cluster.master_url)
            res["cluster"] = one("cluster")
            stop_spark()
    finally:
        stop_spark()
        shutil.rmtree(tmp, ignore_errors=True)
    for m in (NAIVE, PAIRWISE):
        a, b = res["local2"][m], res["cluster"][m]
        _check(f"{m} cluster == local[2]", a["selected"] == b["selected"] and a["scores"] == b["scores"], res)
        res[f"{m}_cluster_over_local"] = b["seconds"] / a["seconds"]
    res["load_end"] = load()
    return res


def bench_e2e_cluster(scale):
    """``e2e`` on a 2-worker standalone cluster on loopback: the driver JVM is then only the
    driver (in local mode it is also the executor that caches the blocks), so its peak RSS
    is the driver's."""
    global EXECUTOR_MEMORY
    from vmi_spark.testing.cluster import SparkCluster
    stop_spark()
    saved, EXECUTOR_MEMORY = EXECUTOR_MEMORY, "5g"
    try:
        with SparkCluster(num_workers=2, cores=1, memory="6g") as cluster:
            spark(cluster.master_url)
            res = bench_e2e(scale)
            res["master_url"] = cluster.master_url
            res["executor_memory"] = EXECUTOR_MEMORY
            stop_spark()
    finally:
        EXECUTOR_MEMORY = saved
        stop_spark()
    return res


BENCHES = {"naive": bench_naive, "overhead": bench_overhead, "pairwise": bench_pairwise, "fixed": bench_fixed,
           "scaling": bench_scaling, "peers": bench_peers, "e2e": bench_e2e,
           "cluster": bench_cluster, "e2e_cluster": bench_e2e_cluster}


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
            "platform": platform.platform(), "master": MASTER,
            "kernels": core_kernels.BACKEND, "execution": EXECUTION,
            "VMI_SPARK_KERNELS": os.environ.get("VMI_SPARK_KERNELS")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", nargs="+", default=["all"],
                    help="benchmarks to run: %s or all; NAME:SCALE overrides --scale" % " ".join(BENCHES))
    ap.add_argument("--scale", type=float, default=1.0, help="row-count multiplier")
    ap.add_argument("--out", default=None, help="write results JSON here")
    ap.add_argument("--peer-limit", type=float, nargs=2, default=None, metavar=("MRMR_SPARK", "SKFEATURE"),
                    help="stop a peer after this many seconds (its time is then a lower bound)")
    ap.add_argument("--no-e2e-pairwise", action="store_true", help="e2e: vmi_naive only")
    ap.add_argument("--no-e2e-naive", action="store_true", help="e2e: vmi_pairwise only")
    ap.add_argument("--e2e-reader", choices=("auto", "spark"), default="auto",
                    help="e2e: read the Parquet files with pyarrow in the workers (auto, the job's "
                         "default) or with Spark's reader")
    ap.add_argument("--execution", choices=("resident", "passes"), default="resident",
                    help="how steps run: resident tasks (run_selection's default) or one Spark "
                         "job per pass")
    ap.add_argument("--e2e-path", default=None,
                    help="e2e: reuse this table (from data.write_mixed_parquet, same rows)")
    a = ap.parse_args(argv)
    global E2E_PAIRWISE, E2E_NAIVE, E2E_READER, E2E_PATH, EXECUTION
    EXECUTION = a.execution
    E2E_PAIRWISE, E2E_NAIVE = not a.no_e2e_pairwise, not a.no_e2e_naive
    E2E_READER, E2E_PATH = a.e2e_reader, a.e2e_path
    if a.peer_limit:
        PEER_LIMIT_S.update(mrmr_spark=a.peer_limit[0], skfeature=a.peer_limit[1])
    names = list(BENCHES) if "all" in a.bench else a.bench
    for spec in names:
        if spec.partition(":")[0] not in BENCHES:
            ap.error(f"unknown benchmark {spec!r}")
    results = {"machine": machine(), "scale": a.scale, "argv": sys.argv,
               "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "results": {}}
    failed = []
    for spec in names:
        name, _, sc = spec.partition(":")
        scale = float(sc) if sc else a.scale
        print(f"== {name} at scale {scale} (load {load()})", flush=True)
        t0 = time.perf_counter()
        try:
            r = BENCHES[name](scale)
        except Exception as exc:  # keep the other benchmarks' results
            import traceback
            traceback.print_exc()
            r = {"error": repr(exc), "checks": {"completed": False}}
        r["scale"] = scale
        r["wall_s"] = time.perf_counter() - t0
        failed += [f"{name}: {c}" for c, ok in r.get("checks", {}).items() if not ok]
        results["results"][name] = r
        print(f"== {name} done in {r['wall_s']:.1f}s", flush=True)
        if a.out:
            with open(a.out, "w") as fh:
                json.dump(results, fh, indent=1, default=float)
    results["failed_checks"] = failed
    results["driver_python_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(results, fh, indent=1, default=float)
    stop_spark()
    if failed:
        print("FAILED CHECKS:\n  " + "\n  ".join(failed), flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
