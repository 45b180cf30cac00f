"""A scikit-learn selector running the VMI numpy core in memory.

:class:`VMIFeatureSelector` encodes ``X`` column by column with the rules of the
encoding plan (:mod:`vmi_spark.core.encoding`, shared with Spark) and runs the same greedy loop
(:func:`vmi_spark.core.greedy.select`, every method) on an
:class:`~vmi_spark.core.inmemory.ThreadedBackend` (the steps on the process's cores). For the same table and
parameters it selects the same features, with the same scores, as
:class:`vmi_spark.VMISelector` on Spark (up to tables larger than
:data:`~vmi_spark.core.encoding.SAMPLE_ROWS` rows, where Spark places the bin edges on
a hashed sample).

scikit-learn is an optional dependency (``pip install "vmi_spark[sklearn]"``); it is
imported only when this module is.
"""

from __future__ import annotations

import datetime as _dt
import logging
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

try:
    from sklearn.base import BaseEstimator
    from sklearn.feature_selection import SelectorMixin
    from sklearn.utils import _safe_indexing
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted
except ImportError as exc:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError(
        "vmi_spark.sklearn needs scikit-learn: pip install 'vmi_spark[sklearn]' "
        "(or pip install scikit-learn)") from exc

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    _validate_data = None

from .core import kernels
from .core.binning import Binning
from .core.encoding import (
    ColumnPlan,
)
from .core.encoding import encode_column as _encode_typed
from .core.greedy import Selection
from .core.inmemory import ThreadedBackend
from .core.planning import (
    BOOLEAN,
    FLOATING,
    INTEGER,
    STRING,
    Planned,
    TableRows,
    ValueType,
    build_plan,
    check_fits,
    suggest_name,
)
from .core.report_schema import SelectionReport
from .core.summary import selection_report
from .errors import phrased
from .params import (
    SPEC,
    Settings,
    check,
    default,
)
from .progress import StepLogger
from .run import run_planned

__all__ = ["VMIFeatureSelector", "column_values", "encode_column", "plan_and_encode"]

log = logging.getLogger("vmi_spark")

#: spec key of each constructor parameter
_SKLEARN_KEYS = {p.sklearn: p.key for p in SPEC if p.sklearn is not None}


# ---------------------------------------------------------------------------
# Encoding (the rules of vmi_spark.core.encoding, on canonical numpy columns)
# ---------------------------------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, (numbers.Number, np.bool_)) and not isinstance(v, complex)


def _missing(values: Any) -> np.ndarray:
    """Which values of a 1-d array are missing (NaN, None); whole-number and boolean
    arrays have none, float arrays are checked at once, others value by value."""
    arr = np.asarray(values)
    if arr.dtype.kind in "biu":
        return np.zeros(arr.shape[0], dtype=bool)
    if arr.dtype.kind == "f":
        return np.isnan(arr)
    return np.fromiter((_is_missing(v) for v in arr.astype(object)), dtype=bool,
                       count=arr.shape[0])


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(v, (float, np.floating)) and bool(np.isnan(v))


def _canonical(column: Any) -> tuple[np.ndarray, str]:
    """One input column as ``(float64 values with NaN, "double")`` or
    ``(object array of str/None, "string")``, as Spark's ``prepare_frame`` types it:
    numbers, booleans, dates, timestamps and durations become doubles (-0.0 as 0.0;
    :func:`column_values`), everything else strings."""
    values, vtype = column_values(column)
    return values, vtype.kind


_TIME_UNITS = {"M": "timestamp_ntz", "m": "interval"}


def _micros(arr: np.ndarray) -> np.ndarray:
    """float64 microseconds of a numpy datetime64 or timedelta64 array (NaT as NaN;
    finer units floored to the microsecond, as Spark stores them)."""
    kind = "datetime64[us]" if arr.dtype.kind == "M" else "timedelta64[us]"
    out = arr.astype(kind).astype(np.int64).astype(np.float64)
    out[np.isnat(arr)] = np.nan
    return out


