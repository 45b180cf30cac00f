"""The Spark reader: the passes of planning and encoding over a DataFrame's rows.

Any DataFrame with the label and feature columns (numeric, boolean or string) is a
row source here. The values are typed in the Python workers (see :func:`packed`),
the same way as :func:`prepare_frame` types them and as the pyarrow reader
(:mod:`.arrow_source`) does, so both give the same plan and the same chunks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...core import limits
from ...core.encoding import EncodingPlan, SplitRequest, TopValues, fit_sample, label_keys
from ...core.planning import FLOATING
from ...core.rows import column_stats_fn, feature_array, merge_stats, typed_array
from ...core.weights import FRACTION_SCALE, units
from ..chunks.codes import CHUNK_SCHEMA, chunk_encoder
from ..chunks.storage import keep
from ..compat import to_arrow
from ..plan import SparkRows, quote, value_sql, value_type

#: the struct column of a packed frame (see :func:`packed`)
PACKED = "_row"


def _missing(col: str, dt: T.DataType):
    c = F.col(quote(col))
    if isinstance(dt, (T.FloatType, T.DoubleType)):
        return c.isNull() | F.isnan(c)
    return c.isNull()


def positional(df: DataFrame, names: list[str], prefix: str = "_c") -> DataFrame:
    """``df`` reduced to ``names`` in that order, renamed ``_c0, _c1, ...``.

    PySpark's ``mapInArrow`` resolves every column by its unquoted name, so a name
    with a dot, a backtick or a ``*`` fails there; the executor functions read the
    columns by position instead.
    """
    # one selectExpr, not a Column per name: on a wide table each PySpark Column call is a
    # round trip to the JVM (milliseconds each, seconds for 1,000 columns)
    return df.selectExpr(*[f"{quote(c)} AS {prefix}{i}" for i, c in enumerate(names)])


def column_kinds(df: DataFrame, names: list[str]) -> list[str]:
    """The kind :func:`prepare_frame` gives each column: "string" or "double"."""
    types = {f.name: f.dataType for f in df.schema.fields}
    return [(value_type(types[c]) or FLOATING).kind for c in names]


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
      rows. Only decimals (to double, Spark's rounding), dates, timestamps and intervals
      (to numbers, :func:`.plan.value_sql`) are converted in Spark.
    """
    types = {f.name: f.dataType for f in df.schema.fields}
    fields = ", ".join(f"'_c{i}', {value_sql(c, types[c])}" for i, c in enumerate(names))
    return df.selectExpr(f"named_struct({fields}) AS {PACKED}")


