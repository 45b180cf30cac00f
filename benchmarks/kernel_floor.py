"""Issue 21, target 5: the step kernels per cell per core, in memory on one core.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/kernel_floor.py \\
        --out benchmarks/results/s11_kernel_floor.json

One process, one thread: ``InMemoryBackend`` (the blocks the executors hold, taken in
turn; the same kernels the driver and the resident tasks run) on 250k rows x 200
features, 8 states, 2 classes (``data.make_table``), blocks as the Spark path cuts them.
For m = 1..K it times

* the ``vmi_naive`` step with the per-block posterior kept from step to step (what the
  driver and resident executions do) and rebuilt every step (the ``passes`` execution);
* the ``vmi_pairwise`` step: the count pass of the feature just chosen plus the state
  pass (fold and score), each rep from the previous step's state (restored in place
  before the rep, outside the timing).

and reports ns per candidate cell (rows x candidates) per core, the pairwise / naive ratio
(median over m = 6..K) and the 1-minute load. Both sides are the fastest of ``--reps``
(until session 20 the pairwise side was one run against the fastest naive one; that
ratio is still reported as ``pairwise_first_over_naive``: the first pairwise rep over the
fastest naive one). Every
kept-posterior step is checked equal, bit for bit, to the rebuilt one, and every pairwise
rep to the first. ``--cpu`` runs the same measurement in child processes
with numba compiling for another CPU (``NUMBA_CPU_NAME``, e.g. ``haswell`` for AVX2 code
on an AVX-512 machine), each with its own compile cache.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
from run import (  # noqa: E402
    CLASSES,
    NAIVE,
    PAIRWISE,
    STATES,
    chunk_rows_for,
    load,
    make_table,
    naive_ops,
    pair_conditional,
    safe_log,
    save,
    tables,
)

from vmi_spark.core import kernels  # noqa: E402
from vmi_spark.core.bound import StepOps  # noqa: E402
from vmi_spark.core.inmemory import InMemoryBackend  # noqa: E402


def cpu_facts() -> dict:
    flags: set[str] = set()
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    import numba
    return {"model": model, "avx2": "avx2" in flags, "avx512f": "avx512f" in flags,
            "numba": numba.__version__, "numba_cpu": os.environ.get("NUMBA_CPU_NAME", "host"),
            "kernels": kernels.BACKEND}


def measure(n: int, d: int, k: int, reps: int) -> dict:
    codes, y = make_table(n, d, STATES)
    prior, cond, mi = tables(codes, y)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    kept = InMemoryBackend(codes, y, STATES, CLASSES, chunk_rows=chunk_rows_for(n, d))
    fresh = InMemoryBackend(codes, y, STATES, CLASSES, chunk_rows=chunk_rows_for(n, d))
    pw = InMemoryBackend(codes, y, STATES, CLASSES,
                         chunk_rows=chunk_rows_for(n, d, PAIRWISE))
    kept.run(naive_ops(prior, cond, order[:8], d))  # compile every loop once
    kept.close()
    rows, tabs, same, same_pair = [], {}, True, True
    for m in range(1, k + 1):
        ops = naive_ops(prior, cond, order[:m], d)
        cells = n * int(ops.candidates.sum())
        t_kept, t_fresh = [], []
        before = [(st.rows, st.block, st.tables) for st in kept.kept_states("naive")]
        for _ in range(reps):  # each rep folds order[m - 1] into the previous step's state
            for st, (r, blk, tb) in zip(kept.kept_states("naive"), before):
                st.rows, st.block, st.tables = r, blk, tb
            t = time.perf_counter()
            a = kept.run(ops)
            t_kept.append(time.perf_counter() - t)
            fresh.close()
            t = time.perf_counter()
            b = fresh.run(ops)
            t_fresh.append(time.perf_counter() - t)
            same &= bool(np.array_equal(a, b))
        f = order[m - 1]
        snap = [(st.posterior.copy(), st.log_ratio.copy(), st.block, st.many_cells)
                for st in pw.kept_states("pairwise")] or None
        t_count_all, t_pass_all, outs = [], [], []
        for _ in range(reps):  # each rep folds f into the previous step's pairwise state
            if snap is None:
                pw.states.reset()
            else:
                for st, (post, ratio, blk, many) in zip(pw.kept_states("pairwise"), snap):
                    st.posterior[:] = post
                    st.log_ratio[:] = ratio
                    st.block, st.many_cells = blk, many
            t = time.perf_counter()
            counts = pw.pair_counts(f)
            t_count_all.append(time.perf_counter() - t)
            tabs[f] = safe_log(pair_conditional(counts))
            pops = StepOps(PAIRWISE, prior, cond, ops.candidates, block=tuple(order[:m]),
                           pair_log_tables=dict(tabs))
            t = time.perf_counter()
            outs.append(pw.run(pops))
            t_pass_all.append(time.perf_counter() - t)
        same_pair &= all(np.array_equal(outs[0], o) for o in outs[1:])
        t_count, t_pass = min(t_count_all), min(t_pass_all)
        first = t_count_all[0] + t_pass_all[0]
        row = {"m": m, "cells": cells,
               "naive_kept_s": min(t_kept), "naive_rebuilt_s": min(t_fresh),
               "pair_count_s": t_count, "pair_pass_s": t_pass, "load": load()}
        row["pairwise_first_over_naive"] = first / row["naive_kept_s"]
        for key in ("naive_kept_s", "naive_rebuilt_s", "pair_count_s", "pair_pass_s"):
            row[key.replace("_s", "_ns_per_cell")] = 1e9 * row[key] / cells
        row["pairwise_ns_per_cell"] = row["pair_count_ns_per_cell"] + row["pair_pass_ns_per_cell"]
        row["pairwise_over_naive"] = (t_count + t_pass) / row["naive_kept_s"]
        rows.append(row)
        print(f"  m={m:2d} naive kept {row['naive_kept_ns_per_cell']:.2f} rebuilt "
              f"{row['naive_rebuilt_ns_per_cell']:.2f} | pairwise count "
              f"{row['pair_count_ns_per_cell']:.2f} pass {row['pair_pass_ns_per_cell']:.2f} "
              f"ns/cell | ratio {row['pairwise_over_naive']:.2f} | load {row['load']}",
              flush=True)
    tail = [r for r in rows if r["m"] >= 6]
    med = statistics.median
    return {"rows": n, "features": d, "states": STATES, "classes": CLASSES, "k": k,
            "cpu": cpu_facts(), "steps": rows, "kept_equals_rebuilt": same,
            "pairwise_reps_equal": same_pair,
            "summary_m6_up": {
                "naive_kept_ns_per_cell": med(r["naive_kept_ns_per_cell"] for r in tail),
                "naive_rebuilt_ns_per_cell": med(r["naive_rebuilt_ns_per_cell"] for r in tail),
                "pairwise_ns_per_cell": med(r["pairwise_ns_per_cell"] for r in tail),
                "pairwise_over_naive": med(r["pairwise_over_naive"] for r in tail),
                "pairwise_first_over_naive": med(r["pairwise_first_over_naive"]
                                                 for r in tail)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=250_000)
    ap.add_argument("--features", type=int, default=200)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu", nargs="*", default=[],
                    help="also measure with numba compiling for these CPUs (child processes)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    res = {"load_start": load(), "host": measure(a.rows, a.features, a.k, a.reps)}
    for cpu in a.cpu:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CACHE_DIR=cache)
            out = os.path.join(cache, "child.json")
            print(f"numba for {cpu}:", flush=True)
            subprocess.run([sys.executable, __file__, "--rows", str(a.rows), "--features",
                            str(a.features), "--k", str(a.k), "--reps", str(a.reps),
                            "--out", out], env=env, check=True)
            with open(out) as fh:
                res[cpu] = json.load(fh)["host"]
    res["load_end"] = load()
    for name, r in res.items():
        if isinstance(r, dict):
            print(name, json.dumps(r["summary_m6_up"]), "kept == rebuilt:",
                  r["kept_equals_rebuilt"], "pairwise reps equal:", r["pairwise_reps_equal"])
    if a.out:
        save(res, a.out)


if __name__ == "__main__":
    main()
