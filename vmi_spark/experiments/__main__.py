"""``python -m vmi_spark.experiments``: the paper's real-data comparison and synthetic experiment.

Full run, both protocols (hours on a 2-core machine)::

    python -m vmi_spark.experiments --protocol once --k-step 10 --out docs/reproduction_once.md
    python -m vmi_spark.experiments --protocol inside --k-step 10 --no-synthetic --out docs/reproduction_inside.md

Quick structural check (CI smoke test; numbers are NOT comparable to the paper)::

    python -m vmi_spark.experiments --quick --out /tmp/quick.md

Every selection of ``--selector spark`` (the default outside ``--quick``) runs through
``vmi_spark.spark.select.run_selection`` on one local SparkSession, reused for the whole
run (CV and synthetic). The synthetic experiment always selects on Spark.
Progress (dataset, method, fold, elapsed) goes to stdout; ``--json`` saves the raw
per-fold, per-K errors after every dataset.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from . import cv, tree
from . import datasets as D
from .selectors import ALL_METHODS, core_selector, local_spark, make_spark_selector

QUICK_DATASETS = ["lung", "promoter", "ionosphere"]
QUICK_KS = [2, 5, 10]
QUICK_FOLDS = 3
FIG_DATASETS = ["semeion", "madelon"]


def _log(msg: str) -> None:
    print(msg, flush=True)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m vmi_spark.experiments", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=D.DEFAULT_DATA_DIR)
    ap.add_argument("--quick", action="store_true",
                    help=f"{', '.join(QUICK_DATASETS)}; K={QUICK_KS}; {QUICK_FOLDS} folds; core selector; "
                         "a small synthetic run")
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
    ap.add_argument("--no-cv", action="store_true", help="only the synthetic experiment")
    ap.add_argument("--figures-dir", default=None,
                    help="write PNG figures here (default docs/figures for a full run, none for --quick)")
    ap.add_argument("--fig-datasets", default=",".join(FIG_DATASETS),
                    help="datasets plotted Fig. 4 style (error vs K), if evaluated")
    ap.add_argument("--encoding", choices=["paper", "job"], default="paper",
                    help="paper: 5 equal-frequency bins, columns with <= 5 values kept; job: "
                         "the job's default encoding (10 spike-aware quantile bins, columns "
                         "with <= 32 values kept)")
    ap.add_argument("--json", default=None, help="save the raw results (per fold, per K) here")
    ap.add_argument("--report-from", default=None,
                    help="comma-separated --json files of earlier runs (one protocol): merge them into one "
                         "report (rows in paper order, each marked with its selector) and exit")
    ap.add_argument("--out", required=True, help="the Markdown report to write")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.report_from:
        return merge_reports(args.report_from.split(","), args.out, args.methods.split(","),
                             args.figures_dir, args.fig_datasets.split(","))

    t0 = time.perf_counter()
    selector_kind = args.selector or ("core" if args.quick else "spark")
    shared = {"spark": None}

    def spark():
        if shared["spark"] is None:
            shared["spark"] = local_spark()
        return shared["spark"]

    if selector_kind == "core":
        selector = core_selector
    else:
        selector = make_spark_selector(spark())
    figdir = args.figures_dir if args.figures_dir is not None else (None if args.quick else "docs/figures")
    if figdir:
        os.makedirs(figdir, exist_ok=True)
    syn_text = ""
    # the synthetic experiment first (short; its report section goes after the CV tables)
    if not args.no_synthetic:
        syn_text = _synthetic_section(args, spark, figdir, t0)
    text = ""
    if not args.no_cv:
        text = _cv_section(args, argv, selector, selector_kind, figdir)
    text += syn_text
    text += f"\nTotal wall time: {time.perf_counter() - t0:.1f} s\n"
    with open(args.out, "w") as fh:
        fh.write(text)
    _log(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0


def _synthetic_section(args: argparse.Namespace, spark, figdir: str | None, t0: float) -> str:
    """The synthetic experiment (on Spark) and its report section."""
    ts = time.perf_counter()
    seeds = tuple(range(args.seeds or (1 if args.quick else 5)))
    _log(f"[{ts - t0:7.1f}s] synthetic tree model, seeds {list(seeds)} (Spark run_selection)")
    rows = tree.run_selection_seeds(seeds, spark=spark(), log=_log)
    table = tree.mi_table(20_000 if args.quick else 100_000, spark=spark())
    conts = [tree.continuation(0, estimator=e, spark=spark())
             for e in (("histogram",) if args.quick else ("histogram", "kde"))]
    fig = None
    if figdir:
        fig = os.path.join(figdir, "synthetic_bound.png")
        tree.plot_bound(conts, fig)
        _log(f"wrote {fig}")
    syn_text = "\n" + tree.report_markdown(
        rows, table=table, conts=conts,
        figure=os.path.relpath(fig, os.path.dirname(args.out) or ".") if fig else None)
    if args.quick:
        syn_text += "\n(QUICK: the I(x_i; y) estimates above use N = 20,000, not 100,000.)\n"
    if args.json:  # keep the synthetic section even if the CV part is interrupted
        with open(args.json + ".synthetic.md", "w") as fh:
            fh.write(syn_text)
    _log(f"[{time.perf_counter() - t0:7.1f}s] synthetic done in {time.perf_counter() - ts:.1f}s")
    return syn_text


def _cv_section(args: argparse.Namespace, argv: list[str] | None, selector, selector_kind: str,
                figdir: str | None) -> str:
    """The cross-validated comparison of the methods and its report (tables, figures)."""
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    names = [n.strip() for n in args.datasets.split(",")] if args.datasets else (
        QUICK_DATASETS if args.quick else D.NAMES)
    ks = QUICK_KS if args.quick else None
    n_folds = args.folds or (QUICK_FOLDS if args.quick else None)
    missing = [n for n in names if n not in D.available(args.data_dir)]
    for n in missing:
        _log(f"note: {n} not available under {args.data_dir}, skipped")
    saved: list[dict] = []

    def save(r):
        if args.json:
            saved.append(r.to_json())
            with open(args.json, "w") as fh:
                json.dump({"argv": argv if argv is not None else sys.argv[1:],
                           "selector": getattr(selector, "name", selector_kind),
                           "protocol": args.protocol, "results": saved}, fh)

    results = cv.run(names, args.data_dir, methods, ks, args.k_step, selector, args.protocol, n_folds,
                     log=_log, on_result=save, encoding=args.encoding)
    meta = _cv_meta(args, selector, selector_kind, n_folds, missing)
    text = cv.report_markdown(results, methods, "VMI feature selection: reproduction of Table 5", meta)
    if figdir:
        text += _cv_figures(args, results, methods, figdir)
    return text


def _cv_meta(args: argparse.Namespace, selector, selector_kind: str, n_folds: int | None,
             missing: list[str]) -> dict[str, str]:
    """How the comparison ran, for the report's header."""
    meta = {
        "mode": "QUICK (structure check only; few K, few folds - not comparable to the paper)"
                if args.quick else "full",
        "protocol": ("(a) selection inside each training fold" if args.protocol == "inside"
                     else "(b) selection once on all rows, then CV of the classifier only"),
        "selector": getattr(selector, "name", selector_kind),
        "K grid": "QUICK " + str(QUICK_KS) if args.quick else f"10..100 step {args.k_step}, capped at d",
        "folds": (f"{n_folds}-fold stratified" if n_folds
                  else "10-fold stratified (N >= 100), LOO (N < 100)"),
        "classifier": "LinearSVC (C=1) on the discretized codes; 3-NN for madelon/gisette",
        "discretization": ("equal-frequency 5 bins for columns with > 5 distinct values, others kept"
                           if args.encoding == "paper" else
                           "the job's default: 10 spike-aware equal-frequency bins for "
                           "columns with > 32 distinct values, others kept"),
        "skipped (missing data)": ", ".join(missing) or "none",
    }
    kinds = getattr(selector, "plan_kinds", None)
    if kinds:
        meta["Spark plan column kinds seen"] = ", ".join(sorted(kinds))
    return meta


