"""A vector column of sparse vectors selected from its non-zeros (issue 47).

:func:`sparse_selection` reads ``featuresCol`` without densifying a row: one pass
counts the labels and the exact (element, value) counts of the non-zeros
(:func:`vmi_spark.core.sparse.value_cells`), the elements' states are planned from them
(:func:`~vmi_spark.core.sparse.element_plan`), a second pass codes every partition's
non-zeros into one :class:`~vmi_spark.core.sparse.SparseChunk` (cached), and the one run
of every front end (:func:`vmi_spark.run.run_planned`: suspects, checkpoint, steps,
stability runs) runs a comparison criterion over :class:`SparkSparseBackend`: each count table is a Spark job whose partitions give their
sparse cells and ``treeReduce`` adds them in exact integers (any partitioning, the same
tables). Memory and work grow with the non-zeros; the tables the driver folds are
(D, A, L) and (D, A, A, L).

:func:`sparse_route` decides, for the estimator and the job alike: a vector column whose
first vector is a ``SparseVector`` with at least :data:`SPARSE_MIN_WIDTH` elements
(:func:`is_sparse_input`), with what this path does not do refused in one line. Before
the rows are read, the plan estimates the run's memory and time
(:func:`vmi_spark.core.sparse.estimate`: from the width, the rows and non-zeros in the
Parquet footers, or a sample of the first rows, K and the method), logs it and refuses
a run that cannot fit (:func:`vmi_spark.core.sparse.check_estimate`); after the first
pass the same estimate from the exact counts is checked again before the rows are
coded, and both go into the report's ``sparse.estimate``. The comparison
criteria chosen step by step run on the sparse tables; the bound (``vmi_naive``,
``vmi_pairwise``), whose steps cost rows x candidates whatever the sparsity, runs on the
:data:`~vmi_spark.core.sparse.SCREEN_BYTES` // rows elements of most mutual information
with the label, as dense codes in the driver (:func:`_screened`, :class:`ScreenedBackend`);
``spec_cmi`` is refused in one line naming ``method``.
"""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...checkpoint import held
from ...core import criteria
from ...core import sparse as sp
from ...core.greedy import report_fields
from ...core.inmemory import InMemoryBackend
from ...core.limits import DEFAULT, available_bytes, current
from ...core.planning import decide_label, label_classes
from ...core.report_schema import SelectionReport
from ...core.stability import HalfSample
from ...core.summary import json_parameters
from ...core.units import show_state
from ...errors import InputError, ParameterError, literal
from ...params import Settings
from ...run import Policy, Ran, run_planned
from ..chunks.storage import check_checkpoint_dir
from ..plan import quote, value_type
from ..session import parallelism
from .vector_source import vector_attribute_names

log = logging.getLogger("vmi_spark")

#: the least width of a sparse vector column read sparsely (narrower ones are read as
#: dense codes, whose results are those of the expanded columns)
#: (the default: the code reads ``limits.current().sparse_min_width``)
SPARSE_MIN_WIDTH = DEFAULT.sparse_min_width

#: rows a worker reads before it counts or codes them: its memory is then the partition's
#: counts or codes (growing with the non-zeros) and one batch of rows
BATCH_ROWS = sp.BATCH_ROWS

#: the driver's limits: (bytes available to its Python, spark.driver.maxResultSize, its
#: JVM's heap), each None where it cannot be known
DriverLimits = tuple[int | None, int | None, int | None]


@dataclass(frozen=True)
class SparseLimits:
    """What the selection of a wide sparse vector takes as given, when a caller gives it:
    ``batch_rows`` the rows a worker reads before it counts or codes them
    (:data:`BATCH_ROWS`), ``driver`` the driver's limits (None: read from the session,
    :func:`driver_limits`). The least width read sparsely is
    ``limits.current().sparse_min_width`` (:mod:`vmi_spark.core.limits`), read by
    :func:`sparse_route` alone."""

    batch_rows: int = BATCH_ROWS
    driver: DriverLimits | None = None


