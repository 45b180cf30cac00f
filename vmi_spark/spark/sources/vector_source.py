"""Read a vector column (Spark ML's ``featuresCol``) without expanding it in Spark.

Expanding a vector into one DataFrame column per element costs Spark dearly on wide
vectors: every pass then plans and runs a projection of thousands of columns, and
building them from Python is a JVM round trip per column (the vector path's planning took
6x as long as the same data in Parquet columns at 2,000 elements). Here the passes map
over two columns, the label and ``vector_to_array`` of the vector, and the Python
workers cut the arrays into typed feature columns themselves (:class:`VectorReader`).

The values and the rows are exactly those of the expanded columns read by
:class:`vmi_spark.spark.sources.spark_source.SparkSource`: doubles with -0.0 as 0.0, a null
vector is a missing value in every element, NaN is missing, and the sample is chosen by
the same ``xxhash64`` of the typed row (:mod:`.sparkhash`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...core import limits
from ...core.limits import DEFAULT
from ...core.planning import FLOATING
from ...core.rows import ByteColumns, feature_array, missing_mask, typed_array
from ...errors import InputError
from ..chunks.storage import session_confs
from ..plan import is_numeric, is_vector_type, quote, value_sql, value_type
from .arrow_source import BatchReader, ParquetSource, RowGroups, row_group_batches


def vector_array(features_col: str):
    """``vector_to_array`` of a vector column as doubles; a null vector is a null array
    (``vector_to_array`` alone fails on it)."""
    from pyspark.ml.functions import vector_to_array

    col = F.col(quote(features_col))
    return F.when(col.isNotNull(), vector_to_array(col, "float64"))


#: bytes of vector elements in one batch read from the input (see VectorReader.reading)
#: (the default: the code reads ``limits.current().vector_batch_bytes``)
VECTOR_BATCH_BYTES = DEFAULT.vector_batch_bytes
#: the batch sizes (rows) reading a vector column goes through, and their defaults
_BATCH_CONFS = {"spark.sql.parquet.columnarReaderBatchSize": 4096,
                "spark.sql.execution.arrow.maxRecordsPerBatch": 10000}


#: the vector length assumed when it is not known yet (before the first look at the data)
UNKNOWN_WIDTH = 32768
#: rows and vector elements the Python workers cut into columns at a time: consecutive
#: batches from the JVM (at most VECTOR_BATCH_BYTES each) are joined up to the fewer rows
#: of the two (per value, reading and the statistics cost least from about 1,000 to 2,000
#: rows; larger batches cost more again)
#: (the default: the code reads ``limits.current().vector_join_rows``)
VECTOR_JOIN_ROWS = DEFAULT.vector_join_rows
#: (the default: the code reads ``limits.current().vector_join_cells``)
VECTOR_JOIN_CELLS = DEFAULT.vector_join_cells
#: rows the column chunks of small-integer vectors are joined up to instead
#: (:meth:`VectorReader.read_chunks`): their one-byte slabs cost nothing per column, and
#: smaller batches decode into memory that stays warm (one process, 20k rows x 10,000
#: elements: the statistics pass 1.7-2.4 s with batches of 2,048 rows, 1.1-1.3 s with 256)
#: (the default: the code reads ``limits.current().vector_byte_rows``)
VECTOR_BYTE_ROWS = DEFAULT.vector_byte_rows


def vector_batches(spark: Any, width: int | None) -> AbstractContextManager[None]:
    """Run the block with batches of at most :data:`VECTOR_BATCH_BYTES` of vector elements.

    Spark's Parquet reader (4,096 rows a batch) and its Arrow batches to Python (10,000
    rows) hold a batch's vectors whole in the heap: 800 MB at 10,000 elements a vector.
    The session's batch sizes are lowered (never raised) for the block and restored;
    ``width`` None (the length not known yet) assumes :data:`UNKNOWN_WIDTH` elements.
    """
    width = UNKNOWN_WIDTH if width is None else max(1, width)
    rows = max(64, limits.current().vector_batch_bytes // (8 * width))
    confs = {}
    for conf, default in _BATCH_CONFS.items():
        try:
            now = int(spark.conf.get(conf, str(default)) or default)
        except Exception:  # noqa: BLE001 - unreadable here: leave it alone
            continue
        if rows < now:  # smaller than the session's batches: never larger
            confs[conf] = str(rows)
    return session_confs(spark, confs) if confs else nullcontext()


#: how the message of :class:`VectorLengthError` starts (found in a failed Spark job's text)
LENGTH_MARK = "vmi_spark: a vector of "


class VectorLengthError(ValueError):
    """A vector whose length is not the others' (met where the rows are read: the driver
    or a Python worker). :func:`vector_lengths_checked` turns it
    into the :class:`~vmi_spark.errors.InputError` of the full check."""


def vector_matrix(arr: pa.Array, width: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(n, width) float64 values of an array<double> column and the null-vector mask (None
    when no vector is null); a null vector's row is NaN. A vector of another length than
    ``width`` raises :class:`VectorLengthError`."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    span = pc.min_max(pc.list_value_length(arr))
    shortest, longest = span["min"].as_py(), span["max"].as_py()
    if shortest is not None and not shortest == longest == width:
        raise VectorLengthError(f"{LENGTH_MARK}{longest if shortest == width else shortest} "
                                f"elements where {width} were expected")
    flat = pc.list_flatten(arr).to_numpy(zero_copy_only=False).astype(np.float64)
    if arr.null_count == 0:
        return flat.reshape(n, width), None
    null = ~arr.is_valid().to_numpy(zero_copy_only=False)
    mat = np.full((n, width), np.nan)
    mat[~null] = flat.reshape(-1, width)
    return mat, null


def vector_struct_matrix(arr: pa.Array, width: int) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`vector_matrix` of ML vectors as Spark stores them (read from Parquet by
    pyarrow: :data:`~.arrow_source.VECTOR_FIELDS`): a dense vector (``type`` 1) is its
    ``values``, a sparse one (``type`` 0) is zero but at ``indices``, as
    ``vector_to_array`` gives them. The length is ``values``' or ``size``."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    null = None if arr.null_count == 0 else ~arr.is_valid().to_numpy(zero_copy_only=False)
    kind = arr.field("type").to_numpy(zero_copy_only=False)
    values = arr.field("values")
    dense = kind == 1 if null is None else (kind == 1) & ~null
    sparse = kind == 0 if null is None else (kind == 0) & ~null
    voff = values.offsets.to_numpy()
    lengths = np.diff(voff)
    size = arr.field("size").fill_null(-1).to_numpy(zero_copy_only=False)
    wrong = (dense & (lengths != width)) | (sparse & (size != width))
    if wrong.any():
        r = int(np.flatnonzero(wrong)[0])
        raise VectorLengthError(f"{LENGTH_MARK}{lengths[r] if dense[r] else size[r]} "
                                f"elements where {width} were expected")
    flat = values.values.to_numpy(zero_copy_only=False)
    if dense.all() and voff[-1] - voff[0] == n * width:  # the usual case: one reshape
        return flat[voff[0]:voff[-1]].reshape(n, width), None  # float64 already
    mat = np.zeros((n, width))
    if null is not None:
        mat[null] = np.nan
    for d in np.flatnonzero(dense):
        mat[d] = flat[voff[d]:voff[d + 1]]
    indices = arr.field("indices")
    ioff, at = indices.offsets.to_numpy(), indices.values.to_numpy(zero_copy_only=False)
    for q in np.flatnonzero(sparse):
        i = at[ioff[q]:ioff[q + 1]]
        if len(i) != lengths[q] or (len(i) and (i.min() < 0 or i.max() >= width)):
            raise ValueError(f"vmi_spark: a malformed sparse vector ({len(i)} indices, "
                             f"{lengths[q]} values, size {width})")
        mat[q, i] = flat[voff[q]:voff[q + 1]]
    return mat, null


def element_columns(mat: np.ndarray, idx: np.ndarray, null: np.ndarray | None) -> list[pa.Array]:
    """Columns ``idx`` of the (rows, width) matrix ``mat`` of one batch (``null``: the null
    vectors' rows), each a contiguous Arrow array of the same doubles: ``int8`` where every
    value of the column in this batch is an integer in [-128, 127] (coded features; -0.0
    is 0 there, as the passes read it), else ``float64``. The passes read both as the same
    doubles (:func:`~.rows.feature_array`'s native types), and one-byte columns cost the
    statistics and the encoder less than doubles. A batch with a null vector stays float64."""
    n, width = mat.shape
    if not len(idx):
        return []
    sel = mat if len(idx) == width and (idx == np.arange(width)).all() else mat[:, idx]
    small, exact = _small(sel, null)
    return _columns(sel, small, exact, null)


def _small(sel: np.ndarray, null: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray]:
    """The (rows, w) ``int8`` values of ``sel`` and which of its columns they equal (none
    where a vector is null: ``small`` None)."""
    if null is not None:
        return None, np.zeros(sel.shape[1], dtype=bool)
    with np.errstate(invalid="ignore"):  # NaN and large values: not exact, not used
        small = sel.astype(np.int8)
    return small, (small == sel).all(axis=0)


def _columns(sel: np.ndarray, small: np.ndarray | None, exact: np.ndarray,
             null: np.ndarray | None) -> list[pa.Array]:
    """The columns of :func:`element_columns` from :func:`_small`'s answer."""
    out: list[pa.Array] = [pa.array([])] * sel.shape[1]
    if small is not None and exact.any():
        rows8 = np.ascontiguousarray(small.T)
        for j in np.flatnonzero(exact):
            out[j] = pa.array(rows8[j])
    rest = np.flatnonzero(~exact)
    if len(rest):
        wide = np.ascontiguousarray((sel if len(rest) == sel.shape[1] else sel[:, rest]).T)
        for k, j in enumerate(rest):
            out[j] = feature_array(pa.array(wide[k], mask=null), "double")
    return out


def joined(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The non-empty ``batches`` joined, in order, into batches of at least ``rows`` rows
    (the last one may have fewer); a batch of ``rows`` or more passes as it is.

    The passes pay a cost per column for every batch they read (the statistics about 12
    microseconds a column), and a batch from the JVM holds at most
    :data:`VECTOR_BATCH_BYTES` of elements: 279 rows at 30,000 elements.
    """
    for group in grouped(batches, rows):
        yield _concat(group)


def grouped(batches: Iterator[pa.RecordBatch], rows: int | Callable[[], int]
            ) -> Iterator[list[pa.RecordBatch]]:
    """The non-empty ``batches``, in order, in groups of at least ``rows`` rows (the last
    may have fewer): the batches :func:`joined` joins. ``rows`` may be a function, asked
    again for each group."""
    group: list[pa.RecordBatch] = []
    count = 0
    for rb in batches:
        if rb.num_rows == 0:
            continue
        group.append(rb)
        count += rb.num_rows
        if count >= (rows() if callable(rows) else rows):
            yield group
            group, count = [], 0
    if group:
        yield group


def _concat(group: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(group) == 1:
        return group[0]
    table = pa.Table.from_batches(group).combine_chunks()
    return pa.RecordBatch.from_arrays([c.chunk(0) for c in table.columns],
                                      names=table.column_names)


class VectorReader(BatchReader):
    """The label and the elements of a vector column as typed batches (a
    :class:`vmi_spark.spark.plan.RowSource` through :class:`.arrow_source.BatchReader`).

    ``names`` are the element names (``features``); every batch read checks that its
    vectors have ``len(names)`` elements (:func:`vector_matrix`), so the statistics pass,
    which reads every row, checks them all without a pass of its own. Consecutive batches
    are :func:`joined` up to :data:`VECTOR_JOIN_ROWS` rows or :data:`VECTOR_JOIN_CELLS`
    elements before they are cut.
    """

    #: the vector batches come as ``vector_to_array`` gives them (an array of doubles)
    _matrix = staticmethod(vector_matrix)

    def __init__(self, df: DataFrame, label: str, features_col: str, names: list[str],
                 slots: int, weight_col: str | None = None):
        ldt = next(f.dataType for f in df.schema.fields if f.name == label)
        lab = F.expr(value_sql(label, ldt))  # as the Spark reader packs it
        weight = [] if weight_col is None else [
            F.col(quote(weight_col)).cast("double").alias("_w")]
        self._frame = df.select(lab.alias("_label"), vector_array(features_col).alias("_v"),
                                *weight)
        self.names, self.slots = list(names), slots
        #: elements of a column chunk of :meth:`read_chunks` (``limits.current().read_cells``)
        self.chunk_cells = limits.current().read_cells
        self.kinds = {label: (value_type(ldt) or FLOATING).kind,
                      **dict.fromkeys(names, "double")}
        if weight_col is not None:
            self.kinds[weight_col] = "double"
        self.df = df
        self._pos = {n: i for i, n in enumerate(names)}
        self.label, self.features_col = label, features_col
        self.weight_col = weight_col

    def frame(self, partitions: int | None = None) -> DataFrame:
        return self._frame

    def reading(self) -> AbstractContextManager[None]:
        """:func:`vector_batches` for vectors of ``len(names)`` elements."""
        return vector_batches(self._frame.sparkSession, len(self.names))

    def _layout(self, columns: list[str]) -> tuple[str, np.ndarray, int]:
        """The label's kind, the positions of the elements ``columns[1:]`` in a vector,
        and the rows a batch is joined up to (see :func:`joined`)."""
        idx = np.array([self._pos[c] for c in columns[1:]], dtype=np.int64)
        now = limits.current()
        rows = max(1, min(now.vector_join_rows, now.vector_join_cells // len(self.names)))
        return self.kinds[columns[0]], idx, rows

    def read(self, columns: list[str]):
        """Typed batches of ``columns``: the label (first) and the named elements (and the
        weight column, last, if it is asked for)."""
        weighted = self.weight_col is not None and columns[-1] == self.weight_col
        label_kind, idx, rows = self._layout(columns[:-1] if weighted else columns)
        width = len(self.names)
        names = [f"_c{j}" for j in range(len(columns))]
        raw, matrix = self._batches(rows), self._matrix

        def batches(it):
            for rb in joined(raw(it), rows):
                mat, null = matrix(rb.column(1), width)
                cols = [typed_array(rb.column(0), label_kind), *element_columns(mat, idx, null)]
                if weighted:
                    cols.append(typed_array(rb.column(2), "double"))
                yield pa.RecordBatch.from_arrays(cols, names=names)
        return batches

    def read_chunks(self, columns: list[str], whole: bool = False):
        """``read(columns)`` as ``(at, batch)`` column chunks of about :attr:`chunk_cells`
        elements (``whole``: every batch as one chunk at 0): the batches :func:`joined`
        would join are cut into element columns a slab of elements at a time, each batch's
        slab joined to the others' (a copy of the slab, not of the whole vectors). The
        same rows, columns and values as ``read``; a slab of small integers only, in rows
        that all have a label and a vector, comes as :class:`~.rows.ByteColumns` (the
        ``int8`` columns ``read`` gives, in one matrix). After a group whose every slab
        was one-byte columns, the next is joined up to :data:`VECTOR_BYTE_ROWS` rows only
        (read in batches of that many)."""
        if whole:
            return super().read_chunks(columns, whole)
        label_kind, idx, rows = self._layout(columns)
        width, cells = len(self.names), self.chunk_cells
        few = min(rows, limits.current().vector_byte_rows)
        raw, matrix = self._batches(few), self._matrix

        def batches(it):
            # the first group has ``rows`` rows (the driver's first look reads it); the
            # next ones ``few`` while every slab is one-byte columns, else ``rows`` again
            # (``grouped`` asks for each group's size when it fills it: a late binding)
            limit = rows
            for group in grouped(raw(it), lambda: limit):  # noqa: B023
                mats = [matrix(rb.column(1), width) for rb in group]
                label = typed_array(pa.concat_arrays([rb.column(0) for rb in group]), label_kind)
                null = (None if all(nl is None for _, nl in mats) else np.concatenate(
                    [np.zeros(len(m), bool) if nl is None else nl for m, nl in mats]))
                labelled = missing_mask(label) is None
                step = max(1, cells // max(1, len(label)))
                limit = few
                for at in range(0, max(1, len(idx)), step):
                    part = idx[at:at + step]
                    slab = np.concatenate([m[:, part] for m, _ in mats])
                    small, exact = _small(slab, null)
                    if labelled and small is not None and len(part) and exact.all():
                        yield at, ByteColumns(label, np.ascontiguousarray(small.T))
                        continue
                    limit = rows
                    cols = _columns(slab, small, exact, null)
                    yield at, pa.RecordBatch.from_arrays(
                        [label, *cols], names=["_c0", *(f"_c{1 + at + j}" for j in range(len(part)))])
        return batches

    def _batches(self, rows: int):
        """The batches of the label and the vector from the frame's batches: as they are."""
        return lambda it: it


class ParquetVectorReader(RowGroups, VectorReader):
    """A vector column of a plain Parquet scan (:func:`~.arrow_source.parquet_source` with
    the label and the vector column), read by pyarrow in the workers: each task reads the
    label and the vectors' struct of its row groups and cuts them as :class:`VectorReader`
    cuts ``vector_to_array``'s arrays (:func:`vector_struct_matrix`). The values never
    cross the JVM, which hands a wide vector to Python at about 8 bytes and a few
    nanoseconds per element per pass."""

    _matrix = staticmethod(vector_struct_matrix)
    read_by = "pyarrow"

    def __init__(self, df: DataFrame, label: str, features_col: str, names: list[str],
                 slots: int, source: ParquetSource, presample: tuple[int, str] | None = None,
                 weight_col: str | None = None):
        super().__init__(df, label, features_col, names, slots, weight_col)
        self.spark, self.source, self.presample = df.sparkSession, source, presample

    def reading(self) -> AbstractContextManager[None]:
        """Nothing to set: the JVM does not read the vectors."""
        return nullcontext()

    def _batches(self, rows: int):
        cols = [self.label, self.features_col]
        return row_group_batches(self.source, cols if self.weight_col is None
                                 else [*cols, self.weight_col], rows)


# ---------------------------------------------------------------------------
# The vector column of a frame: its element names and lengths
# ---------------------------------------------------------------------------

def vector_names(df: DataFrame, features_col: str, label: str, *,
                 check: bool = True) -> list[str]:
    """The element names of vector column ``features_col`` (from ML metadata, else
    ``features[i]``), after checking it is a vector column whose vectors all have that
    many elements (one aggregate over the vectors; a null vector is missing values) and
    that the label exists with a usable type and is not one of the names.

    With ``check`` False and names in the ML metadata (what ``VectorAssembler`` writes)
    the aggregate is left out: the passes check the lengths as they read the rows
    (:class:`.vector_source.VectorLengthError`, :func:`vector_lengths_checked`). It cost
    a read of every vector, 3 s of a 20k x 2,000 selection's 9 s.
    """
    fields = {f.name: f for f in df.schema.fields}
    if features_col not in fields:
        raise InputError(f"features column '{features_col}' not found in the input")
    if label not in fields:
        raise InputError(f"label column '{label}' not found in the input")
    dtype = fields[features_col].dataType
    if not is_vector_type(dtype):
        raise InputError(f"featuresCol '{features_col}' must be a vector column "
                         f"(pyspark.ml.linalg.Vector), not {dtype.simpleString()}")
    ldt = fields[label].dataType
    if not (is_numeric(ldt) or isinstance(ldt, (T.StringType, T.BooleanType))):
        raise InputError(f"label column '{label}' has unsupported type {ldt.simpleString()}")
    names = vector_attribute_names(fields[features_col].metadata)
    if names is None:
        shortest, longest, rows = vector_lengths(df, features_col, None)
        if not rows:
            raise InputError("the input has no rows")
        names = [f"{features_col}[{i}]" for i in range(int(longest or 0))]
    elif check:
        shortest, longest, _ = vector_lengths(df, features_col, len(names))
    else:
        shortest = None  # the passes check the lengths
    if shortest is not None and not shortest == longest == len(names):
        raise InputError(f"featuresCol '{features_col}' holds vectors of {shortest} to {longest} "
                         f"elements; every row must have the same length ({len(names)})")
    if label in names:
        raise InputError(f"label column '{label}' is also an element of featuresCol")
    if not names:
        raise InputError(f"featuresCol '{features_col}' holds empty vectors")
    return names


def vector_lengths(df: DataFrame, features_col: str,
                    width: int | None) -> tuple[int | None, int | None, int]:
    """The shortest and longest vectors of ``features_col`` (None without a non-null
    vector) and the rows: one aggregate, in batches sized for ``width`` elements."""
    arr = vector_array(features_col)
    size = F.when(arr.isNotNull(), F.size(arr))
    with vector_batches(df.sparkSession, width):
        row = df.select(F.min(size), F.max(size), F.count(F.lit(1))).first()
    return (row[0], row[1], row[2]) if row is not None else (None, None, 0)


@contextmanager
def vector_lengths_checked(df: DataFrame, features_col: str | None,
                           label: str) -> Iterator[None]:
    """Run the block; a vector of another length met by it (:class:`.vector_source.
    VectorLengthError`, raised in the driver or in a Python worker and carried in the
    failed job's text) becomes the one-line :class:`InputError` of :func:`vector_names`'s
    full check, which names the shortest and longest vectors."""
    try:
        yield
    except Exception as exc:
        if features_col is None or LENGTH_MARK not in str(exc):
            raise
        vector_names(df, features_col, label)  # raises the InputError
        raise


def expand_vector(df: DataFrame, features_col: str, label: str,
                  weight_col: str | None = None) -> tuple[DataFrame, list[str]]:
    """Replace a vector column by one double column per element (names from ML metadata),
    in one projection (:func:`vector_names` checks it first); the weight column is kept."""
    names = vector_names(df, features_col, label)
    weight = [] if weight_col is None else [F.col(quote(weight_col)).alias("_vmi_w")]
    arr = df.select(F.col(quote(label)).alias("_vmi_label"),
                    vector_array(features_col).alias("_vmi_v"), *weight)
    out = arr.selectExpr(f"_vmi_label AS {quote(label)}",
                         *[f"_vmi_v[{i}] AS {quote(n)}" for i, n in enumerate(names)],
                         *([f"_vmi_w AS {quote(weight_col)}"] if weight_col else []))
    return out, names


def vector_schema(df: DataFrame, label: str, names: list[str]) -> T.StructType:
    """The schema of :func:`expand_vector`'s frame, without building it."""
    label_field = next(f for f in df.schema.fields if f.name == label)
    return T.StructType([label_field, *[T.StructField(n, T.DoubleType()) for n in names]])


def vector_attribute_names(meta: dict | None) -> list[str] | None:
    """Element names of a vector column from its ML metadata; None unless complete and unique."""
    attrs = (meta or {}).get("ml_attr", {})
    if "attrs" not in attrs or "num_attrs" not in attrs:
        return None
    names: list[str | None] = [None] * int(attrs["num_attrs"])
    for group in attrs["attrs"].values():
        for a in group:
            names[a["idx"]] = a.get("name")
    found = [n for n in names if n is not None]
    if len(found) != len(names) or len(set(found)) != len(found):
        return None
    return found
