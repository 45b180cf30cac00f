"""The block format: typed rows become blocks of one-byte codes, and back.

A block row holds up to ``block_rows`` input rows: ``codes`` is the (D, n) uint8
matrix in feature-major order (one byte per cell), ``y`` the (n,) uint16 class
codes, ``block_id`` a number unique in the run (the partition in the high 32 bits).
Both row sources write blocks with :func:`block_encoder`; both executions read them
with :func:`decode_blocks`. This module also holds the byte budgets the executions
share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from ..core.encoding import EncodingPlan, encode_column, encode_label

BLOCK_SCHEMA = "block_id long, n int, codes binary, y binary"
#: bytes of pairwise state one Python worker process keeps between passes
WORKER_STATE_BYTES = 2 << 30
#: bytes of counts one task sends per count request (bulk pair counts are split to fit)
COUNT_PASS_BYTES = 32 << 20


def block_encoder(plan: EncodingPlan, block_rows: int
                  ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function from typed batches (label first, then ``plan.features``)
    to block rows (:data:`BLOCK_SCHEMA`)."""
    def encode(batches):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        base = (ctx.partitionId() if ctx is not None else 0) << 32
        pending: list[pa.RecordBatch] = []
        count = 0
        serial = 0

        def flush(rb_list):
            nonlocal serial
            table = pa.Table.from_batches(rb_list).combine_chunks()
            n = table.num_rows
            codes = np.empty((len(plan.columns), n), dtype=np.uint8)
            for j, col in enumerate(plan.columns):  # column 0 is the label
                codes[j] = encode_column(table.column(j + 1).combine_chunks(), col)
            y = encode_label(table.column(0).combine_chunks(), plan)
            out = pa.RecordBatch.from_pydict({
                "block_id": pa.array([base + serial], pa.int64()),
                "n": pa.array([n], pa.int32()),
                "codes": pa.array([codes.tobytes()], pa.binary()),
                "y": pa.array([y.tobytes()], pa.binary()),
            })
            serial += 1
            return out

        for rb in batches:
            while rb.num_rows:
                take = min(rb.num_rows, block_rows - count)
                pending.append(rb.slice(0, take))
                count += take
                rb = rb.slice(take)
                if count == block_rows:
                    yield flush(pending)
                    pending, count = [], 0
        if count:
            yield flush(pending)

    return encode


def binary_values(arr: pa.Array) -> list[memoryview]:
    """Zero-copy views of the values of an Arrow binary array."""
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
    data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
    return [data[offsets[k]:offsets[k + 1]] for k in range(len(arr))]


def decode_blocks(rb: pa.RecordBatch, num_features: int
                  ) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """(block id, n, codes (D, n) uint8, y (n,) intp) of every block row of a record batch
    (the codes are read-only views of the batch)."""
    ns = rb.column("n").to_pylist()
    ids = rb.column("block_id").to_pylist()
    codes = binary_values(rb.column("codes"))
    ys = binary_values(rb.column("y"))
    for k, n in enumerate(ns):
        c = np.frombuffer(codes[k], dtype=np.uint8).reshape(num_features, n)
        y = np.frombuffer(ys[k], dtype=np.uint16).astype(np.intp)
        yield ids[k], n, c, y


def pair_count_chunks(fs: list[int], num_features: int, arity: int, num_classes: int
                      ) -> list[list[int]]:
    """``fs`` in chunks whose (len, D, A, A, L) int64 pair counts fit
    :data:`COUNT_PASS_BYTES` (at least one feature per chunk)."""
    per = num_features * arity * arity * num_classes * 8
    step = max(1, COUNT_PASS_BYTES // max(1, per))
    return [fs[i:i + step] for i in range(0, len(fs), step)]