#: the report's ``sparse.suspects``: which suspect rules this path applies, and why not
#: the others (the same rules and code as the dense path's, :func:`vmi_spark.run.run_planned`)
SUSPECT_RULES = {"kinds": ["leak"],
                 "not_applied": {"identifier": "a vector's elements are numbers; the rule is "
                                 "for strings and whole-number columns (the dense path finds "
                                 "none among a vector's elements either)",
                                 "missing_leak": "null vectors and NaN elements are refused"}}

def is_sparse_input(df: DataFrame, features_col: str | None, min_width: int = SPARSE_MIN_WIDTH
                    ) -> bool:
    """Whether ``features_col`` holds sparse vectors of at least ``min_width`` elements
    (its first non-null vector: one small job)."""
    if features_col is None or features_col not in df.columns:
        return False
    field = next(f for f in df.schema.fields if f.name == features_col)
    declared = (field.metadata or {}).get("ml_attr", {}).get("num_attrs")
    if declared is not None and int(declared) < min_width:
        return False  # known narrow: no job
    row = df.select(features_col).where(F.col(quote(features_col)).isNotNull()).first()
    vec = None if row is None else row[0]
    return vec is not None and type(vec).__name__ == "SparseVector" and vec.size >= min_width


def sparse_route(df: DataFrame, features_col: str | None, settings: Settings, *,
                 weight_col: str | None = None, exclude: list[str] | None = None) -> bool:
    """Whether ``features_col`` is selected from its non-zeros (:func:`sparse_selection`):
    the one route decision of the estimator and the job. True for a wide sparse vector
    column (:func:`is_sparse_input`); what that path does not do (row weights, the KDE
    estimator, excluded elements) is then refused in one line naming the parameter,
    never ignored. The least width is ``limits.current().sparse_min_width``."""
    if not is_sparse_input(df, features_col, current().sparse_min_width):
        return False
    unsupported = [(weight_col is not None, "weight_col"),
                   (settings.estimator != "histogram", "estimator"), (bool(exclude), "exclude")]
    for bad, key in unsupported:
        if bad:
            raise ParameterError(key, f"{{{key}}} is not supported for a wide sparse vector "
                                 f"column '{literal(str(features_col))}' (its non-zeros "
                                 f"path); unset {{{key}}}", settings.style)
    return True


def partition_stats(rows, batch_rows: int = BATCH_ROWS) -> list[Any]:
    """One partition's label counts, rows, vector sizes, null vectors, NaNs and value
    cells (:func:`~vmi_spark.core.sparse.value_cells`), counted ``batch_rows`` rows at a
    time (the same counts for any ``batch_rows``)."""
    labels: dict[Any, int] = {}
    sizes: set[int] = set()
    nulls = nans = unlabelled = 0
    idx: list[np.ndarray] = []
    val: list[np.ndarray] = []
    cells = sp.value_cells(np.zeros(0, np.int64), np.zeros(0))
    for lab, vec in rows:
        if lab is None:
            unlabelled += 1
            continue
        labels[lab] = labels.get(lab, 0) + 1
        if vec is None:
            nulls += 1
            continue
        sizes.add(int(vec.size))
        i, v = _nonzeros(vec)
        nans += int(np.isnan(v).sum())
        idx.append(i)
        val.append(v)
        if len(idx) >= batch_rows:
            cells = sp.merge_value_cells([cells, sp.value_cells(_cat(idx, np.int64),
                                                                _cat(val, np.float64))])
            idx, val = [], []
    if idx:
        cells = sp.merge_value_cells([cells, sp.value_cells(_cat(idx, np.int64),
                                                            _cat(val, np.float64))])
    # the partition's (non-zeros, distinct value cells): the table jobs' results (estimate)
    part = [(int(cells[2].sum()), len(cells[0]))]
    return [(labels, sizes, nulls, nans, cells, unlabelled, part)]