def _objects(items: list[Any]) -> tuple[np.ndarray, ValueType] | None:
    """Python dates, datetimes or timedeltas as numbers of their unit, else None."""
    present = [v for v in items if not _is_missing(v)]
    if not present:
        return None
    kinds = {type(v) for v in present}
    if all(issubclass(k, _dt.datetime) for k in kinds):
        aware = {v.tzinfo is not None for v in present}
        if len(aware) > 1:
            return None
        unit = "timestamp" if aware.pop() else "timestamp_ntz"
        epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc if unit == "timestamp" else None)
        return np.array([np.nan if _is_missing(v) else (v - epoch) // _dt.timedelta(microseconds=1)
                         for v in items], dtype=np.float64), ValueType("double", unit=unit)
    if all(issubclass(k, _dt.date) and not issubclass(k, _dt.datetime) for k in kinds):
        return np.array([np.nan if _is_missing(v) else (v - _dt.date(1970, 1, 1)).days
                         for v in items], dtype=np.float64), ValueType("double", unit="date")
    if all(issubclass(k, _dt.timedelta) for k in kinds):
        return np.array([np.nan if _is_missing(v) else v // _dt.timedelta(microseconds=1)
                         for v in items], dtype=np.float64), ValueType("double", unit="interval")
    return None


def column_values(column: Any) -> tuple[np.ndarray, ValueType]:
    """One input column as its values and :class:`~vmi_spark.core.planning.ValueType`:
    float64 (NaN missing, -0.0 as 0.0) for numbers, booleans (0, 1), dates (days),
    timestamps and durations (microseconds; a time zone means UTC instants, none a wall
    clock); an object array of ``str`` (None missing) for anything else. These are the
    numbers the Spark readers give the same values (:mod:`vmi_spark.core.units`)."""
    if hasattr(column, "dtype") and hasattr(column, "to_numpy") and hasattr(column, "iloc"):
        import pandas as pd  # a pandas Series

        dt = column.dtype
        if pd.api.types.is_bool_dtype(dt):
            return column.to_numpy(dtype=np.float64, na_value=np.nan) + 0.0, BOOLEAN
        if pd.api.types.is_numeric_dtype(dt) and not pd.api.types.is_complex_dtype(dt):
            vt = FLOATING if pd.api.types.is_float_dtype(dt) else INTEGER
            return column.to_numpy(dtype=np.float64, na_value=np.nan) + 0.0, vt
        if isinstance(dt, pd.DatetimeTZDtype):
            utc = column.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
            return _micros(utc), ValueType("double", unit="timestamp")
        if pd.api.types.is_datetime64_dtype(dt) or pd.api.types.is_timedelta64_dtype(dt):
            arr = column.to_numpy()
            return _micros(arr), ValueType("double", unit=_TIME_UNITS[arr.dtype.kind])
        column = column.to_numpy(dtype=object)
    arr = np.asarray(column)
    if arr.dtype.kind == "b":
        return arr.astype(np.float64), BOOLEAN
    if arr.dtype.kind in "iu":
        return arr.astype(np.float64), INTEGER
    if arr.dtype.kind == "f":
        return arr.astype(np.float64) + 0.0, FLOATING
    if arr.dtype.kind in "Mm":
        return _micros(arr), ValueType("double", unit=_TIME_UNITS[arr.dtype.kind])
    if arr.dtype.kind in "US":
        return np.array([str(v) for v in arr], dtype=object), STRING
    items = list(arr.tolist())
    present = [v for v in items if not _is_missing(v)]
    if present and all(isinstance(v, (bool, np.bool_)) for v in present):
        return np.array([np.nan if _is_missing(v) else float(v) for v in items]), BOOLEAN
    if all(_is_number(v) for v in present):
        floating = any(isinstance(v, (float, np.floating)) for v in present)
        return (np.array([np.nan if _is_missing(v) else float(v) for v in items],
                         dtype=np.float64) + 0.0, FLOATING if floating else INTEGER)
    temporal = _objects(items)
    if temporal is not None:
        return temporal
    return np.array([None if _is_missing(v) else str(v) for v in items], dtype=object), STRING


#: most magnitude of an integer that is exact as a double (every smaller one is too)
_EXACT_INTEGER = 2**53


