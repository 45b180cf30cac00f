"""Decide how every input column becomes small integer codes (the encoding plan).

The rules are those of :mod:`vmi_spark.core.encoding`; this module computes what
they need from the rows with a few passes of a :class:`RowSource` (the Spark reader,
:class:`.spark_source.SparkSource`, or the pyarrow reader,
:class:`.arrow_source.ParquetReader`). The plan is a pure function of the data, not
of its partitioning nor of the reader.
"""

from __future__ import annotations

from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..core.binning import DEFAULT_LABEL_BINS, Binning, resolve_label_type
from ..core.binning import state_labels as binning_state_labels
from ..core.encoding import (
    ColumnPlan,
    EncodingPlan,
    LabelRule,
    TooManyCategories,
    binned_plan,
    categorical_plan,
)
from ..errors import InputError
from ..params import ParameterError, literal

#: columns fetched to the driver at once when placing bin edges
SPLIT_CHUNK = 64

_FLOATING = (T.FloatType, T.DoubleType, T.DecimalType)
_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType,
            T.DoubleType, T.DecimalType)


class RowSource(Protocol):
    """Where the passes over the rows read them (see the module docstring).

    Every method sees the rows the plan keeps: rows with a label and, when
    ``skip_cols`` are given (``handleInvalid`` skip), no missing value in those columns.
    """

    def column_stats(self, label: str, features: list[str], max_categories: int,
                     max_classes: int, skip: bool) -> dict[str, Any]:
        """One pass: :func:`vmi_spark.spark.rows.column_stats_fn` merged over all rows."""
        ...

    def quantile_splits(self, label: str, cols: list[str], num_bins: int, rows: int,
                        skip_cols: list[str], binning: str = "quantile",
                        rule: LabelRule | None = None, hash_extra: list[str] | None = None
                        ) -> dict[str, tuple[list[float], list[float]]]:
        """:func:`vmi_spark.core.encoding.fit_sample` of the columns ``cols`` over the
        kept rows (a sample of them above ``SAMPLE_ROWS``, chosen by a hash of the label,
        ``cols`` and ``hash_extra``); the label maps to its own when ``rule`` makes it
        continuous. ``rule`` gives the sampled rows' classes (``mdlp``, continuous labels)."""
        ...

    def encode_blocks(self, plan: EncodingPlan, block_rows: int,
                      skip_cols: list[str]) -> DataFrame:
        """The kept rows as block rows of codes (:mod:`vmi_spark.spark.blocks`)."""
        ...


def is_numeric(dt: T.DataType) -> bool:
    """Whether a Spark type is a number (coded as a double)."""
    return isinstance(dt, _NUMERIC)


def quote(name: str) -> str:
    """Backtick-quote a column name so dots and odd characters are taken literally."""
    return "`" + name.replace("`", "``") + "`"


