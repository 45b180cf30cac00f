"""Sparse vectors kept sparse: element states and count tables from the non-zeros.

A wide vector (``HashingTF``, one-hot ``VectorAssembler`` output) is mostly zeros. Here
its rows are never expanded to rows x elements: a chunk of rows (:class:`SparseChunk`)
holds the rows' label codes and, for each stored non-zero, its row, element and state
code. The count tables the comparison criteria need are counted from the non-zeros
alone, and the cells of an element's zero state by subtraction from the marginals:

* n(x_i = z_i, y) = n(y) - sum_{a != z_i} n(x_i = a, y);
* n(x_i = z_i, x_f = b, y) = n(x_f = b, y) - sum_{a != z_i} n(x_i = a, x_f = b, y).

Each chunk gives its counts as sparse (cell, count) pairs (:func:`chunk_feature_cells`,
:func:`chunk_pair_cells`); :func:`merge_cells` adds any number of them exactly in
integers, so the tables do not depend on how the rows were cut into chunks.

How an element's values become states (:func:`element_plan`): an element with at most
``max_categories`` distinct values (zero included) is coded by its sorted values, as the
dense path codes a column (:func:`~.encoding.categorical_plan`): binary and count-valued
elements keep their values, and the tables are the dense path's, cell for cell. An
element with more values is cut into at most ``num_bins - 1`` equal-frequency bins of its
non-zeros (exact, from every non-zero value), and zero is a state of its own (state 0).

Spark-free; :class:`SparseBackend` holds chunks in memory (tests, small tables), the
Spark execution aggregates the same per-chunk functions over partitions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bound import StepOps
from .stability import HalfSample

__all__ = ["ElementPlan", "SparseChunk", "value_cells", "element_plan", "encode_chunk",
           "chunk_label_counts", "chunk_feature_cells", "chunk_pair_cells", "merge_cells",
           "feature_table", "pair_table", "SparseBackend", "SparseEstimate", "estimate",
           "check_estimate", "ElementColumn", "ElementPlanned", "chunk_kept",
           "mask_chunk"]


#: a sparse count: (cell ids ascending, int64 counts), one entry per non-empty cell
Cells = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class ElementPlan:
    """How every element of a sparse vector is coded.

    Attributes
    ----------
    width : int
        Elements (D).
    states : numpy.ndarray
        (D,) states per element (at least 1).
    zero : numpy.ndarray
        (D,) the state of a zero of each element; -1 where no row has a zero there.
    categories : list of numpy.ndarray or None
        Per element its sorted values (a ``category`` element), or None (binned).
    edges : list of numpy.ndarray or None
        Per binned element the split points of its non-zeros (a non-zero ``v`` gets
        state ``1 + #{edges <= v}``), else None.
    """

    width: int
    states: np.ndarray
    zero: np.ndarray
    categories: list[np.ndarray | None]
    edges: list[np.ndarray | None]

    @property
    def arity(self) -> int:
        """The most states of any element (A of the (D, A, L) tables)."""
        return int(self.states.max()) if self.width else 1


@dataclass(frozen=True)
class ElementColumn:
    """What the suspects read of an element (:func:`vmi_spark.core.suspects.screen`):
    its name and kind (``category``: its sorted values; ``bins``); no missing state (null
    vectors and NaN elements are refused) and no ``other`` state."""

    name: str
    kind: str
    missing: bool = False
    other: bool = False


@dataclass(frozen=True)
class ElementPlanned:
    """An element plan as the one run (:func:`vmi_spark.run.run_planned`) reads a
    :class:`~vmi_spark.core.planning.Planned`: ``plan`` is itself, with the elements'
    names as ``features``, their :class:`ElementColumn` s and the (categorical) label's
    type. ``identifiers`` is always empty: a vector element is a number, never a string or
    a column of whole numbers the identifier rule is for (the dense path finds none among a
    vector's elements either)."""

    elements: ElementPlan
    features: list[str]
    classes: list[Any]
    num_rows: int
    label_type: str = "categorical"
    identifiers: dict[str, tuple[float, str]] = field(default_factory=dict)

    @property
    def plan(self) -> ElementPlanned:
        """Itself: the plan a :class:`~vmi_spark.core.planning.Planned` holds."""
        return self

    @property
    def columns(self) -> list[ElementColumn]:
        """Every element's :class:`ElementColumn`."""
        return [ElementColumn(n, "category" if c is not None else "bins")
                for n, c in zip(self.features, self.elements.categories)]

    def subset(self, keep: np.ndarray) -> ElementPlanned:
        """The plan of the elements ``keep`` (ascending) alone (a screened selection)."""
        e = self.elements
        sub = ElementPlan(len(keep), e.states[keep], e.zero[keep],
                          [e.categories[i] for i in keep], [e.edges[i] for i in keep])
        return ElementPlanned(sub, [self.features[i] for i in keep], self.classes,
                              self.num_rows, self.label_type)

    def to_json(self) -> str:
        """The plan as JSON (a checkpoint's fingerprint: every element's states)."""
        e = self.elements
        return json.dumps({"features": self.features, "classes": [str(c) for c in self.classes],
                           "num_rows": self.num_rows, "states": e.states.tolist(),
                           "zero": e.zero.tolist(),
                           "categories": [None if c is None else c.tolist()
                                          for c in e.categories],
                           "edges": [None if x is None else x.tolist() for x in e.edges]})


def value_cells(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """The distinct (element, value) pairs of the non-zeros ``indices``/``values`` (0.0 and
    -0.0 dropped), sorted by element then value, with their int64 counts."""
    values = np.asarray(values, dtype=np.float64)
    keep = values != 0.0
    idx, val = np.asarray(indices, dtype=np.int64)[keep], values[keep]
    if not len(idx):
        return idx, val, np.zeros(0, dtype=np.int64)
    order = np.lexsort((val, idx))
    idx, val = idx[order], val[order]
    new = np.ones(len(idx), dtype=bool)
    new[1:] = (idx[1:] != idx[:-1]) | (val[1:] != val[:-1])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, len(idx))).astype(np.int64)
    return idx[starts], val[starts], counts


def merge_value_cells(parts: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`value_cells` of several chunks added up (exact; any order of the parts)."""
    parts = list(parts)
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
    idx = np.concatenate([p[0] for p in parts])
    val = np.concatenate([p[1] for p in parts])
    cnt = np.concatenate([p[2] for p in parts])
    if not len(idx):
        return idx, val, cnt
    order = np.lexsort((val, idx))
    idx, val, cnt = idx[order], val[order], cnt[order]
    new = np.ones(len(idx), dtype=bool)
    new[1:] = (idx[1:] != idx[:-1]) | (val[1:] != val[:-1])
    starts = np.flatnonzero(new)
    return idx[starts], val[starts], np.add.reduceat(cnt, starts)


def _bin_edges(values: np.ndarray, counts: np.ndarray, bins: int) -> np.ndarray:
    """At most ``bins - 1`` split points cutting the multiset (``values`` ascending,
    ``counts``) into equal-frequency bins: the value reached at each k/bins of the count."""
    cum = np.cumsum(counts)
    total = int(cum[-1])
    at = np.searchsorted(cum, [total * k / bins for k in range(1, bins)], side="left")
    edges = np.unique(values[np.minimum(at + 1, len(values) - 1)])
    return edges[edges > values[0]]


def element_plan(width: int, rows: int, cells: tuple[np.ndarray, np.ndarray, np.ndarray],
                 max_categories: int, num_bins: int) -> ElementPlan:
    """The states of every element from the exact counts of its non-zero values
    (``cells``: :func:`merge_value_cells` over all rows) and the ``rows``."""
    idx, val, cnt = cells
    bounds = np.searchsorted(idx, np.arange(width + 1))
    states = np.ones(width, dtype=np.int64)
    zero = np.full(width, -1, dtype=np.int64)
    categories: list[np.ndarray | None] = []
    edges: list[np.ndarray | None] = []
    for i in range(width):
        v, c = val[bounds[i]:bounds[i + 1]], cnt[bounds[i]:bounds[i + 1]]
        has_zero = int(c.sum()) < rows
        if len(v) + has_zero <= max_categories:
            cats = np.sort(np.append(v, 0.0)) if has_zero else v
            categories.append(cats)
            edges.append(None)
            states[i] = max(len(cats), 1)
            if has_zero:
                zero[i] = int(np.searchsorted(cats, 0.0))
            continue
        e = _bin_edges(v, c, max(num_bins - 1, 1))
        categories.append(None)
        edges.append(e)
        states[i] = len(e) + 2
        zero[i] = 0 if has_zero else -1
    return ElementPlan(width, states, zero, categories, edges)


@dataclass
class SparseChunk:
    """Rows of a sparse vector as codes: ``y`` (n,) class codes, and per stored non-zero
    its ``row`` (int32, in the chunk), ``element`` (int32) and state ``code`` (uint8)."""

    y: np.ndarray
    row: np.ndarray
    element: np.ndarray
    code: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.y)


def chunk_kept(plan: ElementPlan, chunk: SparseChunk, keep: HalfSample) -> np.ndarray:
    """(n,) bool: the chunk's rows a stability run keeps (:class:`~.stability.HalfSample`:
    from the hash of each row's codes of every element, as the dense path hashes the
    same rows)."""
    return keep.kept(keep.sparse_row_hashes(plan.zero, chunk.y, chunk.row, chunk.element,
                                            chunk.code))


def mask_chunk(plan: ElementPlan, chunk: SparseChunk, keep: HalfSample) -> SparseChunk:
    """The chunk's rows a stability run keeps (:func:`chunk_kept`), renumbered."""
    kept = chunk_kept(plan, chunk, keep)
    new_row = np.cumsum(kept) - 1
    on = kept[chunk.row]
    return SparseChunk(chunk.y[kept], new_row[chunk.row[on]].astype(np.int32),
                       chunk.element[on], chunk.code[on])


def _flat(plan: ElementPlan) -> tuple[np.ndarray, ...]:
    """The plan's categories and edges as flat arrays sorted by (element, value), with each
    element's first position (computed once a plan, in the process that codes)."""
    cached = getattr(plan, "_flat_cache", None)
    if cached is not None:
        return cached
    empty = np.zeros(0)
    cats = [c if c is not None else empty for c in plan.categories]
    edges = [e if e is not None else empty for e in plan.edges]
    n_cats = np.fromiter((len(c) for c in cats), np.int64, plan.width)
    n_edges = np.fromiter((len(e) for e in edges), np.int64, plan.width)
    out = (np.repeat(np.arange(plan.width), n_cats), _concat(cats),
           np.concatenate([[0], np.cumsum(n_cats)]),
           np.repeat(np.arange(plan.width), n_edges), _concat(edges),
           np.concatenate([[0], np.cumsum(n_edges)]),
           np.fromiter((c is not None for c in plan.categories), bool, plan.width))
    object.__setattr__(plan, "_flat_cache", out)
    return out


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)


