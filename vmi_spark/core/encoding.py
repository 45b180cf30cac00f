"""The encoding plan: how every feature column becomes small integer codes.

Spark-free (numpy and pyarrow only), shared by the Spark data layer
(:mod:`vmi_spark.spark.plan` computes the statistics and the sample, the Python
workers assign the codes) and the in-memory scikit-learn selector
(:mod:`vmi_spark.sklearn`). The rules:

* strings, booleans and numeric columns with at most ``maxCategories`` distinct
  values are categories, coded by their sorted distinct values
  (:func:`categorical_plan`);
* other numeric columns get ``numBins`` equal-frequency bins whose split points
  are exact quantiles of the column (of a content-hashed sample of
  :data:`SAMPLE_ROWS` rows when the table is larger), :func:`equal_frequency_splits`;
  a value ``v`` falls in bin ``#{splits <= v}``, the convention of Spark's
  ``Bucketizer`` (:func:`encode_column`);
* a missing value (null or NaN) is its own extra state, the last code.

References
----------
S. Gao, G. Ver Steeg, A. Galstyan. Variational Information Maximization for
Feature Selection. NIPS 2016 (features are discretised before the bound is computed).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .binning import STRATEGIES, Binning, assign_codes, fit_binning, label_binning, value_counts
from .binning import state_labels as binning_state_labels
from .limits import DEFAULT
from .units import show, show_state

#: rows used to place bin edges; exact quantiles up to this many rows (the default of
#: ``limits.current().sample_rows``, which the code reads)
SAMPLE_ROWS = DEFAULT.sample_rows
#: most states a feature may have (codes are one byte)
MAX_ARITY = 256


@dataclass
class ColumnPlan:
    """How one feature column is coded.

    ``kind`` is ``"category"`` (coded by the sorted ``values``), ``"bins"`` (by the
    sorted, unique ``splits``), ``"grid"`` (equal-width cells of the KDE estimator,
    coded like bins) or ``"constant"`` (one state). ``missing``: a missing state
    exists (the last code). ``dtype`` is the canonical type, ``"double"`` or
    ``"string"``. ``other``: a category column that keeps only its most frequent
    values (``values``) and codes every other value as one more state, after them
    (:func:`grouped_plan`). ``unit``: what the numbers of a temporal column mean
    (:mod:`vmi_spark.core.units`), for its state names.
    """

    name: str
    kind: str  # "category" | "bins" | "grid" (KDE) | "constant"
    values: list[Any] | None = None  # categories (sorted)
    splits: list[float] | None = None  # bin split points (sorted, unique)
    missing: bool = False  # a missing state exists (last code)
    dtype: str = "double"  # "double" | "string"
    spikes: list[float] | None = None  # bins: values that are a state of their own
    other: bool = False  # category: one state for every value not in ``values``
    unit: str | None = None  # date, timestamp, timestamp_ntz, interval, months

    @property
    def num_states(self) -> int:
        """Number of codes of the column (the missing state included)."""
        if self.kind == "category":
            base = len(self.values or []) + (1 if self.other else 0)
        elif self.kind in ("bins", "grid"):
            base = len(self.splits or []) + 1
        else:
            base = 1
        return max(base, 1) + (1 if self.missing else 0)

    def state_labels(self) -> list[str]:
        """Human-readable names of the states, in code order."""
        if self.kind == "category":
            labels = [show_state(v, self.unit) for v in self.values or []]
            labels = labels + ["(other)"] if self.other else labels or ["(empty)"]
        elif self.kind == "bins":
            edges = tuple(float(e) for e in self.splits or [])
            labels = binning_state_labels(Binning("quantile", edges, tuple(self.spikes or ())),
                                          self.unit)
        elif self.kind == "grid":
            cells = [-math.inf, *(self.splits or []), math.inf]
            labels = [f"[{show(cells[i], self.unit)}, {show(cells[i + 1], self.unit)})"
                      for i in range(len(cells) - 1)]
        else:
            labels = ["(constant)"]
        if self.missing:
            labels.append("(missing)")
        return labels


@dataclass
class EncodingPlan:
    """The codes of all features and of the label (``classes``, sorted)."""

    label: str
    classes: list[Any]
    label_dtype: str  # "string", "double", or "boolean" (coded as doubles 0 and 1)
    columns: list[ColumnPlan] = field(default_factory=list)
    num_rows: int = 0
    rows_dropped: int = 0  # null label
    rows_skipped: int = 0  # handleInvalid = skip
    label_type: str = "categorical"  # "categorical" | "continuous" (labelType)
    label_edges: list[float] | None = None  # continuous: the classes' edges
    label_spikes: list[float] | None = None  # continuous: label values that are a class
    #: row weights (:meth:`vmi_spark.core.weights.Weighting.report`): the column, the
    #: units per unit weight (``scale``), the kept rows' total weight; None: unweighted
    weights: dict[str, Any] | None = None

    @property
    def weight_scale(self) -> int | None:
        """Units per unit weight (1: whole-number weights; 1024), None when unweighted."""
        return None if self.weights is None else int(self.weights["scale"])

    @property
    def weight_rows(self) -> float:
        """What the rules count rows in: the kept rows' total weight, or their number."""
        return self.num_rows if self.weights is None else self.weights["total"]

    @property
    def features(self) -> list[str]:
        """The feature names, in column order."""
        return [c.name for c in self.columns]

    @property
    def arity(self) -> int:
        """The largest number of states of a feature."""
        return max((c.num_states for c in self.columns), default=1)

    def to_json(self) -> str:
        """The plan as JSON (numpy scalars as plain numbers)."""
        return json.dumps(asdict(self), default=_json_default)

    @classmethod
    def from_json(cls, text: str) -> EncodingPlan:
        """The plan :meth:`to_json` wrote."""
        raw = json.loads(text)
        cols = [ColumnPlan(**c) for c in raw.pop("columns")]
        return cls(columns=cols, **raw)


