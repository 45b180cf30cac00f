"""Read a Parquet input with pyarrow inside the Python workers (the job's fast path).

Spark hands wide rows to Python workers at a few hundred nanoseconds per cell: above
100 columns it turns off whole-stage code generation and columnar output, and every
cell then crosses from the JVM's row format into Arrow one at a time. pyarrow reads
the same Parquet file at about 20 ns per cell. So when the input is a plain Parquet
scan, the three passes that touch every cell -- the column statistics, the sample the
bin edges are placed on, and the encoding into one-byte chunks -- read the files
directly: Spark schedules one task per group of Parquet row groups (the same unit
Spark's own reader splits files by), and each task reads its row groups with pyarrow.
Only counts, the sample and the one-byte chunks go back through the JVM.

The result is the same plan and the same chunks as the Spark reader would give: the
values are typed the same way as :func:`vmi_spark.spark.sources.spark_source.prepare_frame` (doubles
with -0.0 as 0.0, booleans as 0/1, strings), the same rows are dropped, and the
sample is chosen by the same ``xxhash64`` of the typed row (:mod:`.sparkhash`). A
file pyarrow cannot open from the driver, or a column whose Parquet type is not a
plain number, boolean or string, makes :func:`parquet_source` return None and the
caller uses the Spark reader.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ...core import limits
from ...core.encoding import (
    EncodingPlan,
    LabelRule,
    SplitRequest,
    TopValues,
    doubles,
    fit_sample,
    label_keys,
)
from ...core.rows import (
    ByteColumns,
    ColumnStats,
    byte_columns,
    column_stats_fn,
    feature_array,
    kept_rows,
    merge_stats,
    typed_array,
    weight_values,
)
from ...core.weights import units
from .. import plan
from ..chunks.codes import ChunkStage, chunk_encoder
from ..compat import arrow_reader_note
from .sparkhash import SEED, hash_column, in_sample

log = logging.getLogger("vmi_spark")

#: rows per record batch read from a row group
BATCH_ROWS = 16384
#: Parquet row groups per task (more tasks than slots keeps every core busy)
_TASKS_PER_SLOT = 4

# Spark type of a column -> the Arrow types Spark reads it from (anything else: Spark reader)
_ARROW_TYPES: dict[type, tuple[pa.DataType, ...]] = {
    T.DoubleType: (pa.float64(),),
    T.FloatType: (pa.float32(),),
    T.LongType: (pa.int64(),),
    T.IntegerType: (pa.int32(),),
    T.ShortType: (pa.int16(),),
    T.ByteType: (pa.int8(),),
    T.BooleanType: (pa.bool_(),),
    T.StringType: (pa.string(), pa.large_string()),
}


#: how Spark stores an ML vector (VectorUDT's sqlType) and pyarrow reads it back
VECTOR_FIELDS = (("type", pa.int8()), ("size", pa.int32()), ("indices", pa.list_(pa.int32())),
                 ("values", pa.list_(pa.float64())))


def is_vector_struct(t: pa.DataType) -> bool:
    """Whether ``t`` is the struct Spark writes an ML vector as (:data:`VECTOR_FIELDS`;
    nullability and the lists' element names aside)."""
    if not pa.types.is_struct(t) or t.num_fields != len(VECTOR_FIELDS):
        return False
    for k, (name, want) in enumerate(VECTOR_FIELDS):
        got = t.field(k)
        if got.name != name:
            return False
        if pa.types.is_list(want):
            if not (pa.types.is_list(got.type) and got.type.value_type == want.value_type):
                return False
        elif got.type != want:
            return False
    return True


@dataclass(frozen=True)
class ParquetSource:
    """The Parquet files behind a DataFrame, in units of row groups."""

    files: tuple[str, ...]
    #: (file index, row group, rows, first row): a whole row group from row 0, or a piece
    #: of one (:meth:`evened`)
    units: tuple[tuple[int, int, int, int], ...]
    kinds: dict[str, str]  # column -> "double" | "string" (the typed frame's types) | "vector"

    @property
    def num_rows(self) -> int:
        return sum(u[2] for u in self.units)

    def evened(self, parts: int) -> ParquetSource:
        """The same rows in the same order as ``parts`` equal runs of units: ``spark.range``
        over the units in ``parts`` partitions gives each partition the same number of
        rows (give or take one). A row group that straddles two
        runs is cut into pieces, each read by its own task (the group is decoded by both);
        runs are padded with empty units to the same length."""
        total = self.num_rows
        bounds = [total * i // parts for i in range(parts + 1)]
        runs: list[list[tuple[int, int, int, int]]] = [[] for _ in range(parts)]
        at, p = 0, 0  # first row of the unit, partition being filled
        for f, g, rows, first in self.units:
            start = at
            while start < at + rows:
                while bounds[p + 1] <= start:
                    p += 1
                stop = min(at + rows, bounds[p + 1])
                runs[p].append((f, g, stop - start, first + start - at))
                start = stop
            at += rows
        width = max(1, max(len(r) for r in runs))
        pad = (0, 0, 0, 0)
        units = tuple(u for r in runs for u in r + [pad] * (width - len(r)))
        return ParquetSource(self.files, units, self.kinds)


def _open(uri: str):
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    fs, path = pafs.FileSystem.from_uri(uri)
    return pq.ParquetFile(fs.open_input_file(path))


_PROJECT = "org.apache.spark.sql.catalyst.plans.logical.Project"
_RELATION = "org.apache.spark.sql.execution.datasources.LogicalRelation"
_FS_RELATION = "org.apache.spark.sql.execution.datasources.HadoopFsRelation"
_PARQUET = "org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat"
_FILE_INDEX = "org.apache.spark.sql.execution.datasources.InMemoryFileIndex"


def plain_parquet_scan(df: DataFrame) -> bool:
    """Whether ``df``'s rows are exactly those of the Parquet files it scans.

    True when ``df``'s optimized logical plan is a scan of Parquet files listed in
    memory (``spark.read.parquet(...)``, a non-partitioned Parquet table), or a
    projection of some of its columns (``select``, ``drop``): no filter, sample, limit,
    join, computed or renamed column, cache, and not a Delta table (its own file
    format, which may delete rows without rewriting the files). False where the plan
    cannot be seen (Spark Connect), so the caller then uses Spark's reader.
    """
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return False
    try:
        node = jdf.queryExecution().optimizedPlan()
        if node.getClass().getName() == _PROJECT:
            # a column kept as it is keeps its attribute; a computed or renamed one is new
            if not node.outputSet().subsetOf(node.child().outputSet()):
                return False
            node = node.child()
        if node.getClass().getName() != _RELATION or node.isStreaming():
            return False
        rel = node.relation()
        return (rel.getClass().getName() == _FS_RELATION
                and rel.fileFormat().getClass().getName() == _PARQUET
                and rel.location().getClass().getName() == _FILE_INDEX)
    except Exception as exc:  # py4j: a plan of another shape than expected
        log.debug("Parquet fast path off: %s", str(exc).splitlines()[0] if str(exc) else exc)
        return False


def parquet_source(df: DataFrame, columns: list[str]) -> ParquetSource | None:
    """A :class:`ParquetSource` for ``df`` if it is a plain scan of Parquet files that
    pyarrow can read with the same column types, else None (use the Spark reader).

    ``df`` is what ``spark.read.parquet(path)`` returned, or a projection of its columns
    (:func:`plain_parquet_scan`); any other frame gives None.
    """
    if not plain_parquet_scan(df):
        log.debug("Parquet fast path off: not a plain scan of Parquet files")
        return None
    if arrow_reader_note() is not None:  # too old a pyarrow: run_selection's note says so
        return None
    fields = {f.name: f.dataType for f in df.schema.fields}
    try:
        files = tuple(sorted(df.inputFiles()))
    except Exception as exc:  # not a file scan
        log.debug("Parquet fast path off: %s", str(exc).splitlines()[0] if str(exc) else exc)
        return None
    if not files:
        return None
    units: list[tuple[int, int, int, int]] = []
    try:
        for i, uri in enumerate(files):
            pf = _open(uri)
            schema = pf.schema_arrow
            for c in columns:
                want = _ARROW_TYPES.get(type(fields[c]))
                idx = schema.get_field_index(c)
                if idx >= 0 and plan.is_vector_type(fields[c]) and is_vector_struct(schema.field(idx).type):
                    continue
                if want is None or idx < 0 or schema.field(idx).type not in want:
                    log.debug("Parquet fast path off: column '%s' of %s is not read as %s", c,
                              uri, fields[c].simpleString())
                    pf.close()
                    return None
            md = pf.metadata
            units.extend((i, g, md.row_group(g).num_rows, 0) for g in range(md.num_row_groups))
            pf.close()
    except Exception as exc:  # a file system pyarrow cannot open, an unreadable footer
        log.debug("Parquet fast path off: %s", str(exc).splitlines()[0] if str(exc) else exc)
        return None
    kinds = {c: "string" if isinstance(fields[c], T.StringType)
             else "vector" if plan.is_vector_type(fields[c]) else "double" for c in columns}
    return ParquetSource(files, tuple(u for u in units if u[2] > 0), kinds)


#: most cells of one batch read from a row group larger than :data:`BATCH_ROWS` rows
#: (:func:`row_group_batches`): all of BATCH_ROWS up to 4,096 columns. A 20k-row group of
#: 30,000 int32 columns read alone: 5.4 GB peak RSS and 25.8 s in batches of 16,384
#: rows, 1.9 GB and 27.9 s in batches of 2,236 (2**26 cells), 1.3 GB and 62.6 s at 2**24
BATCH_CELLS = 1 << 26

#: cells of a row group decoded in one call (:func:`group_chunks`). A wide row group is
#: decoded a few columns at a time: at 4,096 rows x 30,000 int32 columns one call for the
#: whole group took 15.6-19.9 ns a cell (statistics pass, one process), calls of 32
#: columns 10.9-13.6 when the chunks are joined into one batch again, and 6.4-7.3 when
#: each chunk is used before the next is read (:func:`read_fn` with ``chunk_cells``)
#: (the default: the readers take ``limits.current().read_cells``)
READ_CELLS = limits.DEFAULT.read_cells


def group_chunks(pf, g: int, columns: list[str], label: bool,
                 cells: int = READ_CELLS) -> Iterator[tuple[int, pa.Table]]:
    """Row group ``g`` of ``pf`` as ``(at, table)`` chunks of about ``cells`` cells,
    decoded one chunk at a time. Without ``label``, the tables hold ``columns[at:at + w]``
    (in that order); with it, ``columns[0]`` and then ``columns[1 + at:1 + at + w]``.
    """
    first = [columns[0]] if label else []
    rest = columns[1:] if label else columns
    step = max(1, cells // max(1, pf.metadata.row_group(g).num_rows))
    for at in range(0, max(1, len(rest)), step):
        part = first + rest[at:at + step]
        table = pf.read_row_group(g, columns=part, use_threads=False)
        if table.column_names != part:  # as pyarrow 26 returns them; a guard for others
            table = pa.Table.from_arrays([table.column(c) for c in part], names=part)
        yield at, table


def read_group(pf, g: int, columns: list[str], cells: int = READ_CELLS) -> pa.Table:
    """Row group ``g`` of ``pf`` as one table of ``columns`` (in that order), decoded in
    :func:`group_chunks` (the same table as ``pf.read_row_group(g, columns)``)."""
    arrays = [t.column(k) for _, t in group_chunks(pf, g, columns, False, cells)
              for k in range(t.num_columns)]
    return pa.Table.from_arrays(arrays, names=columns)


def row_group_batches(source: ParquetSource, columns: list[str], batch_rows: int = BATCH_ROWS,
                      chunk_cells: int | None = None):
    """Executor side: the record batches ``[columns...]`` (in that order) of the row
    groups, or pieces of row groups, whose unit numbers a task's input batches hold, at
    most ``batch_rows`` rows each; with ``chunk_cells``, as ``(at, batch)`` column chunks.

    A row group of at most ``batch_rows`` rows is read whole, a few columns at a time
    (:func:`read_group`); a larger one batch by batch. With ``chunk_cells``, such a whole
    group comes as the chunks of :func:`group_chunks` of that many cells (``columns[0]``
    in each), and every other batch as one chunk at 0: a chunk at 0 starts the next rows.
    """
    files, units = source.files, source.units
    # a row group larger than batch_rows is read batch by batch, every column at once:
    # fewer rows a batch for wide rows (16,384 rows x 30,000 columns were 2 GB of int32,
    # twice that as doubles, in each Python worker: 6-7 GB peaks on 20k x 30,000)
    large_rows = min(batch_rows, max(256, BATCH_CELLS // max(1, len(columns))))

    def ordered(rb: pa.RecordBatch) -> pa.RecordBatch:
        if rb.schema.names == columns:  # as pyarrow returns them (0.17 s a batch to rebuild
            return rb                   # a batch of 30,000 columns)
        idx = {name: k for k, name in enumerate(rb.schema.names)}
        return pa.RecordBatch.from_arrays([rb.column(idx[c]) for c in columns], names=columns)

    def group(pf, g: int, rows: int, first: int, stored: int):
        """Rows ``first`` to ``first + rows`` of row group ``g`` of ``stored`` rows."""
        if stored <= batch_rows:
            parts = (group_chunks(pf, g, columns, True, chunk_cells) if chunk_cells
                     else [(0, read_group(pf, g, columns))])
            for at, table in parts:
                if rows < stored:
                    table = table.slice(first, rows)
                for rb in table.to_batches(max_chunksize=batch_rows):
                    yield at, rb
            return
        at = 0
        for rb in pf.iter_batches(batch_size=large_rows, row_groups=[g], columns=columns,
                                  use_threads=False):
            lo, hi = max(first - at, 0), min(first + rows - at, rb.num_rows)
            at += rb.num_rows
            if lo < hi:
                yield 0, ordered(rb if hi - lo == rb.num_rows else rb.slice(lo, hi - lo))
            if at >= first + rows:
                break

    def batches(unit_batches):
        pf, current = None, -1
        try:
            for ub in unit_batches:
                for u in ub.column(0).to_pylist():
                    f, g, rows, first = units[u]
                    if rows == 0:  # padding (ParquetSource.evened)
                        continue
                    if f != current:  # a task's units are contiguous: one file open at a time
                        if pf is not None:
                            pf.close()
                        pf, current = _open(files[f]), f
                    for at, rb in group(pf, g, rows, first, pf.metadata.row_group(g).num_rows):
                        yield (at, rb) if chunk_cells else rb
        finally:
            if pf is not None:
                pf.close()
    return batches


def read_fn(source: ParquetSource, columns: list[str], chunk_cells: int | None = None):
    """Executor side: the typed record batches ``[columns...]`` of a task's row groups
    (the first column typed, the others as :func:`~.rows.feature_array` passes them on);
    with ``chunk_cells``, the ``(at, batch)`` column chunks of :func:`row_group_batches`
    (the first column and ``columns[1 + at:]``, as many as the batch holds), a chunk of
    small integers in labelled rows as :class:`~.rows.ByteColumns` (:func:`~.rows.byte_columns`)."""
    kinds = [source.kinds[c] for c in columns]
    raw = row_group_batches(source, columns, chunk_cells=chunk_cells)

    def typed(rb: pa.RecordBatch, at: int) -> pa.RecordBatch | ByteColumns:
        own = kinds[1 + at:rb.num_columns + at]
        label = typed_array(rb.column(0), kinds[0])
        if chunk_cells and all(k == "double" for k in own):
            chunk = byte_columns(label, rb.columns[1:])
            if chunk is not None:
                return chunk
        return pa.RecordBatch.from_arrays(
            [label, *(feature_array(rb.column(1 + j), k) for j, k in enumerate(own))],
            names=["_c0", *(f"_c{1 + at + j}" for j in range(rb.num_columns - 1))])

    def batches(unit_batches):
        for item in raw(unit_batches):
            if chunk_cells:
                at, rb = item
                yield at, typed(rb, at)
            else:
                yield typed(item, 0)
    return batches


def _units_frame(spark, source: ParquetSource, slots: int,
                 partitions: int | None = None) -> DataFrame:
    """One row per unit (its index into ``source.units``), in contiguous ranges over at most
    :data:`_TASKS_PER_SLOT` tasks per slot, or over exactly ``partitions`` tasks
    (``spark.range``: no sampling job, no shuffle)."""
    n = len(source.units)
    tasks = partitions if partitions is not None else _TASKS_PER_SLOT * slots
    return spark.range(0, n, 1, max(1, min(n, tasks)))


class BatchReader:
    """The three passes of planning and encoding over typed batches that Python workers
    make themselves (a :class:`vmi_spark.spark.plan.RowSource`): ``frame(partitions)`` is
    the DataFrame the passes map over, ``read(columns)`` turns its batches into typed
    batches of ``columns`` (label first), ``kinds`` gives each column's kind. The plan and
    chunks are those :class:`vmi_spark.spark.sources.spark_source.SparkSource` gives the same rows.
    """

    kinds: dict[str, str]
    slots: int  # task slots of the session
    #: what reads the rows: the Python workers' pyarrow (Parquet files) or Spark's JVM
    read_by = "spark"

    def frame(self, partitions: int | None = None) -> DataFrame:
        raise NotImplementedError

    def read(self, columns: list[str]):
        raise NotImplementedError

    def read_chunks(self, columns: list[str], whole: bool = False):
        """``read(columns)`` as ``(at, batch)`` column chunks (:func:`read_fn`), each
        holding the label: the passes that need a row's other columns only for its label
        (no ``skip``) take them so. With ``whole`` (and here) every batch is one chunk at 0."""
        read = self.read(columns)

        def batches(unit_batches):
            for rb in read(unit_batches):
                yield 0, rb
        return batches

    #: the binning the plan will ask bin edges for, ``(num_bins, binning)``: when set and
    #: the row count is known, :meth:`column_stats` samples in the same pass
    presample: tuple[int, str] | None = None
    _presampled: tuple[tuple, dict] | None = None

    #: the DataFrame of the rows, for the exact counts of :meth:`top_values`
    df: DataFrame | None = None

    #: the row weights' column (read last in every pass), or None
    weight_col: str | None = None

    def _cols(self, cols: list[str]) -> list[str]:
        """``cols``, and the weight column last."""
        return cols if self.weight_col is None else [*cols, self.weight_col]

    def known_rows(self) -> int | None:
        """The rows of the input if known without a pass (else None)."""
        return None

    def top_values(self, label: str, cols: list[str], most: int,
                   skip_cols: list[str], weight_scale: int | None = None
                   ) -> dict[str, TopValues]:
        """The most frequent values of string columns: counted by Spark over :attr:`df`
        (an aggregation with a shuffle, which these readers' passes do not have)."""
        from .spark_source import SparkSource

        if self.df is None:
            raise NotImplementedError("no DataFrame to count the values of")
        return SparkSource(self.df, self.weight_col).top_values(label, cols, most, skip_cols,
                                                                weight_scale)

    def few_values(self, columns: list[str], most: int) -> set[str]:
        """Those of ``columns`` a first batch cannot hold more than ``most`` values of,
        known without reading it (none here)."""
        return set()

    def first_chunks(self, columns: list[str]) -> Iterator[tuple[int, pa.RecordBatch]]:
        """The ``(at, batch)`` column chunks (:meth:`read_chunks`) of a first typed batch of
        ``columns``, read in the driver one at a time (none: not possible)."""
        return iter(())

    def column_stats(self, label: str, features: list[str], max_categories: int,
                     max_classes: int, skip: bool) -> dict:
        """The column statistics (:class:`~.rows.ColumnStats`, merged).

        With :attr:`presample` and a known row count, the same pass also samples the rows
        for the bin edges of the columns that must be binned whatever the other rows
        hold: those with more than ``max_categories`` values in a first batch read in the
        driver. The sample is the one :meth:`quantile_splits` would draw if every row is
        kept (no null label, no row skipped) and exactly those columns are binned; it
        then returns the edges placed in this pass instead of reading the rows again.
        Otherwise (another column turned out to need bins, rows were dropped, the label
        is binned, ``mdlp``) it makes its own pass, as without :attr:`presample`.
        """
        self._presampled = None
        weighted = self.weight_col is not None
        # the fused sample is of the rows, not their weight: not with row weights
        rows = self.known_rows() if self.presample is not None and not weighted else None
        guess = self._sure_binned(label, features, max_categories) if rows else []
        if not guess:
            stats = column_stats_fn(len(features), max_categories, max_classes, skip,
                                    chunks=True, weighted=weighted)
            read = self.read_chunks(self._cols([label, *features]), whole=skip or weighted)

            def fn(batches):
                yield from stats(read(batches))

            parts = [json.loads(r[0]) for r in self.frame().mapInArrow(fn, "stats string").collect()]
            return merge_stats(parts, len(features), max_categories, max_classes)
        assert self.presample is not None and rows is not None
        read = self.read([label, *features])
        num_bins, binning = self.presample
        position = {c: j for j, c in enumerate(features)}
        at = [1 + position[c] for c in guess]
        chunks = _chunks(len(guess), None)
        threshold = _threshold(rows)

        def fused(batches):
            stats = ColumnStats(len(features), max_categories, max_classes, skip)
            sampler = _Sampler(len(guess), 1 + len(guess), threshold, False, None, chunks)
            for rb in read(batches):
                stats.add(rb)
                sampler.add(pa.RecordBatch.from_arrays(
                    [rb.column(0), *(rb.column(j) for j in at)],
                    names=[f"_c{j}" for j in range(1 + len(at))]))
            yield pa.RecordBatch.from_pydict({
                "chunk": pa.array([_STATS_ROW], pa.int32()), "narrow": pa.array([False]),
                "values": pa.array([stats.json().encode("utf-8")], pa.binary())})
            yield from sampler.rows()

        result = _fitted(self.frame().mapInArrow(fused, _SAMPLE_SCHEMA), chunks, num_bins,
                         binning, None, self.slots)
        parts = [json.loads(r[1]) for r in result if r[0] == _PASSED]
        self._presampled = ((tuple(guess), rows, num_bins, binning),
                            _splits_of(result, label, guess))
        return merge_stats(parts, len(features), max_categories, max_classes)

    def _sure_binned(self, label: str, features: list[str], max_categories: int) -> list[str]:
        """The numeric features with more than ``max_categories`` values in a first batch
        (in feature order): they are binned whatever the other rows hold."""
        if self.presample is None or self.presample[1] == "mdlp":  # mdlp needs the classes
            return []
        numeric = [c for c in features if self.kinds[c] == "double"]
        if not numeric:
            return []
        few = self.few_values(numeric, max_categories)
        numeric = [c for c in numeric if c not in few]
        if not numeric:
            return []
        first = ColumnStats(len(numeric), max_categories, 0, False)
        for at, rb in self.first_chunks([label, *numeric]):
            first.add(rb, at)
        return [c for c, v in zip(numeric, first.values) if v is None]

    def quantile_splits(self, req: SplitRequest) -> dict[str, tuple[list[float], list[float]]]:
        """The split points (see :func:`_quantile_splits`), or those :meth:`column_stats`
        placed in its pass when they are the same (see there)."""
        if self._presampled is not None:
            key, splits = self._presampled
            if (key == (req.cols, req.rows, req.num_bins, req.binning) and not req.skip_cols
                    and req.rule is None):
                return dict(splits)
        return _quantile_splits(self, req)

    def encode_chunks(self, plan: EncodingPlan, chunk_rows: int,
                      skip_cols: list[str], partitions: int | None = None) -> DataFrame:
        """The kept rows as chunk rows (same codes, in chunks); with ``partitions``, in that
        many partitions of the frame."""
        return self.chunk_stage(plan, chunk_rows, skip_cols, partitions).df()

    def chunk_stage(self, plan: EncodingPlan, chunk_rows: int, skip_cols: list[str],
                    partitions: int | None = None) -> ChunkStage:
        """:meth:`encode_chunks` before it is a DataFrame (:class:`.ChunkStage`)."""
        skip = bool(skip_cols)  # no other feature has a missing value in a labelled row
        weighted = self.weight_col is not None
        read = self.read_chunks(self._cols([plan.label, *plan.features]), whole=skip or weighted)
        encode = chunk_encoder(plan, chunk_rows, chunks=True)

        def fn(batches):
            yield from encode((at, kept_rows(rb, skip, weighted)) for at, rb in read(batches))

        return ChunkStage(self.frame(partitions), fn)

    def evened(self, parts: int) -> BatchReader | None:
        """This reader with ``parts`` partitions of the same rows (``frame(parts)``), so
        that the chunks need no shuffle to spread them; None where it cannot be known
        without reading the rows (here)."""
        return None

    def reading(self) -> AbstractContextManager[None]:
        """The session settings the jobs reading the rows run under (none here)."""
        return nullcontext()


class RowGroups:
    """What a reader of a :class:`ParquetSource`'s row groups knows without reading them:
    the rows (footers), the tasks (:func:`_units_frame`), how to split them evenly, and
    a first batch read in the driver. Mixed into a :class:`BatchReader` whose ``read``
    maps the unit frame's batches."""

    spark: Any
    source: ParquetSource
    slots: int

    def known_rows(self) -> int | None:
        """The rows in the Parquet footers."""
        return self.source.num_rows

    def few_values(self, columns: list[str], most: int) -> set[str]:
        """The integer and boolean ``columns`` whose values in the first row group span at
        most ``most`` integers by its footer's statistics (min and max), so the first
        batch holds at most ``most`` values (for 8-state columns no batch is read).

        Only a hint: a column that should have been here is counted in the first batch;
        one that should not (a writer's wrong statistics) is missed by ``_sure_binned``,
        which costs the statistics pass its sample, never a result."""
        if not self.source.units:
            return set()
        f, g = self.source.units[0][:2]
        pf = _open(self.source.files[f])
        try:
            md = pf.metadata.row_group(g)
            stats = {}
            for i in range(md.num_columns):
                col = md.column(i)
                if col.physical_type in ("INT32", "INT64", "BOOLEAN") and col.is_stats_set:
                    stats[col.path_in_schema] = col.statistics
        finally:
            pf.close()
        out = set()
        for c in columns:  # a vector's elements are not the file's columns
            st = stats.get(c) if self.source.kinds.get(c) == "double" else None
            if st is None or not st.has_min_max or st.logical_type.type not in ("NONE", "INT"):
                continue
            lo, hi = int(st.min), int(st.max)  # booleans: 0 and 1
            if hi - lo + 1 <= most:
                out.add(c)
        return out

    def first_chunks(self, columns: list[str]) -> Iterator[tuple[int, pa.RecordBatch]]:
        """The chunks of the first batch of the first row group, read by pyarrow in the
        driver (a chunk at a time: a 4,096-row group of 30,000 columns is 0.5 GB whole)."""
        if not self.source.units:
            return
        units = pa.RecordBatch.from_pydict({"unit": pa.array([0], pa.int64())})
        chunks = self.read_chunks(columns)(iter([units]))  # type: ignore[attr-defined]
        try:
            for at, rb in chunks:
                yield at, rb
                if at + rb.num_columns >= len(columns):  # the batch's last chunk (the next
                    break                                # batch is not read)
        finally:
            chunks.close()

    def frame(self, partitions: int | None = None) -> DataFrame:
        return _units_frame(self.spark, self.source, self.slots, partitions)

    def evened(self, parts: int):
        """This reader over the units of :meth:`ParquetSource.evened`: ``frame(parts)``
        gives every partition the same rows, a straddling row group cut in pieces."""
        out = copy.copy(self)
        out.source = self.source.evened(parts)
        return out


class ParquetReader(RowGroups, BatchReader):
    """The passes over the files of a :class:`ParquetSource`, read by pyarrow in the workers."""

    read_by = "pyarrow"

    def __init__(self, spark, source: ParquetSource, slots: int,
                 presample: tuple[int, str] | None = None, df: DataFrame | None = None,
                 weight_col: str | None = None):
        #: cells of a column chunk of :meth:`read_chunks` (``limits.current().read_cells``)
        self.chunk_cells = limits.current().read_cells
        self.spark, self.source, self.slots = spark, source, slots
        self.kinds = source.kinds
        self.presample = presample
        self.df = df
        self.weight_col = weight_col

    def read(self, columns: list[str]):
        return read_fn(self.source, columns)

    def read_chunks(self, columns: list[str], whole: bool = False):
        if whole:
            return super().read_chunks(columns, whole)
        return read_fn(self.source, columns, self.chunk_cells)


class _Sampler:
    """One task's sampled rows: the values of the binned columns (and the label's keys when
    ``rule`` needs them) of the kept rows whose hash is below ``threshold`` (every kept
    row when it is None), sent as one binary row per chunk of columns.

    A batch given to ``add`` holds the label, then the ``num_cols`` binned columns, then
    the other hashed columns (``hashed`` in all, label included), then any columns only
    ``skip`` reads, then (``weight_scale``: row weights) the weight, whose units are sent
    with the sampled rows.
    """

    def __init__(self, num_cols: int, hashed: int, threshold: int | None, skip: bool,
                 rule: LabelRule | None, chunks: list[list[int]],
                 weight_scale: int | None = None):
        self.num_cols, self.hashed, self.threshold, self.skip = num_cols, hashed, threshold, skip
        self.rule, self.chunks = rule, chunks
        self.weight_scale = weight_scale
        self.kept: list[list[np.ndarray]] = [[] for _ in range(num_cols)]
        #: whether every value kept of each column was read from a type whose values are
        #: all exactly float32 (:data:`_NARROW_TYPES`)
        self.narrow = [True] * num_cols
        self.keys: list[np.ndarray] = []
        self.weights: list[np.ndarray] = []

    def add(self, rb: pa.RecordBatch) -> None:
        """Keep the sampled rows of one typed batch."""
        rb = kept_rows(rb, self.skip, self.weight_scale is not None)
        if rb.num_rows == 0:
            return
        if self.threshold is not None:
            h = np.full(rb.num_rows, SEED, dtype=np.uint64)
            for j in range(self.hashed):
                h = hash_column(rb.column(j), h)
            take = pa.array(in_sample(h, self.threshold, _MODULUS))
            if not pc.any(take).as_py():
                return
            rb = rb.filter(take)  # only the sampled rows are read as doubles
        for j in range(self.num_cols):
            col = rb.column(j + 1)
            self.narrow[j] = self.narrow[j] and col.type in _NARROW_TYPES
            self.kept[j].append(doubles(col))
        if self.rule is not None:
            self.keys.append(label_keys(rb.column(0), self.rule))
        if self.weight_scale is not None:
            self.weights.append(units(weight_values(rb), self.weight_scale))

    def rows(self) -> Iterator[pa.RecordBatch]:
        """The sample as ``chunk int, narrow boolean, values binary`` rows: a (label keys,
        weight units and) columns x rows float64 matrix per chunk, as float32 when every
        value of the chunk is one (a float32 column's values are)."""
        if self.rule is not None and not self.keys:
            return
        if self.weight_scale is not None and not self.weights:
            return
        for k, chunk_cols in enumerate(self.chunks):  # one row per chunk: a value < 2 GiB
            if chunk_cols and not self.kept[chunk_cols[0]]:
                continue
            rows_ = [np.concatenate(self.keys)] if self.rule is not None else []
            if self.weight_scale is not None:  # units below 2**53: exact as doubles
                rows_.append(np.concatenate(self.weights).astype(np.float64))
            rows_ += [np.concatenate(self.kept[j]) for j in chunk_cols]
            mat = np.stack(rows_)
            for j in chunk_cols:
                self.kept[j] = []
            with np.errstate(over="ignore"):
                narrow = mat.astype(np.float32)
            # known by the columns' types alone, or else by comparing every value
            exact = (len(rows_) == len(chunk_cols) and all(self.narrow[j] for j in chunk_cols)
                     or np.array_equal(narrow.astype(np.float64), mat, equal_nan=True))
            yield pa.RecordBatch.from_pydict({
                "chunk": pa.array([k], pa.int32()), "narrow": pa.array([exact]),
                "values": pa.array([(narrow if exact else mat).tobytes()], pa.binary())})


#: Arrow types every value of which is exactly a float32 (as :func:`~vmi_spark.core.encoding.doubles`
#: reads them): a sampled chunk of only such columns is sent as float32 unchecked
_NARROW_TYPES = frozenset([pa.float32(), pa.int8(), pa.int16(), pa.uint8(), pa.uint16()])
_MODULUS = 1 << 30
_SAMPLE_SCHEMA = "chunk int, narrow boolean, values binary"
_SPLITS_SCHEMA = "column int, splits string"
#: the ``chunk`` of a task's statistics in the fused pass (:meth:`BatchReader.column_stats`)
_STATS_ROW = -1
#: the ``column`` of those statistics after the fit (passed through); -1 is the label's
_PASSED = -2


def _threshold(rows: int) -> int | None:
    """The hash threshold that samples about ``SAMPLE_ROWS`` of ``rows`` rows (None: all)."""
    sample_rows = limits.current().sample_rows
    return int(_MODULUS * sample_rows / rows) if rows > sample_rows else None


def _chunks(num_cols: int, rule: LabelRule | None) -> list[list[int]]:
    chunk = limits.current().split_chunk
    chunks = [list(range(s, min(s + chunk, num_cols))) for s in range(0, num_cols, chunk)]
    return [[]] if not chunks and rule is not None else chunks  # [[]]: the label alone


def _fit_fn(chunks: list[list[int]], num_bins: int, binning: str, rule: LabelRule | None,
            weighted: bool = False):
    """A ``mapInArrow`` function from the sample rows of one or more chunks (shuffled
    together by chunk) to ``column int, splits string`` rows: each column's (split points,
    spikes), the label's as column -1. Other rows (the fused pass's statistics) pass
    through as column :data:`_PASSED`. ``weighted``: each chunk's matrix carries the rows'
    weight units after the label's keys."""
    lead = (1 if rule is not None else 0) + (1 if weighted else 0)

    def fit(batches):
        got: dict[int, list[np.ndarray]] = {}
        passed: list[str] = []
        for rb in batches:
            for k, narrow, blob in zip(rb.column("chunk").to_pylist(),
                                       rb.column("narrow").to_pylist(),
                                       rb.column("values").to_pylist()):
                if k == _STATS_ROW:
                    passed.append(blob.decode("utf-8"))
                    continue
                width = lead + len(chunks[k])
                mat = np.frombuffer(blob, dtype=np.float32 if narrow else np.float64)
                got.setdefault(k, []).append(mat.astype(np.float64).reshape(width, -1))
        if passed:
            yield pa.RecordBatch.from_pydict({"column": pa.array([_PASSED] * len(passed),
                                                                 pa.int32()),
                                              "splits": pa.array(passed, pa.string())})
        for k in sorted(got):
            mat = np.concatenate(got[k], axis=1)
            keys = mat[0] if rule is not None else None
            wts = mat[lead - 1].astype(np.int64) if weighted else None
            label_split, fitted = fit_sample(list(mat[lead:]), num_bins, binning, keys, rule,
                                             wts)
            cols = list(chunks[k]) + ([-1] if label_split is not None else [])
            out = [json.dumps(f) for f in fitted]
            if label_split is not None:
                out.append(json.dumps(label_split))
            yield pa.RecordBatch.from_pydict({"column": pa.array(cols, pa.int32()),
                                              "splits": pa.array(out, pa.string())})
    return fit


def _fitted(sampled: DataFrame, chunks: list[list[int]], num_bins: int, binning: str,
            rule: LabelRule | None, slots: int, weighted: bool = False) -> list:
    """The rows of :func:`_fit_fn` over the sample rows ``sampled``, shuffled by chunk
    over at most ``slots`` tasks and collected."""
    parts = max(1, min(len(chunks), slots))
    return (sampled.repartition(parts, "chunk")
            .mapInArrow(_fit_fn(chunks, num_bins, binning, rule, weighted),
                        _SPLITS_SCHEMA).collect())


def _splits_of(result, label: str, feats: list[str]) -> dict[str, tuple[list[float], list[float]]]:
    """The fitted rows of :func:`_fit_fn` by column name (no rows at all: no split points)."""
    out = {(feats[r[0]] if r[0] >= 0 else label): tuple(json.loads(r[1]))
           for r in result if r[0] != _PASSED}
    for c in feats:
        out.setdefault(c, ([], []))
    return out


def _quantile_splits(reader: BatchReader, req: SplitRequest
                     ) -> dict[str, tuple[list[float], list[float]]]:
    """The split points over a :class:`BatchReader`'s rows: the same rows are sampled as by
    :meth:`vmi_spark.spark.sources.spark_source.SparkSource.quantile_splits`
    (Spark's ``xxhash64`` of the typed label and columns), the same split points placed.

    Each task sends its sampled values as one binary value per chunk of columns
    (:class:`_Sampler`); a shuffle by chunk brings each chunk's values together, and the
    split points are computed where they land (:func:`_fit_fn`), so no more than a chunk
    of the sample is in one place.
    """
    label, feats, skip_cols, rule = req.label, list(req.cols), list(req.skip_cols), req.rule
    weight_scale = req.weight_scale
    # the rows build_plan keeps: a label, and (handleInvalid skip) no missing value in skip_cols
    extra = [c for c in req.hash_extra if c not in feats]
    read_cols = [label, *feats, *extra]
    read_cols += [c for c in skip_cols if c not in read_cols]
    weighted = reader.weight_col is not None
    read = reader.read(reader._cols(read_cols))
    chunks = _chunks(len(feats), rule)
    threshold = _threshold(req.rows)

    def sample(unit_batches):
        sampler = _Sampler(len(feats), 1 + len(feats) + len(extra), threshold,
                           bool(skip_cols), rule, chunks,
                           (weight_scale or 1) if weighted else None)
        for rb in read(unit_batches):
            sampler.add(rb)
        yield from sampler.rows()

    result = _fitted(reader.frame().mapInArrow(sample, _SAMPLE_SCHEMA), chunks, req.num_bins,
                     req.binning, rule, reader.slots, weighted)
    return _splits_of(result, label, feats)
