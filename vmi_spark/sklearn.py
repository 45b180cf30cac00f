"""A scikit-learn selector running the VMI numpy core in memory.

:class:`VMIFeatureSelector` encodes ``X`` column by column with the rules of the
encoding plan (:mod:`vmi_spark.core.encoding`, shared with Spark) and runs the same greedy loop
(:func:`vmi_spark.core.greedy.select_vmi`, or a classic criterion from
:func:`vmi_spark.core.criteria.select_classic`) on an
:class:`~vmi_spark.core.inmemory.InMemoryBackend`. For the same table and
parameters it selects the same features, with the same scores, as
:class:`vmi_spark.VMISelector` on Spark (up to tables larger than
:data:`~vmi_spark.core.encoding.SAMPLE_ROWS` rows, where Spark places the bin edges on
a hashed sample).

scikit-learn is an optional dependency (``pip install "vmi_spark[sklearn]"``); it is
imported only when this module is.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
import pyarrow as pa

try:
    from sklearn.base import BaseEstimator
    from sklearn.feature_selection import SelectorMixin
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

from .core.binning import (
    Binning,
    assign_codes,
    fit_binning,
    json_float,
    label_binning,
    resolve_label_type,
    state_labels,
    value_counts,
)
from .core.criteria import select_classic
from .core.encoding import ColumnPlan, TooManyCategories, binned_plan, categorical_plan
from .core.encoding import encode_column as _encode_typed
from .core.greedy import Selection, report_fields, select_vmi
from .core.inmemory import InMemoryBackend
from .params import (
    METHOD_NAMES,
    SPEC,
    cap_num_features,
    default,
    is_vmi,
    selection_size,
    validate,
)

__all__ = ["VMIFeatureSelector", "encode_column", "plan_column"]

#: every method the selector accepts (the registry's names)
METHODS = METHOD_NAMES
#: spec key of each constructor parameter
_SKLEARN_KEYS = {p.sklearn: p.key for p in SPEC if p.sklearn is not None}


# ---------------------------------------------------------------------------
# Encoding (the rules of vmi_spark.core.encoding, on canonical numpy columns)
# ---------------------------------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, (numbers.Number, np.bool_)) and not isinstance(v, complex)


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
    numbers and booleans become doubles (-0.0 as 0.0), everything else strings."""
    values, dtype = _typed(column)
    return (values + 0.0, dtype) if dtype == "double" else (values, dtype)


def _typed(column: Any) -> tuple[np.ndarray, str]:
    """:func:`_canonical` before -0.0 becomes 0.0."""
    if hasattr(column, "dtype") and hasattr(column, "to_numpy") and hasattr(column, "iloc"):
        import pandas as pd  # a pandas Series

        dt = column.dtype
        if pd.api.types.is_bool_dtype(dt) or (pd.api.types.is_numeric_dtype(dt)
                                              and not pd.api.types.is_complex_dtype(dt)):
            return column.to_numpy(dtype=np.float64, na_value=np.nan), "double"
        column = column.to_numpy(dtype=object)
    arr = np.asarray(column)
    if arr.dtype.kind in "biuf":
        return arr.astype(np.float64), "double"
    if arr.dtype.kind in "US":
        return np.array([str(v) for v in arr], dtype=object), "string"
    items = list(arr.tolist())
    present = [v for v in items if not _is_missing(v)]
    if all(_is_number(v) for v in present):
        return np.array([np.nan if _is_missing(v) else float(v) for v in items],
                        dtype=np.float64), "double"
    return np.array([None if _is_missing(v) else str(v) for v in items], dtype=object), "string"


def plan_column(name: str, values: np.ndarray, dtype: str, num_bins: int,
                max_categories: int, binning: str = "quantile",
                y_codes: np.ndarray | None = None, num_classes: int | None = None) -> ColumnPlan:
    """The :class:`~vmi_spark.core.encoding.ColumnPlan` of one canonical column.

    Numeric columns with at most ``max_categories`` distinct values, and string
    columns, are categories coded by their sorted values
    (:func:`~vmi_spark.core.encoding.categorical_plan`); other numeric columns get
    ``num_bins`` bins (:func:`~vmi_spark.core.binning.fit_binning` with ``binning``; ``mdlp``
    counts the classes ``y_codes``, 0 .. ``num_classes`` - 1);
    a column that is all missing is ``constant``; missing values (NaN, None) are an
    extra state.
    """
    if dtype == "double":
        miss = np.isnan(values)
        distinct: list[Any] = [float(v) for v in np.unique(values[~miss])]
    else:
        miss = np.array([v is None for v in values], dtype=bool)
        distinct = list(set(values[~miss].tolist()))
    missing = bool(miss.any())
    try:
        plan = categorical_plan(name, dtype, distinct, missing, max_categories)
    except TooManyCategories:
        raise ValueError(f"string column '{name}' has more than {max_categories} distinct "
                         "values (max_categories); raise max_categories or leave it out"
                         ) from None
    if plan is not None:
        return plan
    b = fit_binning(binning, values, num_bins, labels=y_codes, num_classes=num_classes)
    return binned_plan(name, [float(e) for e in b.edges], missing, [float(x) for x in b.spikes])