def resolve_columns(df: DataFrame, label: str, features: list[str] | None) -> list[str]:
    """Check the label and feature columns exist and have usable types."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    if label not in fields:
        raise InputError(f"label column '{label}' not found in the input (columns: "
                         f"{', '.join(list(fields)[:10])}{'...' if len(fields) > 10 else ''})")
    if features is None:
        features = [c for c in fields if c != label]
    else:
        missing = [c for c in features if c not in fields]
        if missing:
            raise InputError(f"feature column '{missing[0]}' not found in the input")
        if label in features:
            raise InputError(f"label column '{label}' is also listed as a feature")
        if len(set(features)) != len(features):
            dup = next(c for c in features if features.count(c) > 1)
            raise InputError(f"feature column '{dup}' is listed twice")
    if not features:
        raise InputError("no feature columns: the input has only the label column")
    for c in features:
        dt = fields[c]
        if not (is_numeric(dt) or isinstance(dt, (T.StringType, T.BooleanType))):
            raise InputError(f"feature column '{c}' has unsupported type {dt.simpleString()} "
                             "(use numeric, string or boolean columns, or a vector column)")
    ldt = fields[label]
    if not (is_numeric(ldt) or isinstance(ldt, (T.StringType, T.BooleanType))):
        raise InputError(f"label column '{label}' has unsupported type {ldt.simpleString()}")
    return features


def _binned(name: str, split: tuple[list[float], list[float]], missing: bool) -> ColumnPlan:
    """The plan of a binned column from its (split points, spikes)."""
    return binned_plan(name, split[0], missing, split[1])


def build_plan(df: DataFrame | T.StructType, label: str, features: list[str], num_bins: int,
               max_categories: int, max_classes: int, handle_invalid: str,
               source: RowSource, binning: str = "quantile", label_type: str = "auto",
               label_bins: int = DEFAULT_LABEL_BINS) -> tuple[EncodingPlan, list[str]]:
    """Compute the encoding plan with the passes of ``source`` over the rows.

    ``df`` (a DataFrame or its schema) gives the types of the label and feature columns.
    Returns the plan and the columns whose missing values drop a row (``skip_cols``,
    non-empty only with ``handleInvalid`` skip), which ``source.encode_blocks`` needs.
    The parameters were checked by :func:`vmi_spark.params.validate`.
    """
    schema = df if isinstance(df, T.StructType) else df.schema
    types = {f.name: f.dataType for f in schema.fields}
    ldt = types[label]
    stats = source.column_stats(label, features, max_categories, max_classes,
                                handle_invalid == "skip")
    total, null_labels = stats["rows"], stats["null_labels"]
    if total == 0:
        raise InputError("the input has no rows")
    if null_labels == total:
        raise InputError(f"no labelled rows: every value of label column '{label}' is null")
    missing = dict(zip(features, stats["missing"]))
    skipped = 0
    skip_cols: list[str] = []  # rows with a missing value in one of these are dropped
    if handle_invalid == "error":
        bad = next((c for c in features if missing[c] > 0), None)
        if bad is not None:
            raise ParameterError("handle_invalid", f"feature column {literal(repr(bad))} has "
                                 f"{missing[bad]} missing values (null or NaN) and "
                                 "{handle_invalid} is 'error'")
    elif handle_invalid == "skip" and stats["skipped"]:
        skip_cols = [c for c in features if missing[c]]
        skipped = stats["skipped"]
        missing = {c: 0 for c in features}
    rows = total - null_labels - skipped
    if rows == 0:
        raise ParameterError("handle_invalid", "no rows left after dropping rows with "
                             "missing feature values ({handle_invalid} is 'skip')")
    string_label = isinstance(ldt, T.StringType)
    if label_type == "continuous" and not is_numeric(ldt):
        raise ParameterError("label_type", "{label_type} is 'continuous' but label column "
                             f"{literal(repr(label))} is not numeric")
    kind = resolve_label_type(label_type, stats["classes"], numeric=is_numeric(ldt),
                              floating=isinstance(ldt, _FLOATING))
    continuous = kind == "continuous"
    classes: list[Any] = []
    if not continuous:
        if stats["classes"] is None:
            hint = "" if string_label else "use {label_type} continuous to bin it into classes, or "
            raise ParameterError("max_classes", f"label column {literal(repr(label))} has more "
                                 f"than {max_classes} distinct values ({{max_classes}}); "
                                 f"{hint}raise {{max_classes}}")
        classes = sorted(stats["classes"])
        if len(classes) < 2:
            raise InputError(f"label column '{label}' has a single class ({classes[0]!r}); "
                             "feature selection needs at least two")

    plans: list[ColumnPlan | None] = []  # None: binned, split points placed below
    for c, distinct in zip(features, stats["values"]):
        dtype = "string" if isinstance(types[c], T.StringType) else "double"
        try:
            plans.append(categorical_plan(c, dtype, distinct, missing[c] > 0, max_categories))
        except TooManyCategories:
            raise ParameterError("max_categories", f"string column {literal(repr(c))} has more "
                                 f"than {max_categories} distinct values ({{max_categories}}); "
                                 "raise {max_categories} or leave the column out") from None
    to_bin = [c for c, p in zip(features, plans) if p is None]
    rule = None
    if continuous or (binning == "mdlp" and to_bin):
        rule = LabelRule(continuous=continuous, classes=tuple(classes), label_bins=label_bins,
                         string=string_label)
    splits = {}
    if to_bin or continuous:
        # a label alone is sampled by the hash of whole rows, not of the label's value
        splits = source.quantile_splits(label, to_bin, num_bins, rows, skip_cols, binning,
                                        rule=rule, hash_extra=[] if to_bin else features)
    label_edges = label_spikes = None
    if continuous:
        label_edges, label_spikes = (list(x) for x in splits.get(label, ([], [])))
        names = binning_state_labels(Binning("quantile", tuple(label_edges), tuple(label_spikes)))
        if len(names) < 2:
            raise InputError(f"label column '{label}' is continuous but has a single value; "
                             "feature selection needs at least two classes")
        classes = names
    columns = [p if p is not None else _binned(c, splits.get(c, ([], [])), missing[c] > 0)
               for c, p in zip(features, plans)]
    plan = EncodingPlan(label=label, classes=classes,
                        label_dtype="string" if string_label else "double",
                        columns=columns, num_rows=rows, rows_dropped=null_labels,
                        rows_skipped=skipped, label_type=kind, label_edges=label_edges,
                        label_spikes=label_spikes or None)
    return plan, skip_cols
