"""A vector column of sparse vectors selected from its non-zeros (issue 47).

:func:`sparse_selection` reads ``featuresCol`` without densifying a row: one pass
counts the labels and the exact (element, value) counts of the non-zeros
(:func:`vmi_spark.core.sparse.value_cells`), the elements' states are planned from them
(:func:`~vmi_spark.core.sparse.element_plan`), a second pass codes every partition's
non-zeros into one :class:`~vmi_spark.core.sparse.SparseChunk` (cached), and the one
greedy loop (:func:`vmi_spark.core.greedy.select`) runs a comparison criterion over
:class:`SparkSparseBackend`: each count table is a Spark job whose partitions give their
sparse cells and ``treeReduce`` adds them in exact integers (any partitioning, the same
tables). Memory and work grow with the non-zeros; the tables the driver folds are
(D, A, L) and (D, A, A, L).

:func:`is_sparse_input` decides: a vector column whose first vector is a
``SparseVector`` with at least :data:`SPARSE_MIN_WIDTH` elements. The comparison
criteria chosen step by step run on the sparse tables; the bound (``vmi_naive``,
``vmi_pairwise``), whose steps cost rows x candidates whatever the sparsity, runs on the
:data:`~vmi_spark.core.sparse.SCREEN_BYTES` // rows elements of most mutual information
with the label, as dense codes in the driver (:func:`_screened_bound`); ``spec_cmi`` is
refused in one line naming ``method``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..core import criteria
from ..core import sparse as sp
from ..core.greedy import Selection, report_fields, select
from ..core.inmemory import InMemoryBackend
from ..core.report_schema import SelectionReport
from ..core.summary import json_parameters
from ..core.units import show_state
from ..errors import InputError, ParameterError
from ..params import Settings, corrections, plan_size
from .plan import quote
from .vector_source import vector_attribute_names

#: the least width of a sparse vector column read sparsely (narrower ones are read as
#: dense codes, whose results are those of the expanded columns)
SPARSE_MIN_WIDTH = 10_000


def is_sparse_input(df: DataFrame, features_col: str | None) -> bool:
    """Whether ``features_col`` holds sparse vectors of at least :data:`SPARSE_MIN_WIDTH`
    elements (its first non-null vector: one small job)."""
    if features_col is None or features_col not in df.columns:
        return False
    field = next(f for f in df.schema.fields if f.name == features_col)
    declared = (field.metadata or {}).get("ml_attr", {}).get("num_attrs")
    if declared is not None and int(declared) < SPARSE_MIN_WIDTH:
        return False  # known narrow: no job
    row = df.select(features_col).where(F.col(quote(features_col)).isNotNull()).first()
    vec = None if row is None else row[0]
    return vec is not None and type(vec).__name__ == "SparseVector" \
        and vec.size >= SPARSE_MIN_WIDTH


def _stats(rows) -> list[Any]:
    """One partition's label counts, rows, vector sizes, null vectors, NaNs and value
    cells (:func:`~vmi_spark.core.sparse.value_cells`)."""
    labels: dict[Any, int] = {}
    sizes: set[int] = set()
    nulls = nans = 0
    idx, val = [], []
    for lab, vec in rows:
        if lab is None:
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
    cells = sp.value_cells(np.concatenate(idx) if idx else np.zeros(0, np.int64),
                           np.concatenate(val) if val else np.zeros(0))
    return [(labels, sizes, nulls, nans, cells)]


def _nonzeros(vec) -> tuple[np.ndarray, np.ndarray]:
    """A vector's (indices, values): a sparse one's stored entries, a dense one's all."""
    if type(vec).__name__ == "SparseVector":
        return np.asarray(vec.indices, np.int64), np.asarray(vec.values, np.float64)
    arr = np.asarray(vec.toArray(), np.float64)
    return np.arange(len(arr), dtype=np.int64), arr


def _merge_stats(a: tuple, b: tuple) -> tuple:
    (la, sa, na, ma, ca), (lb, sb, nb, mb, cb) = a, b
    labels = dict(la)
    for k, v in lb.items():
        labels[k] = labels.get(k, 0) + v
    return labels, sa | sb, na + nb, ma + mb, sp.merge_value_cells([ca, cb])


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

    def close(self) -> None:
        self.chunks.unpersist()
        self._plan.unpersist()