def _binning_report(b: Binning) -> dict[str, Any]:
    """A binning as the report gives it (the keys of ``selection.json``'s columns)."""
    return {"binning": b.strategy, "edges": [json_float(e) for e in b.edges],
            "spikes": [json_float(x) for x in b.spikes], "state_names": state_labels(b)}


def label_codes(y: np.ndarray, label_type: str, label_bins: int, max_classes: int
                ) -> tuple[np.ndarray, np.ndarray, Binning | None]:
    """Classes of the target ``y``: ``(classes, codes, binning)``.

    A categorical target's classes are its sorted values (``codes`` index them); a
    continuous one (``label_type``, :func:`vmi_spark.core.binning.resolve_label_type`,
    ``auto`` deciding as on Spark with ``max_classes``) is cut into ``label_bins``
    spike-aware equal-frequency classes (:func:`vmi_spark.core.binning.label_binning`),
    named by their intervals.
    """
    arr = np.asarray(y)
    numeric = arr.dtype.kind in "iuf" or (arr.dtype.kind == "O" and all(
        _is_number(v) and not isinstance(v, (bool, np.bool_)) for v in arr.tolist()))
    distinct = np.unique(arr.astype(np.float64) if numeric else arr)
    listed = [float(v) for v in distinct] if numeric and len(distinct) <= max_classes else (
        None if len(distinct) > max_classes else list(distinct))
    floating = arr.dtype.kind == "f" or (arr.dtype.kind == "O" and numeric)
    kind = resolve_label_type(label_type, listed, numeric=numeric, floating=floating)
    if kind == "categorical":
        check_classification_targets(arr)
        classes, codes = np.unique(arr, return_inverse=True)
        return classes, codes.astype(np.int64), None
    v = arr.astype(np.float64)
    b = label_binning(*value_counts(v), label_bins)
    return np.array(state_labels(b), dtype=object), assign_codes(b.edges, v), b


def encode_column(values: np.ndarray, col: ColumnPlan) -> np.ndarray:
    """uint8 codes of one canonical column by its plan
    (:func:`vmi_spark.core.encoding.encode_column`, as on Spark)."""
    if col.dtype == "double":  # -0.0 as 0.0: Arrow's index_in tells them apart
        return _encode_typed(pa.array(np.asarray(values, dtype=np.float64) + 0.0), col)
    return _encode_typed(pa.array(values, type=pa.string()), col)


# ---------------------------------------------------------------------------
# The selector
# ---------------------------------------------------------------------------

