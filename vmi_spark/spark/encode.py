"""Turn typed rows into cached blocks of one-byte codes (executor side + driver side).

A block row holds up to ``block_rows`` input rows: ``codes`` is the (D, n) uint8
matrix in feature-major order (one byte per cell), ``y`` the (n,) uint16 class
codes. Every later pass maps over these block rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from .plan import EncodingPlan, column_kinds, packed, unpacked

BLOCK_SCHEMA = "block_id long, n int, codes binary, y binary"


def encode_column(arr: pa.Array, col) -> np.ndarray:
    """Codes of one column of a record batch according to its :class:`ColumnPlan`."""
    miss_code = col.num_states - 1
    if col.kind == "constant":
        if col.missing:
            return np.where(pc.is_null(arr, nan_is_null=True).to_numpy(zero_copy_only=False),
                            miss_code, 0).astype(np.uint8)
        return np.zeros(len(arr), dtype=np.uint8)
    if col.dtype == "string" or col.kind == "category":
        value_set = pa.array(col.values, type=pa.string() if col.dtype == "string" else pa.float64())
        idx = pc.index_in(arr, value_set=value_set)
        out = idx.fill_null(miss_code if col.missing else 0).to_numpy(zero_copy_only=False)
        return out.astype(np.uint8)
    v = arr.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls -> nan
    codes = np.searchsorted(np.asarray(col.splits, dtype=np.float64), v, side="right")
    if col.missing:
        codes = np.where(np.isnan(v), miss_code, codes)
    return codes.astype(np.uint8)


def encode_label(arr: pa.Array, plan: EncodingPlan) -> np.ndarray:
    typ = pa.string() if plan.label_dtype == "string" else pa.float64()
    idx = pc.index_in(arr, value_set=pa.array(plan.classes, type=typ))
    return idx.to_numpy(zero_copy_only=False).astype(np.uint16)


def _encoder(plan: EncodingPlan, block_rows: int):
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
            for j, col in enumerate(plan.columns):  # column 0 is the label (see encode_blocks)
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


def encode_blocks(df: DataFrame, plan: EncodingPlan, block_rows: int) -> DataFrame:
    """Map the rows :func:`plan.build_plan` returns to block rows of codes."""
    cols = [plan.label, *plan.features]
    return packed(df, cols).mapInArrow(unpacked(_encoder(plan, block_rows), column_kinds(df, cols)),
                                       BLOCK_SCHEMA)