def _json_default(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return str(v)


def categorical_plan(name: str, dtype: str, distinct: list[Any] | None, missing: bool,
                     max_categories: int, unit: str | None = None) -> ColumnPlan | None:
    """The plan of a column coded by its values, or None if it has too many of them.

    Parameters
    ----------
    name : str
        The column name.
    dtype : {"double", "string"}
        The canonical type of the column.
    distinct : list or None
        The column's distinct non-missing values (any order), or None if there are
        more than ``max_categories`` of them.
    missing : bool
        Whether the column has a missing value (null or NaN) in a kept row.
    max_categories : int
        Most distinct values of a categorical column.
    unit : str, optional
        What a temporal column's numbers mean (:mod:`vmi_spark.core.units`).

    Returns
    -------
    ColumnPlan or None
        ``category`` (sorted values) or ``constant`` (no value at all); None for a
        column with more than ``max_categories`` values: a numeric one gets bins
        (:func:`binned_plan`), a string one keeps its most frequent values
        (:func:`grouped_plan`).
    """
    if distinct is not None and len(distinct) <= max_categories:
        vals = sorted(distinct)
        return ColumnPlan(name, "category" if vals else "constant", values=vals,
                          missing=missing, dtype=dtype, unit=unit)
    return None


@dataclass(frozen=True)
class TopValues:
    """The most frequent values of one column over the kept rows.

    ``values`` are at most the ``most`` asked for, by count (descending), ties by value
    (ascending), with their ``counts``; ``distinct`` is the number of distinct values
    and ``rows`` the number of non-missing values in all.
    """

    values: tuple[Any, ...]
    counts: tuple[int, ...]
    distinct: int
    rows: int


def top_values(values: list[Any], counts: list[int], most: int) -> TopValues:
    """:class:`TopValues` of a column from all its ``values`` and their ``counts``
    (distinct values, any order): the ``most`` most frequent, ties to the smaller value."""
    order = sorted(range(len(values)), key=lambda i: (-counts[i], values[i]))[:max(most, 0)]
    return TopValues(tuple(values[i] for i in order), tuple(int(counts[i]) for i in order),
                     len(values), int(sum(counts)))


#: a value of a grouped column needs at least this many rows to be a state of its own
MIN_STATE_ROWS = 10


def grouped_plan(name: str, dtype: str, top: TopValues, missing: bool,
                 max_categories: int, min_rows: int = MIN_STATE_ROWS) -> ColumnPlan:
    """A category column with more than ``max_categories`` values: its most frequent
    values (``top``, ties to the smaller value) are states of their own, in sorted order,
    at most ``max_categories - 1`` of them and each with at least ``min_rows`` rows, and
    every other value is one more state, ``(other)``, as scikit-learn's
    ``OneHotEncoder(max_categories=..., min_frequency=...)`` groups its infrequent
    categories (``max_categories`` counts that state). A value seen in a handful of rows
    tells the label by chance (an identifier would look informative: each of its values
    predicts its own rows' class); :data:`MIN_STATE_ROWS` is the rows a value the
    label rule asks of a class (:data:`vmi_spark.core.planning.AUTO_ROWS_PER_VALUE`).

    References
    ----------
    scikit-learn, ``sklearn.preprocessing.OneHotEncoder``, parameters ``max_categories``
    and ``min_frequency`` (infrequent categories), version 1.1 and later.
    """
    kept = sorted(v for v, n in zip(top.values[:max(max_categories - 1, 0)], top.counts)
                  if n >= min_rows)
    return ColumnPlan(name, "category" if kept or top.distinct else "constant", values=kept,
                      missing=missing, dtype=dtype, other=top.distinct > len(kept))


def binned_plan(name: str, splits: list[float], missing: bool,
                spikes: list[float] | None = None, unit: str | None = None) -> ColumnPlan:
    """The plan of a numeric column coded by bins with the given split points (and the
    values among them that are a state of their own, :func:`column_binning`)."""
    return ColumnPlan(name, "bins", splits=list(splits), missing=missing,
                      spikes=list(spikes) if spikes else None, unit=unit)


#: how numeric columns with many values are cut: spike-aware equal-frequency or equal width
BINNINGS = STRATEGIES


def column_binning(values: np.ndarray, num_bins: int, binning: str = "quantile",
                   weights: np.ndarray | None = None) -> tuple[list[float], list[float]]:
    """The split rule of a binned column: its split points and spikes under ``binning``.

    Parameters
    ----------
    values : ndarray of float64
        The column's values in the kept rows (or a sample of them); NaN is ignored.
    num_bins : int
        At most this many states.
    binning : {"quantile", "uniform"}
        (``mdlp`` needs the rows' classes: :func:`fit_sample`.)
        ``quantile``: spike-aware equal-frequency bins, every value holding more than
        1/num_bins of the rows a state of its own
        (:func:`vmi_spark.core.binning.quantile_binning`); without such a value these
        are the split points of :func:`equal_frequency_splits`. ``uniform``: equal
        width between robust limits (:func:`vmi_spark.core.binning.uniform_binning`).
    weights : int array, optional
        The rows' integer weights (:mod:`vmi_spark.core.weights`): the rows' shares are
        shares of their weight.

    Returns
    -------
    (list of float, list of float)
        Sorted, unique split points (a value ``v`` gets the code ``#{splits <= v}``)
        and the spikes: the values that are a state of their own, each bounded by the
        split point just above it, the next double (and by itself, unless it is the
        smallest value).
    """
    if binning not in BINNINGS:
        raise ValueError(f"unknown binning {binning!r} (choose from {', '.join(BINNINGS)})")
    b = fit_binning(binning, values, num_bins, weights=weights)
    return [float(e) for e in b.edges], [float(s) for s in b.spikes]


@dataclass(frozen=True)
class SplitRequest:
    """What the planner asks a row source for the bin edges (``PlanSource.quantile_splits``):
    :func:`fit_sample` of the columns ``cols`` over the kept rows (a label, and no missing
    value in ``skip_cols``), of a sample above :data:`SAMPLE_ROWS` of the ``rows`` rows
    chosen by a hash of the label, ``cols`` and ``hash_extra``.

    ``rule`` reads the sampled rows' label (``mdlp``; a continuous label, whose own edges
    come back under its name); ``weight_scale``: with row weights, each sampled row counts
    by its weight in units of that scale (:mod:`vmi_spark.core.weights`).
    """

    label: str
    cols: tuple[str, ...]
    num_bins: int
    rows: int
    skip_cols: tuple[str, ...] = ()
    binning: str = "quantile"
    rule: LabelRule | None = None
    hash_extra: tuple[str, ...] = ()
    weight_scale: int | None = None


@dataclass(frozen=True)
class LabelRule:
    """How the label of the sampled rows is read while bin edges are placed.

    Needed when a column is binned with ``mdlp`` (supervised: it counts classes) or
    when the label is continuous (its classes are bins placed on the same sample).
    The sources ship each sampled row's *label key*: the value of a numeric label, the
    class index of a string label (:func:`label_keys`).

    ``continuous``: the label is binned into ``label_bins`` classes
    (:func:`vmi_spark.core.binning.label_binning`); otherwise ``classes`` are the
    plan's sorted classes.
    """

    continuous: bool
    classes: tuple[Any, ...] = ()
    label_bins: int = 10
    string: bool = False  # a string label: keys are class indices

    def binning(self, keys: np.ndarray, weights: np.ndarray | None = None) -> Binning | None:
        """The label's binning (continuous labels; by the rows' ``weights`` if given), else
        None."""
        if not self.continuous:
            return None
        known = ~np.isnan(keys)
        return label_binning(*value_counts(keys[known],
                                           None if weights is None else weights[known]),
                             self.label_bins)

    def codes(self, keys: np.ndarray, label_bins: Binning | None) -> np.ndarray:
        """Class codes (int64) of the label keys of the sampled rows."""
        if label_bins is not None:
            return assign_codes(label_bins.edges, keys)
        if self.string:
            return keys.astype(np.int64)
        return np.searchsorted(np.asarray(self.classes, dtype=np.float64), keys).astype(np.int64)

    @property
    def num_classes(self) -> int | None:
        """Classes of a categorical label (a continuous one has them after binning)."""
        return None if self.continuous else len(self.classes)


def label_keys(arr: pa.Array, rule: LabelRule) -> np.ndarray:
    """float64 keys of labels (the rows are labelled): a numeric label's value, or the
    index of a string label among ``rule.classes``."""
    if rule.string:
        idx = pc.index_in(arr, value_set=pa.array(list(rule.classes), type=pa.string()))
        return idx.to_numpy(zero_copy_only=False).astype(np.float64)
    return arr.to_numpy(zero_copy_only=False).astype(np.float64)


def fit_sample(columns: list[np.ndarray], num_bins: int, binning: str,
               keys: np.ndarray | None = None, rule: LabelRule | None = None,
               weights: np.ndarray | None = None
               ) -> tuple[tuple[list[float], list[float]] | None, list[tuple[list[float], list[float]]]]:
    """The split rules of the sampled rows: the label's (continuous labels) and each
    column's, as ``(splits, spikes)`` pairs (:func:`column_binning`).

    ``keys`` and ``rule`` (:class:`LabelRule`) are needed for a continuous label and for
    ``binning="mdlp"``, whose class counts use the label's class codes. ``weights`` are
    the sampled rows' integer weights (:mod:`vmi_spark.core.weights`), or None.
    """
    if binning not in BINNINGS:
        raise ValueError(f"unknown binning {binning!r} (choose from {', '.join(BINNINGS)})")
    if rule is None or keys is None:
        if binning == "mdlp" or (rule is not None and rule.continuous):
            raise ValueError("the label of the sampled rows is needed here")
        return None, [column_binning(v, num_bins, binning, weights) for v in columns]
    lb = rule.binning(keys, weights)
    label_rule = None if lb is None else ([float(e) for e in lb.edges], [float(x) for x in lb.spikes])
    if binning != "mdlp":
        return label_rule, [column_binning(v, num_bins, binning, weights) for v in columns]
    y = rule.codes(keys, lb)
    k = lb.num_states if lb is not None else len(rule.classes)
    out = []
    for v in columns:
        b = fit_binning(binning, v, num_bins, labels=y, num_classes=k, weights=weights)
        out.append(([float(e) for e in b.edges], [float(x) for x in b.spikes]))
    return label_rule, out


def equal_frequency_splits(values: np.ndarray, num_bins: int) -> list[float]:
    """The split rule: points giving ``num_bins`` (or fewer, on ties) equal-frequency bins.

    Parameters
    ----------
    values : ndarray of float64
        The column's values in the kept rows (or a sample of them); NaN is ignored.
    num_bins : int
        The number of bins wanted.

    Returns
    -------
    list of float
        Sorted, unique split points: the values at ranks ``floor(k n / num_bins)``,
        k = 1 .. num_bins - 1, of the sorted values, above the minimum.
    """
    v = np.sort(values[~np.isnan(values)])
    n = len(v)
    if n == 0:
        return []
    idx = (np.arange(1, num_bins) * n) // num_bins
    cand = np.unique(v[idx])
    return [float(s) for s in cand if s > v[0]]


def doubles(arr: pa.Array) -> np.ndarray:
    """A numeric column's values as a new float64 array: null as NaN, -0.0 as 0.0.

    ``arr`` may be any Arrow integer or floating type; every value is read as the double
    nearest to it (exact for 32-bit integers and floats)."""
    v = arr.to_numpy(zero_copy_only=False).astype(np.float64)  # a copy; nulls -> nan
    v += 0.0  # -0.0 + 0.0 == +0.0
    return v


#: Arrow integer types coded through a table over all their bit patterns
_LOOKUP_BITS = {pa.int8(): 8, pa.uint8(): 8}
#: most split points or categories coded by counting comparisons (vectorised; above
#: this a binary search per value is cheaper)
_COUNT_BELOW = 16
#: widest range of integer categories coded by one table lookup per value
_TABLE_RANGE = 4096


def _count_at_least(v: np.ndarray, points: np.ndarray, strict: bool = False) -> np.ndarray:
    """uint8 ``#{points <= v}`` (``strict``: ``#{points < v}``) per value of the float64
    ``v`` for sorted ``points``: NaN counts 0 (a comparison with NaN is false)."""
    if len(points) > _COUNT_BELOW:
        found = (np.searchsorted(points, v, side="left") if strict
                 else np.searchsorted(points, v, side="right"))
        out = found.astype(np.uint8)
        out[np.isnan(v)] = 0
        return out
    out = np.zeros(len(v), dtype=np.uint8)
    tmp = np.empty(len(v), dtype=bool)
    compare = np.greater if strict else np.greater_equal
    for p in points:
        compare(v, p, out=tmp)
        out += tmp
    return out


def _as_doubles(raw: np.ndarray) -> np.ndarray:
    """float64 values of a numeric numpy array (exact for 32-bit types; no copy if float64)."""
    return raw if raw.dtype == np.float64 else raw.astype(np.float64)


def _category_codes(arr: pa.Array, values: list[Any], fill: int,
                    dtype: str = "double") -> np.ndarray:
    """uint8 positions of a column's values among the sorted ``values``; a value not
    among them (missing, NaN) gets ``fill``. Numbers compare as doubles (-0.0 == 0.0)."""
    if dtype == "string":
        idx = pc.index_in(arr, value_set=pa.array(values, type=pa.string()))
        return idx.fill_null(fill).to_numpy(zero_copy_only=False).astype(np.uint8)
    n = len(arr)
    if not values:
        return np.full(n, fill, dtype=np.uint8)
    points = np.asarray(values, dtype=np.float64)
    raw = arr.to_numpy(zero_copy_only=False)  # nulls -> nan
    lo, hi = points[0], points[-1]
    bits = _LOOKUP_BITS.get(arr.type)
    if bits is not None and arr.null_count == 0:
        # bytes: a table over the 256 bit patterns, one lookup per value
        signed = pa.types.is_signed_integer(arr.type)
        patterns = np.arange(1 << bits, dtype=np.int64)
        as_value = patterns - (1 << bits) * (patterns >= (1 << (bits - 1))) if signed else patterns
        at = np.searchsorted(points, as_value)
        hit = points[np.minimum(at, len(points) - 1)] == as_value
        table = np.where(hit, at, fill).astype(np.uint8)
        out = table[raw.view(np.uint8)]
    elif np.all(points == np.floor(points)) and hi - lo < _TABLE_RANGE:
        # integer categories: one table lookup per value, off the table -> fill
        table = np.full(int(hi - lo) + 2, fill, dtype=np.uint8)
        table[(points - lo).astype(np.int64)] = np.arange(len(points))
        if raw.dtype.kind in "iu":
            at = raw.astype(np.int64) - int(lo)
        else:
            v = _as_doubles(raw)
            whole = v == np.floor(v)  # NaN, inf: False
            at = np.where(whole, v - lo, -1.0)  # -1: off the table
            np.clip(at, -1, len(table) - 1, out=at)
            at = at.astype(np.int64)
        at[(at < 0) | (at > len(table) - 2)] = len(table) - 1  # the last cell holds fill
        out = table[at]
    else:
        v = _as_doubles(raw)
        idx = _count_at_least(v, points, strict=True)  # position if v is a category
        hit = points[np.minimum(idx, len(points) - 1)] == v  # NaN never matches
        out = np.where(hit, idx, fill).astype(np.uint8)
    return out  # (an integer column with nulls comes out of to_numpy as float64 with NaN)


def encode_column(arr: pa.Array, col: ColumnPlan) -> np.ndarray:
    """The code assignment: uint8 codes of one column by its :class:`ColumnPlan`.

    ``arr`` holds strings, or numbers of any Arrow integer or floating type read as
    doubles (-0.0 is 0.0); null and NaN are missing. A category is the position of the
    value among the plan's values; a bin is the number of split points ``<= v``; a
    missing value gets the last code (0 when the plan has no missing state).
    """
    miss_code = col.num_states - 1
    fill = miss_code if col.missing else 0
    if col.kind == "constant":
        if col.missing:
            return np.where(pc.is_null(arr, nan_is_null=True).to_numpy(zero_copy_only=False),
                            miss_code, 0).astype(np.uint8)
        return np.zeros(len(arr), dtype=np.uint8)
    if col.other:  # a value not among the kept ones is the state after them
        out = _category_codes(arr, col.values or [], len(col.values or []), col.dtype)
        if col.missing:
            out[pc.is_null(arr, nan_is_null=True).to_numpy(zero_copy_only=False)] = miss_code
        return out
    if col.kind == "category":
        return _category_codes(arr, col.values or [], fill, col.dtype)
    v = _as_doubles(arr.to_numpy(zero_copy_only=False))  # nulls -> nan
    codes = _count_at_least(v, np.asarray(col.splits, dtype=np.float64))
    if col.missing:
        codes[np.isnan(v)] = miss_code
    return codes


#: every one-byte integer, in the order of its bit pattern read as unsigned (0..127, -128..-1)
_BYTES = np.arange(256, dtype=np.uint8).view(np.int8)


def coding_key(col: ColumnPlan) -> tuple:
    """What :func:`encode_column` reads of ``col``: two columns with equal keys give every
    value the same code (the name and the bins' ``spikes``, which label states, do not
    count). Values compare as Python objects: 3 and 3.0, -0.0 and 0.0 are equal, as they
    are when coded."""
    def items(seq):
        return None if seq is None else tuple(seq)
    return (col.kind, col.dtype, items(col.values), items(col.splits), col.missing, col.other)


def byte_table(col: ColumnPlan) -> np.ndarray:
    """(256,) uint8: the code :func:`encode_column` gives each one-byte integer value of a
    numeric column, indexed by the value's bit pattern (``int8`` viewed as ``uint8``).

    A code depends on its own value only, so looking a column's values up in this table
    gives the codes of encoding the column (:func:`encode_bytes`).
    """
    if col.dtype == "string":
        raise ValueError(f"column {col.name!r} holds strings, not numbers")
    return encode_column(pa.array(_BYTES), col)


def encode_bytes(values: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """(w, n) uint8 codes of the (w, n) ``int8`` values of ``w`` columns, each looked up in
    its row of ``tables`` ((w, 256), :func:`byte_table`): one gather for all the columns
    instead of one :func:`encode_column` per column (about 0.9 ns a value, against a
    fixed 9 to 11 us a column for short columns)."""
    w, n = values.shape
    if tables.shape != (w, 256):
        raise ValueError(f"{w} columns need ({w}, 256) tables, not {tables.shape}")
    at = values.view(np.uint8).astype(np.intp)
    at += (np.arange(w, dtype=np.intp) * 256)[:, None]
    return np.take(np.ascontiguousarray(tables, dtype=np.uint8).ravel(), at)


def encode_label(arr: pa.Array, plan: EncodingPlan) -> np.ndarray:
    """uint16 class codes: the position of each label among ``plan.classes`` or, for a
    continuous label, its bin ``#{label_edges <= v}``."""
    if plan.label_type == "continuous":
        v = arr.to_numpy(zero_copy_only=False).astype(np.float64)
        edges = np.asarray(plan.label_edges or [], dtype=np.float64)
        return np.searchsorted(edges, v, side="right").astype(np.uint16)
    typ = pa.string() if plan.label_dtype == "string" else pa.float64()
    idx = pc.index_in(arr, value_set=pa.array(plan.classes, type=typ))
    return idx.to_numpy(zero_copy_only=False).astype(np.uint16)
