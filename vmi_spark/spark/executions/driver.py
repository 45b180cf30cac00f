"""The driver execution: a small table is planned, encoded and selected in the driver.

On a small table the fixed cost of Spark jobs dominates: each pass over the rows is a
job with its Python workers and tasks (seconds each, tens of seconds on a cold
session), while the arithmetic takes milliseconds. So when a table has at most
:data:`DRIVER_CELLS` cells (:data:`PROBE_CELLS` when Spark must be asked for the rows),
the rows come to the driver once and everything else happens there, with the same
functions the executors run:

* the rows are typed by :func:`vmi_spark.core.rows.typed_array` and the plan is built
  by :func:`vmi_spark.core.planning.build_plan` over the rows in memory
  (:class:`vmi_spark.core.planning.TableRows`, the scikit-learn selector's rows too: a
  small table has at most :data:`~vmi_spark.core.encoding.SAMPLE_ROWS` rows, so no
  sample is drawn);
* the codes come from :func:`vmi_spark.core.encoding.encode_column` and
  :func:`~vmi_spark.core.encoding.encode_label`, and the steps run on
  :class:`vmi_spark.core.inmemory.ThreadedBackend` over the driver's cores.

The result is the one the distributed executions give, bit for bit: the plan is a pure
function of the rows, and a step's sums are exact integers in any order. The report
says ``execution: driver``.

Where the rows come from: a Parquet input that pyarrow can read from the driver is read
directly (its row count is in the footers, so the choice costs no Spark job); any other
DataFrame is asked for ``PROBE_CELLS / (D + 1) + 1`` rows with one ``limit`` job, and if
fewer come back, those are all of them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from ...core import limits
from ...core.encoding import EncodingPlan
from ...core.inmemory import ThreadedBackend
from ...core.limits import DEFAULT
from ...core.planning import FLOATING, TableRows
from ...core.rows import typed_array
from ..chunks.codes import CHUNK_SCHEMA
from ..compat import to_arrow
from ..plan import SparkRows, value_sql, value_type

#: largest table (rows x (features + 1)) selected in the driver when its rows are counted
#: without Spark (a Parquet input pyarrow reads from the driver)
#: (the default: the code reads ``limits.current().driver_cells``)
DRIVER_CELLS = DEFAULT.driver_cells
#: largest table selected in the driver when Spark is asked for its rows (a ``limit`` job)
#: (the default: the code reads ``limits.current().probe_cells``)
PROBE_CELLS = DEFAULT.probe_cells
#: most bytes of pairwise state (8 per row, feature and class) the driver keeps; a larger
#: pairwise selection ships the driver's codes to the executors instead
#: (the default: the code reads ``limits.current().driver_pair_bytes``)
DRIVER_PAIR_BYTES = DEFAULT.driver_pair_bytes


class DriverRows(SparkRows, TableRows):
    """All rows of a small table, typed, in the driver: the in-memory rows of the core
    (:class:`vmi_spark.core.planning.TableRows`, which plans and codes them) that can also
    hand the codes to the executors (:meth:`encode_chunks`).

    ``batches()`` yields typed record batches (label first, then ``features``) each time
    it is called; ``num_rows`` is the table's row count.
    """

    def __init__(self, spark, batches, features: list[str], num_rows: int,
                 read_by: str = "spark", weight_col: str | None = None):
        TableRows.__init__(self, batches, features, num_rows, weight_col=weight_col)
        self.spark, self.read_by = spark, read_by

    def encode_chunks(self, plan: EncodingPlan, chunk_rows: int,
                      skip_cols: list[str]) -> DataFrame:
        """The codes as chunk rows (:data:`~.chunks.CHUNK_SCHEMA`) of a DataFrame, for the
        distributed executions (a pairwise selection whose state would not fit the driver)."""
        codes, y, w = self.codes(plan, skip_cols)
        starts = range(0, codes.shape[1], chunk_rows)
        table = pa.table({
            "chunk_id": pa.array(list(range(len(starts))), pa.int64()),
            "n": pa.array([min(chunk_rows, codes.shape[1] - s) for s in starts], pa.int32()),
            "codes": pa.array([np.ascontiguousarray(codes[:, s:s + chunk_rows]).tobytes()
                               for s in starts], pa.binary()),
            "y": pa.array([y[s:s + chunk_rows].astype(np.uint16).tobytes() for s in starts],
                          pa.binary()),
            "w": pa.array([None if w is None else w[s:s + chunk_rows].tobytes()
                           for s in starts], pa.binary())})
        return self.spark.createDataFrame(table.to_pandas(), schema=CHUNK_SCHEMA)


def parquet_rows(spark, source, label: str, features: list[str],
                 weight_col: str | None = None) -> DriverRows | None:
    """The rows of a :class:`~.arrow_source.ParquetSource`, read by pyarrow in the driver,
    if the table is small (:data:`DRIVER_CELLS`, at most ``SAMPLE_ROWS`` rows); the weight
    column last, if any."""
    from ..sources.arrow_source import read_fn

    n = source.num_rows
    now = limits.current()
    if n > now.sample_rows or n * (len(features) + 1) > now.driver_cells:
        return None
    read = read_fn(source, [label, *features, *([weight_col] if weight_col else [])])
    units = pa.RecordBatch.from_pydict({"unit": pa.array(range(len(source.units)), pa.int64())})
    return DriverRows(spark, lambda: read(iter([units])), features, n, read_by="pyarrow",
                      weight_col=weight_col)


def probed_rows(df: DataFrame, label: str, features: list[str],
                vector=None, weight_col: str | None = None) -> DriverRows | None:
    """The rows of ``df`` if it has at most ``PROBE_CELLS / (D + 1)`` of them (one Spark
    job brings at most one more row than that to the driver); else None. With ``vector``
    (a :class:`~.vector_source.VectorReader`) the rows are its two columns, typed by it.
    The weight column comes last, if any. A vector's rows are sized by all its elements,
    the excluded ones included: the whole vectors come to the driver."""
    now = limits.current()
    width = len(features) if vector is None else len(vector.names)
    limit = min(now.sample_rows, now.probe_cells // (width + 1))
    if limit < 1:
        return None
    cols = [label, *features, *([weight_col] if weight_col else [])]
    if vector is not None:
        table = to_arrow(vector.frame().limit(limit + 1))
        if table.num_rows > limit:
            return None
        typed = list(vector.read(cols)(iter(table.to_batches())))
        return DriverRows(df.sparkSession, lambda: iter(typed), features, table.num_rows,
                          weight_col=weight_col)
    types = {f.name: f.dataType for f in df.schema.fields}
    # the columns as the Spark reader packs them (decimals, dates, timestamps and
    # intervals converted in Spark, the rest typed in Python by typed_array), so the
    # values are the same
    exprs = [f"{value_sql(c, types[c])} AS _c{i}" for i, c in enumerate(cols)]
    table = to_arrow(df.selectExpr(*exprs).limit(limit + 1))
    if table.num_rows > limit:
        return None
    kinds = [(value_type(types[c]) or FLOATING).kind for c in cols]
    names = [f"_c{i}" for i in range(len(cols))]
    batch = pa.RecordBatch.from_arrays(
        [typed_array(table.column(i).combine_chunks(), k) for i, k in enumerate(kinds)],
        names=names) if table.num_rows else None
    return DriverRows(df.sparkSession, lambda: iter([batch] if batch is not None else []),
                      features, table.num_rows, weight_col=weight_col)


class DriverBackend(ThreadedBackend):
    """:class:`~vmi_spark.core.inmemory.ThreadedBackend` (the chunks on the driver's
    threads) with the execution interface of :class:`vmi_spark.spark.routes.Execution`."""

    execution = "driver"

    def notes(self) -> list[str]:
        return []