def encode_chunk(plan: ElementPlan, y: np.ndarray, row: np.ndarray, indices: np.ndarray,
                 values: np.ndarray) -> SparseChunk:
    """The codes of the non-zeros (``row``, ``indices``, ``values``; zeros dropped) of rows
    with class codes ``y``, by ``plan``: a category element's value its position among
    the element's sorted values, a binned element's ``1 + #{edges <= v}``. All elements at
    once: (element, value) pairs ranked into one int64 key (the element times the distinct
    values, plus the value's rank) and looked up among the plan's keys."""
    values = np.asarray(values, dtype=np.float64)
    keep = values != 0.0
    row, el, val = (np.asarray(row)[keep], np.asarray(indices, dtype=np.int64)[keep],
                    values[keep])
    cat_el, cat_val, cat_start, edge_el, edge_val, edge_start, is_cat = _flat(plan)
    code = np.zeros(len(el), dtype=np.uint8)
    if len(el):
        ranks = np.unique(np.concatenate([val, cat_val, edge_val]))
        span = len(ranks) + 1

        def key(e: np.ndarray, v: np.ndarray) -> np.ndarray:
            return e.astype(np.int64) * span + np.searchsorted(ranks, v)

        cat = is_cat[el]
        k = key(el[cat], val[cat])
        code[cat] = np.searchsorted(key(cat_el, cat_val), k) - cat_start[el[cat]]
        binned = ~cat
        k = key(el[binned], val[binned])
        code[binned] = 1 + np.searchsorted(key(edge_el, edge_val), k, side="right") \
            - edge_start[el[binned]]
    return SparseChunk(np.asarray(y, dtype=np.int32), row.astype(np.int32),
                       el.astype(np.int32), code)


