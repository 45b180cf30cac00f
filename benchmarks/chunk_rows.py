"""Issue 21, target 3: the naive step of a wide table against the rows of its chunks.

One process, one thread: ``InMemoryBackend`` (the kernels the resident tasks run, chunk by
chunk) on ``--rows`` x D of 8-state features, 2 classes (``data.make_table``), for each
chunk size of ``--blocks``: the mean of the ten ``vmi_naive`` steps m = 1..10 (posterior
kept, as the resident tasks keep it), in ns per candidate cell. A wide table's chunks hold
few rows (``memory.chunk_rows_for``: at most 8 MiB a chunk, 256 to 279 rows at 30,000
columns), so whatever a step costs per candidate per chunk shows here, and not at the
200-column sizes of ``kernel_floor.py``. Also prints the chunk size ``run_selection``
picks for each D on two task slots.

    .venv/bin/python benchmarks/chunk_rows.py --dims 10000 30000 \\
        --blocks 256 279 288 832 838 --out benchmarks/results/s18_block_rows.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
from run import CLASSES, NAIVE, STATES, load, make_table, naive_ops, save, tables  # noqa: E402

from vmi_spark.core.inmemory import InMemoryBackend  # noqa: E402


def measure(n: int, d: int, chunk_rows: int, k: int = 10) -> dict:
    """Mean and every step time of m = 1..k, chunks of ``chunk_rows`` rows."""
    codes, y = make_table(n, d, STATES)
    prior, cond, mi = tables(codes, y)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    backend = InMemoryBackend(codes, y, STATES, CLASSES, chunk_rows=chunk_rows)
    backend.run(naive_ops(prior, cond, order[:1], d))  # compile, touch every chunk
    times, scores = [], []
    for m in range(1, k + 1):
        ops = naive_ops(prior, cond, order[:m], d)
        t = time.perf_counter()
        scores.append(backend.run(ops))
        times.append(time.perf_counter() - t)
    mean = float(np.mean(times))
    return {"d": d, "block_rows": chunk_rows, "blocks": len(backend.chunks),
            "step_mean_s": round(mean, 5), "ns_per_cell": round(1e9 * mean / (n * d), 3),
            "steps_s": [round(t, 5) for t in times], "load": load(),
            "sums": [int(s.sum()) for s in scores]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dims", type=int, nargs="+", default=[10_000, 30_000])
    ap.add_argument("--blocks", type=int, nargs="+", default=[256, 279, 288, 832, 838])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    try:
        from vmi_spark.spark.chunks.memory import chunk_rows_for
        picked = {d: chunk_rows_for(a.rows, 2, d, NAIVE, CLASSES) for d in a.dims}
    except ImportError:  # a checkout before session 18 (an A/B)
        picked = None
    res: dict = {"rows": a.rows, "load_start": load(), "runs": [], "picked": picked}
    print("block rows run_selection picks (2 slots):", res["picked"], flush=True)
    for d in a.dims:
        for b in a.blocks:
            r = measure(a.rows, d, b)
            res["runs"].append(r)
            print(f"D={d} chunks of {b} rows ({r['blocks']}): step {r['step_mean_s']:.4f} s, "
                  f"{r['ns_per_cell']:.3f} ns per cell, load {r['load']}", flush=True)
        same = {tuple(r["sums"]) for r in res["runs"] if r["d"] == d}
        print(f"D={d}: the same step sums for every chunk size: {len(same) == 1}", flush=True)
    res["load_end"] = load()
    if a.out:
        save(res, a.out)


if __name__ == "__main__":
    main()
