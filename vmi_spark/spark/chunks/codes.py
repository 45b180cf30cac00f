"""The chunk format: typed rows become chunks of one-byte codes, and back.

A chunk row holds up to ``chunk_rows`` input rows: ``codes`` is the (D, n) uint8
matrix in feature-major order (one byte per cell), ``y`` the (n,) uint16 class
codes, ``chunk_id`` a number unique in the run (the partition in the high 32 bits),
``w`` the (n,) int64 weight units of a weighted table's rows
(:mod:`vmi_spark.core.weights`; null without row weights: nothing is stored).
Both row sources write chunks with :func:`chunk_encoder`; both executions read them
with :func:`decode_chunks`. This module also holds the byte budgets the executions
share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ...core import limits
from ...core.encoding import (
    EncodingPlan,
    byte_table,
    coding_key,
    encode_bytes,
    encode_column,
    encode_label,
)
from ...core.limits import DEFAULT
from ...core.rows import ByteColumns, weight_values, without_weight
from ...core.weights import units

CHUNK_SCHEMA = "chunk_id long, n int, codes binary, y binary, w binary"


class ChunkStage:
    """Encoded chunks before they are a DataFrame: ``encode`` maps the Arrow batches of
    ``frame`` to chunk batches (:data:`CHUNK_SCHEMA`). :meth:`df` is that DataFrame;
    :meth:`then` runs a consumer of the chunk batches in the same ``mapInArrow`` (the same
    Python worker), so the encoded rows never go through the JVM (the resident tasks that
    encode their own rows, :mod:`vmi_spark.spark.routes`)."""

    def __init__(self, frame: Any, encode: Callable[[Iterable[pa.RecordBatch]],
                                                    Iterator[pa.RecordBatch]]) -> None:
        self.frame = frame
        self.encode = encode

    @property
    def sparkSession(self) -> Any:  # noqa: N802 - as a DataFrame's
        """The session of ``frame``."""
        return self.frame.sparkSession

    def df(self) -> Any:
        """The chunks as a DataFrame (``frame.mapInArrow(encode)``)."""
        return self.frame.mapInArrow(self.encode, CHUNK_SCHEMA)

    def then(self, fn: Callable, schema: Any, barrier: bool = False) -> Any:
        """``fn`` over the chunk batches, in the stage that encodes them."""
        encode = self.encode

        def both(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield from fn(encode(batches))
        return self.frame.mapInArrow(both, schema, barrier=barrier)


def map_chunks(chunks: Any, fn: Callable, schema: Any, barrier: bool = False) -> Any:
    """``fn`` over the chunk batches of ``chunks``: a DataFrame of chunks, or a
    :class:`ChunkStage` (then in the stage that encodes them)."""
    if isinstance(chunks, ChunkStage):
        return chunks.then(fn, schema, barrier=barrier)
    return chunks.mapInArrow(fn, schema, barrier=barrier)
#: bytes of pairwise state one Python worker process keeps between passes
WORKER_STATE_BYTES = 2 << 30
#: bytes of counts one task sends per count request (bulk pair counts are split to fit)
#: (the default: the code reads ``limits.current().count_pass_bytes``)
COUNT_PASS_BYTES = DEFAULT.count_pass_bytes
#: cells a chunk encoder encodes at once (one byte of codes each, no more than the input
#: batch itself holds: one to eight bytes a cell). Each slice costs about 17 us a column:
#: at 64 Mi cells a 4,096-row row group of 30,000 columns took two slices and 10.4 ns a
#: cell, in one 5.6 ns
ENCODE_CELLS = 256 << 20


def encode_batch(rb: pa.RecordBatch, plan: EncodingPlan) -> tuple[np.ndarray, np.ndarray]:
    """(D, n) uint8 codes and (n,) uint16 class codes of one typed batch (label first)."""
    codes = np.empty((len(plan.columns), rb.num_rows), dtype=np.uint8)
    for j, col in enumerate(plan.columns):  # column 0 is the label
        codes[j] = encode_column(rb.column(j + 1), col)
    return codes, encode_label(rb.column(0), plan)


def _slices(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The non-empty batches, cut into slices of at most ``rows`` rows (zero-copy)."""
    for rb in batches:
        for s in range(0, rb.num_rows, rows):
            yield rb.slice(s, rows)


