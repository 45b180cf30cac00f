"""The encoding plan of a table: one planner for Spark and for memory.

:func:`build_plan` decides how the label and every feature become small integer codes
(:mod:`vmi_spark.core.encoding`) from what a *row source* tells it: one pass of column
statistics, the split points of the binned columns (of a content-hashed sample above
:data:`~vmi_spark.core.encoding.SAMPLE_ROWS` rows), and the most frequent values of the
category columns with too many values. The Spark layer's row sources
(:mod:`vmi_spark.spark.plan`) answer with Spark jobs; :class:`TableRows` answers from
typed record batches in memory (a small table in the driver, the scikit-learn
selector). The rules are here only, so that every front end codes a table the same
way:

* the label is a class label or a continuous target (:func:`decide_label`);
* a feature with at most ``maxCategories`` distinct values is a category; a numeric
  one with more is binned (``numBins``, ``binning``); a string one with more keeps its
  ``maxCategories - 1`` most frequent values and groups the rest into one state
  (:func:`~vmi_spark.core.encoding.grouped_plan`);
* a missing value is a state of its own, or drops the row (``handleInvalid``).

References
----------
S. Gao, G. Ver Steeg, A. Galstyan. Variational Information Maximization for Feature
Selection. NIPS 2016.
W. G. Cochran. Some Methods for Strengthening the Common chi^2 Tests. Biometrics 10(4),
1954 (expected counts of at least 5 to 10 per cell).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError, ParameterError, literal, phrase
from . import limits
from .binning import DEFAULT_LABEL_BINS, Binning
from .binning import state_labels as binning_state_labels
from .criteria import corrected
from .encoding import (
    MIN_STATE_ROWS,
    ColumnPlan,
    EncodingPlan,
    LabelRule,
    SplitRequest,
    TopValues,
    binned_plan,
    categorical_plan,
    doubles,
    encode_column,
    encode_label,
    fit_sample,
    grouped_plan,
    label_keys,
    top_values,
)
from .rows import (
    column_stats_fn,
    distinct_estimate,
    kept_rows,
    merge_stats,
    missing_mask,
    weight_values,
)
from .suspects import ID_SHARE, numeric_identifier
from .units import count_text, show_state
from .weights import Weighting, WeightStats, units

#: ``labelType="auto"``: a numeric label with more distinct values than this ...
AUTO_MIN_VALUES = 20
#: ... and fewer rows per distinct value than this, on average, is continuous (the rows a
#: value of a grouped category column needs, too)
AUTO_ROWS_PER_VALUE = MIN_STATE_ROWS


# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ValueType:
    """How a column's values are read: ``kind`` ``"double"`` or ``"string"``.

    ``numeric``: a number (a label may be continuous), not a boolean nor a string;
    ``floating``: a floating-point or decimal number; ``unit``: what the numbers of a
    date, timestamp or interval column count (:mod:`vmi_spark.core.units`).
    """

    kind: str
    numeric: bool = True
    floating: bool = False
    unit: str | None = None


#: the value types of plain columns
STRING = ValueType("string", numeric=False)
BOOLEAN = ValueType("double", numeric=False)
INTEGER = ValueType("double")
FLOATING = ValueType("double", floating=True)


# ---------------------------------------------------------------------------
# The label
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class LabelDecision:
    """Whether the label is ``categorical`` or ``continuous`` (``kind``), and why."""

    kind: str
    reason: str


def decide_label(requested: str, classes: list[Any] | None, rows: float, vtype: ValueType,
                 max_classes: int, style: str = "ml",
                 label_bins: int = DEFAULT_LABEL_BINS) -> LabelDecision:
    """How the label is coded (``labelType``): classes, or a continuous target.

    Parameters
    ----------
    requested : {"auto", "categorical", "continuous"}
        ``labelType``.
    classes : list or None
        The label's distinct values in the labelled rows, or None when there are more
        than ``max_classes`` of them (the statistics pass stops collecting there).
    rows : int or float
        The labelled rows (their total weight, with row weights).
    vtype : ValueType
        The label column's type.
    max_classes : int
        ``maxClasses``.
    style : str
        The front end whose parameter names the reason uses (:func:`vmi_spark.errors.phrase`).
    label_bins : int
        ``labelBins``: the classes a continuous label is cut into.

    Returns
    -------
    LabelDecision
        An explicit choice is kept (``continuous`` needs a number). ``auto`` keeps a
        string or boolean label as classes, and a numeric label with at most
        ``label_bins`` distinct values (few values: coding each as a class loses nothing
        that the ``label_bins`` bins of a continuous label would keep, and keeps every
        value apart). A numeric label with more values is a measurement, whether its
        values are whole numbers or not (a weight in whole units, a price, a score,
        a count): it is continuous, cut into ``label_bins`` equal-frequency classes. A
        whole-number class code with more than ``label_bins`` classes needs
        ``labelType='categorical'``; the reason (logged before the steps, and in the
        report's ``label_decision``) says so.

    Raises
    ------
    InputError
        ``continuous`` asked for a label that is not a number.

    References
    ----------
    S. S. Stevens. On the theory of scales of measurement. Science 103, 1946 (a numeric
    scale with many values is a measurement, not a nominal code).
    """
    if requested == "continuous" and not vtype.numeric:
        raise ParameterError("label_type", "{label_type} is 'continuous' but the label "
                                           "column is not numeric")
    if requested != "auto":
        return LabelDecision(requested, phrase(f"{{label_type}} is '{requested}'", style))
    if not vtype.numeric:
        what = "a string" if vtype.kind == "string" else "a boolean"
        return LabelDecision("categorical", f"{what} label")
    k = None if classes is None else len(classes)
    if k is not None and k <= label_bins:
        return LabelDecision("categorical", phrase(
            f"a numeric label with {k} distinct values, at most {{label_bins}} "
            f"({label_bins}): each value a class", style))
    many = f"more than {max_classes}" if k is None else str(k)
    return LabelDecision("continuous", phrase(
        f"a numeric label with {many} distinct values, more than {{label_bins}} "
        f"({label_bins}): a measurement, cut into {label_bins} equal-frequency classes "
        "(set {label_type} to categorical if its values are class codes)", style))


#: a count table n(x_i, y) needs at least this many rows a cell on average (Cochran 1954)
ROWS_PER_CELL = 5


@dataclass(frozen=True)
class StateBudget:
    """The most states of a feature (``states``) and of a continuous label (``label_bins``)
    that the rows can estimate, and whether the budget cut what was asked (``bound``)."""

    states: int
    label_bins: int
    bound: bool


def state_budget(rows: float, num_classes: int | None, num_bins: int, max_categories: int,
                 label_bins: int) -> StateBudget:
    """How many states each count table n(x_i, y) may have for ``rows`` rows.

    Parameters
    ----------
    rows : int or float
        The labelled rows (their total weight, with row weights).
    num_classes : int or None
        The classes of a categorical label; None for a continuous label.
    num_bins, max_categories, label_bins : int
        ``numBins``, ``maxCategories`` and ``labelBins`` as asked.

    Returns
    -------
    StateBudget
        Every table of A feature states and L classes keeps at least
        :data:`ROWS_PER_CELL` rows a cell on average: A * L <= N / 5. A continuous
        label takes L = min(``label_bins``, floor(sqrt(N / 5))) (the budget shared
        evenly when both would be cut), a categorical one its classes; a feature then
        has at most A = floor(N / (5 L)) states (at least 2), so ``numBins`` and
        ``maxCategories`` are cut to A on small tables. The plug-in mutual information
        of a table with fewer rows a cell is mostly bias, (A - 1)(L - 1) / 2N nats, and
        its variance grows with it: a many-state noise column would then rank above a
        real effect whatever the correction.

    References
    ----------
    W. G. Cochran. Some methods for strengthening the common chi-square tests.
    Biometrics 10(4), 1954 (expected counts of at least 5 a cell).
    G. A. Miller. Note on the bias of information estimates. 1955.
    """
    budget = max(rows, 0) / ROWS_PER_CELL
    if num_classes is None:
        bins = max(2, min(label_bins, int(math.isqrt(int(budget)))))
        classes = bins
    else:
        bins, classes = label_bins, max(num_classes, 2)
    states = min(max(2, int(budget // classes)), 255)
    return StateBudget(states, bins, bins < label_bins or states < num_bins)


def check_fits(method: str, num_features: int, available: int | None = None) -> None:
    """Refuse, before any row is read, a selection whose own tables cannot fit in this
    process: ``method``'s least table size for ``num_features`` candidates
    (:meth:`~.criterion.Criterion.driver_bytes`, a lower bound) against the memory
    available (:func:`.limits.available_bytes`; nothing checked where it is unknown). One line
    naming the method, the bytes needed and had, and what to change. Swap is not counted:
    a selection that would only fit by swapping would not end in useful time."""
    from .criteria import criterion

    need = criterion(method).driver_bytes(num_features)
    have = limits.available_bytes() if available is None and need else available
    if not need or have is None or need <= have:
        return
    raise ParameterError("method", literal(
        f"{method} on {num_features:,} features needs at least {need / 2**30:.1f} GiB of "
        f"tables in one process and this process has {have / 2**30:.1f} GiB available") +
        ": leave columns out ({exclude}) or use another {method}")


def suggest_name(name: str, names: list[str]) -> str:
    """``"; did you mean 'X'?"`` for the name among ``names`` closest to ``name`` (the
    same name in other case first, then by :func:`difflib.get_close_matches`), else ``""``."""
    lower: dict[str, str] = {}
    for n in names:
        lower.setdefault(n.lower(), n)
    if name.lower() in lower:
        return f"; did you mean '{lower[name.lower()]}'?"
    close = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.6)
    return f"; did you mean '{lower[close[0]]}'?" if close else ""


def thin_classes(num_classes: int, rows: float) -> bool:
    """Whether classes this many in so few rows are too thin to estimate (the rule of
    :func:`decide_label`, for a label asked to be categorical)."""
    return num_classes > AUTO_MIN_VALUES and rows < AUTO_ROWS_PER_VALUE * num_classes


# ---------------------------------------------------------------------------
# Row sources
# ---------------------------------------------------------------------------

class PlanSource(Protocol):
    """What :func:`build_plan` asks of the rows (every method sees the rows the plan
    keeps: a label and, when ``skip_cols`` are given, no missing value in those)."""

    def column_stats(self, label: str, features: list[str], max_categories: int,
                     max_classes: int, skip: bool) -> dict[str, Any]:
        """One pass: :func:`vmi_spark.core.rows.column_stats_fn` merged over all rows."""
        ...

    def quantile_splits(self, req: SplitRequest) -> dict[str, tuple[list[float], list[float]]]:
        """The split points of :class:`~vmi_spark.core.encoding.SplitRequest` by column
        (and the label's own when ``req.rule`` makes it continuous)."""
        ...

    def top_values(self, label: str, cols: list[str], most: int,
                   skip_cols: list[str], weight_scale: int | None = None
                   ) -> dict[str, TopValues]:
        """The ``most`` most frequent values of each string column of ``cols`` over all
        kept rows (:class:`~vmi_spark.core.encoding.TopValues`), exactly (by weight, in
        units of ``weight_scale``, with row weights)."""
        ...


@dataclass
class Planned:
    """:func:`build_plan`'s result: the plan, the columns whose missing values drop a
    row (``skip_cols``), how the label was decided and what the run's warnings say."""

    plan: EncodingPlan
    skip_cols: list[str]
    label: LabelDecision
    notes: list[str] = field(default_factory=list)
    #: the columns that look like identifiers: ``{column: (share, reason)}``
    #: (:mod:`vmi_spark.core.suspects`)
    identifiers: dict[str, tuple[float, str]] = field(default_factory=dict)


def _skipping(features: list[str], stats: dict[str, Any], handle_invalid: str
              ) -> tuple[dict[str, int], list[str], int]:
    """Missing values per feature after ``handleInvalid``, the columns whose missing
    values drop a row, and the rows dropped so."""
    missing = dict(zip(features, stats["missing"]))
    if handle_invalid == "error":
        bad = next((c for c in features if missing[c] > 0), None)
        if bad is not None:
            raise ParameterError("handle_invalid", f"feature column '{literal(bad)}' has "
                                 f"{missing[bad]} missing values (null or NaN) and "
                                 "{handle_invalid} is 'error'")
    elif handle_invalid == "skip" and stats["skipped"]:
        return {c: 0 for c in features}, [c for c in features if missing[c]], stats["skipped"]
    return missing, [], 0


def label_classes(label: str, decision: LabelDecision, classes: list[Any] | None,
                   vtype: ValueType, max_classes: int) -> list[Any]:
    """The sorted classes of a categorical label (a continuous one has none yet)."""
    if decision.kind == "continuous":
        return []
    if classes is None:
        hint = "" if not vtype.numeric else "set {label_type} continuous to bin it, or "
        raise ParameterError("max_classes", f"label column '{literal(label)}' has more than "
                             f"{max_classes} distinct values ({{max_classes}}); {hint}raise "
                             "{max_classes}")
    out = sorted(classes)
    if len(out) < 2:  # "one class": scikit-learn's wording (check_fit2d_1sample)
        only = (repr(out[0]) if isinstance(out[0], str) else
                show_state(out[0], "boolean" if vtype == BOOLEAN else None))
        raise InputError(f"label column '{label}' has one class ({only}); "
                         "feature selection needs at least two")
    return out


def _grouped(source: PlanSource, label: str, types: Mapping[str, ValueType],
             cols: list[str], missing: dict[str, int], skip_cols: list[str],
             max_categories: int, notes: list[str], identifiers: dict[str, tuple[float, str]],
             weight_scale: int | None = None) -> dict[str, ColumnPlan]:
    """The plans of the string columns with more than ``max_categories`` values: their
    most frequent values and one state for the rest; a note names each, and
    ``identifiers`` gets each ID (nearly every value distinct). With row weights the counts are weights in units of
    ``weight_scale``, and a value needs :data:`MIN_STATE_ROWS` of weight."""
    if not cols:
        return {}
    scale = weight_scale or 1
    weighted = weight_scale is not None
    tops = (source.top_values(label, cols, max(max_categories - 1, 0), skip_cols)
            if weight_scale is None else
            source.top_values(label, cols, max(max_categories - 1, 0), skip_cols,
                              weight_scale=weight_scale))
    out = {}
    for c in cols:
        top = tops[c]
        out[c] = grouped_plan(c, types[c].kind, top, missing[c] > 0, max_categories,
                              MIN_STATE_ROWS * scale)
        kept_values = len(out[c].values or [])
        kept = sum(n for v, n in zip(top.values, top.counts) if v in (out[c].values or []))
        rows = top.rows / scale if scale > 1 else top.rows
        rest = top.rows - kept
        others = count_text(rest / scale if scale > 1 else rest, weighted)
        least = count_text(MIN_STATE_ROWS, weighted)
        if kept_values == 0:  # every value rarer than a state needs: one state in all
            notes.append(f"string column '{c}' has {top.distinct} distinct values, none in "
                         f"at least {least}: all of them ({others}) are one state '(other)'")
        else:
            kept_words = ("its most frequent value (of at least {least}) is a state of its "
                          "own" if kept_values == 1 else
                          f"its {kept_values} most frequent (of at least {{least}}) are states "
                          "of their own").format(least=least)
            notes.append(f"string column '{c}' has {top.distinct} distinct values: "
                         f"{kept_words}, the other {top.distinct - kept_values} ({others}) "
                         "one state '(other)'")
        if rows >= 20 and top.distinct >= ID_SHARE * rows:
            identifiers[c] = (top.distinct / rows, f"'{c}' has {top.distinct} distinct "
                                                   f"values in {count_text(rows, weighted)}")
    return out


def _numeric_identifiers(features: list[str], types: Mapping[str, ValueType],
                         stats: Mapping[str, Any], rows: float, missing: dict[str, int]
                         ) -> dict[str, tuple[float, str]]:
    """The whole-number columns past the distinct-value cap with a value of their own in
    nearly every row (:func:`vmi_spark.core.suspects.numeric_identifier`)."""
    out = {}
    sketches = stats.get("sketches") or [None] * len(features)
    for j, c in enumerate(features):
        if types[c].kind != "double" or stats["values"][j] is not None:
            continue
        n = int(rows - missing[c])
        share = numeric_identifier(distinct_estimate(sketches[j]), n)
        if share is not None:
            out[c] = (share, f"'{c}' has about {share:.0%} distinct whole numbers in its "
                             f"{n} values")
    return out


def _weighting(stats: dict[str, Any], weight_col: str | None) -> Weighting | None:
    """How the weights became units (:mod:`vmi_spark.core.weights`), checked: a weight
    that is null, NaN, negative or infinite, all weights 0, too much weight in all are a
    :class:`ParameterError` naming the weight column. None without a weight column."""
    if weight_col is None:
        return None
    ws = stats.get("weights") or WeightStats()
    problem = ws.problem(weight_col)
    if problem is not None:
        raise ParameterError("weight_col", problem)
    kept = int(stats.get("kept_fine", 0))
    kept_units = kept // 1024 if ws.whole else kept
    rows = stats["rows"] - stats["null_labels"] - stats["skipped"]
    return Weighting(weight_col, ws.scale, kept_units, rows, ws.absent)


def build_plan(label: str, label_type: ValueType, features: list[str],
               types: Mapping[str, ValueType], params: Mapping[str, Any],
               source: PlanSource, weight_col: str | None = None) -> Planned:
    """Compute the encoding plan with the passes of ``source`` over the rows.

    Parameters
    ----------
    label : str
        The label column.
    label_type : ValueType
        Its type.
    features : list of str
        The feature columns, in order.
    types : mapping
        Each feature's :class:`ValueType`.
    params : mapping
        The checked parameters by key (:mod:`vmi_spark.params`): ``num_bins``,
        ``binning``, ``max_categories``, ``max_classes``, ``handle_invalid``,
        ``label_type``, ``label_bins``; a :class:`~vmi_spark.params.Settings`' ``style``
        names the parameters in the label decision's reason (else the ML names).
    source : PlanSource
        The rows (with ``weight_col``, each batch's last column is the rows' weight).
    weight_col : str, optional
        The weight column (:mod:`vmi_spark.core.weights`): every rule then counts
        weight, not rows; the plan records how the weights became units (``weights``).

    Returns
    -------
    Planned

    Raises
    ------
    InputError
        No rows, no labelled rows, one class, too many classes, missing values with
        ``handleInvalid`` ``error``, bad weights (a :class:`ParameterError` naming the
        weight column).
    """
    max_categories, max_classes = params["max_categories"], params["max_classes"]
    stats = source.column_stats(label, features, max_categories, max_classes,
                                params["handle_invalid"] == "skip")
    weighting = _weighting(stats, weight_col)
    scale = None if weighting is None else weighting.scale
    total, null_labels = stats["rows"], stats["null_labels"]
    if total == 0:
        raise InputError("the input has no rows")
    if null_labels == total:
        raise ParameterError("label", "no labelled rows: every value of {label} column "
                             f"'{literal(label)}' is null", getattr(params, "style", "ml"))
    missing, skip_cols, skipped = _skipping(features, stats, params["handle_invalid"])
    rows = total - null_labels - skipped
    if rows == 0:
        raise ParameterError("handle_invalid", "no rows left after dropping rows with "
                             "missing feature values ({handle_invalid} is 'skip')")
    # the rules count weight with row weights (a row of weight w is w rows)
    counted: float = rows if weighting is None else (
        weighting.total_units if weighting.scale == 1 else weighting.total)
    style = getattr(params, "style", "ml")
    try:
        decision = decide_label(params["label_type"], stats["classes"], counted, label_type,
                                max_classes, style, params["label_bins"])
    except ParameterError as e:
        raise ParameterError(e.key, e.template + f" (label column '{literal(label)}')"
                             ) from None
    classes = label_classes(label, decision, stats["classes"], label_type, max_classes)
    notes: list[str] = []
    # whole weights are counts of rows; fractional ones reweigh the rows there are
    params = _budgeted(params, counted if scale in (None, 1) else rows, decision, classes,
                       notes, style, weighted=weighting is not None and scale == 1)
    max_categories = params["max_categories"]
    plans: dict[str, ColumnPlan | None] = {
        c: categorical_plan(c, types[c].kind, distinct, missing[c] > 0, max_categories,
                            "boolean" if types[c] == BOOLEAN else types[c].unit)
        for c, distinct in zip(features, stats["values"])}
    strings = [c for c in features if plans[c] is None and types[c].kind == "string"]
    identifiers = _numeric_identifiers(features, types, stats, rows, missing)
    plans.update(_grouped(source, label, types, strings, missing, skip_cols, max_categories,
                          notes, identifiers, scale))
    plan = _binned(label, label_type, decision, classes, features, types, plans, missing,
                   skip_cols, rows, params, source, scale)
    plan.rows_dropped, plan.rows_skipped = null_labels, skipped
    if weighting is not None:
        plan.weights = weighting.report()
    return Planned(plan, skip_cols, decision, notes, identifiers)


def _budgeted(params: Mapping[str, Any], rows: float, decision: LabelDecision,
              classes: list[Any], notes: list[str], style: str,
              weighted: bool = False) -> Mapping[str, Any]:
    """``params`` with ``num_bins``, ``max_categories`` and ``label_bins`` cut to the
    :func:`state_budget` of ``rows`` (a note says so when it cuts ``numBins`` or
    ``labelBins``) where the gains are corrected (:func:`corrected`); unchanged otherwise:
    the paper's plug-in estimates (``biasCorrection='none'``) and the comparison
    criteria, as published, code the states asked for."""
    if not corrected(params):
        return params
    continuous = decision.kind == "continuous"
    b = state_budget(rows, None if continuous else len(classes), params["num_bins"],
                     params["max_categories"], params["label_bins"])
    out = {**params, "num_bins": min(params["num_bins"], b.states),
           "max_categories": min(params["max_categories"], b.states),
           "label_bins": b.label_bins}
    if b.bound:
        label_part = f"{b.label_bins} label classes and " if continuous else ""
        per_cell = rows / (b.states * (b.label_bins if continuous else max(len(classes), 2)))
        why = (f"so that each count table keeps {ROWS_PER_CELL} rows a cell on average"
               if per_cell >= ROWS_PER_CELL else
               f"the least; even so a count table keeps only {per_cell:.2g} rows a cell on "
               f"average, fewer than {ROWS_PER_CELL}: too few rows for "
               f"{len(classes) if not continuous else b.label_bins} classes")
        notes.append(phrase(
            f"{count_text(rows, weighted)}: at most {label_part}{b.states} states a feature, "
            f"{why} ({{num_bins}}, {{max_categories}} and {{label_bins}} cut to fit)", style))
    return out


def _binned(label: str, label_type: ValueType, decision: LabelDecision, classes: list[Any],
            features: list[str],
            types: Mapping[str, ValueType], plans: dict[str, ColumnPlan | None],
            missing: dict[str, int], skip_cols: list[str], rows: int,
            params: Mapping[str, Any], source: PlanSource,
            weight_scale: int | None = None) -> EncodingPlan:
    """The plan with the binned columns' split points (and a continuous label's classes)
    placed on the sample of ``source``."""
    continuous = decision.kind == "continuous"
    string_label = label_type.kind == "string"
    to_bin = [c for c in features if plans[c] is None]
    rule = None
    if continuous or (params["binning"] == "mdlp" and to_bin):
        rule = LabelRule(continuous=continuous, classes=tuple(classes),
                         label_bins=params["label_bins"], string=string_label)
    splits: dict[str, tuple[list[float], list[float]]] = {}
    if to_bin or continuous:
        # a label alone is sampled by the hash of whole rows, not of the label's value
        splits = source.quantile_splits(SplitRequest(
            label, tuple(to_bin), params["num_bins"], rows, tuple(skip_cols),
            params["binning"], rule, () if to_bin else tuple(features), weight_scale))
    label_edges = label_spikes = None
    if continuous:
        label_edges, label_spikes = (list(x) for x in splits.get(label, ([], [])))
        classes = binning_state_labels(Binning("quantile", tuple(label_edges),
                                               tuple(label_spikes)))
        if len(classes) < 2:
            raise InputError(f"label column '{label}' is continuous but has a single value; "
                             "feature selection needs at least two classes")
    columns = [plans[c] or binned_plan(c, splits.get(c, ([], []))[0], missing[c] > 0,
                                       splits.get(c, ([], []))[1], unit=types[c].unit)
               for c in features]
    return EncodingPlan(label=label, classes=classes,
                        label_dtype=("string" if string_label else
                                     "boolean" if label_type == BOOLEAN else "double"),
                        columns=columns, num_rows=rows, label_type=decision.kind,
                        label_edges=label_edges, label_spikes=label_spikes or None)


# ---------------------------------------------------------------------------
# Rows in memory
# ---------------------------------------------------------------------------

class TableRows:
    """All rows of a table as typed record batches in memory (label first, then the
    features; :mod:`vmi_spark.core.rows`): a :class:`PlanSource` that also gives the codes.

    ``batches`` returns an iterator over the batches each time it is called; the table
    has ``num_rows`` rows. Used for a small table in the Spark driver
    (:class:`vmi_spark.spark.executions.driver.DriverRows`) and by the scikit-learn selector, so that
    both plan and code exactly as the Spark passes do (no sample: at most
    :data:`~vmi_spark.core.encoding.SAMPLE_ROWS` rows are asked of it, or every row is
    the sample).
    """

    def __init__(self, batches: Callable[[], Iterator[pa.RecordBatch]], features: list[str],
                 num_rows: int, sample_all: bool = False, weight_col: str | None = None):
        self._batches, self.features, self.num_rows = batches, list(features), num_rows
        self._sample_all = sample_all
        #: the weight column (each batch's last column), or None
        self.weight_col = weight_col

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The typed batches (label, then the features), read again at each call."""
        return self._batches()

    def column_stats(self, label: str, features: list[str], max_categories: int,
                     max_classes: int, skip: bool) -> dict[str, Any]:
        """:func:`~.rows.column_stats_fn` over all rows, merged as the tasks' would be."""
        fn = column_stats_fn(len(features), max_categories, max_classes, skip,
                             weighted=self.weight_col is not None)
        parts = [json.loads(v) for rb in fn(self.batches()) for v in rb.column(0).to_pylist()]
        return merge_stats(parts, len(features), max_categories, max_classes)

    def _kept(self, skip_cols: list[str]) -> Iterator[pa.RecordBatch]:
        """The kept rows' batches (the weight, if any, still last)."""
        for rb in self.batches():
            yield kept_rows(rb, bool(skip_cols), self.weight_col is not None)

    def quantile_splits(self, req: SplitRequest) -> dict[str, tuple[list[float], list[float]]]:
        """:func:`vmi_spark.core.encoding.fit_sample` over all kept rows (by weight, with
        row weights)."""
        label, cols, rows, rule, weight_scale = (req.label, req.cols, req.rows, req.rule,
                                                 req.weight_scale)
        sample_rows = limits.current().sample_rows
        if rows > sample_rows and not self._sample_all:
            raise AssertionError(f"rows in memory are planned without a sample: at most "
                                 f"{sample_rows} rows")
        pos = {c: 1 + j for j, c in enumerate(self.features)}
        values: list[list[np.ndarray]] = [[] for _ in cols]
        keys: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        for rb in self._kept(list(req.skip_cols)):
            for i, c in enumerate(cols):
                values[i].append(doubles(rb.column(pos[c])))
            if rule is not None:
                keys.append(label_keys(rb.column(0), rule))
            if weight_scale is not None:
                weights.append(units(weight_values(rb), weight_scale))
        cat = [np.concatenate(v) if v else np.empty(0) for v in values]
        wts = None if weight_scale is None else (
            np.concatenate(weights) if weights else np.empty(0, np.int64))
        label_split, fitted = fit_sample(cat, req.num_bins, req.binning,
                                         np.concatenate(keys) if rule is not None else None, rule,
                                         wts)
        out = dict(zip(cols, fitted))
        if label_split is not None:
            out[label] = label_split
        return out

    def top_values(self, label: str, cols: list[str], most: int,
                   skip_cols: list[str], weight_scale: int | None = None
                   ) -> dict[str, TopValues]:
        """The most frequent values of each column of ``cols`` over all kept rows (the
        weight of each value in units of ``weight_scale``, with row weights)."""
        pos = {c: 1 + j for j, c in enumerate(self.features)}
        counts: list[dict[Any, int]] = [{} for _ in cols]
        for rb in self._kept(skip_cols):
            w = None if weight_scale is None else units(weight_values(rb), weight_scale)
            for i, c in enumerate(cols):
                arr = rb.column(pos[c])
                for v, n in _value_weights(arr, w):
                    counts[i][v] = counts[i].get(v, 0) + n
        return {c: top_values(list(m), list(m.values()), most) for c, m in zip(cols, counts)}

    def codes(self, plan: EncodingPlan, skip_cols: list[str]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(D, N) uint8 codes, (N,) class codes and (N,) int64 weight units (None when
        unweighted) of the kept rows, in row order."""
        parts, ys, ws = [], [], []
        scale = plan.weight_scale
        for rb in self._kept(skip_cols):
            if rb.num_rows == 0:
                continue
            chunk = np.empty((len(plan.columns), rb.num_rows), dtype=np.uint8)
            for j, col in enumerate(plan.columns):
                chunk[j] = encode_column(rb.column(j + 1), col)
            parts.append(chunk)
            ys.append(encode_label(rb.column(0), plan))
            if scale is not None:
                ws.append(units(weight_values(rb), scale))
        codes = (np.concatenate(parts, axis=1) if parts
                 else np.empty((len(plan.columns), 0), dtype=np.uint8))
        y = np.concatenate(ys).astype(np.int64) if ys else np.empty(0, dtype=np.int64)
        w = None if scale is None else (np.concatenate(ws) if ws else np.empty(0, np.int64))
        return codes, y, w


def _value_weights(arr: pa.Array, w: np.ndarray | None) -> Iterator[tuple[Any, int]]:
    """``(value, count)`` of the non-missing values of ``arr``: rows, or the sum of the
    rows' weight units ``w``."""
    miss = missing_mask(arr)
    if miss is not None:
        arr = arr.filter(pa.array(~miss))
        w = None if w is None else w[~miss]
    if w is None:
        vc = pc.value_counts(arr)
        yield from zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist())
        return
    table = pa.table({"v": arr, "w": pa.array(w, pa.int64())}).group_by("v").aggregate(
        [("w", "sum")])
    yield from zip(table.column("v").to_pylist(), table.column("w_sum").to_pylist())
