"""Issue 21, target 5: when the pairwise step scores per (pattern, x_i, y) cell, not per row.

One process, one thread: ``InMemoryBackend`` (the kernels the resident tasks run, block by
block) on ``--rows`` x ``--features`` of 2-, 3- and 8-state features, 2 classes
(``data.make_table``), blocks as ``memory.chunk_rows_for`` cuts them. For m = 1..K the
``vmi_pairwise`` step (the state pass: fold and score; the count pass is the same either
way) is timed three ways, fastest of ``--reps`` whole paths:

* ``cells``: ``Routes.pair_cell_ratio`` = 1, so the cells are scored whenever the block's
  patterns give at most one cell per row;
* ``rows``: the ratio so large that every row is scored (``kernels.pair_fold_scores``);
* ``default``: the ratio the package sets.

and reports ns per candidate row, with the cells of the first block at each m. The three
give the same integers (checked). ``bound.PAIR_CELL_RATIO`` is chosen from this table.

    .venv/bin/python benchmarks/pair_cells.py --out benchmarks/results/s19_pair_cells.json
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
from run import (  # noqa: E402
    CLASSES,
    PAIRWISE,
    chunk_rows_for,
    load,
    make_table,
    pair_conditional,
    safe_log,
    save,
)

from vmi_spark.core import bound  # noqa: E402
from vmi_spark.core.bound import StepOps, feature_counts  # noqa: E402
from vmi_spark.core.inmemory import InMemoryBackend  # noqa: E402
from vmi_spark.core.tables import conditional, mutual_information  # noqa: E402

MODES = {"cells": 1, "rows": 10**12, "default": bound.PAIR_CELL_RATIO}


def path_times(codes, y, states: int, k: int, ratio: int, block: int):
    """Seconds and integers of the pairwise steps m = 1..k at ``PAIR_CELL_RATIO = ratio``."""
    n, d = codes.shape[1], codes.shape[0]
    cnt = feature_counts(codes, y.astype(np.intp), states, CLASSES)
    prior, cond, mi = cnt[0].sum(axis=0) / n, conditional(cnt), mutual_information(cnt)
    order = [int(i) for i in np.argsort(-mi, kind="stable")]
    be = InMemoryBackend(codes, y, states, CLASSES, chunk_rows=block)
    tabs, secs, sums = {}, [], []
    for m in range(1, k + 1):
        f = order[m - 1]
        tabs[f] = safe_log(pair_conditional(be.pair_counts(f)))
        cands = np.ones(d, bool)
        cands[order[:m]] = False
        ops = StepOps(PAIRWISE, prior, cond, cands, block=tuple(order[:m]),
                      pair_log_tables=dict(tabs), routes=bound.Routes(pair_cell_ratio=ratio))
        t = time.perf_counter()
        sums.append(be.run(ops))
        secs.append(time.perf_counter() - t)
    return secs, sums, order


def measure(n: int, d: int, states: int, k: int, reps: int) -> dict:
    codes, y = make_table(n, d, states)
    block = chunk_rows_for(n, d, PAIRWISE)
    best: dict[str, list[float]] = {}
    sums: dict[str, list[np.ndarray]] = {}
    for _ in range(reps):
        for mode, ratio in MODES.items():  # alternating, so that load hits them alike
            secs, got, order = path_times(codes, y, states, k, ratio, block)
            best[mode] = [min(a, b) for a, b in zip(best.get(mode, secs), secs)]
            sums[mode] = got
    same = all(np.array_equal(a, b) for mode in MODES for a, b in zip(sums[mode], sums["rows"]))
    steps = []
    for m in range(1, k + 1):
        _, num, _, used = bound.block_patterns(codes[:, :block], tuple(order[:m]), states, block)
        row = {"m": m, "cells_first_block": num * states * CLASSES if used == m else None}
        for mode in MODES:
            row[f"{mode}_ns_per_row"] = 1e9 * best[mode][m - 1] / (n * (d - m))
        steps.append(row)
        print(f"  states {states} m={m:2d} cells {row['cells_first_block']} | "
              + " ".join(f"{mode} {row[f'{mode}_ns_per_row']:.2f}" for mode in MODES),
              flush=True)
    return {"states": states, "block_rows": block, "same_integers": same, "steps": steps,
            "load": load()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--states", type=int, nargs="+", default=[2, 3, 8])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    res = {"load_start": load(), "rows": a.rows, "features": a.features,
           "pair_cell_ratio": bound.PAIR_CELL_RATIO,
           "runs": [measure(a.rows, a.features, s, a.k, a.reps) for s in a.states]}
    res["load_end"] = load()
    print("same integers:", all(r["same_integers"] for r in res["runs"]))
    save(res, a.out)


if __name__ == "__main__":
    main()