def _cv_figures(args: argparse.Namespace, results, methods: list[str], figdir: str) -> str:
    """Fig. 4 style plots (error vs K) of the chosen datasets, and their report section."""
    figs = []
    for r in results:
        if r.name in args.fig_datasets.split(","):
            path = os.path.join(figdir, f"error_vs_k_{r.name}_{args.protocol}.png")
            cv.plot_error_vs_k(r, path, methods)
            figs.append(path)
            _log(f"wrote {path}")
    if not figs:
        return ""
    return ("\n## Error versus number of selected features (Fig. 4 style)\n\n"
            + "\n".join(f"![{os.path.basename(p)}]({os.path.relpath(p, os.path.dirname(args.out) or '.')})"
                        for p in figs) + "\n")


def merge_reports(paths: list[str], out: str, methods, figdir: str | None = None,
                  fig_datasets=()) -> int:
    """One Markdown report from the ``--json`` files of several runs of the same protocol."""
    by_name, notes, protocols = {}, {}, set()
    for p in paths:
        with open(p) as fh:
            blob = json.load(fh)
        argv_ = blob.get("argv") or []
        sel = blob.get("selector") or ("spark" if "spark" in argv_ and "--selector" in argv_ else "core")
        tag = "Spark" if sel.startswith("spark") else "core"
        for d in blob["results"]:
            r = cv.DatasetResult.from_json(d)
            protocols.add(r.protocol)
            by_name[r.name] = r
            notes[r.name] = tag
    results = [by_name[n] for n in D.NAMES if n in by_name]
    # a method missing from some dataset's run is shown as "not run" in that row
    methods = [m for m in methods if any(m in r.fold_errors for r in results)]
    meta = {"protocol": ", ".join(sorted(protocols)), "merged from": ", ".join(paths),
            "selector per row": "; ".join(f"{n}: {notes[n]}" for n in D.NAMES if n in notes)}
    text = cv.report_markdown(results, methods, "Merged results", meta, row_notes=notes)
    if figdir:
        os.makedirs(figdir, exist_ok=True)
        for r in results:
            if r.name in fig_datasets:
                path = os.path.join(figdir, f"error_vs_k_{r.name}_{r.protocol}.png")
                cv.plot_error_vs_k(r, path, methods, title=(
                    f"{r.name} ({r.num_folds} folds, selection "
                    f"{'inside each training fold' if r.protocol == 'inside' else 'once on all rows'}; "
                    f"{notes[r.name]} selector)"))
                text += f"\n![{r.name}]({os.path.relpath(path, os.path.dirname(out) or '.')})\n"
                _log(f"wrote {path}")
    with open(out, "w") as fh:
        fh.write(text)
    _log(f"wrote {out} ({len(results)} datasets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
