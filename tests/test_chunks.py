"""The chunk encoder: typed batches in, chunks of one-byte codes out (Spark-free).

Expected chunks come from encoding every column of the whole input at once and cutting the
result into consecutive ``chunk_rows`` slices; the encoder must give exactly those, with
serial chunk ids, whatever the input batches' sizes and however it slices them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from vmi_spark.core.encoding import ColumnPlan, EncodingPlan, encode_column, encode_label
from vmi_spark.spark.chunks import codes as B


def _plan_and_batches(sizes, seed=0):
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    y = rng.choice(["a", "b", "c"], n)
    x1 = rng.normal(size=n)
    x1[rng.random(n) < 0.1] = np.nan
    x2 = rng.integers(0, 5, n).astype(np.int8)
    x3 = rng.choice(["u", "v", "w"], n).astype(object)
    x3[rng.random(n) < 0.1] = None
    plan = EncodingPlan("y", ["a", "b", "c"], "string", [
        ColumnPlan("x1", "bins", splits=[-0.5, 0.0, 0.7], missing=True),
        ColumnPlan("x2", "category", values=[0.0, 1.0, 2.0, 3.0, 4.0]),
        ColumnPlan("x3", "category", values=["u", "v", "w"], missing=True, dtype="string"),
    ])
    whole = pa.RecordBatch.from_arrays(
        [pa.array(y), pa.array(x1), pa.array(x2), pa.array(list(x3), pa.string())],
        names=["_c0", "_c1", "_c2", "_c3"])
    cuts = np.cumsum([0, *sizes])
    batches = [whole.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:])]
    return plan, whole, batches


@pytest.mark.parametrize("sizes", [[1000], [7, 0, 300, 1, 692], [250] * 4, [999, 1], [3]])
# 50 cells: slices of max(chunk_rows, 50 // 3) rows
@pytest.mark.parametrize("encode_cells", [B.ENCODE_CELLS, 50])
def test_chunks_are_the_whole_input_encoded_and_cut(sizes, encode_cells):
    plan, whole, batches = _plan_and_batches(sizes)
    chunk_rows = 128
    expected = np.stack([encode_column(whole.column(j + 1), c)
                         for j, c in enumerate(plan.columns)])
    expected_y = encode_label(whole.column(0), plan)
    out = list(B.chunk_encoder(plan, chunk_rows, encode_cells=encode_cells)(iter(batches)))
    got = [b for rb in out for b in B.decode_chunks(rb, len(plan.columns))]
    n = whole.num_rows
    assert [g[0] for g in got] == list(range(len(got)))  # serial ids, partition 0
    assert [g[1] for g in got] == [min(chunk_rows, n - s) for s in range(0, n, chunk_rows)]
    for (_, _, codes, y, w), s in zip(got, range(0, n, chunk_rows)):
        assert w is None  # unweighted: no weight column stored
        assert np.array_equal(codes, expected[:, s:s + chunk_rows])
        assert np.array_equal(y, expected_y[s:s + chunk_rows])
    # and by hand for a few rows: a bin is the number of split points <= v, NaN and None
    # the missing (last) code
    x1 = whole.column(1).to_numpy(zero_copy_only=False)
    hand = [4 if np.isnan(v) else sum(int(v >= s) for s in (-0.5, 0.0, 0.7)) for v in x1[:50]]
    assert expected[0, :50].tolist() == hand
    x3 = whole.column(3).to_pylist()
    assert expected[2, :50].tolist() == [3 if v is None else "uvw".index(v) for v in x3[:50]]


def test_no_rows_no_chunks():
    plan, whole, _ = _plan_and_batches([0])
    assert list(B.chunk_encoder(plan, 16)(iter([whole]))) == []


@pytest.mark.parametrize("sizes", [[1000], [7, 0, 300, 1, 692], [3]])
@pytest.mark.parametrize("width", [1, 2, 3])
def test_column_chunks_give_the_chunks_of_the_whole_batches(sizes, width):
    """Each batch given as ``(at, batch)`` chunks of ``width`` features (the label in
    each; width 3 is every feature, encoded as a whole batch): the same chunks."""
    plan, whole, batches = _plan_and_batches(sizes)

    def chunks():
        for rb in batches:
            for at in range(0, 3, width):
                idx = [0, *range(1 + at, 1 + min(3, at + width))]
                yield at, pa.RecordBatch.from_arrays([rb.column(j) for j in idx],
                                                     names=[f"_c{j}" for j in idx])

    want = list(B.chunk_encoder(plan, 128)(iter(batches)))
    got = list(B.chunk_encoder(plan, 128, chunks=True)(chunks()))
    assert got == want and len(want) == -(-sum(sizes) // 128)


def test_a_chunk_that_does_not_continue_its_rows_is_refused():
    plan, whole, _ = _plan_and_batches([10])
    two = pa.RecordBatch.from_arrays([whole.column(0), whole.column(1)], names=["_c0", "_c1"])
    with pytest.raises(ValueError, match="does not continue"):
        list(B.chunk_encoder(plan, 4, chunks=True)(iter([(1, two)])))  # no chunk at 0 first
    with pytest.raises(ValueError, match="does not continue"):
        list(B.chunk_encoder(plan, 4, chunks=True)(iter([(0, two), (1, two.slice(0, 5))])))
