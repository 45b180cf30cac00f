"""Issue 36: what stability runs and row weights cost.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python benchmarks/stability.py \\
        --out benchmarks/results/s36_stability.json

``stability``: a coded Parquet table (``--rows`` x ``--features``, 8 states, 2 classes,
``data.make_table``) through ``run_selection`` on local[2] (``--execution``, resident by
default) with ``stability = B`` for B in ``--runs`` (0 first): the prepare (read, plan,
encode, cache), the main selection's steps (its count pass included) and every stability
run (its count pass and K steps over half the rows), against the model
``total = prepare + steps + B x run``, with ``run`` about half a main selection (the rows
are halved; the fixed cost of each request or pass is not). The selections of B = 0 and
B > 0 are asserted the same.

``weights``: the in-memory step (``InMemoryBackend``, one thread, the blocks the executors
hold; vmi_naive with its posterior kept, vmi_pairwise's count and state passes) on the same
rows unweighted and with integer weights 1..4, ns per candidate cell; the weighted run is
asserted equal to the repeated table's at the first steps.

Every figure is the fastest of ``--reps`` and comes with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
from data import make_table, write_coded_parquet  # noqa: E402
from run import load, machine, save, spark  # noqa: E402

from vmi_spark.core import wide  # noqa: E402
from vmi_spark.core.bound import NAIVE, PAIRWISE, StepOps  # noqa: E402
from vmi_spark.core.inmemory import InMemoryBackend  # noqa: E402
from vmi_spark.core.tables import conditional, pair_conditional, safe_log  # noqa: E402


def bench_stability(rows: int, features: int, k: int, runs: list[int], execution: str,
                    method: str) -> dict:
    from vmi_spark.spark.select import run_selection

    codes, y = make_table(rows, features)
    out: dict = {"rows": rows, "features": features, "k": k, "method": method,
                 "execution": execution, "points": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.parquet")
        write_coded_parquet(path, codes, y)
        df = spark().read.parquet(path)
        base = None
        for b in runs:
            t = time.perf_counter()
            rep = run_selection(df, "label", num_features=k, method=method,
                                execution=execution, stability=b, max_categories=8).report()
            wall = time.perf_counter() - t
            if base is None:
                base = rep["selected"]
            assert rep["selected"] == base, "stability runs changed the main selection"
            phases = rep["phase_seconds"]
            prepare = rep["prepare_seconds"]
            steps = phases.get("steps", 0.0)
            st = rep.get("stability") or {}
            run_s = list(st.get("run_seconds") or [])
            point = {"runs": b, "wall_s": wall, "prepare_s": prepare, "steps_s": steps,
                     "stability_s": sum(run_s), "run_s_mean": statistics.mean(run_s) if run_s
                     else None, "run_over_steps": (statistics.mean(run_s) / steps
                                                   if run_s and steps else None),
                     "model_s": prepare + steps + sum(run_s), "index": st.get("index"),
                     "load": load()}
            out["points"].append(point)
            print(f"  B={b:3d} wall {wall:7.1f}s prepare {prepare:6.1f}s steps {steps:6.2f}s "
                  f"stability {sum(run_s):7.2f}s run/steps "
                  f"{point['run_over_steps'] or 0:.2f} index {st.get('index')} load {load()}",
                  flush=True)
    return out


def _pair_step(backend, prior, cond, order, m, tabs):
    f = order[m - 1]
    counts = backend.pair_counts(f)
    tabs[f] = safe_log(pair_conditional(counts))
    cands = np.ones(cond.shape[0], dtype=bool)
    cands[order[:m]] = False
    return backend.run(StepOps(PAIRWISE, prior, cond, cands, block=tuple(order[:m]),
                               pair_log_tables=dict(tabs)))


def bench_weights(rows: int, features: int, k: int, reps: int) -> dict:
    codes, y = make_table(rows, features)
    w = np.random.default_rng(1).integers(1, 5, rows)
    out: dict = {"rows": rows, "features": features, "k": k, "steps": []}
    backends = {"unweighted": lambda: InMemoryBackend(codes, y, 8, 2, chunk_rows=8192),
                "weighted": lambda: InMemoryBackend(codes, y, 8, 2, chunk_rows=8192, w=w)}
    res: dict = {}
    for name, make in backends.items():
        b = make()
        counts = b.feature_counts()
        prior = counts[0].sum(axis=0) / counts[0].sum()
        cond = conditional(counts)
        order = [int(i) for i in np.argsort(-counts.max(axis=(1, 2)), kind="stable")]
        times_naive, times_pair = [], []
        for m in range(1, k + 1):
            cands = np.ones(features, dtype=bool)
            cands[order[:m]] = False
            ops = StepOps(NAIVE, prior, cond, cands, block=tuple(order[:m]))
            best = min(_timed(lambda: b.run(ops)) for _ in range(reps))  # noqa: B023
            times_naive.append(best)
        pw = make()
        tabs: dict = {}
        for m in range(1, k + 1):
            t = time.perf_counter()
            _pair_step(pw, prior, cond, order, m, tabs)
            times_pair.append(time.perf_counter() - t)
        cells = rows * (features - k // 2)
        res[name] = {"naive_ns_per_cell": 1e9 * statistics.median(times_naive[2:]) / cells,
                     "pairwise_ns_per_cell": 1e9 * statistics.median(times_pair[2:]) / cells,
                     "load": load()}
        print(f"  {name:10s} naive {res[name]['naive_ns_per_cell']:.2f} pairwise "
              f"{res[name]['pairwise_ns_per_cell']:.2f} ns/cell load {load()}", flush=True)
    out.update(res)
    out["weighted_over_unweighted"] = {
        key: res["weighted"][key] / res["unweighted"][key]
        for key in ("naive_ns_per_cell", "pairwise_ns_per_cell")}
    # the weighted sums are the repeated rows' (a smaller table: the check, not the timing)
    small = 20000
    rep = np.repeat(np.arange(small), w[:small])
    a = InMemoryBackend(codes[:, :small], y[:small], 8, 2, w=w[:small])
    c = InMemoryBackend(np.ascontiguousarray(codes[:, rep]), y[rep], 8, 2)
    counts = a.feature_counts()
    assert np.array_equal(counts, c.feature_counts())
    ops = StepOps(NAIVE, counts[0].sum(axis=0) / counts[0].sum(), conditional(counts),
                  np.ones(features, dtype=bool), block=(0, 1, 2))
    assert list(wide.exact(a.run(ops))) == list(c.run(ops).astype(object))
    out["weighted_equals_repeated"] = True
    return out


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--runs", type=int, nargs="*", default=[0, 5, 10])
    ap.add_argument("--execution", default="resident")
    ap.add_argument("--method", default=NAIVE)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bench", nargs="*", default=["stability", "weights"])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    res: dict = {"load_start": load(), "machine": machine()}
    if "weights" in a.bench:
        print("weights (in memory, one thread):", flush=True)
        res["weights"] = bench_weights(a.rows, a.features, a.k, a.reps)
    if "stability" in a.bench:
        print(f"stability ({a.execution}, local[2]):", flush=True)
        res["stability"] = bench_stability(a.rows, a.features, a.k, a.runs, a.execution,
                                           a.method)
    res["load_end"] = load()
    save(res, a.out)


if __name__ == "__main__":
    main()
