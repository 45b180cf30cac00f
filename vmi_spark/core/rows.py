"""Work on typed record batches that every row source shares (Spark-free).

A *typed* batch holds the label in column 0 and the features after it, typed as
:func:`vmi_spark.spark.sources.spark_source.prepare_frame` types them: ``"double"`` (numbers,
booleans, dates, timestamps and intervals as numbers, -0.0 as 0.0) or ``"string"``. A
numeric feature may also stay in the Arrow type it was read in (:func:`feature_array`):
its values are the same doubles. The Spark reader (:mod:`vmi_spark.spark.sources.spark_source`),
the pyarrow reader (:mod:`vmi_spark.spark.sources.arrow_source`) and the in-memory rows
(:class:`vmi_spark.core.planning.TableRows`: the driver's small tables, the
scikit-learn selector) produce such batches; the functions here compute the column
statistics of the encoding plan from them and drop the rows the plan does not keep,
the same way for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .weights import FRACTION_SCALE, WeightStats, exact_sum, present


def typed_array(arr: pa.Array, kind: str) -> pa.Array:
    """A column typed as the plan types it: ``kind`` "string", or "double"
    (integers and booleans as doubles, -0.0 as 0.0)."""
    if kind == "string":
        return arr.cast(pa.string())
    if not pa.types.is_floating(arr.type):
        # integers and booleans have no -0.0; a long above 2**53 rounds to the nearest
        # double, as Spark's CAST does (a safe cast would refuse it)
        return pc.cast(arr, pa.float64(), safe=False)
    return pc.add(arr.cast(pa.float64()), 0.0)  # -0.0 + 0.0 == +0.0; NaN and null stay


#: Arrow types a ``"double"`` feature column is passed on in as read: each value is exactly
#: one double, so the consumers (:func:`column_stats_fn`, the sample, the encoder) read it
#: as such without a float64 copy of every column (64-bit integers are cast: above 2**53
#: two of them can round to the same double)
NATIVE_TYPES = frozenset([pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(),
                          pa.uint32(), pa.float32(), pa.float64()])


def feature_array(arr: pa.Array, kind: str) -> pa.Array:
    """A feature column of a typed batch: :func:`typed_array`, except that a number of one
    of :data:`NATIVE_TYPES` stays as read (its values are the same doubles; -0.0 is read
    as 0.0 where it matters)."""
    if kind == "double" and arr.type in NATIVE_TYPES:
        return arr
    return typed_array(arr, kind)


def missing_mask(arr: pa.Array) -> np.ndarray | None:
    """Where ``arr`` is null or NaN, or None when nothing is (the common case, cheaply)."""
    if pa.types.is_floating(arr.type):
        m = np.isnan(arr.to_numpy(zero_copy_only=False))  # nulls come out as NaN
        return m if m.any() else None
    if arr.null_count == 0:
        return None
    return ~arr.is_valid().to_numpy(zero_copy_only=False)


def kept_rows(rb: pa.RecordBatch | ByteColumns, skip: bool,
              weighted: bool = False) -> pa.RecordBatch | ByteColumns:
    """The rows the plan keeps: a label (column 0), and if ``skip`` no missing value in
    the other columns (all of them, in one-byte columns); with ``weighted`` (the batch's
    last column is the rows' weight, :func:`weight_values`) a weight that is present
    (:func:`vmi_spark.core.weights.present`; the weight column stays last)."""
    if isinstance(rb, ByteColumns):
        return rb
    drop = missing_mask(rb.column(0))
    last = rb.num_columns - 1 if weighted else rb.num_columns
    if skip:
        for j in range(1, last):
            m = missing_mask(rb.column(j))
            if m is not None:
                drop = m if drop is None else drop | m
    if weighted:
        absent = ~present(weight_values(rb))
        if absent.any():
            drop = absent if drop is None else drop | absent
    return rb if drop is None or not drop.any() else rb.filter(pa.array(~drop))


def weight_values(rb: pa.RecordBatch) -> np.ndarray:
    """float64 weights of a typed batch whose last column is the weight (null as NaN)."""
    return rb.column(rb.num_columns - 1).to_numpy(zero_copy_only=False).astype(np.float64)


def without_weight(rb: pa.RecordBatch) -> pa.RecordBatch:
    """The batch without its last column (the weight)."""
    return pa.RecordBatch.from_arrays(rb.columns[:-1], names=rb.schema.names[:-1])


class ByteColumns:
    """A column chunk of one-byte integer features: the typed ``label`` (nothing missing)
    and ``values``, the (w, n) ``int8`` values of ``w`` features, one feature a row (no
    value missing). The vector reader cuts coded vectors so
    (:meth:`~.vector_source.VectorReader.read_chunks`): :meth:`ColumnStats.add` and
    :func:`~.chunks.encode_chunks` take all ``w`` features in a few numpy operations
    instead of a fixed cost per column. Reads like the typed batch it stands for
    (``num_rows``, ``num_columns``, ``column``: the features as ``int8`` arrays)."""

    __slots__ = ("label", "values")

    def __init__(self, label: pa.Array, values: np.ndarray):
        if values.dtype != np.int8 or values.ndim != 2 or values.shape[1] != len(label):
            raise ValueError(f"one-byte columns must be (w, {len(label)}) int8, not "
                             f"{values.shape} {values.dtype}")
        if missing_mask(label) is not None:
            raise ValueError("one-byte columns hold rows with a label only")
        self.label, self.values = label, values

    @property
    def num_rows(self) -> int:
        return len(self.label)

    @property
    def num_columns(self) -> int:
        return 1 + self.values.shape[0]

    def column(self, j: int) -> pa.Array:
        """The label (0) or feature ``j - 1`` as an Arrow array."""
        return self.label if j == 0 else pa.array(self.values[j - 1])


def byte_columns(label: pa.Array, columns: list[pa.Array]) -> ByteColumns | None:
    """``columns`` as :class:`ByteColumns` when each is an integer array without nulls whose
    values all lie in [-128, 127] and no ``label`` is missing (else None): a chunk of coded
    features read from Parquet as, say, ``int32``, counted and encoded a chunk at a time."""
    if not columns or missing_mask(label) is not None or not all(
            pa.types.is_integer(c.type) and c.null_count == 0 for c in columns):
        return None
    values = np.stack([c.to_numpy() for c in columns])
    if values.dtype != np.int8 and values.size and (
            values.min() < -128 or values.max() > 127):
        return None
    return ByteColumns(label, values.astype(np.int8, copy=False))


def _and_not(keep: np.ndarray | None, m: np.ndarray | None) -> np.ndarray | None:
    """``keep & ~m`` where None means all rows (keep) or no rows (m)."""
    if m is None:
        return keep
    return ~m if keep is None else keep & ~m


#: values of a column whose distinct values are counted first, alone: past the cap there,
#: the whole column is (a continuous column costs a count of these, not of the batch)
_DISTINCT_PREFIX = 512


def _add_distinct(seen: set | None, arr: pa.Array, rows: np.ndarray | None, cap: int) -> set | None:
    """``seen`` plus the distinct values of ``arr`` at ``rows``; None once above ``cap``."""
    if seen is None:
        return None
    if rows is not None:
        arr = arr.filter(pa.array(rows))
    if len(arr) > _DISTINCT_PREFIX and len(pc.unique(arr.slice(0, _DISTINCT_PREFIX))) > cap + 1:
        return None  # a continuous column: its first values are already past the cap
    u = _integer_distinct(arr)
    if u is None:
        u = pc.unique(arr)
    if len(u) > cap + 1:  # as doubles at most two (-0.0 and 0.0) are one value
        return None
    if pa.types.is_integer(u.type) or pa.types.is_floating(u.type):
        seen |= set((u.to_numpy(zero_copy_only=False).astype(np.float64) + 0.0).tolist())
    else:
        seen |= set(u.to_pylist())
    return None if len(seen) > cap else seen


#: widest range of an integer column whose distinct values are counted in a table of the
#: range (:func:`_integer_distinct`)
_TABLE_SPAN = 4096


def _integer_distinct(arr: pa.Array) -> pa.Array | None:
    """The distinct values of an integer column without nulls whose values span at most
    :data:`_TABLE_SPAN` (sorted), from a count of each value of the range; None for any
    other column. The same values as ``pc.unique`` (200k int32 codes: 0.5 ms against
    1.1 ms, a min, a max and one counting pass instead of a hash table)."""
    if not pa.types.is_integer(arr.type) or arr.null_count or not len(arr):
        return None
    v = arr.to_numpy()
    lo, hi = int(v.min()), int(v.max())
    if hi - lo > _TABLE_SPAN or hi > np.iinfo(np.intp).max:
        return None
    counts = np.bincount(np.subtract(v, lo, dtype=np.intp), minlength=hi - lo + 1)
    return pa.array(np.flatnonzero(counts) + lo)


def _span(seen: set | None) -> tuple[float, float] | None:
    """(lo, hi) when ``seen`` is every integer from lo to hi, else None."""
    if not seen:
        return None
    lo, hi = min(seen), max(seen)
    whole = all(isinstance(v, float) and v.is_integer() for v in (lo, hi))
    return (lo, hi) if whole and hi - lo + 1 == len(seen) else None


#: the k of the k-minimum-values sketch of a whole-number column's distinct values
SKETCH_K = 1024
#: a batch whose values repeat more than this share cannot be of a near-unique column
_BATCH_REPEATS = 0.1


def _hashes(v: np.ndarray) -> np.ndarray:
    """splitmix64 of the whole numbers ``v`` (as int64): uint64 hashes, the same on
    every machine."""
    with np.errstate(over="ignore"):
        z = v.astype(np.int64).view(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _smallest(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The :data:`SKETCH_K` smallest distinct hashes of ``a`` and ``b``."""
    return np.unique(np.concatenate([a, b]))[:SKETCH_K]


def _sketch(state: Any, arr: pa.Array, rows: np.ndarray | None) -> Any:
    """The distinct-value sketch of a numeric column past the distinct-value cap, for the
    identifier check (:func:`distinct_estimate`): the :data:`SKETCH_K` smallest hashes of
    its values while every value is a whole number and no batch repeats more than
    :data:`_BATCH_REPEATS` of its values (a near-unique column cannot), False once one
    does (or the column is not numeric); ``state`` itself for a batch with no value."""
    if state is False:
        return False
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        return False
    if rows is not None:
        arr = arr.filter(pa.array(rows))
    v = arr.drop_null().to_numpy(zero_copy_only=False).astype(np.float64)
    v = v[~np.isnan(v)]
    if not len(v):
        return state
    if not np.all(np.isfinite(v)) or not np.array_equal(v, np.floor(v)) or \
            np.abs(v).max() >= 2.0 ** 63:
        return False
    h = np.unique(_hashes(v))
    if len(h) < (1.0 - _BATCH_REPEATS) * len(v):
        return False
    return _smallest(np.empty(0, np.uint64) if state is None else state, h)


def sketch_of(seen: set | None) -> Any:
    """:func:`_sketch`'s state of the distinct values ``seen`` (None: nothing seen)."""
    if not seen:
        return None
    if not all(isinstance(v, float) and v.is_integer() for v in seen):
        return False
    return _smallest(np.empty(0, np.uint64), _hashes(np.array(sorted(seen))))


def merge_sketches(a: Any, b: Any) -> Any:
    """Two :func:`_sketch` states of the same column as one (the same for any order)."""
    if a is False or b is False:
        return False
    if a is None or b is None:
        return b if a is None else a
    return _smallest(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))