def _exact_integers(column: Any) -> np.ndarray | None:
    """A column of plain integers (a numpy integer array, or a pandas Series of a numpy
    integer dtype; not nullable ones) as its own contiguous integer array when every
    value is exact as a double, else None.

    Such a column goes to the planner as the Spark readers give an integer column, typed,
    not widened to float64 first (:func:`column_values`): the codes and the plan are the
    same (every number is read as the double nearest to it, exact here), and the integer
    paths of the statistics and the encoding are cheaper (200k x 200 int32: 0.7 s to
    plan and code, against 1.1-1.7 s as doubles, one-off timings).
    """
    arr = column.to_numpy() if hasattr(column, "iloc") and hasattr(column, "dtype") else column
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "iu" or arr.ndim != 1:
        return None
    if arr.dtype.itemsize == 8 and len(arr) and (
            int(arr.max()) > _EXACT_INTEGER or int(arr.min()) < -_EXACT_INTEGER):
        return None
    return np.ascontiguousarray(arr)


#: rows of a row-major integer ``X`` turned feature-major at a time (:func:`_feature_major`)
_STRETCH_ROWS = 2048


def _feature_major(X: Any, keep: list[int]) -> np.ndarray | None:
    """The columns ``keep`` of a 2-d numpy integer array that is not column-major, as one
    (len(keep), n) array of the same dtype filled a stretch of rows at a time; None for
    any other input.

    A column of a row-major array is a strided gather: copying the columns one at a time
    reads the whole array once per column (200k x 200 int32: 0.2-0.8 s, against 0.1 s a
    stretch of rows at a time). The values are the same, so are the codes.
    """
    if not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype.kind not in "iu" \
            or X.flags.f_contiguous:
        return None
    every = len(keep) == X.shape[1]
    out = np.empty((len(keep), X.shape[0]), dtype=X.dtype)
    for s in range(0, X.shape[0], _STRETCH_ROWS):
        rows = X[s:s + _STRETCH_ROWS]
        out[:, s:s + _STRETCH_ROWS] = (rows if every else rows[:, keep]).T
    return out


def encode_column(values: np.ndarray, col: ColumnPlan) -> np.ndarray:
    """uint8 codes of one canonical column by its plan
    (:func:`vmi_spark.core.encoding.encode_column`, as on Spark)."""
    if col.dtype == "double":  # -0.0 as 0.0: Arrow's index_in tells them apart
        return _encode_typed(pa.array(np.asarray(values, dtype=np.float64) + 0.0), col)
    return _encode_typed(pa.array(values, type=pa.string()), col)


def _plan_and_code(frame: Any, X: Any, y: Any, names: list[str], keep: list[int],
                   settings: Settings, sample_weight: np.ndarray | None = None
                   ) -> tuple[Planned, np.ndarray, np.ndarray, np.ndarray | None]:
    """The plan of the columns ``keep`` of ``X`` for target ``y`` and their codes (and the
    rows' weight units), by the planner of the Spark path
    (:func:`vmi_spark.core.planning.build_plan` over the rows in memory,
    :class:`~vmi_spark.core.planning.TableRows`): every row is the sample."""
    label_values, label_type = column_values(np.asarray(y))
    arrays, types = [], {}
    by_feature = _feature_major(X, keep) if frame is None else None
    for i, (name, j) in enumerate(zip(names, keep)):
        column = (frame.iloc[:, j] if frame is not None
                  else by_feature[i] if by_feature is not None else X[:, j])
        ints = _exact_integers(column)
        if ints is not None:  # typed, as the Spark readers give it (the same codes)
            arrays.append(pa.array(ints))
            types[name] = INTEGER
            continue
        values, vtype = column_values(column)
        arrays.append(pa.array(values, type=pa.string() if vtype.kind == "string"
                               else pa.float64(), from_pandas=True))
        types[name] = vtype
    label_arr = pa.array(label_values, type=pa.string() if label_type.kind == "string"
                         else pa.float64(), from_pandas=True)
    if sample_weight is not None:
        arrays.append(pa.array(sample_weight, type=pa.float64()))
    batch = pa.RecordBatch.from_arrays([label_arr, *arrays],
                                       names=[f"_c{i}" for i in range(len(arrays) + 1)])
    weight_col = None if sample_weight is None else ""
    rows = TableRows(lambda: iter([batch]), names, batch.num_rows, sample_all=True,
                     weight_col=weight_col)
    planned = build_plan("y", label_type, names, types, settings, rows, weight_col)
    if planned.plan.weights is not None:
        planned.plan.weights["column"] = "sample_weight"
    codes, y_codes, w = rows.codes(planned.plan, planned.skip_cols)
    return planned, codes, y_codes, w