def _cells(ids: np.ndarray) -> Cells:
    """The distinct ``ids`` ascending and how often each occurs (int64)."""
    if not len(ids):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    u, c = np.unique(ids, return_counts=True)
    return u.astype(np.int64), c.astype(np.int64)


def merge_cells(parts: Iterable[Cells]) -> Cells:
    """Sparse counts added cell by cell (exact integers; any order and grouping)."""
    parts = list(parts)
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ids = np.concatenate([p[0] for p in parts])
    cnt = np.concatenate([p[1] for p in parts])
    if not len(ids):
        return ids, cnt
    order = np.argsort(ids, kind="stable")
    ids, cnt = ids[order], cnt[order]
    new = np.ones(len(ids), dtype=bool)
    new[1:] = ids[1:] != ids[:-1]
    starts = np.flatnonzero(new)
    return ids[starts], np.add.reduceat(cnt, starts)


def chunk_label_counts(chunk: SparseChunk, classes: int) -> np.ndarray:
    """(L,) int64 rows of each class in the chunk."""
    return np.bincount(chunk.y, minlength=classes).astype(np.int64)


def _off_zero(plan: ElementPlan, chunk: SparseChunk) -> np.ndarray:
    """Which non-zeros are not in their element's zero state (all, by construction; kept
    as a guard against a plan whose zero shares a state)."""
    return chunk.code.astype(np.int64) != plan.zero[chunk.element]