def encode_chunks(chunks: Iterator[tuple[int, pa.RecordBatch | ByteColumns]], plan: EncodingPlan,
                  rows: int
                  ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(D, n) uint8 codes and (n,) class codes of ``(at, batch)`` column chunks: a batch
    holds the label and the features ``at`` to ``at + w - 1``; a chunk at 0 starts the
    next rows, whose codes the chunks after it fill in. A batch of every feature is
    encoded in slices of at most ``rows`` rows (:func:`encode_batch`); one-byte columns
    (:class:`~.rows.ByteColumns`) by their columns' :func:`byte_table`, all at once."""
    d = len(plan.columns)
    current: tuple[np.ndarray, np.ndarray] | None = None  # the rows being filled in
    tables = _ByteTables(plan)
    for at, rb in chunks:
        w = rb.num_columns - 1
        if at == 0 and current is not None:
            yield current
            current = None
        byte = isinstance(rb, ByteColumns)
        if at == 0 and w == d and not byte:
            yield from (encode_batch(s, plan) for s in _slices([rb], rows))
            continue
        if at == 0:
            current = (np.empty((d, rb.num_rows), dtype=np.uint8),
                       encode_label(rb.column(0), plan))
        if current is None or rb.num_rows != current[0].shape[1] or at + w > d:
            raise ValueError(f"a column chunk at {at} of {rb.num_rows} rows does not continue "
                             "the rows before it")
        if byte:
            current[0][at:at + w] = encode_bytes(rb.values, tables(at, w))
            continue
        for j in range(w):
            current[0][at + j] = encode_column(rb.column(j + 1), plan.columns[at + j])
    if current is not None:
        yield current


class _ByteTables:
    """The :func:`byte_table` of the plan's features, each made when first asked for.

    Columns coded alike (:func:`coding_key`) share one table, made once: the features of
    a wide table are often the same few integer categories, and a table costs an
    :func:`encode_column` call (about 15-40 us, 0.5-1.2 s a task at 30,000 columns).
    """

    def __init__(self, plan: EncodingPlan):
        self._columns = plan.columns
        self._tables = np.empty((len(plan.columns), 256), dtype=np.uint8)
        self._made = np.zeros(len(plan.columns), dtype=bool)
        self._alike: dict[tuple, np.ndarray] = {}

    def __call__(self, at: int, w: int) -> np.ndarray:
        """The (w, 256) tables of features ``at`` to ``at + w - 1``."""
        for k in np.flatnonzero(~self._made[at:at + w]).tolist():
            col = self._columns[at + k]
            key = coding_key(col)
            table = self._alike.get(key)
            if table is None:
                table = self._alike[key] = byte_table(col)
            self._tables[at + k] = table
            self._made[at + k] = True
        return self._tables[at:at + w]


def chunk_encoder(plan: EncodingPlan, chunk_rows: int, chunks: bool = False,
                  encode_cells: int = ENCODE_CELLS
                  ) -> Callable[[Iterator[Any]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function from typed batches (label first, then ``plan.features``)
    to chunk rows (:data:`CHUNK_SCHEMA`) of ``chunk_rows`` rows (the last one fewer);
    with ``chunks``, from the ``(at, batch)`` column chunks of :func:`encode_chunks`.

    Each input batch is encoded column by column in slices of up to ``encode_cells``
    cells (:data:`ENCODE_CELLS`; and at least a chunk), then cut into chunks: the per-column cost is paid once
    per slice, not once per chunk (a chunk of a table of 30,000 columns holds a few
    hundred rows). Every code depends on its own value only, so the chunks are those of
    encoding chunk by chunk.
    """
    scale = plan.weight_scale

    def encode(batches):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        base = (ctx.partitionId() if ctx is not None else 0) << 32
        serial = 0

        def chunk(codes, y, w):
            nonlocal serial
            out = pa.RecordBatch.from_pydict({
                "chunk_id": pa.array([base + serial], pa.int64()),
                "n": pa.array([codes.shape[1]], pa.int32()),
                "codes": pa.array([np.ascontiguousarray(codes).tobytes()], pa.binary()),
                "y": pa.array([np.ascontiguousarray(y).tobytes()], pa.binary()),
                "w": pa.array([None if w is None else np.ascontiguousarray(w).tobytes()],
                              pa.binary()),
            })
            serial += 1
            return out

        # encoded rows not yet in a chunk: (codes, y, weight units or None)
        held: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
        count = 0
        step = max(chunk_rows, encode_cells // max(1, len(plan.columns)))
        pairs = batches if chunks else ((0, rb) for rb in batches)
        rows = (encode_chunks(pairs, plan, step) if scale is None
                else _weighted_rows(pairs, plan, step, scale))
        for item in rows:
            codes, y = item[0], item[1]
            held.append((codes, y, item[2] if len(item) > 2 else None))
            count += codes.shape[1]
            if count < chunk_rows:
                continue
            codes, y, w = _joined(held)
            full = count - count % chunk_rows
            for s in range(0, full, chunk_rows):
                yield chunk(codes[:, s:s + chunk_rows], y[s:s + chunk_rows],
                            None if w is None else w[s:s + chunk_rows])
            held = [(codes[:, full:].copy(), y[full:].copy(),
                     None if w is None else w[full:].copy())] if full < count else []
            count -= full
        if count:
            yield chunk(*_joined(held))

    return encode


def _joined(held: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The held rows as one (codes, y, w)."""
    if len(held) == 1:
        return held[0]
    w = None if held[0][2] is None else np.concatenate([h[2] for h in held])  # type: ignore[misc]
    return (np.concatenate([h[0] for h in held], axis=1), np.concatenate([h[1] for h in held]),
            w)


def _weighted_rows(pairs: Iterator[tuple[int, Any]], plan: EncodingPlan, rows: int, scale: int
                   ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(codes, y, weight units) of whole typed batches whose last column is the weight (the
    rows kept already: :func:`~vmi_spark.core.rows.kept_rows`), in slices of ``rows``."""
    for at, rb in pairs:
        if at:
            raise ValueError("weighted rows are encoded in whole batches")
        for s in _slices([rb], rows):
            codes, y = encode_batch(without_weight(s), plan)
            yield codes, y, units(weight_values(s), scale)


def binary_values(arr: pa.Array) -> list[memoryview]:
    """Zero-copy views of the values of an Arrow binary array."""
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
    data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
    return [data[offsets[k]:offsets[k + 1]] for k in range(len(arr))]


def decode_chunks(rb: pa.RecordBatch, num_features: int
                  ) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray | None]]:
    """(chunk id, n, codes (D, n) uint8, y (n,) intp, w (n,) int64 or None) of every chunk
    row of a record batch (the codes are read-only views of the batch; ``w`` the weight
    units of a weighted table's rows)."""
    ns = rb.column("n").to_pylist()
    ids = rb.column("chunk_id").to_pylist()
    codes = binary_values(rb.column("codes"))
    ys = binary_values(rb.column("y"))
    wcol = rb.column("w") if "w" in rb.schema.names else None
    ws = None if wcol is None or wcol.null_count == len(wcol) else binary_values(wcol)
    for k, n in enumerate(ns):
        c = np.frombuffer(codes[k], dtype=np.uint8).reshape(num_features, n)
        y = np.frombuffer(ys[k], dtype=np.uint16).astype(np.intp)
        w = None if ws is None else np.frombuffer(ws[k], dtype=np.int64).copy()
        yield ids[k], n, c, y, w


def pair_count_chunks(fs: list[int], num_features: int, arity: int, num_classes: int
                      ) -> list[list[int]]:
    """``fs`` in chunks whose (len, D, A, A, L) int64 pair counts fit
    :data:`COUNT_PASS_BYTES` (at least one feature per chunk)."""
    per = num_features * arity * arity * num_classes * 8
    step = max(1, limits.current().count_pass_bytes // max(1, per))
    return [fs[i:i + step] for i in range(0, len(fs), step)]