def plan_and_encode(X: Any, y: Any, **params: Any) -> tuple[Planned, np.ndarray]:
    """The plan :meth:`VMIFeatureSelector.fit` makes of the columns of ``X`` for the label
    ``y`` (the planner of every front end, :func:`vmi_spark.core.planning.build_plan`) and
    the (N, d) uint8 codes of its rows, without selecting. ``params`` are the selector's
    (``num_bins``, ``max_categories``, ``bias_correction``, ...)."""
    selector = VMIFeatureSelector(**params)
    coded = selector._coded(X, y, None, selector._check_params(), every=True)
    return coded.planned, np.ascontiguousarray(coded.codes.T)


def _labelled_rows(X: Any, y: Any, sample_weight: Any) -> tuple[Any, Any, Any]:
    """``X``, ``y`` and ``sample_weight`` without the rows whose label is missing (NaN,
    None), with a warning saying how many, as the job drops them; a ``y`` without any
    label is a ValueError (a ``y`` of another shape is left to the input checks)."""
    if y is None:
        return X, y, sample_weight
    labels = np.asarray(y)
    if labels.ndim != 1 or not len(labels):
        return X, y, sample_weight
    unlabelled = _missing(labels)
    if not unlabelled.any():
        return X, y, sample_weight
    if unlabelled.all():
        raise ValueError("y has no labelled rows (every label is NaN or None)")
    warnings.warn(f"dropped {int(unlabelled.sum())} rows with a missing label (NaN or None) "
                  "in y", UserWarning, stacklevel=3)
    rows = np.flatnonzero(~unlabelled)
    weights = None if sample_weight is None else _safe_indexing(sample_weight, rows)
    kept = labels[rows]
    if kept.dtype == object:  # the labels' own type once the Nones are gone (ints, strings)
        kept = np.asarray(kept.tolist())
    return _safe_indexing(X, rows), kept, weights


def _sample_weight(sample_weight: Any, n_rows: int) -> np.ndarray | None:
    """``sample_weight`` as float64 (n_rows,), or None; a non-numeric or misshapen one is
    a one-line ValueError (the values themselves are checked with the rows)."""
    if sample_weight is None:
        return None
    arr = np.asarray(sample_weight)
    if arr.dtype.kind not in "biuf" or arr.dtype.kind == "b":
        raise ValueError(f"sample_weight must hold numbers, not {arr.dtype}")
    if arr.shape != (n_rows,):
        raise ValueError(f"sample_weight must have shape ({n_rows},) like X's rows, "
                         f"got {arr.shape}")
    return arr.astype(np.float64)


# ---------------------------------------------------------------------------
# The selector
# ---------------------------------------------------------------------------

@dataclass
class _Coded:
    """What :meth:`VMIFeatureSelector._coded` gives: the plan and codes of the candidates
    ``keep`` (input column indices), the checked label ``y`` and the number of rows."""

    planned: Planned
    codes: np.ndarray
    y_codes: np.ndarray
    w: np.ndarray | None
    keep: list[int]
    y: Any
    n_rows: int


def _times_as_objects(X: Any) -> Any:
    """``X`` with its datetime64 and timedelta64 columns as objects, for scikit-learn's
    checks, which find no common dtype for them and numbers (the values are read from
    the frame itself: :func:`column_values`)."""
    if not hasattr(X, "dtypes") or not hasattr(X, "astype"):
        return X
    times = {c: object for c, dt in X.dtypes.items() if getattr(dt, "kind", "") in "Mm"}
    return X.astype(times) if times and len(times) < X.shape[1] else X


