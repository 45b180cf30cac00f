"""Issue 21: the count passes of the driver execution on its threads.

One process: ``spark.driver.DriverBackend`` (a small table selected in the driver, its
blocks on a thread pool) on ``--rows`` x ``--features`` of 8-state features, 2 classes
(``data.make_table``), K = ``--k`` features by ``vmi_pairwise``, ``mrmr`` and ``jmi``
(their steps are count passes: n(x_i, x_f, y) of the feature just chosen). Each selection
runs twice per repetition, alternating: with the count passes summed block after block on
the calling thread (how ``InMemoryBackend`` counted before session 19) and mapped over the
blocks like the steps (``InMemoryBackend._summed``). The selections must be equal.

    .venv/bin/python benchmarks/driver_counts.py --out benchmarks/results/s19_driver_counts.json
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
from run import load, make_table, save  # noqa: E402

from vmi_spark.core import inmemory  # noqa: E402
from vmi_spark.core.greedy import select_classic, select_vmi  # noqa: E402
from vmi_spark.spark.executions.driver import DriverBackend  # noqa: E402

METHODS = ("vmi_pairwise", "mrmr", "jmi")
MAPPED = inmemory.InMemoryBackend._summed


def in_turn(self, count):
    """The count passes as before: every block on the calling thread, then one sum."""
    return np.sum([count(c, y) for c, y in self.chunks], axis=0)


def select(codes, y, method: str, k: int) -> tuple[float, list[int]]:
    be = DriverBackend(codes, y, 8, 2,
                       threads=2)
    try:
        t = time.perf_counter()
        sel = select_vmi(be, method, k) if method.startswith("vmi") else select_classic(be, method, k)
        return time.perf_counter() - t, list(sel.selected)
    finally:
        be.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--features", type=int, default=200)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    codes, y = make_table(a.rows, a.features, 8)
    select(codes, y, "vmi_pairwise", 2)  # compile every loop once
    res = {"rows": a.rows, "features": a.features, "k": a.k, "load_start": load(), "runs": []}
    best: dict[str, dict[str, float]] = {"in_turn": {}, "mapped": {}}
    chosen: dict[str, set] = {m: set() for m in METHODS}
    try:
        for _ in range(a.reps):
            for label, summed in (("in_turn", in_turn), ("mapped", MAPPED)):
                inmemory.InMemoryBackend._summed = summed
                for method in METHODS:
                    secs, sel = select(codes, y, method, a.k)
                    chosen[method].add(tuple(sel))
                    best[label][method] = min(best[label].get(method, secs), secs)
                    res["runs"].append({"counts": label, "method": method, "seconds": secs,
                                        "load": load()})
    finally:
        inmemory.InMemoryBackend._summed = MAPPED
    res["fastest"] = best
    res["same_selections"] = all(len(s) == 1 for s in chosen.values())
    res["load_end"] = load()
    for method in METHODS:
        print(f"{method}: in turn {best['in_turn'][method]:.2f} s, mapped "
              f"{best['mapped'][method]:.2f} s", flush=True)
    print("same selections:", res["same_selections"])
    save(res, a.out)


if __name__ == "__main__":
    main()
