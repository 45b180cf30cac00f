"""Cross-validation harness for the paper's real-data comparison (supplementary Table 5).

Protocol (paper, "Real-World Data"; Nguyen et al. KDD 2014):

* each dataset is discretized once with the label-free scheme of
  :mod:`vmi_spark.experiments.datasets` (equal-frequency 5 bins for columns with
  more than 5 distinct values, others kept); the classifier is trained on the
  same discretized codes ("all data are discretized");
* error rate averaged over K = 10..100 selected features (capped at d);
* 10-fold stratified CV when N >= 100, leave-one-out otherwise;
* linear SVM (``sklearn.svm.LinearSVC`` with its default C=1) except 3-NN for
  Madelon and Gisette;
* ``protocol="inside"``: features are selected on each training fold (no
  selection bias); ``protocol="once"``: selected once on all rows, as many
  published comparisons did;
* for each fold the error is averaged over the K grid; a method's entry is
  the mean and std over folds (in %);
* W/T/L: for VMI_naive and VMI_pairwise against each baseline, a paired t-test
  (``scipy.stats.ttest_rel``) on the per-fold errors at the 5% level; a
  significant difference is a win if VMI's mean is lower, else a loss.

Selection goes through a pluggable selector (:mod:`vmi_spark.experiments.selectors`);
each fold runs one selection with the largest K and uses its prefixes.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import datasets as D
from . import paper
from .selectors import ALL_METHODS, Selector, core_selector

KNN_DATASETS = {"madelon", "gisette"}


def k_grid(d: int, k_min: int = 10, k_max: int = 100, step: int = 1) -> list[int]:
    """K = k_min..k_max (step), capped at d."""
    ks = [k for k in range(k_min, k_max + 1, step) if k <= d]
    return ks or [d]


def make_classifier(name: str):
    if name in KNN_DATASETS:
        from sklearn.neighbors import KNeighborsClassifier

        return KNeighborsClassifier(n_neighbors=3)
    from sklearn.svm import LinearSVC

    return LinearSVC()


def folds(y: np.ndarray, n_folds: int | None = None, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """10-fold stratified for N >= 100, LOO otherwise; ``n_folds`` overrides both."""
    from sklearn.model_selection import LeaveOneOut, StratifiedKFold

    n = len(y)
    if n_folds is None and n < 100:
        return list(LeaveOneOut().split(np.zeros(n)))
    k = n_folds or 10
    min_class = int(np.bincount(y).min())
    if min_class < k:
        warnings.warn(f"smallest class has {min_class} rows < {k} folds", UserWarning)
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    return list(skf.split(np.zeros(n), y))


@dataclass
class DatasetResult:
    name: str
    shape: tuple[int, int, int]
    ks: list[int]
    num_folds: int
    protocol: str
    fold_errors: dict[str, np.ndarray] = field(default_factory=dict)  # method -> (folds,) error in [0, 1]
    select_seconds: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def mean_std(self, method: str) -> tuple[float, float]:
        e = 100 * self.fold_errors[method]
        return float(e.mean()), float(e.std(ddof=1)) if len(e) > 1 else 0.0


def _errors_for_prefixes(clf_name, Xtr, ytr, Xte, yte, order, ks) -> float:
    from sklearn.exceptions import ConvergenceWarning

    errs = []
    for k in ks:
        cols = order[:k]
        clf = make_classifier(clf_name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(Xtr[:, cols], ytr)
        errs.append(float(np.mean(clf.predict(Xte[:, cols]) != yte)))
    return float(np.mean(errs))


def evaluate(name: str, codes: np.ndarray, y: np.ndarray, methods=ALL_METHODS,
             ks: list[int] | None = None, selector: Selector = core_selector,
             protocol: str = "inside", n_folds: int | None = None, seed: int = 0,
             log=print) -> DatasetResult:
    """Cross-validated error of every method on one (already discretized) dataset."""
    if protocol not in ("inside", "once"):
        raise ValueError("protocol must be 'inside' or 'once'")
    t0 = time.perf_counter()
    n, d = codes.shape
    ks = ks or k_grid(d)
    ks = [k for k in ks if k <= d] or [d]
    kmax = max(ks)
    splits = folds(y, n_folds, seed)
    res = DatasetResult(name, (n, d, int(y.max()) + 1), ks, len(splits), protocol)
    for method in methods:
        t = time.perf_counter()
        sel_time = 0.0
        once = None
        if protocol == "once":
            s = time.perf_counter()
            once = selector(codes, y, method, kmax)
            sel_time += time.perf_counter() - s
        errs = []
        for tr, te in splits:
            if once is None:
                s = time.perf_counter()
                order = selector(codes[tr], y[tr], method, kmax)
                sel_time += time.perf_counter() - s
            else:
                order = once
            fold_ks = [k for k in ks if k <= len(order)] or [len(order)]
            errs.append(_errors_for_prefixes(name, codes[tr], y[tr], codes[te], y[te], order, fold_ks))
        res.fold_errors[method] = np.asarray(errs)
        res.select_seconds[method] = sel_time
        if log:
            m, sd = res.mean_std(method)
            log(f"  {name:11s} {method:13s} {m:5.1f} +- {sd:4.1f}  "
                f"(select {sel_time:.1f}s, total {time.perf_counter() - t:.1f}s)")
    res.seconds = time.perf_counter() - t0
    return res


def wtl(result: DatasetResult, vmi: str, baseline: str, alpha: float = 0.05) -> str:
    """'W', 'T' or 'L' of ``vmi`` against ``baseline`` by a paired t-test on the fold errors."""
    from scipy.stats import ttest_rel

    a, b = result.fold_errors[vmi], result.fold_errors[baseline]
    if len(a) < 2 or np.allclose(a, b):
        return "T"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = ttest_rel(a, b).pvalue
    if not np.isfinite(p) or p >= alpha:
        return "T"
    return "W" if a.mean() < b.mean() else "L"


def run(names, data_dir=None, methods=ALL_METHODS, ks=None, k_step: int = 1,
        selector: Selector = core_selector, protocol: str = "inside",
        n_folds: int | None = None, seed: int = 0, log=print) -> list[DatasetResult]:
    """Load, discretize and evaluate each dataset in ``names`` that is available."""
    have = set(D.available(data_dir))
    out = []
    for name in names:
        if name not in have:
            if log:
                log(f"note: {name} not available, skipped")
            continue
        X, y, info = D.load(name, data_dir)
        codes = D.discretize(X)
        grid = ks if ks is not None else k_grid(info["d"], step=k_step)
        out.append(evaluate(name, codes, y, methods, grid, selector, protocol, n_folds, seed, log))
    return out


def _fmt(mean: float, std: float) -> str:
    return f"{mean:.1f} ± ({std:.1f})"


def report_markdown(results: list[DatasetResult], methods=ALL_METHODS, title: str = "Reproduction",
                    meta: dict | None = None) -> str:
    """Markdown: ours vs the paper per dataset, and the W/T/L rows."""
    methods = list(methods)
    labels = [paper.METHOD_LABELS.get(m, m) for m in methods]
    lines = [f"# {title}", ""]
    for k, v in (meta or {}).items():
        lines.append(f"* {k}: {v}")
    lines += ["", "## Average CV error rate (%), ours", "",
              "| Dataset | N x d x L | folds | K | " + " | ".join(labels) + " |",
              "|---|---|---|---|" + "---|" * len(methods)]
    for r in results:
        cells = []
        best = min(r.mean_std(m)[0] for m in methods)
        for m in methods:
            mean, sd = r.mean_std(m)
            c = _fmt(mean, sd)
            cells.append(f"**{c}**" if np.isclose(mean, best) else c)
        kdesc = f"{r.ks[0]}..{r.ks[-1]} ({len(r.ks)})"
        lines.append(f"| {paper.DATASET_LABELS.get(r.name, r.name)} | {r.shape[0]} x {r.shape[1]} x {r.shape[2]} "
                     f"| {r.num_folds} | {kdesc} | " + " | ".join(cells) + " |")
    baselines = [m for m in methods if m not in ("vmi_naive", "vmi_pairwise")]
    for vmi in ("vmi_naive", "vmi_pairwise"):
        if vmi not in methods:
            continue
        cells = []
        for b in methods:
            if b not in baselines:
                cells.append("")
                continue
            marks = [wtl(r, vmi, b) for r in results]
            cells.append(f"{marks.count('W')}/{marks.count('T')}/{marks.count('L')}")
        lines.append(f"| W/T/L {paper.METHOD_LABELS[vmi]} | | | | " + " | ".join(cells) + " |")
    lines += ["", "## Paper (supplementary Table 5), same rows", "",
              "| Dataset | " + " | ".join(labels) + " |", "|---|" + "---|" * len(methods)]
    for r in results:
        row = paper.TABLE5.get(r.name, {})
        lines.append(f"| {paper.DATASET_LABELS.get(r.name, r.name)} | "
                     + " | ".join(_fmt(*row[m]) if m in row else "" for m in methods) + " |")
    for vmi in ("vmi_naive", "vmi_pairwise"):
        if vmi in methods:
            lines.append(f"| W/T/L {paper.METHOD_LABELS[vmi]} (all 17 rows) | "
                         + " | ".join("/".join(map(str, paper.WTL[vmi][m])) if m in paper.WTL[vmi] else ""
                                      for m in methods) + " |")
    lines += ["", "## Differences (ours - paper, percentage points)", "",
              "| Dataset | " + " | ".join(labels) + " |", "|---|" + "---|" * len(methods)]
    for r in results:
        row = paper.TABLE5.get(r.name, {})
        lines.append(f"| {paper.DATASET_LABELS.get(r.name, r.name)} | "
                     + " | ".join(f"{r.mean_std(m)[0] - row[m][0]:+.1f}" if m in row else "" for m in methods)
                     + " |")
    lines += ["", "## Timings", "", "| Dataset | total s | " + " | ".join(f"select {l} s" for l in labels) + " |",
              "|---|---|" + "---|" * len(methods)]
    for r in results:
        lines.append(f"| {r.name} | {r.seconds:.1f} | "
                     + " | ".join(f"{r.select_seconds.get(m, 0):.1f}" for m in methods) + " |")
    lines.append("")
    return "\n".join(lines)