def unpacked(fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
             kinds: list[str]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``fn`` over the batches of a :func:`packed` frame, unpacked and typed (``kinds``
    from :func:`column_kinds`)."""
    names = [f"_c{i}" for i in range(len(kinds))]

    def typed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            cols = rb.column(0).flatten()
            yield pa.RecordBatch.from_arrays(
                [(feature_array if j else typed_array)(a, k)
                 for j, (a, k) in enumerate(zip(cols, kinds))], names=names)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return fn(typed(batches))
    return run


def prepare_frame(df: DataFrame, label: str, features: list[str],
                  weight_col: str | None = None) -> DataFrame:
    """Select the label and features with canonical types (double / string), and the
    weight column (as a double) last if given.

    Numeric values are normalised so that -0.0 becomes 0.0: they compare equal, but
    Arrow's hashing (distinct values, ``index_in``) tells them apart.
    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    for c in [label, *features, *([weight_col] if weight_col is not None else [])]:
        dt, q = fields[c], quote(c)
        vt = value_type(dt) or FLOATING
        if vt.kind == "string":
            cols.append(f"CAST({q} AS STRING) AS {q}")
        elif not vt.numeric:
            cols.append(f"CAST(CAST({q} AS INT) AS DOUBLE) AS {q}")
        else:
            v = f"CAST({value_sql(c, dt)} AS DOUBLE)"
            cols.append(f"CASE WHEN {v} = 0.0D THEN 0.0D ELSE {v} END AS {q}")
    return df.selectExpr(*cols)  # one JVM call (see positional)


def weight_units_sql(weight_col: str, scale: int) -> str:
    """The SQL of a row's weight units (:func:`vmi_spark.core.weights.units`): the weight
    as a BIGINT (whole numbers, ``scale`` 1) or ``rint(w * 1024)`` (half to even, as
    numpy's ``rint``; ``w * 1024`` is exact)."""
    w = f"CAST({quote(weight_col)} AS DOUBLE)"
    return f"CAST({w} AS BIGINT)" if scale == 1 else f"CAST(rint({w} * {scale}D) AS BIGINT)"


def weight_present_sql(weight_col: str) -> str:
    """The SQL of :func:`vmi_spark.core.weights.present`: the weight rounds to at least one
    1/1024 unit (a null or NaN weight is not present)."""
    return f"rint(CAST({quote(weight_col)} AS DOUBLE) * {FRACTION_SCALE}D) > 0"


def top_values_of(df: DataFrame, cols: list[str], most: int, weight_col: str | None = None,
                  weight_scale: int | None = None) -> dict[str, TopValues]:
    """:class:`~vmi_spark.core.encoding.TopValues` of the string columns ``cols`` of
    ``df``: their ``most`` most frequent values (ties to the smaller value), the number
    of distinct values and of non-null values. One Spark job. With ``weight_col`` every
    count is a sum of weight units (:func:`weight_units_sql` at ``weight_scale``)."""
    from pyspark.sql import Window

    parts = [F.lit(1).cast("long").alias("u")] if weight_col is None else [
        F.expr(weight_units_sql(weight_col, weight_scale or 1)).alias("u")]
    pairs = F.explode(F.array(*[F.struct(F.lit(i).alias("i"), F.col(quote(c)).cast("string")
                                         .alias("v")) for i, c in enumerate(cols)]))
    counts = (df.select(pairs.alias("p"), *parts).select("p.i", "p.v", "u")
              .where(F.col("v").isNotNull())
              .groupBy("i", "v").agg(F.sum("u").alias("count")))
    by_col = Window.partitionBy("i")
    ranked = counts.select(
        "i", "v", "count",
        F.row_number().over(by_col.orderBy(F.desc("count"), F.asc("v"))).alias("rank"),
        F.count(F.lit(1)).over(by_col).alias("distinct"),
        F.sum("count").over(by_col).alias("rows"))
    got: dict[int, list] = {i: [] for i in range(len(cols))}
    totals: dict[int, tuple[int, int]] = {}
    for r in ranked.where(F.col("rank") <= max(most, 1)).collect():
        totals[r["i"]] = (int(r["distinct"]), int(r["rows"]))
        if r["rank"] <= most:
            got[r["i"]].append((r["rank"], r["v"], int(r["count"])))
    out = {}
    for i, c in enumerate(cols):
        top = sorted(got[i])
        distinct, rows = totals.get(i, (0, 0))
        out[c] = TopValues(tuple(v for _, v, _ in top), tuple(n for _, _, n in top),
                           distinct, rows)
    return out


class SparkSource(SparkRows):
    """The rows of a DataFrame as a :class:`vmi_spark.spark.plan.RowSource`.

    ``df`` holds the label and feature columns with any supported types; ``weight_col``
    (optional) a numeric column of row weights (:mod:`vmi_spark.core.weights`), read last
    in every pass.
    """

    def __init__(self, df: DataFrame, weight_col: str | None = None):
        self.df = df
        self.weight_col = weight_col

    def _cols(self, cols: list[str]) -> list[str]:
        """``cols``, and the weight column last."""
        return cols if self.weight_col is None else [*cols, self.weight_col]

    def kept(self, label: str, skip_cols: list[str]) -> DataFrame:
        """The rows the plan keeps: a label, no missing value in ``skip_cols``, and a
        weight that is present."""
        types = {f.name: f.dataType for f in self.df.schema.fields}
        cond = _missing(label, types[label])
        for c in skip_cols:
            cond = cond | _missing(c, types[c])
        if self.weight_col is not None:
            cond = cond | ~F.coalesce(F.expr(weight_present_sql(self.weight_col)), F.lit(False))
        return self.df.where(~cond)

    def column_stats(self, label: str, features: list[str], max_categories: int,
                     max_classes: int, skip: bool) -> dict[str, Any]:
        """One exact pass: rows, null labels, missing values, and distinct values capped
        at ``max_categories`` per feature (``max_classes`` for the label); the weights."""
        d = len(features)
        fn = column_stats_fn(d, max_categories, max_classes, skip,
                             weighted=self.weight_col is not None)
        cols = self._cols([label, *features])
        frame = packed(self.df, cols).mapInArrow(unpacked(fn, column_kinds(self.df, cols)),
                                                 "stats string")
        parts = [json.loads(r[0]) for r in frame.collect()]
        return merge_stats(parts, d, max_categories, max_classes)

    def quantile_splits(self, req: SplitRequest) -> dict[str, tuple[list[float], list[float]]]:
        """Split points of the kept rows (:func:`vmi_spark.core.encoding.fit_sample`):
        of all of them or, above :data:`~vmi_spark.core.encoding.SAMPLE_ROWS` rows, of a
        hashed sample. With a continuous label (``rule``), ``label`` maps to its own.
        With row weights each sampled row counts by its weight units (``weight_scale``);
        the hash is of the row's values, not its weight, and the sample is drawn over the
        rows (``rows`` is their number)."""
        label, cols, rows, rule = req.label, list(req.cols), req.rows, req.rule
        num_bins, binning, weight_scale = req.num_bins, req.binning, req.weight_scale
        hashed = [label, *cols, *req.hash_extra]
        df = prepare_frame(self.kept(label, list(req.skip_cols)), label, hashed[1:], self.weight_col)
        sample = df
        sample_rows = limits.current().sample_rows
        if rows > sample_rows:
            # keep a row iff a hash of its content falls below a threshold: the same rows
            # are kept however the table is partitioned or ordered
            modulus = 1 << 30
            threshold = int(modulus * sample_rows / rows)
            h = f"pmod(xxhash64({', '.join(quote(c) for c in hashed)}), {modulus})"
            sample = df.where(F.expr(f"{h} < {threshold}"))
        out: dict[str, tuple[list[float], list[float]]] = {}
        # the columns come to the driver a chunk at a time; with more than one chunk the
        # sample is cached first, so that the input is read (and hashed) once, not per chunk
        chunk = limits.current().split_chunk
        weighted = self.weight_col is not None
        frame = positional(sample, self._cols([label, *cols]))
        kept = None
        if len(cols) > chunk:  # a session that refuses caching hashes the input per chunk
            kept = keep(frame, StorageLevel.MEMORY_AND_DISK, materialize=False, warn=False)
            frame = kept.df
        lead = frame.columns[:1] if rule is not None else []  # the label, row-aligned
        tail = frame.columns[-1:] if weighted else []  # the weight, row-aligned
        try:
            for start in range(0, max(len(cols), 1), chunk):
                names = frame.columns[1 + start:1 + min(start + chunk, len(cols))]
                if not names and not lead:
                    break
                table = to_arrow(frame.select(*lead, *names, *tail))
                values = [table.column(len(lead) + i).to_numpy(zero_copy_only=False)
                          .astype(np.float64) for i in range(len(names))]
                keys = (label_keys(table.column(0).combine_chunks(), rule)
                        if rule is not None else None)
                wts = None if not weighted else units(
                    table.column(table.num_columns - 1).to_numpy(zero_copy_only=False),
                    weight_scale or 1)
                label_split, splits = fit_sample(values, num_bins, binning, keys, rule, wts)
                if label_split is not None:
                    out[label] = label_split
                out.update(zip(cols[start:start + chunk], splits))
                del table
        finally:
            if kept is not None:
                kept.release()
        return out

    def top_values(self, label: str, cols: list[str], most: int,
                   skip_cols: list[str], weight_scale: int | None = None
                   ) -> dict[str, TopValues]:
        """The ``most`` most frequent values of each string column of ``cols`` over the
        kept rows, exactly (one aggregation job over the rows: counts of every
        (column, value), ranked by count and then value, Spark's binary string order
        being Python's code-point order)."""
        return top_values_of(self.kept(label, skip_cols), cols, most, self.weight_col,
                             weight_scale)

    def encode_chunks(self, plan: EncodingPlan, chunk_rows: int,
                      skip_cols: list[str]) -> DataFrame:
        """The kept rows as chunk rows of codes (:mod:`.chunks`)."""
        df = self.kept(plan.label, skip_cols)
        cols = self._cols([plan.label, *plan.features])
        return packed(df, cols).mapInArrow(
            unpacked(chunk_encoder(plan, chunk_rows), column_kinds(df, cols)), CHUNK_SCHEMA)