def _nonzeros(vec) -> tuple[np.ndarray, np.ndarray]:
    """A vector's (indices, values): a sparse one's stored entries, a dense one's all."""
    if type(vec).__name__ == "SparseVector":
        return np.asarray(vec.indices, np.int64), np.asarray(vec.values, np.float64)
    arr = np.asarray(vec.toArray(), np.float64)
    return np.arange(len(arr), dtype=np.int64), arr


def _merge_stats(a: tuple, b: tuple) -> tuple:
    (la, sa, na, ma, ca, ua, pa), (lb, sb, nb, mb, cb, ub, pb) = a, b
    labels = dict(la)
    for k, v in lb.items():
        labels[k] = labels.get(k, 0) + v
    return (labels, sa | sb, na + nb, ma + mb, sp.merge_value_cells([ca, cb]), ua + ub,
            pa + pb)


class SparkSparseBackend:
    """The count tables of the comparison criteria over a cached RDD of
    :class:`~vmi_spark.core.sparse.SparseChunk` s (one a partition): each table one job,
    the partitions' sparse cells added by ``treeReduce``."""

    execution = "sparse"

    def __init__(self, chunks, plan: sp.ElementPlan, classes: int):
        self.chunks, self.plan, self.classes = chunks, plan, classes
        self._plan = chunks.context.broadcast(plan)
        self._counts: np.ndarray | None = None
        self.label_counts = chunks.map(lambda c: sp.chunk_label_counts(c, classes)).treeReduce(
            lambda a, b: a + b)

    def feature_counts(self) -> np.ndarray:
        if self._counts is None:
            bc, classes = self._plan, self.classes
            cells = self.chunks.map(lambda c: sp.chunk_feature_cells(bc.value, c, classes)
                                    ).treeReduce(lambda a, b: sp.merge_cells([a, b]))
            self._counts = sp.feature_table(self.plan, cells, self.label_counts)
        return self._counts

    def pair_counts(self, f: int) -> np.ndarray:
        bc, classes = self._plan, self.classes
        cells = self.chunks.map(lambda c: sp.chunk_pair_cells(bc.value, c, f, classes)
                                ).treeReduce(lambda a, b: sp.merge_cells([a, b]))
        return sp.pair_table(self.plan, cells, self.feature_counts()[f])

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        return np.stack([self.pair_counts(f) for f in fs])

    def run(self, ops):
        raise NotImplementedError("the sparse path counts tables only")

    def masked(self, keep: HalfSample) -> SparkSparseBackend:
        """A stability run's rows (:func:`~vmi_spark.core.sparse.mask_chunk`), cached
        until the view is closed."""
        bc = self._plan
        chunks = self.chunks.map(lambda c: sp.mask_chunk(bc.value, c, keep))
        return SparkSparseBackend(chunks.persist(StorageLevel.MEMORY_AND_DISK), self.plan,
                                  self.classes)

    def kept(self, keep: HalfSample) -> np.ndarray:
        """(rows,) bool: the rows ``keep`` keeps, in the order of the chunks' rows."""
        bc = self._plan
        return np.concatenate(self.chunks.map(lambda c: sp.chunk_kept(bc.value, c, keep))
                              .collect())

    def close(self) -> None:
        self.chunks.unpersist()
        self._plan.unpersist()


class ScreenedBackend(InMemoryBackend):
    """The bound's dense codes of the screened elements (:func:`_screened`); a stability
    run keeps the rows the hash of their every element's codes keeps (``kept``), as the
    dense path's half-samples of the same rows."""

    def __init__(self, codes: np.ndarray, y: np.ndarray, arity: int, classes: int, kept):
        super().__init__(codes, y, arity=arity, num_classes=classes)
        self.kept = kept

    def masked(self, keep) -> InMemoryBackend:
        codes, y, _ = self.rows()
        on = self.kept(keep)
        return InMemoryBackend(codes[:, on], y[on], self.arity, self.num_classes)