def _encoder(plan_bc, classes: list[Any]):
    """A partition's rows as one SparseChunk (labelled rows only)."""
    code = {c: k for k, c in enumerate(classes)}

    def encode(rows):
        y, row, idx, val = [], [], [], []
        for lab, vec in rows:
            if lab is None:
                continue
            i, v = _nonzeros(vec)
            row.append(np.full(len(i), len(y), np.int64))
            y.append(code[lab])
            idx.append(i)
            val.append(v)
        yield sp.encode_chunk(plan_bc.value, np.asarray(y, np.int32), _cat(row, np.int64),
                              _cat(idx, np.int64), _cat(val, np.float64))
    return encode


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _checked(stats: tuple, features_col: str, label: str,
             settings: Settings) -> tuple[list[Any], int, tuple]:
    """The sorted classes, the width and the value cells of the stats pass, or the one
    line saying why the input cannot be selected sparsely."""
    labels, sizes, nulls, nans, cells = stats
    if not labels:
        raise InputError(f"no labelled rows: every value of label column '{label}' is null")
    if len(sizes) != 1:
        raise InputError(f"featuresCol '{features_col}' holds vectors of {min(sizes)} to "
                         f"{max(sizes)} elements; every row must have the same length")
    if nulls or nans:
        raise InputError(f"featuresCol '{features_col}' has {nulls} null vectors and {nans} "
                         "NaN elements; the sparse path reads complete vectors only")
    if len(labels) > settings.max_classes:
        raise ParameterError("max_classes", f"label column '{label}' has more than "
                             f"{settings.max_classes} distinct values ({{max_classes}}); the "
                             "sparse path takes a categorical label")
    classes = sorted(labels)
    if len(classes) < 2:
        raise InputError(f"label column '{label}' has one class; feature selection "
                         "needs at least two")
    return classes, sizes.pop(), cells


def _screened_bound(backend: SparkSparseBackend, crit, k: int, min_gain: float | None,
                    rows: int,
                    settings: Settings, on_step) -> tuple[Selection, dict[str, Any]]:
    """The bound on the :data:`~vmi_spark.core.sparse.SCREEN_BYTES` // rows elements of
    most mutual information with the label (MIM from the sparse tables), as dense codes
    in the driver; the selection in the vector's indices and what the screening kept."""
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
    dense = InMemoryBackend(codes, y, arity=plan.arity, num_classes=backend.classes)
    sel = select(dense, crit, k, restart_tolerance=settings.restart_tolerance,
                 min_gain=min_gain, report_candidates=settings.report_candidates,
                 **corrections(settings))
    sel.selected = [int(keep[i]) for i in sel.selected]
    sel.candidates = [[(int(keep[i]), v) for i, v in step] for step in sel.candidates]
    if on_step is not None:
        on_step(sel)
    return sel, {"screened_by": "mim", "screened_elements": int(len(keep)),
                 "screened_bytes": int(codes.nbytes)}


def sparse_selection(df: DataFrame, label: str, features_col: str, settings: Settings,
                     on_step=None) -> SelectionReport:
    """Select elements of the sparse vector column ``features_col`` by a comparison
    criterion; returns the report (the fields a fitted model reads)."""
    t0 = time.perf_counter()
    crit = criteria.criterion(settings.method)
    if crit.all_pair_tables:
        raise ParameterError("method", f"{{method}} '{settings.method}' needs every pair "
                             "of elements' tables (elements squared) on a sparse vector this "
                             "wide; choose mim, mrmr, jmi, cmim or cife")
    rdd = df.select(F.col(quote(label)), F.col(quote(features_col))).rdd.map(tuple)
    stats = rdd.mapPartitions(_stats).treeReduce(_merge_stats)
    classes, width, cells = _checked(stats, features_col, label, settings)
    rows = sum(stats[0].values())
    plan = sp.element_plan(width, rows, cells, settings.max_categories, settings.num_bins)
    bc = df.sparkSession.sparkContext.broadcast(plan)
    chunks = rdd.mapPartitions(_encoder(bc, classes)).persist(StorageLevel.MEMORY_AND_DISK)
    backend = SparkSparseBackend(chunks, plan, len(classes))
    k, min_gain, _ = plan_size(settings, width)
    screen: dict[str, Any] = {}
    try:
        if crit.vmi:
            sel, screen = _screened_bound(backend, crit, k, min_gain, rows, settings, on_step)
        else:
            sel = select(backend, crit, k, min_gain=min_gain, on_step=on_step,
                         report_candidates=settings.report_candidates, **corrections(settings))
    finally:
        backend.close()
        bc.unpersist()
    field = next(f for f in df.schema.fields if f.name == features_col)
    names = vector_attribute_names(field.metadata) or [f"{features_col}[{i}]"
                                                       for i in range(width)]
    return {**report_fields(sel, names), "label": label, "num_rows": rows,
            "num_classes": len(classes), "classes": [show_state(c) for c in classes],
            "label_type": "categorical", "parameters": json_parameters(settings.result()),
            "columns": [], "execution": "sparse", "reader": "spark", "storage": "cache",
            "sparse": {"elements": width, "non_zero_values": int(cells[2].sum()),
                       "states": plan.arity, **screen},
            "total_seconds": time.perf_counter() - t0, "warnings": []}