def chunk_feature_cells(plan: ElementPlan, chunk: SparseChunk, classes: int) -> Cells:
    """The chunk's non-zero cells of n(x_i = a, y): ids ``(i * A + a) * L + y``."""
    a = plan.arity
    keep = _off_zero(plan, chunk)
    el, code = chunk.element[keep].astype(np.int64), chunk.code[keep].astype(np.int64)
    ids = (el * a + code) * classes + chunk.y[chunk.row[keep]]
    return _cells(ids)


def _states_of(plan: ElementPlan, chunk: SparseChunk, f: int) -> np.ndarray:
    """(n,) the state of element ``f`` in every row of the chunk."""
    b = np.full(chunk.num_rows, max(int(plan.zero[f]), 0), dtype=np.int64)
    at = chunk.element == f
    b[chunk.row[at]] = chunk.code[at]
    return b


def chunk_pair_cells(plan: ElementPlan, chunk: SparseChunk, f: int, classes: int) -> Cells:
    """The chunk's non-zero cells of n(x_i = a, x_f = b, y) (a not x_i's zero state):
    ids ``((i * A + a) * A + b) * L + y``, b the state of ``f`` in the non-zero's row."""
    a = plan.arity
    b = _states_of(plan, chunk, f)
    keep = _off_zero(plan, chunk)
    rows = chunk.row[keep]
    el, code = chunk.element[keep].astype(np.int64), chunk.code[keep].astype(np.int64)
    ids = ((el * a + code) * a + b[rows]) * classes + chunk.y[rows]
    return _cells(ids)