def encoder(plan_bc, classes: list[Any], batch_rows: int = BATCH_ROWS):
    """A partition's rows as one SparseChunk (labelled rows only), coded ``batch_rows``
    rows at a time (the codes are the same for any ``batch_rows``: each non-zero's code
    depends on its element and value alone); ``plan_bc.value`` is the element plan."""
    code = {c: k for k, c in enumerate(classes)}

    def encode(rows):
        pieces: list[sp.SparseChunk] = []
        y: list[int] = []
        row: list[np.ndarray] = []
        idx: list[np.ndarray] = []
        val: list[np.ndarray] = []
        done = 0  # rows coded before this batch

        def flush() -> None:
            pieces.append(sp.encode_chunk(plan_bc.value, np.asarray(y, np.int32),
                                          _cat(row, np.int64), _cat(idx, np.int64),
                                          _cat(val, np.float64)))
        for lab, vec in rows:
            if lab is None:
                continue
            i, v = _nonzeros(vec)
            row.append(np.full(len(i), done + len(y), np.int64))
            y.append(code[lab])
            idx.append(i)
            val.append(v)
            if len(y) >= batch_rows:
                flush()
                done += len(y)
                y, row, idx, val = [], [], [], []
        if y or not pieces:
            flush()
        yield sp.SparseChunk(_cat([p.y for p in pieces], np.int32),
                             _cat([p.row for p in pieces], np.int32),
                             _cat([p.element for p in pieces], np.int32),
                             _cat([p.code for p in pieces], np.uint8))
    return encode


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _checked(stats: tuple, df: DataFrame, features_col: str, label: str,
             settings: Settings) -> tuple[list[Any], int, tuple]:
    """The sorted classes, the width and the value cells of the stats pass, or the one
    line saying why the input cannot be selected sparsely. The label is decided and its
    classes checked by the planning the dense path uses
    (:func:`vmi_spark.core.planning.decide_label`, :func:`~vmi_spark.core.planning.
    label_classes`); this path takes a categorical label."""
    labels, sizes, nulls, nans, cells = stats[:5]
    if not labels:
        raise ParameterError("label", "no labelled rows: every value of {label} column "
                             f"'{literal(label)}' is null")
    if len(sizes) != 1:
        raise InputError(f"featuresCol '{features_col}' holds vectors of {min(sizes)} to "
                         f"{max(sizes)} elements; every row must have the same length")
    if nulls or nans:
        raise InputError(f"featuresCol '{features_col}' has {nulls} null vectors and {nans} "
                         "NaN elements; the sparse path reads complete vectors only")
    found = sorted(labels) if len(labels) <= settings.max_classes else None
    vtype = _label_type(df, label)
    decision = decide_label(settings.label_type, found, sum(labels.values()), vtype,
                            settings.max_classes, settings.style, settings.label_bins)
    if decision.kind == "continuous":
        raise ParameterError("label_type", f"label column '{literal(label)}': "
                             f"{literal(decision.reason)}; a wide sparse vector column is "
                             "selected for a categorical label: set {label_type} "
                             "categorical", settings.style)
    classes = label_classes(label, decision, found, vtype, settings.max_classes)
    return classes, sizes.pop(), cells


def _label_type(df: DataFrame, label: str):
    """The label column's :class:`~vmi_spark.core.planning.ValueType` (a string one when
    its type cannot be read as a feature's)."""
    from ...core.planning import STRING

    field = next((f for f in df.schema.fields if f.name == label), None)
    vt = None if field is None else value_type(field.dataType)
    return vt if vt is not None else STRING


def _screened(backend: SparkSparseBackend, planned: sp.ElementPlanned, k: int,
              settings: Settings) -> tuple[ScreenedBackend, np.ndarray]:
    """The bound's backend: the :data:`~vmi_spark.core.sparse.SCREEN_BYTES` // rows
    elements of most mutual information with the label (MIM from the sparse tables), as
    dense codes in the driver; and those elements (ascending)."""
    rows = planned.num_rows
    relevance = criteria.label_mutual_information(backend.feature_counts())
    keep = sp.screened(relevance, rows)
    if len(keep) < k:
        raise ParameterError("num_features", f"{{num_features}} {k} is more than the "
                             f"{len(keep)} elements a screened {settings.method} selection "
                             f"of {rows} rows holds ({sp.SCREEN_BYTES >> 20} MiB of codes); "
                             "lower {num_features} or choose mim, mrmr, jmi, cmim or cife")
    plan = backend.plan
    parts = backend.chunks.map(lambda c: (c.y, sp.chunk_dense_codes(plan, c, keep))).collect()
    codes = np.concatenate([p[1] for p in parts], axis=1)
    y = np.concatenate([p[0] for p in parts])
    return ScreenedBackend(codes, y, plan.arity, backend.classes, backend.kept), keep