def distinct_estimate(sketch: Any) -> float | None:
    """The number of distinct values a sketch stands for: exact below :data:`SKETCH_K`
    hashes, else (k - 1) / (the k-th smallest hash as a fraction of 2^64), with a
    relative standard error of about 1 / sqrt(k - 2), 3% (Bar-Yossef et al. 2002); None for a column that is not near-unique.

    References
    ----------
    Z. Bar-Yossef, T. S. Jayram, R. Kumar, D. Sivakumar, L. Trevisan. Counting distinct
    elements in a data stream. RANDOM 2002.
    """
    if sketch is None or sketch is False:
        return None
    if len(sketch) < SKETCH_K:
        return float(len(sketch))
    return (SKETCH_K - 1) / (float(sketch[SKETCH_K - 1]) / 2.0 ** 64)


def _within(arr: pa.Array, lo: float, hi: float) -> bool:
    """Whether ``arr`` is an integer column without nulls whose values all lie in
    [lo, hi] (NaN: no span): then every one of them is already in a set of every integer
    of the span."""
    if arr.null_count or not pa.types.is_integer(arr.type) or not len(arr):
        return False
    v = arr.to_numpy()
    return bool(v.min() >= lo and v.max() <= hi)


class ColumnStats:
    """The statistics of one task's typed batches, added up batch by batch (``add``):
    rows, null labels, rows skipped, missing values per feature and distinct values,
    capped at ``max_categories`` per feature (``max_classes`` for the label; None above
    the cap). ``json()`` is the task's row for :func:`merge_stats`.

    ``weighted``: each batch's last column is the rows' weight. The weights are checked
    and counted (:class:`~vmi_spark.core.weights.WeightStats`), a row whose weight is
    absent (0) is left out of everything, and the weight of the kept rows (a label, not
    skipped) is summed in 1/1024 units (``kept_fine``)."""

    def __init__(self, num_features: int, max_categories: int, max_classes: int, skip: bool,
                 weighted: bool = False):
        self.d, self.max_categories, self.max_classes, self.skip = (
            num_features, max_categories, max_classes, skip)
        self.weighted = weighted
        self.weights = WeightStats()
        self.kept_fine = 0
        self.rows = self.null_labels = self.skipped = 0
        self.missing = np.zeros(num_features, dtype=np.int64)
        self.values: list[set | None] = [set() for _ in range(num_features)]
        # [_lo[j], _hi[j]] where values[j] is every integer of it (NaN: not so; every
        # number once values[j] is past the cap): a batch of integers in that span adds
        # nothing (a min and a max instead of a distinct pass: 3 against 13 us a column of
        # 4,096 rows; one-byte columns: all of a chunk's columns at once)
        self._lo = np.full(num_features, np.nan)
        self._hi = np.full(num_features, np.nan)
        self.classes: set | None = set()
        #: per feature past the cap: its distinct-value sketch (:func:`_sketch`)
        self.sketches: list[Any] = [None] * num_features

    def add(self, rb: pa.RecordBatch | ByteColumns, at: int = 0) -> None:
        """Count one typed batch: the label, then the features ``at`` to ``at + w - 1``
        (all of them, or one column chunk of the rows: the rows and the label are counted
        with the chunk at 0). Without ``skip`` the statistics of a feature need only its
        values and the label's, so chunks of the same rows give those of the whole rows."""
        fine = None
        if self.weighted:
            if at or isinstance(rb, ByteColumns):
                raise ValueError("weighted rows come in whole batches")
            wv = weight_values(rb)
            here = self.weights.add(wv)
            rb = without_weight(rb)
            if not here.all():
                rb = rb.filter(pa.array(here))
            fine = np.rint(wv[here] * FRACTION_SCALE).astype(np.int64)
        w = rb.num_columns - 1
        if self.skip and (at or w != self.d):
            raise ValueError("skipping rows with missing values needs every feature in a batch")
        if isinstance(rb, ByteColumns):
            self._add_bytes(rb, at)
            return
        lab_miss = missing_mask(rb.column(0))
        keep = None if lab_miss is None else ~lab_miss  # None: every row
        if at == 0:
            self.rows += rb.num_rows
            self.null_labels += 0 if lab_miss is None else int(lab_miss.sum())
        miss = [missing_mask(rb.column(j + 1)) for j in range(w)]
        for j, m in enumerate(miss):
            if m is not None:
                self.missing[at + j] += int((m if keep is None else m & keep).sum())
        if self.skip and any(m is not None for m in miss):
            anym = np.logical_or.reduce([m for m in miss if m is not None])
            self.skipped += int((anym if keep is None else anym & keep).sum())
            keep = _and_not(keep, anym)
        if at == 0:
            self.classes = _add_distinct(self.classes, rb.column(0), keep, self.max_classes)
        if fine is not None:
            self.kept_fine += exact_sum(fine if keep is None else fine[keep])
        for j in range(w):
            k, arr = at + j, rb.column(j + 1)
            if self.values[k] is None:
                if self.sketches[k] is not False:
                    self.sketches[k] = _sketch(self.sketches[k], arr, _and_not(keep, miss[j]))
            elif not _within(arr, self._lo[k], self._hi[k]):
                before = self.values[k]
                self.values[k] = _add_distinct(before, arr, _and_not(keep, miss[j]),
                                               self.max_categories)
                if self.values[k] is None:  # past the cap in this batch
                    self.sketches[k] = _sketch(sketch_of(before), arr, _and_not(keep, miss[j]))
                self._set_span(k)

    def _add_bytes(self, rb: ByteColumns, at: int) -> None:
        """:meth:`add` of one-byte columns: no value is missing, and a column whose values
        lie in the span of every integer it has shown (a min and a max of every column at
        once) adds nothing; the others are counted as :meth:`add` counts them."""
        w, n = rb.values.shape
        if at == 0:
            self.rows += n
            self.classes = _add_distinct(self.classes, rb.label, None, self.max_classes)
        if not n or not w:
            return
        lo, hi = rb.values.min(axis=1), rb.values.max(axis=1)
        with np.errstate(invalid="ignore"):  # NaN: no span, the column is counted
            within = (lo >= self._lo[at:at + w]) & (hi <= self._hi[at:at + w])
        for j in np.flatnonzero(~within).tolist():  # (a column past the cap is within)
            k = at + j
            self.values[k] = _add_distinct(self.values[k], pa.array(rb.values[j]), None,
                                           self.max_categories)
            self._set_span(k)

    @property
    def spans(self) -> list[tuple[float, float] | None]:
        """(lo, hi) per feature where its values are every integer from lo to hi, else None."""
        return [None if v is None or np.isnan(lo) else (float(lo), float(hi))
                for v, lo, hi in zip(self.values, self._lo, self._hi)]

    def _set_span(self, k: int) -> None:
        """``_lo[k]``, ``_hi[k]`` from ``values[k]``: its span (:func:`_span`), NaN for none,
        every number for a column past the cap (which nothing changes any more)."""
        span = (-np.inf, np.inf) if self.values[k] is None else _span(self.values[k])
        self._lo[k], self._hi[k] = span if span is not None else (np.nan, np.nan)

    def json(self) -> str:
        """The task's statistics as JSON (:func:`merge_stats` reads them)."""
        out = {
            "rows": self.rows, "null_labels": self.null_labels, "skipped": self.skipped,
            "missing": self.missing.tolist(),
            "classes": None if self.classes is None else list(self.classes),
            "values": [None if v is None else list(v) for v in self.values],
            "sketches": [q.tolist() if isinstance(q, np.ndarray) else q
                         for q in self.sketches]}
        if self.weighted:
            out.update(weights=self.weights.to_dict(), kept_fine=self.kept_fine)
        return json.dumps(out)


