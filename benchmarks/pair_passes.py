"""The pairwise score passes alone, per class count, in one process on one core.

    .venv/bin/python benchmarks/pair_passes.py --out benchmarks/results/s20_pair_passes.json

For 2 and 3 classes, times ``kernels.pair_fold_scores`` (the feature just chosen folded
into each candidate's sums and scored: one pass with two classes, a fold and then a score
with more) and ``kernels.pair_scores`` (the score alone) over ``--blocks`` blocks of
per-row state, each 200 features x 10,432 rows (two classes) or 5,216 rows (three: the
same bytes), 8 states, 192 candidates; the blocks together are far larger than the
caches, as the state of a real step is. Reports ns per candidate ratio (rows x candidates
x (classes - 1)), the fastest of ``--reps``, and the 1-minute load. Run it from two
checkouts in turn (``PYTHONPATH=<checkout>``) for an A/B: ``kernels`` is imported from
the first ``vmi_spark`` on the path.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import load, save  # noqa: E402

from vmi_spark.core import kernels  # noqa: E402


def measure(num_classes: int, blocks: int, reps: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    d, arity = 200, 8
    n = 10_432 // (num_classes - 1)  # the same bytes of state a block
    table = np.log(rng.random((d, arity, arity, num_classes)))
    codes = rng.integers(0, arity, (d, n)).astype(np.uint8)
    y = rng.integers(0, num_classes, n)
    post = rng.random((n, num_classes))
    post /= post.sum(axis=1, keepdims=True)
    cands = np.array([i for i in range(d) if i % 25])
    states = [rng.normal(0.0, 1.0, (d, n, num_classes - 1)) for _ in range(blocks)]
    kernels.pair_fold_scores(states[0].copy(), table, codes, codes[0], y, post, cands, 5)
    ratios = blocks * n * len(cands) * (num_classes - 1)
    out = {"classes": num_classes, "rows": n, "features": d, "blocks": blocks}
    for name in ("fold_scores", "scores"):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            for st in states:
                if name == "fold_scores":
                    kernels.pair_fold_scores(st, table, codes, codes[0], y, post, cands, 5)
                else:
                    kernels.pair_scores(st, post, y, cands, 5)
            times.append(time.perf_counter() - t)
        out[f"{name}_ns_per_ratio"] = 1e9 * min(times) / ratios
        print(f"{num_classes} classes: {name} {out[f'{name}_ns_per_ratio']:.3f} ns a ratio",
              flush=True)
    out["load"] = load()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", type=int, nargs="*", default=[2, 3])
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    res = {"kernels": kernels.__file__, "backend": kernels.BACKEND, "load_start": load(),
           "runs": [measure(c, a.blocks, a.reps) for c in a.classes]}
    res["load_end"] = load()
    if a.out:
        save(res, a.out)


if __name__ == "__main__":
    main()