class VMIFeatureSelector(SelectorMixin, BaseEstimator):
    """Feature selection by variational information maximisation, in memory.

    Greedily selects the features that maximise a variational lower bound on
    I(x_S; y) (Gao, Ver Steeg & Galstyan, NIPS 2016) with the naive Bayes or
    pairwise Q-distribution and the paper's restart rule, or runs one of the
    classic mutual-information criteria. It runs the numpy core of
    :class:`vmi_spark.VMISelector` without Spark and selects the same features.

    Parameters
    ----------
    n_features_to_select : int, default=10
        How many features to select (K). More than the number of features is
        capped, with a warning.
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

    Attributes
    ----------
    selected_features_ : ndarray of shape (n_selected,)
        Indices of the selected features, in selection order.
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

    def __init__(self, n_features_to_select: int = default("num_features", "sklearn"),
                 method: str = default("method", "sklearn"),
                 restart_tolerance: float = default("restart_tolerance", "sklearn"),
                 num_bins: int = default("num_bins", "sklearn"),
                 binning: str = default("binning", "sklearn"),
                 label_type: str = default("label_type", "sklearn"),
                 label_bins: int = default("label_bins", "sklearn"),
                 max_categories: int = default("max_categories", "sklearn"),
                 selection_mode: str = default("selection_mode", "sklearn"),
                 selection_threshold: float | None = default("selection_threshold",
                                                             "sklearn")) -> None:
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
    def _check_params(self) -> dict[str, Any]:
        """Check the parameters (:func:`vmi_spark.params.validate`); returns them by key."""
        return validate({key: getattr(self, name) for name, key in _SKLEARN_KEYS.items()},
                        "sklearn")

    def _validate(self, X, y):
        """Check ``X`` and ``y`` and record ``n_features_in_`` / ``feature_names_in_``."""
        # +/-inf are values like any other (binned, or a state of their own), as in the job
        if _validate_data is not None:
            return _validate_data(self, X, y, dtype=None, ensure_all_finite=False, reset=True)
        if y is None:  # pragma: no cover - scikit-learn < 1.6
            raise ValueError(f"This {type(self).__name__} estimator requires y to be passed, "
                             "but the target y is None.")
        return self._validate_data(X, y, dtype=None, force_all_finite=False,
                                   reset=True)  # pragma: no cover

    def fit(self, X, y) -> VMIFeatureSelector:
        """Encode ``X`` and select features for the class label ``y``.

        Parameters
        ----------
        X : array-like or pandas DataFrame of shape (n_samples, n_features)
            Numeric, boolean or string features; NaN and None are missing values, +/-inf
            values like any other (as in the Spark job).
        y : array-like of shape (n_samples,)
            Class labels (at least two classes), or a continuous target
            (``label_type``).

        Returns
        -------
        self : VMIFeatureSelector
            The fitted selector.
        """
        checked = self._check_params()
        frame = X if hasattr(X, "iloc") and hasattr(X, "columns") else None
        X_checked, y_checked = self._validate(X, y)
        if any(_is_missing(v) for v in np.asarray(y_checked, dtype=object)):
            raise ValueError("y has missing values (NaN or None)")
        classes, y_codes, label_bin = label_codes(
            y_checked, checked["label_type"], checked["label_bins"], default("max_classes"))
        if len(classes) < 2:
            raise ValueError(f"y has one class ({classes[0]!r}); "
                             "feature selection needs at least two classes")
        n_rows, n_cols = X_checked.shape
        names = [str(c) for c in frame.columns] if frame is not None else \
            [f"x{j}" for j in range(n_cols)]

        plans: list[ColumnPlan] = []
        codes = np.empty((n_cols, n_rows), dtype=np.uint8)
        for j in range(n_cols):
            column = frame.iloc[:, j] if frame is not None else X_checked[:, j]
            values, dtype = _canonical(column)
            plan = plan_column(names[j], values, dtype, int(self.num_bins),
                               int(self.max_categories), checked["binning"], y_codes,
                               len(classes))
            plans.append(plan)
            codes[j] = encode_column(values, plan)

        k, min_gain = selection_size(checked["selection_mode"], checked["selection_threshold"],
                                     checked["num_features"], n_cols)
        k, capped = cap_num_features(k, n_cols)
        if capped is not None:
            warnings.warn(capped.phrase("sklearn"), UserWarning, stacklevel=2)
        arity = max((p.num_states for p in plans), default=1)
        backend = InMemoryBackend(codes, y_codes.astype(np.int64), self.method, arity=arity,
                                  num_classes=len(classes))
        try:
            if is_vmi(self.method):
                sel = select_vmi(backend, self.method, k, float(self.restart_tolerance),
                                 min_gain=min_gain)
            else:
                sel = select_classic(backend, self.method, k, min_gain=min_gain)
        finally:
            backend.close()

        self.selection_: Selection = sel
        self.columns_ = plans
        self.classes_ = classes
        self.label_binning_ = label_bin
        self.selected_features_ = np.asarray(sel.selected, dtype=np.intp)
        self.scores_ = np.asarray(sel.scores, dtype=np.float64)
        self.gains_ = np.asarray(sel.gains, dtype=np.float64)
        self.blocks_ = np.asarray(sel.blocks, dtype=np.intp)
        self.mutual_information_ = np.asarray(sel.mutual_information, dtype=np.float64)
        self.restarts_ = int(sel.restarts)
        self.stopped_early_ = sel.stopped_early
        self.stop_reason_ = sel.stop_reason
        self.n_samples_fit_ = n_rows
        return self

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self, "selected_features_")
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.selected_features_] = True
        return mask

    def report(self) -> dict[str, Any]:
        """The selection as a dict with the fields of the job's ``selection.json``.

        Can be passed to :func:`vmi_spark.report.render_markdown` and
        :func:`vmi_spark.report.plot_bounds`.

        Returns
        -------
        dict
            ``method``, ``features``, ``selected``, ``selected_indices``, ``scores``,
            ``gains``, ``blocks``, ``restarts``, ``stopped_early``, ``num_rows``,
            ``num_classes``, ``classes``, ``step_seconds``, ``parameters``, ``columns``.
        """
        check_is_fitted(self, "selected_features_")
        names = [c.name for c in self.columns_]
        return {
            **report_fields(self.selection_, names),
            "label": None,
            "num_rows": self.n_samples_fit_,
            "rows_dropped": 0,
            "rows_skipped": 0,
            "num_classes": len(self.classes_),
            "classes": [str(c) for c in self.classes_],
            "label_type": "continuous" if self.label_binning_ is not None else "categorical",
            **({"label_binning": _binning_report(self.label_binning_)}
               if self.label_binning_ is not None else {}),
            "parameters": self.get_params(),
            "columns": [{"name": c.name, "kind": c.kind, "states": c.num_states,
                         "missing_state": c.missing} for c in self.columns_],
        }
