"""Decide how every input column becomes small integer codes (the encoding plan).

The plan is computed with a few aggregations and is a pure function of the data,
not of its partitioning:

* strings, booleans and numeric columns with at most ``maxCategories`` distinct
  values are categories, coded by their sorted distinct values;
* other numeric columns get ``numBins`` equal-frequency bins whose split points
  are exact quantiles of the column (of a content-hashed sample of
  :data:`SAMPLE_ROWS` rows when the table is larger); a value ``v`` falls in bin
  ``#{splits <= v}``, the convention of Spark's ``Bucketizer``;
* a missing value (null or NaN) is its own extra state when ``handleInvalid`` is
  ``keep``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core.columns import MAX_ARITY, ColumnPlan, equal_frequency_splits
from ..errors import InputError
from .storage import keep

#: rows used to place bin edges; exact quantiles up to this many rows
SAMPLE_ROWS = 200_000
#: columns fetched to the driver at once when placing bin edges
_SPLIT_CHUNK = 64
#: the struct column of a packed frame (see :func:`packed`)
_PACKED = "_row"

_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType,
            T.DoubleType, T.DecimalType)


@dataclass
class EncodingPlan:
    """The codes of all features and of the label."""

    label: str
    classes: list[Any]
    label_dtype: str
    columns: list[ColumnPlan] = field(default_factory=list)
    num_rows: int = 0
    rows_dropped: int = 0  # null label
    rows_skipped: int = 0  # handleInvalid = skip

    @property
    def features(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def arity(self) -> int:
        return max((c.num_states for c in self.columns), default=1)

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=_json_default)

    @classmethod
    def from_json(cls, text: str) -> EncodingPlan:
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


def _is_numeric(dt: T.DataType) -> bool:
    return isinstance(dt, _NUMERIC)


def _missing(col: str, dt: T.DataType):
    c = F.col(quote(col))
    if isinstance(dt, (T.FloatType, T.DoubleType)):
        return c.isNull() | F.isnan(c)
    return c.isNull()


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
        if not (_is_numeric(dt) or isinstance(dt, (T.StringType, T.BooleanType))):
            raise InputError(f"feature column '{c}' has unsupported type {dt.simpleString()} "
                             "(use numeric, string or boolean columns, or a vector column)")
    ldt = fields[label]
    if not (_is_numeric(ldt) or isinstance(ldt, (T.StringType, T.BooleanType))):
        raise InputError(f"label column '{label}' has unsupported type {ldt.simpleString()}")
    return features


def positional(df: DataFrame, names: list[str], prefix: str = "_c") -> DataFrame:
    """``df`` reduced to ``names`` in that order, renamed ``_c0, _c1, ...``.

    PySpark's ``mapInArrow`` resolves every column by its unquoted name, so a name
    with a dot, a backtick or a ``*`` fails there; the executor functions read the
    columns by position instead.
    """
    # one selectExpr, not a Column per name: on a wide table each PySpark Column call is a
    # round trip to the JVM (milliseconds each, seconds for 1,000 columns)
    return df.selectExpr(*[f"{quote(c)} AS {prefix}{i}" for i, c in enumerate(names)])


def typed_array(arr: pa.Array, kind: str) -> pa.Array:
    """A column typed as :func:`prepare_frame` types it: ``kind`` "string", or "double"
    (integers and booleans as doubles, -0.0 as 0.0)."""
    if kind == "string":
        return arr.cast(pa.string())
    if not pa.types.is_floating(arr.type):
        # integers and booleans have no -0.0; a long above 2**53 rounds to the nearest
        # double, as Spark's CAST does (a safe cast would refuse it)
        return pc.cast(arr, pa.float64(), safe=False)
    return pc.add(arr.cast(pa.float64()), 0.0)  # -0.0 + 0.0 == +0.0; NaN and null stay


def column_kinds(df: DataFrame, names: list[str]) -> list[str]:
    """The kind :func:`prepare_frame` gives each column: "string" or "double"."""
    types = {f.name: f.dataType for f in df.schema.fields}
    return ["string" if isinstance(types[c], T.StringType) else "double" for c in names]


def packed(df: DataFrame, names: list[str]) -> DataFrame:
    """``df`` reduced to ``names`` in that order, packed into one struct column.

    Map it with ``mapInArrow`` and a function wrapped in :func:`unpacked`, which gets
    record batches of the columns ``_c0, _c1, ...`` typed as :func:`prepare_frame`
    types them. On a wide table this is what keeps planning and encoding cheap:

    * PySpark's ``mapInArrow`` makes one JVM call per input column, each resolving a
      name against the whole plan (18 s for 7,000 columns); one struct column is one
      call, and names with dots, backticks or ``*`` need no quoting there;
    * the values are typed in the Python workers, not by a projection with a cast per
      column, which Spark runs at seconds per pass at 7,000 columns, however few the
      rows. Only decimals are cast in Spark (to double, Spark's rounding).
    """
    types = {f.name: f.dataType for f in df.schema.fields}

    def value(c: str) -> str:
        return f"CAST({quote(c)} AS DOUBLE)" if isinstance(types[c], T.DecimalType) else quote(c)

    fields = ", ".join(f"'_c{i}', {value(c)}" for i, c in enumerate(names))
    return df.selectExpr(f"named_struct({fields}) AS {_PACKED}")


def unpacked(fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
             kinds: list[str]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``fn`` over the batches of a :func:`packed` frame, unpacked and typed (``kinds``
    from :func:`column_kinds`)."""
    names = [f"_c{i}" for i in range(len(kinds))]

    def typed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            cols = rb.column(0).flatten()
            yield pa.RecordBatch.from_arrays(
                [typed_array(a, k) for a, k in zip(cols, kinds)], names=names)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return fn(typed(batches))
    return run


def prepare_frame(df: DataFrame, label: str, features: list[str]) -> DataFrame:
    """Select the label and features with canonical types (double / string).

    Numeric values are normalised so that -0.0 becomes 0.0: they compare equal, but
    Arrow's hashing (distinct values, ``index_in``) tells them apart.
    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    for c in [label, *features]:
        dt, q = fields[c], quote(c)
        if _is_numeric(dt):
            v = f"CAST({q} AS DOUBLE)"
            cols.append(f"CASE WHEN {v} = 0.0D THEN 0.0D ELSE {v} END AS {q}")
        elif isinstance(dt, T.BooleanType):
            cols.append(f"CAST(CAST({q} AS INT) AS DOUBLE) AS {q}")
        else:
            cols.append(f"CAST({q} AS STRING) AS {q}")
    return df.selectExpr(*cols)  # one JVM call (see positional)


def build_plan(df: DataFrame, label: str, features: list[str], num_bins: int,
               max_categories: int, max_classes: int, handle_invalid: str,
               reader: Any = None) -> tuple[DataFrame, EncodingPlan]:
    """Compute the encoding plan; returns the filtered, typed frame and the plan.

    ``df`` holds the label and feature columns with any supported types: the passes
    over the rows type the values as :func:`prepare_frame` does. With a
    ``reader`` (:class:`vmi_spark.spark.arrow_source.ParquetReader`) the passes over the
    rows read the Parquet files behind ``df`` instead, ``df`` may be the untyped input
    (only its schema is used), and it is returned unfiltered; the plan is the same.
    """
    if not 2 <= num_bins <= MAX_ARITY - 1:
        raise InputError(f"numBins must be between 2 and {MAX_ARITY - 1}, got {num_bins}")
    if not 1 <= max_categories <= MAX_ARITY - 1:
        raise InputError(f"maxCategories must be between 1 and {MAX_ARITY - 1}, got {max_categories}")
    if max_classes < 2 or max_classes > 65535:
        raise InputError(f"maxClasses must be between 2 and 65535, got {max_classes}")
    if handle_invalid not in ("keep", "skip", "error"):
        raise InputError(f"handleInvalid must be keep, skip or error, got {handle_invalid!r}")
    types = {f.name: f.dataType for f in df.schema.fields}
    ldt = types[label]
    if reader is not None:
        stats = reader.column_stats(label, features, max_categories, max_classes, handle_invalid)
    else:
        stats = _column_stats(df, label, features, max_categories, max_classes, handle_invalid)
    total, null_labels = stats["rows"], stats["null_labels"]
    if total == 0:
        raise InputError("the input has no rows")
    if null_labels == total:
        raise InputError(f"no labelled rows: every value of label column '{label}' is null")
    if reader is None:  # a reader drops the same rows itself
        df = df.where(~_missing(label, ldt))
    missing = dict(zip(features, stats["missing"]))
    skipped = 0
    skip_cols: list[str] = []  # rows with a missing value in one of these are dropped
    if handle_invalid == "error":
        bad = next((c for c in features if missing[c] > 0), None)
        if bad is not None:
            raise InputError(f"feature column '{bad}' has {missing[bad]} missing values "
                             "(null or NaN) and handleInvalid is 'error'")
    elif handle_invalid == "skip" and stats["skipped"]:
        skip_cols = [c for c in features if missing[c]]
        if reader is None:  # a reader drops these rows itself
            cond = None
            for c in skip_cols:
                m = _missing(c, types[c])
                cond = m if cond is None else (cond | m)
            if cond is not None:
                df = df.where(~cond)
        skipped = stats["skipped"]
        missing = {c: 0 for c in features}
    rows = total - null_labels - skipped
    if rows == 0:
        raise InputError("no rows left after dropping rows with missing feature values "
                         "(handleInvalid is 'skip')")
    if stats["classes"] is None:
        hint = (" it looks continuous: bin it into classes first"
                if isinstance(ldt, (T.FloatType, T.DoubleType, T.DecimalType)) else "")
        raise InputError(f"label column '{label}' has more than {max_classes} distinct values "
                         f"(maxClasses);{hint} or raise --max-classes")
    classes = sorted(stats["classes"])
    if len(classes) < 2:
        raise InputError(f"label column '{label}' has a single class ({classes[0]!r}); "
                         "feature selection needs at least two")
    exact = {c: sorted(v) for c, v in zip(features, stats["values"]) if v is not None}

    plans: list[ColumnPlan] = []
    to_bin: list[str] = []
    for c in features:
        is_str = isinstance(types[c], T.StringType)
        miss = missing[c] > 0
        if c in exact and len(exact[c]) <= max_categories:
            vals = exact[c]
            kind = "category" if vals else "constant"
            plans.append(ColumnPlan(c, kind, values=vals, missing=miss,
                                    dtype="string" if is_str else "double"))
        elif is_str:
            raise InputError(f"string column '{c}' has more than {max_categories} distinct values "
                             "(maxCategories); raise --max-categories or leave it out with --features")
        else:
            plans.append(ColumnPlan(c, "bins", splits=[], missing=miss))
            to_bin.append(c)
    if to_bin:
        if reader is not None:
            splits = reader.quantile_splits(label, to_bin, num_bins, rows, skip_cols)
        else:
            splits = _quantile_splits(prepare_frame(df, label, to_bin), to_bin, num_bins, rows,
                                      label)
        for p in plans:
            if p.name in splits:
                p.splits = splits[p.name]
    plan = EncodingPlan(label=label, classes=classes,
                        label_dtype="string" if isinstance(ldt, T.StringType) else "double",
                        columns=plans, num_rows=rows, rows_dropped=null_labels,
                        rows_skipped=skipped)
    return df, plan


def missing_mask(arr: pa.Array) -> np.ndarray | None:
    """Where ``arr`` is null or NaN, or None when nothing is (the common case, cheaply)."""
    if pa.types.is_floating(arr.type):
        m = np.isnan(arr.to_numpy(zero_copy_only=False))  # nulls come out as NaN
        return m if m.any() else None
    if arr.null_count == 0:
        return None
    return ~arr.is_valid().to_numpy(zero_copy_only=False)


def _and_not(keep: np.ndarray | None, m: np.ndarray | None) -> np.ndarray | None:
    """``keep & ~m`` where None means all rows (keep) or no rows (m)."""
    if m is None:
        return keep
    return ~m if keep is None else keep & ~m


def _add_distinct(seen: set | None, arr: pa.Array, rows: np.ndarray | None, cap: int) -> set | None:
    """``seen`` plus the distinct values of ``arr`` at ``rows``; None once above ``cap``."""
    if seen is None:
        return None
    u = pc.unique(arr if rows is None else arr.filter(pa.array(rows)))
    if len(u) > cap:
        return None
    seen |= set(u.to_pylist())
    return None if len(seen) > cap else seen


def _stats_fn(num_features: int, max_categories: int, max_classes: int, skip: bool):
    def fn(batches):
        rows = null_labels = skipped = 0
        missing = np.zeros(num_features, dtype=np.int64)
        values: list[set | None] = [set() for _ in range(num_features)]
        classes: set | None = set()
        for rb in batches:
            rows += rb.num_rows
            lab_miss = missing_mask(rb.column(0))
            keep = None if lab_miss is None else ~lab_miss  # None: every row
            null_labels += 0 if lab_miss is None else int(lab_miss.sum())
            miss = [missing_mask(rb.column(j + 1)) for j in range(num_features)]
            for j, m in enumerate(miss):
                if m is not None:
                    missing[j] += int((m if keep is None else m & keep).sum())
            if skip and any(m is not None for m in miss):
                anym = np.logical_or.reduce([m for m in miss if m is not None])
                skipped += int((anym if keep is None else anym & keep).sum())
                keep = _and_not(keep, anym)
            classes = _add_distinct(classes, rb.column(0), keep, max_classes)
            for j in range(num_features):
                if values[j] is not None:
                    values[j] = _add_distinct(values[j], rb.column(j + 1),
                                              _and_not(keep, miss[j]), max_categories)
        yield pa.RecordBatch.from_pydict({"stats": [json.dumps({
            "rows": rows, "null_labels": null_labels, "skipped": skipped,
            "missing": missing.tolist(),
            "classes": None if classes is None else list(classes),
            "values": [None if v is None else list(v) for v in values]})]})
    return fn


def _column_stats(df: DataFrame, label: str, features: list[str], max_categories: int,
                  max_classes: int, handle_invalid: str) -> dict[str, Any]:
    """One exact pass: rows, null labels, missing values, and distinct values capped
    at ``max_categories`` per feature (``max_classes`` for the label)."""
    d = len(features)
    fn = _stats_fn(d, max_categories, max_classes, handle_invalid == "skip")
    cols = [label, *features]
    frame = packed(df, cols).mapInArrow(unpacked(fn, column_kinds(df, cols)), "stats string")
    parts = [json.loads(r[0]) for r in frame.collect()]
    return _merge_stats(parts, d, max_categories, max_classes)


def _merge_stats(parts: list[dict[str, Any]], d: int, max_categories: int,
                 max_classes: int) -> dict[str, Any]:
    """Add up the statistics of the tasks (distinct sets: union, capped)."""
    out: dict[str, Any] = {"rows": 0, "null_labels": 0, "skipped": 0, "missing": [0] * d,
                           "classes": set(), "values": [set() for _ in range(d)]}
    for p in parts:
        for key in ("rows", "null_labels", "skipped"):
            out[key] += p[key]
        out["missing"] = [a + b for a, b in zip(out["missing"], p["missing"])]
        if out["classes"] is not None:
            out["classes"] = None if p["classes"] is None else out["classes"] | set(p["classes"])
            if out["classes"] is not None and len(out["classes"]) > max_classes:
                out["classes"] = None
        for j in range(d):
            cur, new = out["values"][j], p["values"][j]
            if cur is not None:
                cur = None if new is None else cur | set(new)
                if cur is not None and len(cur) > max_categories:
                    cur = None
            out["values"][j] = cur
    return out


def _quantile_splits(df: DataFrame, cols: list[str], num_bins: int, rows: int,
                     label: str) -> dict[str, list[float]]:
    """Equal-frequency split points: exact quantiles of the data or of a hashed sample."""
    sample = df
    if rows > SAMPLE_ROWS:
        # keep a row iff a hash of its content falls below a threshold: the same rows
        # are kept however the table is partitioned or ordered
        modulus = 1 << 30
        threshold = int(modulus * SAMPLE_ROWS / rows)
        h = f"pmod(xxhash64({', '.join(quote(c) for c in [label, *cols])}), {modulus})"
        sample = df.where(F.expr(f"{h} < {threshold}"))
    out: dict[str, list[float]] = {}
    # the columns come to the driver a chunk at a time; with more than one chunk the
    # sample is cached first, so that the input is read (and hashed) once, not per chunk
    frame = positional(sample, cols)
    kept = None
    if len(cols) > _SPLIT_CHUNK:  # a session that refuses caching hashes the input per chunk
        kept = keep(frame, StorageLevel.MEMORY_AND_DISK, materialize=False, warn=False)
        frame = kept.df
    try:
        for start in range(0, len(cols), _SPLIT_CHUNK):
            names = frame.columns[start:start + _SPLIT_CHUNK]
            table = frame.select(*names).toArrow()
            for i, c in enumerate(cols[start:start + _SPLIT_CHUNK]):
                v = table.column(i).to_numpy(zero_copy_only=False).astype(np.float64)
                out[c] = equal_frequency_splits(v, num_bins)
            del table
    finally:
        if kept is not None:
            kept.release()
    return out
