"""``python -m vmi_spark.experiments``: the paper's real-data comparison and synthetic experiment.

Full run (hours; not for a shared 2-core machine)::

    python -m vmi_spark.experiments --out docs/reproduction.md

Quick structural check (about a minute; numbers are NOT comparable to the paper)::

    python -m vmi_spark.experiments --quick --out /tmp/quick.md
"""

from __future__ import annotations

import argparse
import sys
import time

from . import cv, synthetic
from . import datasets as D
from .selectors import ALL_METHODS, core_selector, make_spark_selector

QUICK_DATASETS = ["lung", "promoter", "ionosphere"]
QUICK_KS = [2, 5, 10]
QUICK_FOLDS = 3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vmi_spark.experiments", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=D.DEFAULT_DATA_DIR)
    ap.add_argument("--quick", action="store_true",
                    help=f"{', '.join(QUICK_DATASETS)}; K={QUICK_KS}; {QUICK_FOLDS} folds; core selector")
    ap.add_argument("--protocol", choices=["inside", "once"], default="inside",
                    help="select inside each training fold (default) or once on all rows")
    ap.add_argument("--selector", choices=["core", "spark"], default=None,
                    help="default: spark for a full run, core for --quick")
    ap.add_argument("--datasets", default=None, help="comma-separated names (default: all available)")
    ap.add_argument("--methods", default=",".join(ALL_METHODS))
    ap.add_argument("--k-step", type=int, default=1, help="step of the K = 10..100 grid")
    ap.add_argument("--folds", type=int, default=None, help="override the 10-fold / LOO rule")
    ap.add_argument("--seeds", type=int, default=None, help="synthetic experiment seeds")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--out", default="docs/reproduction.md")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    selector_kind = args.selector or ("core" if args.quick else "spark")
    selector = core_selector if selector_kind == "core" else make_spark_selector()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.datasets:
        names = [n.strip() for n in args.datasets.split(",")]
    else:
        names = QUICK_DATASETS if args.quick else D.NAMES
    ks = QUICK_KS if args.quick else None
    n_folds = args.folds or (QUICK_FOLDS if args.quick else None)
    missing = [n for n in names if n not in D.available(args.data_dir)]
    for n in missing:
        print(f"note: {n} not available under {args.data_dir}, skipped")

    results = cv.run(names, args.data_dir, methods, ks, args.k_step, selector, args.protocol, n_folds)
    meta = {
        "mode": "QUICK (structure check only; few K, few folds - not comparable to the paper)"
                if args.quick else "full",
        "protocol": f"selection {'inside each training fold' if args.protocol == 'inside' else 'once on all rows'}",
        "selector": getattr(selector, "name", selector_kind),
        "K grid": "QUICK " + str(QUICK_KS) if args.quick else f"10..100 step {args.k_step}, capped at d",
        "folds": (f"{n_folds}-fold stratified" if n_folds else "10-fold stratified (N >= 100), LOO (N < 100)"),
        "classifier": "LinearSVC (C=1) on the discretized codes; 3-NN for madelon/gisette",
        "discretization": "equal-frequency 5 bins for columns with > 5 distinct values, others kept",
        "skipped (missing data)": ", ".join(missing) or "none",
    }
    if getattr(selector, "fallbacks", None):
        meta["core fallback (not in Spark run_selection)"] = ", ".join(sorted(selector.fallbacks))
    text = cv.report_markdown(results, methods, "VMI feature selection: reproduction of Table 5", meta)

    if not args.no_synthetic:
        seeds = range(args.seeds or (2 if args.quick else 5))
        use_spark = selector_kind == "spark"
        rows = synthetic.run_selection_seeds(tuple(seeds), use_spark=use_spark)
        text += "\n" + synthetic.report_markdown(rows)
    text += f"\nTotal wall time: {time.perf_counter() - t0:.1f} s\n"
    with open(args.out, "w") as fh:
        fh.write(text)
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
