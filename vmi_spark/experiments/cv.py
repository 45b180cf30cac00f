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
from .selectors import ALL_METHODS, VMI_METHODS, Selector, core_selector

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
        warnings.warn(f"smallest class has {min_class} rows < {k} folds", UserWarning, stacklevel=2)
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
    k_errors: dict[str, np.ndarray] = field(default_factory=dict)  # method -> (folds, len(ks)), nan if K > order
    select_seconds: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def mean_std(self, method: str) -> tuple[float, float]:
        e = 100 * self.fold_errors[method]
        return float(e.mean()), float(e.std(ddof=1)) if len(e) > 1 else 0.0


    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "ks": list(self.ks),
                "num_folds": self.num_folds, "protocol": self.protocol, "seconds": self.seconds,
                "select_seconds": dict(self.select_seconds),
                "fold_errors": {m: v.tolist() for m, v in self.fold_errors.items()},
                "k_errors": {m: np.where(np.isnan(v), None, v).tolist() for m, v in self.k_errors.items()}}

    @classmethod
    def from_json(cls, d: dict) -> DatasetResult:
        r = cls(d["name"], tuple(d["shape"]), list(d["ks"]), d["num_folds"], d["protocol"])
        r.fold_errors = {m: np.asarray(v, dtype=float) for m, v in d["fold_errors"].items()}
        r.k_errors = {m: np.asarray([[np.nan if x is None else x for x in row] for row in v], dtype=float)
                      for m, v in d.get("k_errors", {}).items()}
        r.select_seconds = dict(d["select_seconds"])
        r.seconds = d["seconds"]
        return r


def _errors_for_prefixes(clf_name, Xtr, ytr, Xte, yte, order, ks) -> np.ndarray:
    """Test error of the classifier on the first K selected features, for each K in ``ks``."""
    from sklearn.exceptions import ConvergenceWarning

    errs = []
    for k in ks:
        if k > len(order):
            errs.append(np.nan)
            continue
        cols = order[:k]
        clf = make_classifier(clf_name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(Xtr[:, cols], ytr)
        errs.append(float(np.mean(clf.predict(Xte[:, cols]) != yte)))
    return np.asarray(errs)


def evaluate(name: str, codes: np.ndarray, y: np.ndarray, methods=ALL_METHODS,
             ks: list[int] | None = None, selector: Selector = core_selector,
             protocol: str = "inside", n_folds: int | None = None, seed: int = 0,
             log=print, t_start: float | None = None) -> DatasetResult:
    """Cross-validated error of every method on one (already discretized) dataset.

    ``log`` gets a progress line per fold (dataset, method, fold, elapsed since ``t_start``)
    and a summary line per method.
    """
    t_start = time.perf_counter() if t_start is None else t_start
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
        errs, kerrs = [], []
        for i, (tr, te) in enumerate(splits):
            if once is None:
                s = time.perf_counter()
                order = selector(codes[tr], y[tr], method, kmax)
                sel_time += time.perf_counter() - s
            else:
                order = once
            ke = _errors_for_prefixes(name, codes[tr], y[tr], codes[te], y[te], order, ks)
            if np.all(np.isnan(ke)):  # fewer selected than the smallest K: use them all
                ke[0] = _errors_for_prefixes(name, codes[tr], y[tr], codes[te], y[te], order, [len(order)])[0]
            kerrs.append(ke)
            errs.append(float(np.nanmean(ke)))
            if log and (len(splits) <= 20 or (i + 1) % 10 == 0 or i + 1 == len(splits)):
                log(f"    [{time.perf_counter() - t_start:7.1f}s] {name} {method} fold {i + 1}/{len(splits)}")
        res.fold_errors[method] = np.asarray(errs)
        res.k_errors[method] = np.asarray(kerrs)
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
        n_folds: int | None = None, seed: int = 0, log=print,
        on_result=None, encoding: str = "paper") -> list[DatasetResult]:
    """Load, discretize and evaluate each dataset in ``names`` that is available.

    ``encoding`` (:data:`vmi_spark.experiments.datasets.ENCODINGS`): ``paper`` (5
    equal-frequency bins, columns with at most 5 values kept) or ``job`` (the job's
    default encoding); the selectors and the classifier see the same codes either way.

    ``on_result(result)`` is called after every dataset (e.g. to save partial results).
    """
    t_start = time.perf_counter()
    have = set(D.available(data_dir))
    out = []
    for name in names:
        if name not in have:
            if log:
                log(f"note: {name} not available, skipped")
            continue
        X, y, info = D.load(name, data_dir)
        codes = D.ENCODINGS[encoding](X, y)
        grid = ks if ks is not None else k_grid(info["d"], step=k_step)
        if log:
            log(f"[{time.perf_counter() - t_start:7.1f}s] {name} {codes.shape} protocol={protocol}")
        out.append(evaluate(name, codes, y, methods, grid, selector, protocol, n_folds, seed, log, t_start))
        if on_result is not None:
            on_result(out[-1])
    return out