def feature_table(plan: ElementPlan, cells: Cells, label_counts: np.ndarray) -> np.ndarray:
    """(D, A, L) int64 n(x_i = a, y): the non-zero cells, the zero state by subtraction
    from the class totals ``label_counts``."""
    d, a, classes = plan.width, plan.arity, len(label_counts)
    flat = np.zeros(d * a * classes, dtype=np.int64)
    flat[cells[0]] = cells[1]
    table = flat.reshape(d, a, classes)
    has = np.flatnonzero(plan.zero >= 0)
    table[has, plan.zero[has], :] = label_counts[None, :] - table[has].sum(axis=1)
    return table


def pair_table(plan: ElementPlan, cells: Cells, marginal: np.ndarray) -> np.ndarray:
    """(D, A, A, L) int64 n(x_i = a, x_f = b, y): the non-zero cells, x_i's zero state by
    subtraction from ``marginal``, the (A, L) counts n(x_f = b, y) of f."""
    d, a, classes = plan.width, plan.arity, marginal.shape[1]
    flat = np.zeros(d * a * a * classes, dtype=np.int64)
    flat[cells[0]] = cells[1]
    table = flat.reshape(d, a, a, classes)
    has = np.flatnonzero(plan.zero >= 0)
    table[has, plan.zero[has]] = marginal[None] - table[has].sum(axis=1)
    return table


class SparseBackend:
    """A :class:`~.criterion.Backend` over :class:`SparseChunk` s in memory: the count
    tables of the comparison criteria from the non-zeros (the bound's passes are not
    available: :meth:`run` raises)."""

    execution = "sparse"

    def __init__(self, plan: ElementPlan, chunks: Sequence[SparseChunk], classes: int):
        self.plan, self.chunks, self.classes = plan, list(chunks), classes
        self._counts: np.ndarray | None = None

    def label_counts(self) -> np.ndarray:
        total = np.zeros(self.classes, dtype=np.int64)
        for c in self.chunks:
            total += chunk_label_counts(c, self.classes)
        return total

    def feature_counts(self) -> np.ndarray:
        if self._counts is None:
            cells = merge_cells(chunk_feature_cells(self.plan, c, self.classes)
                                for c in self.chunks)
            self._counts = feature_table(self.plan, cells, self.label_counts())
        return self._counts

    def pair_counts(self, f: int) -> np.ndarray:
        cells = merge_cells(chunk_pair_cells(self.plan, c, f, self.classes)
                            for c in self.chunks)
        return pair_table(self.plan, cells, self.feature_counts()[f])

    def pair_counts_many(self, fs: list[int]) -> np.ndarray:
        return np.stack([self.pair_counts(f) for f in fs])

    def run(self, ops: StepOps) -> np.ndarray:
        raise NotImplementedError("the sparse path counts tables only; the bound's passes "
                                  "run on dense codes (a screened selection)")

    def masked(self, keep: HalfSample) -> SparseBackend:
        """The rows a stability run keeps (:func:`mask_chunk`)."""
        return SparseBackend(self.plan, [mask_chunk(self.plan, c, keep) for c in self.chunks],
                             self.classes)

    def close(self) -> None:
        self.chunks = []


#: bytes of dense codes (rows x screened elements) a screened selection of the bound may
#: hold in the driver
SCREEN_BYTES = 256 << 20