def column_stats_fn(num_features: int, max_categories: int, max_classes: int, skip: bool,
                    chunks: bool = False, weighted: bool = False
                    ) -> Callable[[Iterator[Any]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: the :class:`ColumnStats` of a task's typed batches (with
    ``chunks``, of its ``(at, batch)`` column chunks; ``weighted``: the weight last) as one
    JSON row (``stats string``). :func:`merge_stats` adds up the tasks' rows."""
    def fn(batches):
        stats = ColumnStats(num_features, max_categories, max_classes, skip, weighted)
        for item in batches:
            if chunks:
                stats.add(item[1], item[0])
            else:
                stats.add(item)
        yield pa.RecordBatch.from_pydict({"stats": [stats.json()]})
    return fn


def merge_stats(parts: list[dict[str, Any]], d: int, max_categories: int,
                max_classes: int) -> dict[str, Any]:
    """Add up the statistics of the tasks (distinct sets: union, capped; weighted rows'
    :class:`~vmi_spark.core.weights.WeightStats` as ``weights`` and the kept rows' weight in
    1/1024 units as ``kept_fine``)."""
    out: dict[str, Any] = {"rows": 0, "null_labels": 0, "skipped": 0, "missing": [0] * d,
                           "classes": set(), "values": [set() for _ in range(d)]}
    if any("weights" in p for p in parts):
        out["weights"] = WeightStats.merge([p["weights"] for p in parts])
        out["kept_fine"] = sum(int(p["kept_fine"]) for p in parts)
    out["sketches"] = [None] * d
    for p in parts:
        for j, q in enumerate(p.get("sketches") or [None] * d):
            q = np.array(q, dtype=np.uint64) if isinstance(q, list) else q
            if q is None and p["values"][j] is not None:  # this task stayed under the cap
                q = sketch_of(set(p["values"][j]))
            out["sketches"][j] = merge_sketches(out["sketches"][j], q)
    out["sketches"] = [tuple(int(h) for h in q) if isinstance(q, np.ndarray) else q
                       for q in out["sketches"]]
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