class VMIFeatureSelector(SelectorMixin, BaseEstimator):
    """Feature selection by variational information maximisation, in memory.

    Greedily selects the features that maximise a variational lower bound on
    I(x_S; y) (Gao, Ver Steeg & Galstyan, NIPS 2016) with the naive Bayes or
    pairwise Q-distribution and the paper's restart rule, or runs one of the
    classic mutual-information criteria. It runs the numpy core of
    :class:`vmi_spark.VMISelector` without Spark and selects the same features.

    Parameters
    ----------
    n_features_to_select : int or None, default=None
        How many features to select (K). More than the number of features is
        capped, with a warning. None: every feature the evidence supports, at most 50
        (the selection ends when no remaining feature is significant by the G-test at
        5%, Bonferroni over the features; ``stop_reason_`` ``"not_significant"``).
    method : {"vmi_naive", "vmi_pairwise", "mim", "mrmr", "jmi", "cmim", "cife", \
"spec_cmi"}, default="vmi_naive"
        The VMI Q-distribution, or a classic criterion
        (see :mod:`vmi_spark.core.criteria`).
    restart_tolerance : float, default=0.0
        VMI only: clear the block when the best candidate raises its bound by no
        more than this (nats). 0.0 is the paper's Algorithm 1; the authors'
        program uses 0.01; ``-inf`` never restarts (one block, the paper's
        dotted continuation in Fig. 3).
    binning : {"quantile", "uniform", "mdlp"}, default="quantile"
        How binned columns are cut: spike-aware equal-frequency bins (a value holding
        more than 1/``num_bins`` of the rows is a state of its own), equal width
        between the 0.5% and 99.5% quantiles, or Fayyad-Irani MDLP cuts fitted on
        ``y`` (supervised: it inflates the fitted column's plug-in MI).
    label_type : {"auto", "categorical", "continuous"}, default="auto"
        How ``y`` is read: classes, or a regression target cut into ``label_bins``
        spike-aware equal-frequency classes. ``auto``: continuous if ``y`` is
        numeric with a non-integer float value or more than 1000 distinct values.
    label_bins : int, default=10
        Classes of a continuous ``y`` (2..255).
    num_bins : int, default=10
        Equal-frequency bins for numeric columns with more than
        ``max_categories`` distinct values (2..255).
    max_categories : int, default=32
        Numeric columns with at most this many distinct values are used as
        categories (1..255). String columns must have at most this many.
    selection_mode : {"numTopFeatures", "gain", "fraction"}, default="numTopFeatures"
        ``numTopFeatures`` selects ``n_features_to_select``; ``gain`` selects until
        the best candidate raises the bound (a classic criterion: scores) by less than
        ``selection_threshold`` nats and no restart would help; ``fraction`` selects
        ``floor(selection_threshold * n_features_in_)`` features (at least one).
    selection_threshold : float or None, default=None
        The least gain for ``gain`` (default 0.01 nats) or the fraction for
        ``fraction`` (default 0.1); unused by ``numTopFeatures``.
    bias_correction : {"significance", "chance", "none"}, default="significance"
        How candidates' gains are compared (``vmi_naive``, ``vmi_pairwise``): each gain
        less the gain a feature independent of ``y`` reaches by chance, (A - 1)(L - 1) / 2N
        nats for A states, L classes and N rows (Miller 1955), and a block grows only by
        a gain significant at 5% by the G-test, Bonferroni over the candidates (Vinh et
        al. 2014), else it restarts; ``chance``: the correction alone, a block restarting
        when no gain beats chance; ``none``: the paper's plug-in gains.
    drop_suspects : {"identifiers", "all", "none"}, default="identifiers"
        Which suspect features (:mod:`vmi_spark.core.suspects`) are left out of the
        candidates: identifiers (a value of its own in nearly every row, or a row
        number), ``all`` also suspected leaks (a column carrying at least 90% of the
        information it and ``y`` can share, or whose missing values mark a class), or
        none. Every suspect is warned of and listed in :meth:`report`'s ``suspects``.
    exclude : list of str or None, default=None
        Column names (``feature_names_in_``, or ``x0``, ``x1``, ... for an array) never
        to select: left out of the candidates, and dropped by ``transform``.
    stability : int, default=0
        Also run the selection on this many random subsamples of the rows and report
        how often each feature was selected (``stability_``); 0 runs none, else at least 2.
    stability_seed : int, default=0
        Seed of the subsamples (a row is kept by a hash of its encoded values, the seed
        and the run: the rows Spark keeps for the same table).
    stability_fraction : float, default=0.5
        The share of the rows each subsample keeps, in (0, 1).
    n_jobs : int or None, default=None
        Threads the steps run on. None (unlike most scikit-learn estimators, whose None
        means one) or -1: every core the process may use (its CPU affinity and cgroup CPU
        quota, at most 8); 1 runs them in the calling thread (e.g. inside joblib workers).
        The result is the same, bit for bit, on any number.

    Attributes
    ----------
    selected_features_ : ndarray of shape (n_selected,)
        Indices of the selected features, in selection order.
    selected_feature_names_ : ndarray of str of shape (n_selected,)
        Their names, in selection order: the DataFrame's column names, else ``x0``,
        ``x1``, ... (scikit-learn's names for an array's columns). ``get_feature_names_out()``
        gives the same names in the input's column order.
    scores_ : ndarray of shape (n_selected,)
        Per step, aligned with ``selected_features_``: for VMI the bound I_LB of
        the current block after adding that feature (nats); for a classic
        criterion the criterion value of the chosen feature.
    gains_ : ndarray of shape (n_selected,)
        Per step: how much the feature raised its block's bound.
    blocks_ : ndarray of shape (n_selected,)
        Per step: 0 for the first block, +1 at each restart (all 0 for the
        classic criteria).
    mutual_information_ : ndarray of shape (n_features_in_,)
        Plug-in I(x_i; y) of every feature (nats), input order.
    restarts_ : int
        Number of restarts.
    stopped_early_ : str or None
        Why the selection stopped before ``n_features_to_select``, if it did.
    stop_reason_ : str
        Why the selection ended: ``num_features``, ``threshold`` (``selection_mode``
        ``gain``), ``no_features_left`` or ``no_information``.
    classes_ : ndarray
        The class labels, sorted; for a continuous ``y`` the names of its bins.
    label_binning_ : Binning or None
        How a continuous ``y`` was cut (strategy, edges, spikes); None otherwise.
    columns_ : list of ColumnPlan
        How each feature was coded (``category``, ``bins``, ``constant``).
    selection_ : Selection
        The raw result of the core.
    stability_ : dict or None
        With ``stability`` B > 0: the B selections on half-samples of the rows
        (:func:`vmi_spark.core.stability.summarize`: per feature its ``frequency`` and
        ``mean_rank``, the stability ``index`` of Nogueira et al. 2018 with its
        ``variance`` and 95% ``ci``); None otherwise.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during ``fit`` (only if ``X`` has string
        column names).

    See Also
    --------
    vmi_spark.VMISelector : the same selection on Spark.

    Notes
    -----
    Encoding follows the Spark plan: numbers and booleans are numeric, other
    values strings; numeric columns with at most ``max_categories`` distinct
    values and string columns are categories coded by their sorted values; other
    numeric columns get ``num_bins`` equal-frequency bins whose split points are
    exact quantiles of the column, and a value ``v`` falls in bin
    ``#{splits <= v}``. Missing values (NaN, None) are an extra state. Rows with a
    missing label are refused. ``transform`` keeps the selected columns in their
    input order (the scikit-learn convention); ``selected_features_`` has the
    selection order.

    References
    ----------
    S. Gao, G. Ver Steeg, A. Galstyan. Variational Information Maximization for
    Feature Selection. NIPS 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from vmi_spark.sklearn import VMIFeatureSelector
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 500)
    >>> noise = rng.integers(0, 3, (500, 3))
    >>> X = np.column_stack([noise[:, 0], y ^ (rng.random(500) < 0.1), noise[:, 1:]])
    >>> selector = VMIFeatureSelector(n_features_to_select=1).fit(X, y)
    >>> selector.selected_features_
    array([1])
    >>> selector.transform(X).shape
    (500, 1)
    """

    def __init__(self, n_features_to_select: int | None = default("num_features", "sklearn"),
                 method: str = default("method", "sklearn"),
                 restart_tolerance: float = default("restart_tolerance", "sklearn"),
                 num_bins: int = default("num_bins", "sklearn"),
                 binning: str = default("binning", "sklearn"),
                 label_type: str = default("label_type", "sklearn"),
                 label_bins: int = default("label_bins", "sklearn"),
                 max_categories: int = default("max_categories", "sklearn"),
                 selection_mode: str = default("selection_mode", "sklearn"),
                 selection_threshold: float | None = default("selection_threshold",
                                                             "sklearn"),
                 exclude: list[str] | None = None,
                 bias_correction: str = default("bias_correction", "sklearn"),
                 drop_suspects: str = default("drop_suspects", "sklearn"),
                 stability: int = default("stability", "sklearn"),
                 stability_seed: int = default("stability_seed", "sklearn"),
                 stability_fraction: float = default("stability_fraction", "sklearn"),
                 n_jobs: int | None = default("threads", "sklearn")
                 ) -> None:
        self.n_features_to_select = n_features_to_select
        self.selection_mode = selection_mode
        self.selection_threshold = selection_threshold
        self.method = method
        self.restart_tolerance = restart_tolerance
        self.num_bins = num_bins
        self.binning = binning
        self.label_type = label_type
        self.label_bins = label_bins
        self.max_categories = max_categories
        self.exclude = exclude
        self.bias_correction = bias_correction
        self.drop_suspects = drop_suspects
        self.stability = stability
        self.stability_seed = stability_seed
        self.stability_fraction = stability_fraction
        self.n_jobs = n_jobs

    # -- tags -------------------------------------------------------------------
    def __sklearn_tags__(self):  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        tags.target_tags.required = True
        return tags

    def _more_tags(self) -> dict[str, Any]:  # scikit-learn < 1.6
        return {"allow_nan": True, "requires_y": True,
                "X_types": ["2darray", "string", "categorical"]}

    # -- fitting ----------------------------------------------------------------
    def _check_params(self) -> Settings:
        """The parameters, checked once (:class:`vmi_spark.params.Settings`)."""
        return Settings.of({key: getattr(self, name) for name, key in _SKLEARN_KEYS.items()
                            if key in Settings.KEYS}, "sklearn")

    def _validate(self, X, y):
        """Check ``X`` and ``y`` and record ``n_features_in_`` / ``feature_names_in_``."""
        # +/-inf are values like any other (binned, or a state of their own), as in the job
        X = _times_as_objects(X)
        if _validate_data is not None:
            return _validate_data(self, X, y, dtype=None, ensure_all_finite=False, reset=True)
        if y is None:  # pragma: no cover - scikit-learn < 1.6
            raise ValueError(f"This {type(self).__name__} estimator requires y to be passed, "
                             "but the target y is None.")
        return self._validate_data(X, y, dtype=None, force_all_finite=False,
                                   reset=True)  # pragma: no cover

    def fit(self, X, y, sample_weight=None) -> VMIFeatureSelector:
        """Encode ``X`` and select features for the class label ``y``.

        Parameters
        ----------
        X : array-like or pandas DataFrame of shape (n_samples, n_features)
            Numeric, boolean, string, date, datetime or duration features; NaN, NaT
            and None are missing values, +/-inf values like any other (as in the Spark
            job).
        y : array-like of shape (n_samples,)
            Class labels (at least two classes), or a continuous target
            (``label_type``).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative row weights: a row of weight w counts as w rows in every count,
            bin edge and step, a row of weight 0 as none (:mod:`vmi_spark.core.weights`:
            whole numbers give exactly the result of repeating each row w times, others
            are rounded to 1/1024). NaN, negative and all-zero weights are refused.

        Returns
        -------
        self : VMIFeatureSelector
            The fitted selector.
        """
        settings = self._check_params()
        kernels.warm()  # numba's set-up overlaps the planning
        coded = self._coded(X, y, sample_weight, settings)
        planned, codes, y_codes, w = coded.planned, coded.codes, coded.y_codes, coded.w
        keep, y_checked, n_rows = coded.keep, coded.y, coded.n_rows
        plan = planned.plan
        if plan.label_type == "categorical":
            check_classification_targets(y_checked)
        log.info("label: %s (%s)", plan.label_type, planned.label.reason)
        notes = list(planned.notes)
        for note in notes:
            warnings.warn(note, UserWarning, stacklevel=2)
        threads = settings.threads if settings.threads not in (None, -1) else None
        backend = ThreadedBackend(codes, y_codes, arity=plan.arity,
                                  num_classes=len(plan.classes), threads=threads, w=w)
        try:  # one INFO line a step, as the job's and the estimator's
            ran = run_planned(backend, planned, settings, notes, on_step=StepLogger())
        finally:
            backend.close()
        sel, stability = ran.selection, ran.stability
        self._record(sel, planned, keep, y_checked, n_rows, settings)
        self.stability_ = stability
        return self

    def _coded(self, X: Any, y: Any, sample_weight: Any, settings: Settings,
               every: bool = False) -> _Coded:
        """The checked rows of ``X`` and ``y``, planned and coded: the candidates
        (``exclude`` left out; every column with ``every``), their plan, (D, N) codes, class
        codes and weight units."""
        if getattr(X, "ndim", 2) == 2 and getattr(X, "shape", (1, 1))[1] == 0:
            raise ValueError("X has no columns: there is no feature to select")
        X, y, sample_weight = _labelled_rows(X, y, sample_weight)
        frame = X if hasattr(X, "iloc") and hasattr(X, "columns") else None
        X_checked, y_checked = self._validate(X, y)
        n_rows, n_cols = X_checked.shape
        weights = _sample_weight(sample_weight, n_rows)
        names = [str(c) for c in frame.columns] if frame is not None else \
            [f"x{j}" for j in range(n_cols)]
        keep = list(range(n_cols)) if every else self._candidates(names)
        with phrased("sklearn"):
            check_fits(settings.method, len(keep))
            planned, codes, y_codes, w = _plan_and_code(
                frame, X_checked, y_checked, [names[j] for j in keep], keep, settings,
                weights)
        return _Coded(planned, codes, y_codes, w, keep, y_checked, n_rows)

    def _candidates(self, names: list[str]) -> list[int]:
        """Indices of the columns that may be selected: all but ``exclude``."""
        exclude = check("exclude", self.exclude, "sklearn") or []  # a string is refused
        for c in exclude:
            if c not in names:
                raise ValueError(f"exclude names column '{c}', which X does not have"
                                 f"{suggest_name(c, names)}")
        keep = [j for j, n in enumerate(names) if n not in exclude]
        if not keep:
            raise ValueError("exclude leaves no feature to select")
        return keep

    def _record(self, sel: Selection, planned: Planned, keep: list[int], y: Any, n_rows: int,
                settings: Settings) -> None:
        """Set the fitted attributes (input column indices, not candidate positions)."""
        plan = planned.plan
        self.selection_: Selection = sel
        self.plan_ = plan
        self.settings_ = settings
        self.label_decision_ = planned.label
        self.columns_ = plan.columns
        if plan.label_type == "categorical":
            self.classes_ = np.unique(np.asarray(y))
        else:
            self.classes_ = np.array(plan.classes, dtype=object)
        self.label_binning_ = (Binning("quantile", tuple(plan.label_edges or ()),
                                       tuple(plan.label_spikes or ()))
                               if plan.label_type == "continuous" else None)
        self.selected_features_ = np.asarray([keep[i] for i in sel.selected], dtype=np.intp)
        self.selected_feature_names_ = np.asarray([plan.features[i] for i in sel.selected],
                                                  dtype=object)
        self.scores_ = np.asarray(sel.scores, dtype=np.float64)
        self.gains_ = np.asarray(sel.gains, dtype=np.float64)
        self.blocks_ = np.asarray(sel.blocks, dtype=np.intp)
        mi = np.full(self.n_features_in_, np.nan)
        mi[keep] = sel.mutual_information
        self.mutual_information_ = mi
        self.restarts_ = int(sel.restarts)
        self.stopped_early_ = sel.stopped_early
        self.stop_reason_ = sel.stop_reason
        self.n_samples_fit_ = n_rows

    def transform(self, X: Any) -> Any:
        """The selected columns of ``X`` (scikit-learn's ``SelectorMixin.transform``; a
        frame with datetime or duration columns beside numbers, which its checks cannot
        give one dtype, is taken with those columns as objects)."""
        try:
            return super().transform(X)
        except TypeError:  # numpy's DTypePromotionError: no common dtype
            times = _times_as_objects(X)
            if times is X:
                raise
            return super().transform(times)

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self, "selected_features_")
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.selected_features_] = True
        return mask

    def report(self) -> SelectionReport:
        """The selection as a dict with the fields of the job's ``selection.json``
        (:func:`vmi_spark.core.summary.selection_report`: the same builder), with
        ``selected_indices`` those of the candidates (all columns but ``exclude``).

        Can be passed to :func:`vmi_spark.report.render_markdown` and
        :func:`vmi_spark.report.plot_bounds`.
        """
        check_is_fitted(self, "selected_features_")
        out = selection_report(self.plan_, self.selection_, self.settings_.result(),
                               self.label_decision_.reason)
        out["label"] = None
        if self.stability_ is not None:
            out["stability"] = self.stability_
        return out