def screened(relevance: np.ndarray, rows: int, budget: int = SCREEN_BYTES) -> np.ndarray:
    """The elements a screened selection of the bound runs on: the ``budget // rows`` most
    relevant (ties to the lowest index), in index order."""
    m = max(0, min(len(relevance), budget // max(rows, 1)))
    order = np.lexsort((np.arange(len(relevance)), -relevance))
    return np.sort(order[:m])


def chunk_dense_codes(plan: ElementPlan, chunk: SparseChunk, keep: np.ndarray) -> np.ndarray:
    """(len(keep), n) uint8 codes of the elements ``keep`` (ascending) in the chunk's rows:
    each element's zero state, and its non-zeros' codes where they are."""
    out = np.repeat(np.maximum(plan.zero[keep], 0).astype(np.uint8)[:, None],
                    chunk.num_rows, axis=1)
    pos = np.searchsorted(keep, chunk.element)
    hit = (pos < len(keep)) & (keep[np.minimum(pos, len(keep) - 1)] == chunk.element)
    out[pos[hit], chunk.row[hit]] = chunk.code[hit]
    return out


# ---------------------------------------------------------------------------
# What a run will take: the plan's estimate, before the rows are read
# ---------------------------------------------------------------------------

#: bytes a cached non-zero takes (its row and element as int32, its state code uint8)
CHUNK_BYTES_PER_NONZERO = 9
#: bytes a cached row takes (its class code, int32)
CHUNK_BYTES_PER_ROW = 4
#: bytes of one sparse count a task sends to the driver (int64 cell id, int64 count)
CELL_BYTES = 16
#: bytes of one (element, value, count) cell of the first pass (int64, float64, int64)
VALUE_CELL_BYTES = 24
#: bytes a Python process holds before any table (the interpreter, numpy, pyspark,
#: vmi_spark: 150-180 MB measured)
PYTHON_BASE_BYTES = 200 << 20
#: bytes a Python worker holds per non-zero and per row of the batch of rows it reads
#: (the rows' Row, SparseVector and index/value arrays, their concatenation, the sort):
#: from the workers' peak of benchmarks/sparse_wide.py at 10^5 x 2^18, whole partitions
#: (562 MB for 1.64M non-zeros and 50,000 rows)
TASK_BYTES_PER_NONZERO = 200
TASK_BYTES_PER_ROW = 1000
#: rows a worker reads at a time (:data:`vmi_spark.spark.sources.sparse_vectors.BATCH_ROWS`)
BATCH_ROWS = 8192
#: bytes a worker holds per code of its partition (the batches' codes and their
#: concatenation) and per distinct (element, value) cell (the running cells, the batch's
#: and their merge)
TASK_BYTES_PER_CODE = 2 * CHUNK_BYTES_PER_NONZERO
TASK_BYTES_PER_CELL = 3 * VALUE_CELL_BYTES
#: bytes a worker holds per code of its partition in a step's task (the unpickled chunk,
#: its codes widened to int64, the cells' ids and their sort): fitted to the workers'
#: peaks of benchmarks/sparse_wide.py (456 MB at 1.64M codes a partition, 1,825 MB at
#: 16.7M), which come in the steps
STEP_TASK_BYTES_PER_CODE = 100
#: (D, A, A, L) int64 arrays the driver holds at once while it scores a pair table (the
#: table, its zero-state slice and sums, the criterion's sorted copies and products)
PAIR_TABLE_COPIES = 8
#: copies of the screened codes the driver holds while it collects them (the tasks'
#: pickled parts, their arrays, the concatenation)
SCREEN_COPIES = 3
#: seconds a reading pass spends per row and per non-zero in one Python worker (a
#: ``Row`` of a ``SparseVector`` through the RDD API), fitted to benchmarks/sparse_wide.py
#: at 10^5 x 2^18 (two passes 36 s on 2 cores, load average 8 on them)
READ_SECONDS_PER_ROW = 100e-6
READ_SECONDS_PER_NONZERO = 8e-6
#: seconds a step's job spends per cached non-zero in one worker, and the driver per
#: cell of a (D, A, A, L) table it folds and scores (the same run: 2-3.5 s a step)
STEP_SECONDS_PER_NONZERO = 1.1e-6
TABLE_SECONDS_PER_CELL = 200e-9
#: seconds the bound's in-memory steps spend per row and screened element
BOUND_SECONDS_PER_CELL = 10e-9


@dataclass(frozen=True)
class SparseEstimate:
    """What a selection from the non-zeros will take (:func:`estimate`): bytes where they
    are held and seconds, from the width D, the rows N, the non-zeros Z, the states A, the
    classes L, K steps and the partitions P.

    Attributes
    ----------
    chunk_bytes : int
        The cached codes, in the executors' storage (spilled to disk if need be):
        ``9 Z + 4 N``.
    task_bytes : int
        One Python worker reading a partition of Z_p = ceil(Z / P) non-zeros and C_p
        distinct (element, value) pairs (before reading ``min(Z_p, D A)``) in batches of
        B = min(8192, N / P) rows, or a step's task over its codes, the larger:
        ``200 MiB + max(18 Z_p + 72 C_p + B (1000 + 200 Z / N), 100 Z_p)``.
    result_bytes : int
        One job's task results, collected in the driver (``spark.driver.maxResultSize``):
        the largest of the first pass's value cells and a table job's sparse counts.
        Before reading, the first pass's ``24 min(Z, P D A)`` (the table jobs' are not
        known yet); after it, from each partition's non-zeros Z_p and distinct
        (element, value) pairs C_p: ``max(24 sum C_p, 16 sum min(Z_p, C_p L A))``
        (``C_p L`` without pair tables: mim).
    driver_bytes : int
        The driver's Python: ``200 MiB`` before any table, the (D, A, L) table ``8 D A L``,
        ``8`` (D, A, A, L) tables ``8 x 8 D A^2 L`` with pair tables, the collected
        results, and with screening the codes ``3 M N``.
    read_seconds, step_seconds : float
        The two reading passes ``2 (100e-6 N + 8e-6 Z) / cores`` and the K steps:
        ``K (1.1e-6 Z / cores + 200e-9 D A^2 L)`` with pair tables, one ``1.1e-6 Z / cores
        + 200e-9 D A L`` without, and the screened bound's ``K 10e-9 M N``.
    """

    width: int
    rows: int
    non_zeros: int
    states: int
    classes: int
    k: int
    method: str
    partitions: int
    cores: int
    screened: int
    chunk_bytes: int
    task_bytes: int
    result_bytes: int
    driver_bytes: int
    read_seconds: float
    step_seconds: float

    @property
    def seconds(self) -> float:
        return self.read_seconds + self.step_seconds

    def fields(self) -> dict[str, Any]:
        """The estimate as the report's ``sparse.estimate`` (JSON)."""
        return {"width": self.width, "rows": self.rows, "non_zeros": self.non_zeros,
                "states": self.states, "classes": self.classes, "k": self.k,
                "method": self.method, "partitions": self.partitions, "cores": self.cores,
                "screened": self.screened, "chunk_bytes": self.chunk_bytes,
                "task_bytes": self.task_bytes, "result_bytes": self.result_bytes,
                "driver_bytes": self.driver_bytes,
                "read_seconds": round(self.read_seconds, 3),
                "step_seconds": round(self.step_seconds, 3),
                "seconds": round(self.seconds, 3)}

    def line(self) -> str:
        """One log line."""
        return (f"{self.method} on {self.rows:,} rows x {self.width:,} elements, "
                f"{self.non_zeros:,} non-zeros, A={self.states}, L={self.classes}, "
                f"K={self.k}, {self.partitions} partitions: about "
                f"{_size(self.driver_bytes)} in the driver's Python, "
                f"{_size(self.result_bytes)} of task results a job, "
                f"{_size(self.task_bytes)} a Python worker, "
                f"{_size(self.chunk_bytes)} cached; about {self.read_seconds:.0f} s reading "
                f"and {self.step_seconds:.0f} s of steps")


def _size(n: float) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{int(n)} B"


def estimate(width: int, rows: int, non_zeros: int, states: int, classes: int, k: int,
             method: str, partitions: int, cores: int, budget: int = SCREEN_BYTES,
             cells: Sequence[tuple[int, int]] | None = None) -> SparseEstimate:
    """The memory and time of a selection of ``k`` elements by ``method`` from the
    non-zeros (the formulas: :class:`SparseEstimate`). The bound (``vmi_*``) runs on the
    ``budget // rows`` screened elements; pair tables are counted by the criteria with a
    redundancy term (mrmr, jmi, cmim, cife), not by mim. ``cells``: each partition's
    (non-zeros, distinct (element, value) pairs), known after the first pass."""
    from .criteria import criterion

    d, n, z, a, lab = width, rows, non_zeros, max(states, 1), max(classes, 1)
    p, c = max(partitions, 1), max(cores, 1)
    crit = criterion(method)
    pairs = bool(getattr(crit, "pair_tables_per_step", False))
    m = min(d, budget // max(n, 1)) if crit.vmi else 0
    table_cells = d * a * a * lab if pairs else d * a * lab
    if cells is None:
        result = VALUE_CELL_BYTES * min(z, p * d * a)
    else:
        per = lab * (a if pairs else 1)
        result = max(VALUE_CELL_BYTES * sum(cp for _, cp in cells),
                     CELL_BYTES * sum(min(zp, cp * per) for zp, cp in cells))
    driver = (PYTHON_BASE_BYTES + 8 * d * a * lab
              + (PAIR_TABLE_COPIES * 8 * table_cells if pairs else 0)
              + result + SCREEN_COPIES * m * n)
    zp = -(-z // p)
    cp = min(zp, d * a) if cells is None else max((c for _, c in cells), default=0)
    batch = min(BATCH_ROWS, -(-n // p))
    task = PYTHON_BASE_BYTES + max(
        TASK_BYTES_PER_CODE * zp + TASK_BYTES_PER_CELL * cp
        + batch * (TASK_BYTES_PER_ROW + TASK_BYTES_PER_NONZERO * z // max(n, 1)),
        STEP_TASK_BYTES_PER_CODE * zp)
    read = 2 * (READ_SECONDS_PER_ROW * n + READ_SECONDS_PER_NONZERO * z) / c
    one = STEP_SECONDS_PER_NONZERO * z / c + TABLE_SECONDS_PER_CELL * table_cells
    if crit.vmi:
        steps = one + k * BOUND_SECONDS_PER_CELL * m * n
    else:
        steps = k * one if pairs else one
    return SparseEstimate(d, n, z, a, lab, k, method, p, c, m,
                          CHUNK_BYTES_PER_NONZERO * z + CHUNK_BYTES_PER_ROW * n, task, result,
                          driver, read, steps)


def check_estimate(est: SparseEstimate, driver_available: int | None,
                   max_result_bytes: int | None, driver_heap: int | None) -> None:
    """Refuse, in one line naming the parameter to change, a run whose estimate does not
    fit: the driver's Python in ``driver_available`` bytes (the (D, A, A, L) tables:
    ``maxCategories``/``method``), a job's task results in ``spark.driver.maxResultSize``
    (``max_result_bytes``; 0 or None: no limit) or in the driver JVM's heap
    (``driver_heap``: ``spark.driver.memory``). None skips a limit."""
    from ..errors import InputError, ParameterError

    if max_result_bytes and est.result_bytes > max_result_bytes:
        raise InputError(f"a sparse {est.method} selection of {est.non_zeros:,} non-zeros "
                         f"collects about {_size(est.result_bytes)} of task results in one "
                         f"job, more than spark.driver.maxResultSize ({_size(max_result_bytes)}); "
                         "raise spark.driver.maxResultSize")
    if driver_heap and est.result_bytes > driver_heap // 2:
        raise InputError(f"a sparse {est.method} selection of {est.non_zeros:,} non-zeros "
                         f"collects about {_size(est.result_bytes)} of task results in one "
                         f"job, more than half the driver's heap ({_size(driver_heap)}); "
                         "raise spark.driver.memory (--driver-memory)")
    if driver_available is not None and est.driver_bytes > driver_available:
        what = (f"the {est.width:,} x {est.states} x {est.states} x {est.classes} pair "
                "tables of a step" if est.method not in ("mim",) and not est.screened
                else f"the {est.screened:,} screened elements' codes of {est.rows:,} rows"
                if est.screened else f"the {est.width:,} x {est.states} x {est.classes} table")
        raise ParameterError("max_categories",
                             f"a sparse {est.method} selection needs about "
                             f"{_size(est.driver_bytes)} in the driver ({what}), more than "
                             f"the {_size(driver_available)} available; lower "
                             "{max_categories} (the states A of an element; elements of more "
                             "values are cut into {num_bins}) or choose {method} mim")