def plot_error_vs_k(result: DatasetResult, path: str, methods=None, title: str | None = None) -> str:
    """Fig. 4 style: mean CV error (%) over folds against the number of selected features."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [m for m in (methods or result.k_errors) if m in result.k_errors]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    styles = {"vmi_naive": dict(color="tab:red", lw=2.2, marker="o"),
              "vmi_pairwise": dict(color="darkred", lw=2.2, marker="s")}
    others = iter(["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:gray",
                   "tab:olive", "tab:cyan"])
    for m in methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            e = 100 * np.nanmean(result.k_errors[m], axis=0)
        style = styles.get(m) or dict(lw=1.2, marker=".", alpha=0.85, color=next(others))
        ax.plot(result.ks, e, label=paper.METHOD_LABELS.get(m, m), **style)
    ax.set_xlabel("number of selected features K")
    ax.set_ylabel("CV error rate (%)")
    proto = "selection inside each training fold" if result.protocol == "inside" else "selection once on all rows"
    ax.set_title(title or f"{paper.DATASET_LABELS.get(result.name, result.name)} "
                 f"({result.num_folds} folds, {proto})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _fmt(mean: float, std: float) -> str:
    return f"{mean:.1f} ± ({std:.1f})"


def report_markdown(results: list[DatasetResult], methods=ALL_METHODS, title: str = "Reproduction",
                    meta: dict | None = None, row_notes: dict | None = None) -> str:
    """Markdown: ours vs the paper per dataset, and the W/T/L rows.

    ``row_notes`` (dataset -> text, e.g. which selector produced the row) is shown after
    the dataset name in our table."""
    row_notes = row_notes or {}
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
        best = min(r.mean_std(m)[0] for m in methods if m in r.fold_errors)
        for m in methods:
            if m not in r.fold_errors:  # a method this dataset's run did not include
                cells.append("not run")
                continue
            mean, sd = r.mean_std(m)
            c = _fmt(mean, sd)
            cells.append(f"**{c}**" if np.isclose(mean, best) else c)
        kdesc = f"{r.ks[0]}..{r.ks[-1]} ({len(r.ks)})"
        note = f" ({row_notes[r.name]})" if r.name in row_notes else ""
        lines.append(f"| {paper.DATASET_LABELS.get(r.name, r.name)}{note} | {r.shape[0]} x {r.shape[1]} x {r.shape[2]} "
                     f"| {r.num_folds} | {kdesc} | " + " | ".join(cells) + " |")
    baselines = [m for m in methods if m not in VMI_METHODS]
    for vmi in VMI_METHODS:
        if vmi not in methods:
            continue
        cells = []
        for b in methods:
            if b not in baselines:
                cells.append("")
                continue
            marks = [wtl(r, vmi, b) for r in results
                     if vmi in r.fold_errors and b in r.fold_errors]
            cells.append(f"{marks.count('W')}/{marks.count('T')}/{marks.count('L')}")
        lines.append(f"| W/T/L {paper.METHOD_LABELS[vmi]} | | | | " + " | ".join(cells) + " |")
    lines += ["", "## Paper (supplementary Table 5), same rows", "",
              "| Dataset | " + " | ".join(labels) + " |", "|---|" + "---|" * len(methods)]
    for r in results:
        row = paper.TABLE5.get(r.name, {})
        lines.append(f"| {paper.DATASET_LABELS.get(r.name, r.name)} | "
                     + " | ".join(_fmt(*row[m]) if m in row else "" for m in methods) + " |")
    for vmi in VMI_METHODS:
        if vmi in methods:
            lines.append(f"| W/T/L {paper.METHOD_LABELS[vmi]} (all 17 rows) | "
                         + " | ".join("/".join(map(str, paper.WTL[vmi][m])) if m in paper.WTL[vmi] else ""
                                      for m in methods) + " |")
    lines += ["", "## Differences (ours - paper, percentage points)", "",
              "| Dataset | " + " | ".join(labels) + " |", "|---|" + "---|" * len(methods)]
    for r in results:
        row = paper.TABLE5.get(r.name, {})
        lines.append(f"| {paper.DATASET_LABELS.get(r.name, r.name)} | "
                     + " | ".join(f"{r.mean_std(m)[0] - row[m][0]:+.1f}"
                                  if m in row and m in r.fold_errors else "" for m in methods)
                     + " |")
    lines += ["", "## Alternative spread: std over the K grid of the fold-mean error (%)", "",
              "Same means as above; the spread is the std (ddof=1) over K of the error averaged over folds, "
              "one reading of the paper's much smaller ± values.", "",
              "| Dataset | " + " | ".join(labels) + " |", "|---|" + "---|" * len(methods)]
    for r in results:
        cells = []
        for m in methods:
            ke = r.k_errors.get(m)
            if ke is None or not len(ke):
                cells.append("")
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                per_k = 100 * np.nanmean(ke, axis=0)
            per_k = per_k[np.isfinite(per_k)]
            cells.append(f"{per_k.mean():.1f} ± ({per_k.std(ddof=1) if len(per_k) > 1 else 0.0:.1f})")
        lines.append(f"| {paper.DATASET_LABELS.get(r.name, r.name)} | " + " | ".join(cells) + " |")
    lines += ["", "## Timings", "", "| Dataset | total s | " + " | ".join(f"select {lab} s" for lab in labels) + " |",
              "|---|---|" + "---|" * len(methods)]
    for r in results:
        lines.append(f"| {r.name} | {r.seconds:.1f} | "
                     + " | ".join(f"{r.select_seconds[m]:.1f}" if m in r.select_seconds else ""
                                  for m in methods) + " |")
    lines.append("")
    return "\n".join(lines)