def _in_elements(ran: Ran, keep: np.ndarray) -> None:
    """A screened run's indices (among the ``keep`` elements) as the vector's: the
    selection, its candidates and suspects, the stability runs' features."""
    sel = ran.selection
    sel.selected = [int(keep[i]) for i in sel.selected]
    sel.candidates = [[(int(keep[i]), v) for i, v in step] for step in sel.candidates]
    sel.suspects = [{**s, "index": int(keep[s["index"]])} for s in sel.suspects]
    if ran.stability is not None:
        ran.stability["features"] = [{**f, "index": int(keep[f["index"]])}
                                     for f in ran.stability["features"]]


#: rows of the sample the estimate before reading takes when the Parquet footers do not
#: give the rows and non-zeros (one small job)
NNZ_SAMPLE_ROWS = 256


def _footer_counts(df: DataFrame, label: str, features_col: str) -> tuple[int, int] | None:
    """(rows, non-zeros) from the Parquet footers of a plain scan (the row groups' rows and
    the values of the vectors' ``indices`` leaf column), or None."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from .arrow_source import parquet_source

    src = parquet_source(df, [label, features_col])
    if src is None:
        return None
    leaf = f"{features_col}.indices.list.element"
    nnz = 0
    try:
        for uri in src.files:
            fs, path = pafs.FileSystem.from_uri(uri)
            pf = pq.ParquetFile(fs.open_input_file(path))
            md = pf.metadata
            col = next((j for j in range(md.num_columns)
                        if md.row_group(0).column(j).path_in_schema == leaf), None) \
                if md.num_row_groups else None
            if col is not None:
                nnz += sum(md.row_group(g).column(col).num_values
                           for g in range(md.num_row_groups))
            pf.close()
    except Exception as exc:  # noqa: BLE001 - an unreadable footer: the sample instead
        log.debug("no non-zeros from the footers: %s", exc)
        return None
    return src.num_rows, nnz


def _sample(df: DataFrame, label: str, features_col: str) -> tuple[float, int, int]:
    """(mean non-zeros a row, the most states an element shows, classes) in the first
    :data:`NNZ_SAMPLE_ROWS` rows (one small job)."""
    rows = df.select(F.col(quote(label)), F.col(quote(features_col))).limit(NNZ_SAMPLE_ROWS).collect()
    vecs = [r[1] for r in rows if r[1] is not None]
    labels = {r[0] for r in rows if r[0] is not None}
    if not vecs:
        return 0.0, 2, max(len(labels), 2)
    parts = [_nonzeros(v) for v in vecs]
    idx = np.concatenate([p[0] for p in parts])
    val = np.concatenate([p[1] for p in parts])
    el, _, _ = sp.value_cells(idx, val)
    most = int(np.bincount(el).max()) if len(el) else 0
    return float(len(idx)) / len(vecs), most + 1, max(len(labels), 2)


def driver_limits(spark) -> DriverLimits:
    """(bytes available to the driver's Python, :func:`~vmi_spark.core.limits.
    available_bytes`; spark.driver.maxResultSize; the driver JVM's heap), each None where
    it cannot be known (Spark Connect: no JVM here)."""
    result = heap = None
    try:
        sc = spark.sparkContext
        result = int(sc._jvm.org.apache.spark.util.Utils.byteStringAsBytes(
            sc.getConf().get("spark.driver.maxResultSize", "1g")))
        heap = int(sc._jvm.java.lang.Runtime.getRuntime().maxMemory())
    except Exception as exc:  # noqa: BLE001 - Connect: no SparkContext
        log.debug("no driver limits: %s", exc)
    return available_bytes(), result, heap


def _partitions(df: DataFrame) -> int:
    try:
        return int(df.rdd.getNumPartitions())
    except Exception:  # noqa: BLE001 - Connect
        return 1


def plan_estimate(df: DataFrame, label: str, features_col: str, settings: Settings,
                  width: int, k: int) -> tuple[sp.SparseEstimate, str]:
    """The estimate before any row is read: the rows and non-zeros from the Parquet
    footers, else from a sample of the first rows and a count; the states and classes
    from the sample. Logged and checked (:func:`~vmi_spark.core.sparse.check_estimate`)."""
    mean, states, classes = _sample(df, label, features_col)
    counts = _footer_counts(df, label, features_col)
    if counts is not None:
        rows, nnz, source = counts[0], counts[1], "the Parquet footers"
    else:
        rows = int(df.count())
        nnz, source = int(round(mean * rows)), f"a count and {NNZ_SAMPLE_ROWS} rows' non-zeros"
    states = min(states, max(settings.max_categories, settings.num_bins))
    cores = parallelism(df.sparkSession)
    est = sp.estimate(width, rows, nnz, states, classes, k, settings.method,
                      max(_partitions(df), cores), cores)
    return est, source


def sparse_selection(df: DataFrame, label: str, features_col: str, settings: Settings,
                     on_step=None, limits: SparseLimits | None = None) -> SelectionReport:
    """Select elements of the sparse vector column ``features_col`` by a comparison
    criterion (the bound: screened); returns the report (the fields a fitted model
    reads). Before reading, and again after the first pass, the run's memory and time are
    estimated, logged and checked (one line naming the parameter to change). From the
    coded rows on it is the one run of every front end (:func:`vmi_spark.run.run_planned`:
    K, suspects, the checkpoint, the steps, the stability runs, the notes).
    ``limits``: from :func:`~vmi_spark.core.limits.current` unless given."""
    t0 = time.perf_counter()
    limits = limits or SparseLimits()
    crit = criteria.criterion(settings.method)
    if crit.all_pair_tables:
        raise ParameterError("method", f"{{method}} '{settings.method}' needs every pair "
                             "of elements' tables (elements squared) on a sparse vector this "
                             "wide; choose mim, mrmr, jmi, cmim or cife")
    if settings.checkpoint_dir is not None:  # before anything is read, as the dense path
        check_checkpoint_dir(df, settings.checkpoint_dir)
    field = next(f for f in df.schema.fields if f.name == features_col)
    width = _declared_width(df, features_col)
    k = Policy.of(settings, width).k  # the estimate's K (run_planned warns if capped)
    driver = limits.driver if limits.driver is not None else driver_limits(df.sparkSession)
    before, source = plan_estimate(df, label, features_col, settings, width, k)
    t_estimate = time.perf_counter()
    log.info("sparse plan (from %s): %s", source, before.line())
    sp.check_estimate(before, *driver)
    source_df = df.select(F.col(quote(label)), F.col(quote(features_col)))
    if _partitions(df) < before.cores:  # few files: every core reads (the tables are
        source_df = source_df.repartition(before.cores)  # exact sums in any partitioning)
    rdd = source_df.rdd.map(tuple)
    stats = rdd.mapPartitions(partial(partition_stats, batch_rows=limits.batch_rows)
                              ).treeReduce(_merge_stats)
    classes, width, cells = _checked(stats, df, features_col, label, settings)
    rows = sum(stats[0].values())
    t_first = time.perf_counter()
    plan = sp.element_plan(width, rows, cells, settings.max_categories, settings.num_bins)
    after = sp.estimate(width, rows, int(cells[2].sum()), plan.arity, len(classes), k,
                        settings.method, before.partitions, before.cores, cells=stats[6])
    log.info("sparse plan (from the first pass): %s", after.line())
    sp.check_estimate(after, *driver)
    names = vector_attribute_names(field.metadata) or [f"{features_col}[{i}]"
                                                       for i in range(width)]
    planned = sp.ElementPlanned(plan, names, classes, rows)
    bc = df.sparkSession.sparkContext.broadcast(plan)
    chunks = rdd.mapPartitions(encoder(bc, classes, limits.batch_rows)
                               ).persist(StorageLevel.MEMORY_AND_DISK)
    t_plan = time.perf_counter()
    backend = SparkSparseBackend(chunks, plan, len(classes))  # the coding pass (cached)
    t_coded = time.perf_counter()
    notes: list[str] = []
    screen: dict[str, Any] = {}
    try:
        ran, keep = _run(backend, planned, settings, notes, on_step, k)
    finally:
        backend.close()
        bc.unpersist()
    if keep is not None:
        _in_elements(ran, keep)
        screen = {"screened_by": "mim", "screened_elements": int(len(keep)),
                  "screened_bytes": int(len(keep)) * rows}
    out: SelectionReport = {
        **report_fields(ran.selection, names), "label": label, "num_rows": rows,
        "rows_dropped": int(stats[5]), "rows_skipped": 0,
        "num_classes": len(classes), "classes": [show_state(c) for c in classes],
        "label_type": "categorical", "parameters": json_parameters(settings.result()),
        "columns": [], "execution": "sparse", "reader": "spark", "storage": "cache",
        "features_col": features_col,
        "sparse": {"elements": width, "non_zero_values": int(cells[2].sum()),
                   "states": plan.arity, **screen,
                   "suspects": {**SUSPECT_RULES, "over": "every element" if keep is None
                                else "the screened elements (also the copies, the checkpoint "
                                "and the stability runs)"},
                   "seconds": {"estimate": t_estimate - t0, "first_pass": t_first - t_estimate,
                               "plan": t_plan - t_first, "coding_pass": t_coded - t_plan,
                               "steps": time.perf_counter() - t_coded},
                   "estimate": {"before_reading": {**before.fields(), "from": source},
                                "after_first_pass": after.fields(),
                                "partition_cells": [list(c) for c in stats[6]],
                                "limits": {"driver_available_bytes": driver[0],
                                           "max_result_bytes": driver[1],
                                           "driver_heap_bytes": driver[2]}}},
        "prepare_seconds": t_coded - t0,
        "total_seconds": time.perf_counter() - t0, "warnings": notes}
    if ran.stability is not None:
        out["stability"] = ran.stability
    return out


def _run(backend: SparkSparseBackend, planned: sp.ElementPlanned, settings: Settings,
         notes: list[str], on_step, k: int) -> tuple[Ran, np.ndarray | None]:
    """The one run (:func:`vmi_spark.run.run_planned`) over the sparse tables, or for the
    bound over the screened elements' dense codes (and those elements), held in the
    checkpoint directory when there is one."""
    keep = None
    run_backend: Any = backend
    if criteria.criterion(settings.method).vmi:
        run_backend, keep = _screened(backend, planned, k, settings)
        planned = planned.subset(keep)
    with ExitStack() as steps:
        keeper = (steps.enter_context(held(settings, planned.to_json(), len(planned.features),
                                           run_backend.feature_counts, notes))
                  if settings.checkpoint_dir is not None else None)
        return run_planned(run_backend, planned, settings, notes, on_step=on_step,
                           keeper=keeper), keep


def _declared_width(df: DataFrame, features_col: str) -> int:
    """The vector's width: its ML attributes' ``num_attrs``, else its first vector's size."""
    field = next(f for f in df.schema.fields if f.name == features_col)
    declared = (field.metadata or {}).get("ml_attr", {}).get("num_attrs")
    if declared is not None:
        return int(declared)
    row = df.select(features_col).where(F.col(quote(features_col)).isNotNull()).first()
    return int(row[0].size) if row is not None and row[0] is not None else 0
