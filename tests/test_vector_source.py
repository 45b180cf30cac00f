"""The vector reader (issue 21): a vector column is read by cutting ``vector_to_array`` in
the Python workers, not by expanding it into D DataFrame columns. The plan, the sample,
the blocks and the selection are those of the expanded columns read by the Spark reader,
bit for bit: null vectors, NaN, -0.0, binned and categorical elements, a string label, and
a sample above ``SAMPLE_ROWS``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.ml.linalg import Vectors

from vmi_spark.core import limits
from vmi_spark.errors import InputError
from vmi_spark.spark.sources.vector_source import (
    VectorLengthError,
    element_columns,
    vector_matrix,
    vector_struct_matrix,
)


def test_vector_matrix_hand_made():
    arr = pa.array([[1.0, -0.0], None, [np.nan, 4.0]], pa.list_(pa.float64()))
    mat, null = vector_matrix(arr, 2)
    assert null.tolist() == [False, True, False]
    np.testing.assert_array_equal(mat[[0, 2]], [[1.0, -0.0], [np.nan, 4.0]])
    assert np.isnan(mat[1]).all()
    mat, null = vector_matrix(pa.array([[1.0, 2.0]], pa.list_(pa.float64())), 2)
    assert null is None and mat.tolist() == [[1.0, 2.0]]


@pytest.mark.parametrize("rows, width, found", [
    ([[1.0, 2.0], [3.0]], 2, 1),  # one short vector
    ([[1.0, 2.0, 3.0], None, [4.0, 5.0, 6.0]], 2, 3),  # all longer (the total is no proof)
    ([[1.0, 2.0, 3.0], [4.0]], 2, 1),  # 4 values in 2 rows of 2: the lengths, not the sum
])
def test_vector_matrix_rejects_vectors_of_another_length(rows, width, found):
    arr = pa.array(rows, pa.list_(pa.float64()))
    with pytest.raises(VectorLengthError, match=f"a vector of {found} elements where {width}"):
        vector_matrix(arr, width)


def _stored(vectors):
    """ML vectors as Spark stores them in Parquet (VectorUDT's struct), built by hand:
    ``("d", values)``, ``("s", size, indices, values)`` or None."""
    from vmi_spark.spark.sources.arrow_source import VECTOR_FIELDS

    rows = [None if v is None else
            {"type": 1, "size": None, "indices": None, "values": v[1]} if v[0] == "d" else
            {"type": 0, "size": v[1], "indices": v[2], "values": v[3]} for v in vectors]
    return pa.array(rows, pa.struct([pa.field(n, t) for n, t in VECTOR_FIELDS]))


def _densified(vectors, width):
    """The slow way: one row at a time, as ``vector_to_array`` densifies."""
    out = np.full((len(vectors), width), np.nan)
    for r, v in enumerate(vectors):
        if v is None:
            continue
        if v[0] == "d":
            out[r] = v[1]
        else:
            out[r] = 0.0
            for i, x in zip(v[2], v[3]):
                out[r, i] = x
    return out


def test_stored_vectors_densify_as_vector_to_array_does():
    vectors = [("d", [1.0, -0.0, 2.5, np.nan]), ("s", 4, [0, 3], [7.0, -1.0]), None,
               ("s", 4, [], []), ("d", [0.0, 0.0, 0.0, 9.0]), ("s", 4, [2], [np.nan])]
    arr = _stored(vectors)
    for lo, hi in ((0, 6), (1, 5), (4, 5), (2, 3)):  # slices: offsets into shared buffers
        mat, null = vector_struct_matrix(arr.slice(lo, hi - lo), 4)
        want = _densified(vectors[lo:hi], 4)
        np.testing.assert_array_equal(mat, want)
        assert np.array_equal(np.signbit(mat), np.signbit(want))  # -0.0 stays -0.0
        assert (null is None) == (not any(v is None for v in vectors[lo:hi]))
        if null is not None:
            assert null.tolist() == [v is None for v in vectors[lo:hi]]
    dense = [("d", [float(i), float(-i)]) for i in range(5)]
    mat, null = vector_struct_matrix(_stored(dense).slice(1, 3), 2)
    assert null is None and mat.tolist() == [[1.0, -1.0], [2.0, -2.0], [3.0, -3.0]]


@pytest.mark.parametrize("vectors, found", [
    ([("d", [1.0, 2.0]), ("d", [3.0])], 1),
    ([("s", 2, [0], [1.0]), ("s", 5, [4], [1.0])], 5),
    ([None, ("d", [1.0, 2.0, 3.0])], 3),
])
def test_stored_vectors_of_another_length_are_rejected(vectors, found):
    with pytest.raises(VectorLengthError, match=f"a vector of {found} elements where 2"):
        vector_struct_matrix(_stored(vectors), 2)


def test_element_columns_are_one_byte_where_every_value_is_a_small_integer():
    mat = np.array([[1.0, 0.5, -0.0, 127.0, 128.0, np.nan, -128.0],
                    [2.0, 1.0, 3.0, -3.0, 1.0, 1.0, 0.0]])
    idx = np.arange(7)
    cols = element_columns(mat, idx, None)
    assert [str(c.type) for c in cols] == ["int8", "double", "int8", "int8", "double",
                                           "double", "int8"]
    for j, c in enumerate(cols):  # the same doubles (NaN where NaN), column by column
        np.testing.assert_array_equal(c.to_numpy(zero_copy_only=False).astype(float) + 0.0,
                                      mat[:, j] + 0.0)
    sub = element_columns(mat, np.array([5, 0, 1]), None)  # a subset, in its order
    assert [str(c.type) for c in sub] == ["double", "int8", "double"]
    assert sub[1].to_pylist() == [1, 2] and sub[2].to_pylist() == [0.5, 1.0]
    null = np.array([False, True])
    masked = element_columns(np.where(null[:, None], np.nan, mat), idx, null)
    assert all(str(c.type) == "double" and c.null_count == 1 for c in masked)
    assert masked[0].to_pylist() == [1.0, None]
    assert element_columns(mat, np.array([], dtype=np.int64), None) == []


def test_joined_batches_keep_the_rows_in_order():
    from vmi_spark.spark.sources.vector_source import joined

    def batch(lo, hi):
        return pa.RecordBatch.from_pydict({
            "y": pa.array(np.arange(lo, hi, dtype=np.float64)),
            "v": pa.array([[float(i), -float(i)] for i in range(lo, hi)],
                          pa.list_(pa.float64()))})

    cuts = [0, 3, 3, 5, 12, 13, 20]  # an empty batch, small ones, one above `rows`
    parts = [batch(a, b) for a, b in zip(cuts, cuts[1:])]
    out = list(joined(iter(parts), 4))
    assert [rb.num_rows for rb in out] == [5, 7, 8]
    assert sum((rb.column(0).to_pylist() for rb in out), []) == list(range(20))
    assert sum((rb.column(1).to_pylist() for rb in out), []) == [
        [float(i), -float(i)] for i in range(20)]
    assert out[1] is parts[3]  # a batch of `rows` or more passes as it is
    assert [rb.num_rows for rb in joined(iter(parts), 100)] == [20]


def _abc_reader():
    """A VectorReader of vectors of elements a, b, c and a label y, without a frame."""
    from vmi_spark.spark.sources import vector_source as V

    reader = V.VectorReader.__new__(V.VectorReader)
    reader.names = ["a", "b", "c"]
    reader.kinds = {"y": "double", "a": "double", "b": "double", "c": "double"}
    reader._pos = {"a": 0, "b": 1, "c": 2}
    reader.chunk_cells = limits.DEFAULT.read_cells  # as __init__ takes it
    return reader


def test_vector_reader_cuts_joined_batches_as_it_cuts_single_ones(set_limits):
    """The typed columns do not depend on how the JVM's batches were joined."""

    rng = np.random.default_rng(5)
    rows = [[float(x) for x in rng.integers(0, 4, 3)] for _ in range(50)]
    rows[7] = None
    arr = pa.array(rows, pa.list_(pa.float64()))
    label = pa.array(rng.integers(0, 2, 50).astype(np.float64))
    parts = [pa.RecordBatch.from_arrays([label.slice(s, 6), arr.slice(s, 6)], ["_label", "_v"])
             for s in range(0, 50, 6)]
    reader = _abc_reader()
    cols = ["y", "c", "a"]

    def table(join_cells):
        set_limits(vector_join_cells=join_cells)
        got = list(reader.read(cols)(iter(parts)))
        # a batch without a null vector holds these small integers as int8: as doubles
        doubles = [pa.RecordBatch.from_arrays([c.cast(pa.float64()) for c in rb.columns],
                                              names=rb.schema.names) for rb in got]
        return [rb.num_rows for rb in got], pa.Table.from_batches(doubles)

    sizes_one, one = table(1)
    sizes_all, everything = table(3 * 1000)
    assert sizes_one == [6] * 8 + [2] and sizes_all == [50]
    assert one.equals(everything)
    assert one.column(1).to_pylist()[7] is None  # the null vector: missing in every element
    assert one.column(2).to_pylist()[:3] == [r[0] for r in rows[:3]]


@pytest.mark.parametrize("cells", [1, 60, 10_000])
def test_vector_chunks_side_by_side_are_the_read_batches(set_limits, cells):
    """read_chunks: the chunks of ``cells`` elements (1, 2 or every element column of a
    joined batch), put side by side from each chunk at 0 on, are read's batches, with a
    null vector and int8 / float64 columns as read makes them."""
    from vmi_spark.core.rows import ByteColumns

    rng = np.random.default_rng(6)
    rows = [[float(x) for x in rng.integers(0, 4, 3)] for _ in range(50)]
    rows[7] = None
    rows[30][1] = 0.5
    arr = pa.array(rows, pa.list_(pa.float64()))
    label = pa.array(rng.integers(0, 2, 50).astype(np.float64))
    parts = [pa.RecordBatch.from_arrays([label.slice(s, 6), arr.slice(s, 6)], ["_label", "_v"])
             for s in range(0, 50, 6)]
    reader = _abc_reader()
    reader.chunk_cells = cells
    set_limits(vector_join_cells=3 * 20)  # groups of 20 rows or more
    cols = ["y", "c", "a", "b"]
    want = list(reader.read(cols)(iter(parts)))
    got = list(reader.read_chunks(cols)(iter(parts)))
    # a group of four 6-row batches (two in the last): columns of cells // rows elements
    assert [rb.num_rows for rb in want] == [24, 24, 2]
    assert [at for at, _ in got] == [at for rb in want
                                     for at in range(0, 3, max(1, cells // rb.num_rows))]
    joined: list[list[pa.Array]] = []
    for at, rb in got:
        if at == 0:
            joined.append([rb.column(0)])
        if not isinstance(rb, ByteColumns):
            assert rb.schema.names == ["_c0", *(f"_c{1 + at + j}"
                                               for j in range(rb.num_columns - 1))]
        joined[-1].extend(rb.column(j) for j in range(1, rb.num_columns))
    assert len(joined) == len(want)
    # one-byte slabs come whole, where no vector is null (not the first group) and every
    # element is a small integer (not b in the second, where row 30 holds 0.5)
    byte = [(k, at) for k, (at, rb) in enumerate(got) if isinstance(rb, ByteColumns)]
    starts = [k for k, (at, _) in enumerate(got) if at == 0]
    groups = [sum(1 for s in starts if s <= k) - 1 for k, _ in byte]
    assert set(groups) == ({1, 2} if cells // 24 < 3 else {2})
    assert groups.count(2) == len(got) - starts[2]
    assert all(not (g == 1 and step_holds_b) for g, step_holds_b in zip(
        groups, (at <= 2 < at + got[k][1].num_columns - 1 for k, at in byte)))
    for cols_, rb in zip(joined, want):
        assert pa.RecordBatch.from_arrays(cols_, names=rb.schema.names).equals(rb)
    assert {c.type for rb in want for c in rb.columns[1:]} == {pa.int8(), pa.float64()}


def _vector_frame(spark, n=1200, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    rows = []
    for i in range(n):
        v = [float(y[i] + rng.normal()), float(rng.integers(0, 4)), float(rng.normal()),
             -0.0 if i % 7 == 0 else float(rng.integers(0, 2) * (y[i] == 1)),
             float("nan") if i % 11 == 0 else float(rng.exponential()) * (y[i] + 1)]
        vec = None if i % 97 == 5 else (Vectors.dense(v) if i % 2 else Vectors.sparse(5, {
            j: x for j, x in enumerate(v) if x != 0.0}))
        rows.append((["lo", "mid", "hi"][y[i]], vec))
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("y", T.StringType()), T.StructField("v", VectorUDT())])
    return spark.createDataFrame(rows, schema)


@pytest.mark.parametrize("sample_rows", [None, 500])
@pytest.mark.parametrize("chunk_cells", [None, 400])
def test_vector_reader_plans_and_selects_as_the_expanded_columns(set_limits, spark,
                                                                  sample_rows, chunk_cells):
    from vmi_spark.spark import select
    from vmi_spark.spark.sources import vector_source

    if sample_rows is not None:  # bin edges from the hashed sample
        set_limits(sample_rows=sample_rows)
    if chunk_cells is not None:  # element chunks of a column or two
        set_limits(read_cells=chunk_cells)
    df = _vector_frame(spark).repartition(3)
    expanded, names = vector_source.expand_vector(df, "v", "y")
    kw = dict(method="vmi_pairwise", num_features=4, num_bins=5, max_categories=4)
    ref = select.run_selection(expanded, "y", features=names, **kw)  # the Spark reader
    got = select.run_selection(df, "y", features_col="v", **kw)  # the vector reader
    assert got.plan.to_json() == ref.plan.to_json()
    assert got.selection.selected == ref.selection.selected
    assert got.selection.scores == ref.selection.scores
    kinds = [c.kind for c in ref.plan.columns]
    assert "bins" in kinds and "category" in kinds
    assert all(c.missing for c in ref.plan.columns)  # the null vectors


@pytest.mark.parametrize("sample_rows", [None, 500])
def test_vector_parquet_is_read_with_pyarrow_and_selects_as_spark(set_limits, spark, tmp_path,
                                                                   monkeypatch, sample_rows):
    """A vector column of a Parquet scan (dense, sparse and null vectors) is read by
    pyarrow in the workers: the plan, selection and scores of Spark's reading of it."""
    from vmi_spark.spark import routes, select

    if sample_rows is not None:
        set_limits(sample_rows=sample_rows)
    path = str(tmp_path / "vectors.parquet")
    _vector_frame(spark).repartition(3).write.parquet(path)
    df = spark.read.parquet(path)
    kw = dict(method="vmi_pairwise", num_features=4, num_bins=5, max_categories=4,
              features_col="v", execution="passes")
    ref = select.run_selection(df, "y", reader="spark", **kw)
    calls = []
    real = routes.ParquetVectorReader.read
    monkeypatch.setattr(routes.ParquetVectorReader, "read",
                        lambda self, cols: calls.append(1) or real(self, cols))
    got = select.run_selection(df, "y", **kw)
    assert got.report()["reader"] == "pyarrow" and ref.report()["reader"] == "spark"
    assert calls  # the passes went through the Parquet vector reader
    assert got.plan.to_json() == ref.plan.to_json()
    assert got.selection.selected == ref.selection.selected
    assert got.selection.scores == ref.selection.scores
    assert all(c.missing for c in got.plan.columns)  # the null vectors
    filtered = df.where("y != 'lo'")  # not a plain scan: Spark reads it
    assert select.run_selection(filtered, "y", **kw).report()["reader"] == "spark"


@pytest.mark.parametrize("reader", ["auto", "spark"])
@pytest.mark.parametrize("chunk_cells", [None, 300])
def test_small_integer_elements_select_as_the_expanded_columns(spark, tmp_path,
                                                               set_limits, reader, chunk_cells):
    """Elements read as one-byte columns in some batches and as doubles in others (a NaN,
    a 0.5 or a 300 in one batch only; -0.0 among the codes): the plan, sample, selection
    and scores of the expanded columns read by Spark, also in element chunks."""
    from vmi_spark.spark import select
    from vmi_spark.spark.sources import vector_source

    set_limits(sample_rows=700, vector_join_rows=128)  # many batches per task
    if chunk_cells is not None:  # two element columns a chunk
        set_limits(read_cells=chunk_cells)
    rng = np.random.default_rng(4)
    n = 1500
    y = rng.integers(0, 2, n)
    codes = rng.integers(0, 5, (n, 6)).astype(float)
    codes[:, 0] += 3 * y
    codes[:, 1] = np.where(y == 1, -0.0, codes[:, 1])
    codes[:, 2] = rng.integers(-60, 60, n) + 20 * y  # many values: binned
    codes[100, 3], codes[900, 4], codes[1400, 5] = np.nan, 0.5, 300.0
    rows = [(int(y[i]), Vectors.dense(codes[i].tolist())) for i in range(n)]
    path = str(tmp_path / "codes.parquet")
    spark.createDataFrame(rows, ["y", "v"]).repartition(2).write.parquet(path)
    df = spark.read.parquet(path)
    expanded, names = vector_source.expand_vector(df, "v", "y")
    kw = dict(method="vmi_pairwise", num_features=4, num_bins=6, max_categories=8)
    ref = select.run_selection(expanded, "y", features=names, reader="spark", **kw)
    got = select.run_selection(df, "y", features_col="v", reader=reader, **kw)
    assert got.report()["reader"] == ("pyarrow" if reader == "auto" else "spark")
    assert got.plan.to_json() == ref.plan.to_json()
    assert got.selection.selected == ref.selection.selected
    assert got.selection.scores == ref.selection.scores
    kinds = [c.kind for c in ref.plan.columns]
    assert kinds[2] == "bins" and kinds[0] == "category"


def test_wide_vectors_are_read_in_batches_of_bounded_bytes(spark, set_limits):
    """Reading a wide vector column sets Spark's Parquet and Arrow batch sizes so that a
    batch holds at most VECTOR_BATCH_BYTES of elements, and puts the session's back."""
    from vmi_spark.spark.sources import vector_source as V

    df = spark.createDataFrame([(1, Vectors.dense([0.0] * 50))], ["y", "v"])
    reader = V.VectorReader(df, "y", "v", [f"v[{i}]" for i in range(50)], 2)
    set_limits(vector_batch_bytes=8 * 50 * 100)  # 100 rows a batch
    keys = ("spark.sql.parquet.columnarReaderBatchSize",
            "spark.sql.execution.arrow.maxRecordsPerBatch")
    before = [spark.conf.get(k, None) for k in keys]
    with reader.reading():
        assert [spark.conf.get(k) for k in keys] == ["100", "100"]
    assert [spark.conf.get(k, None) for k in keys] == before
    set_limits(vector_batch_bytes=8 * 50 * 50_000)  # larger: left alone
    with reader.reading():
        assert [spark.conf.get(k, None) for k in keys] == before


def test_vector_length_is_checked_in_batches_of_bounded_bytes(spark, monkeypatch):
    """The aggregate that checks every vector's length runs before the length is known:
    it reads in batches sized for UNKNOWN_WIDTH elements (256 rows at 64 MB), so that a
    30,000-element column does not fill the heap with 4,096-row Parquet batches."""
    from contextlib import contextmanager

    from vmi_spark.spark.sources import vector_source
    from vmi_spark.spark.sources import vector_source as V

    df = spark.createDataFrame([(1, Vectors.dense([0.0] * 5)), (0, Vectors.dense([1.0] * 5))],
                               ["y", "v"])
    key = "spark.sql.parquet.columnarReaderBatchSize"
    seen = []
    real = V.vector_batches

    @contextmanager
    def spy(session, width):
        with real(session, width):
            seen.append((width, session.conf.get(key)))
            yield

    monkeypatch.setattr(vector_source, "vector_batches", spy)
    assert vector_source.vector_names(df, "v", "y") == [f"v[{i}]" for i in range(5)]
    assert seen == [(None, "256")]
    assert V.VECTOR_BATCH_BYTES // (8 * V.UNKNOWN_WIDTH) == 256


def _labelled_vectors(spark, widths, names):
    """A frame whose vector column carries ML attribute metadata naming ``names`` (what
    VectorAssembler writes) over vectors of the given ``widths``, row by row."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rng = np.random.default_rng(3)
    rows = [(int(i % 2), Vectors.dense(rng.integers(0, 3, w).astype(float).tolist()))
            for i, w in enumerate(widths)]
    schema = T.StructType([T.StructField("y", T.IntegerType()), T.StructField("v", VectorUDT())])
    meta = {"ml_attr": {"num_attrs": len(names),
                        "attrs": {"numeric": [{"idx": i, "name": n} for i, n in enumerate(names)]}}}
    df = spark.createDataFrame(rows, schema)
    return df.select("y", F.col("v").alias("v", metadata=meta)).repartition(2)


def test_named_vectors_are_not_aggregated_before_the_passes(spark, monkeypatch):
    """With ML attribute names the length aggregate is left out of the set-up (the
    statistics pass checks every vector as it reads it); without names it still runs."""
    from vmi_spark.spark import select
    from vmi_spark.spark.sources import vector_source

    names = ["a", "b", "c"]
    df = _labelled_vectors(spark, [3] * 40, names)
    calls = []
    real = vector_source.vector_lengths

    def spy(frame, col, width):
        calls.append(width)
        return real(frame, col, width)

    monkeypatch.setattr(vector_source, "vector_lengths", spy)
    assert vector_source.vector_names(df, "v", "y", check=False) == names
    assert calls == []
    assert vector_source.vector_names(df, "v", "y") == names  # the full check, when asked
    assert calls == [3]
    calls.clear()
    got = select.run_selection(df, "y", features_col="v", num_features=2, execution="passes")
    assert calls == [] and len(got.selection.selected) == 2


@pytest.mark.driver_auto  # the driver execution reads the rows itself
@pytest.mark.parametrize("execution", ["driver", "passes", "resident"])
def test_named_vectors_of_another_length_fail_in_the_passes_with_the_full_message(
        spark, tmp_path, execution):
    """A vector shorter or longer than its ML attributes say, met by the statistics pass
    in a Python worker (passes, resident) or by the driver reading the rows (driver), ends
    in the one-line InputError of the full check: the shortest and longest lengths."""
    from vmi_spark.spark import select

    widths = [3] * 30 + [2] + [3] * 30 + [5] + [3] * 10
    df = _labelled_vectors(spark, widths, ["a", "b", "c"])
    path = str(tmp_path / "vectors.parquet")
    df.write.parquet(path)  # the ML attributes are kept in the file's Spark schema
    for frame in (df, spark.read.parquet(path)):  # read by Spark, by pyarrow
        with pytest.raises(InputError) as info:
            select.run_selection(frame, "y", features_col="v", num_features=2,
                                 execution=execution)
        msg = str(info.value)
        assert msg == ("featuresCol 'v' holds vectors of 2 to 5 elements; every row must "
                       "have the same length (3)"), msg
        assert "\n" not in msg


def test_vector_chunks_of_small_integers_come_in_smaller_groups(set_limits):
    """read_chunks: the first group has the joined rows (what the driver's first look
    reads); after a group of one-byte slabs only, groups of VECTOR_BYTE_ROWS rows; after a
    slab that is not (a 0.5), the joined rows again. Side by side, read's values."""
    from vmi_spark.core.rows import ByteColumns

    rng = np.random.default_rng(9)
    rows = [[float(x) for x in rng.integers(0, 4, 3)] for _ in range(60)]
    rows[29][2] = 0.5  # in the group of rows 28-29 (after 20 + 4 + 4)
    arr = pa.array(rows, pa.list_(pa.float64()))
    label = pa.array(rng.integers(0, 2, 60).astype(np.float64))
    parts = [pa.RecordBatch.from_arrays([label.slice(s, 2), arr.slice(s, 2)], ["_label", "_v"])
             for s in range(0, 60, 2)]
    reader = _abc_reader()
    set_limits(vector_join_cells=3 * 20, vector_byte_rows=4)  # groups of 20 rows
    cols = ["y", "c", "a", "b"]
    got = list(reader.read_chunks(cols)(iter(parts)))
    sizes = [rb.num_rows for at, rb in got if at == 0]
    # 20 (first), 4, 4, then 4 holding the 0.5 -> 20 again, then bytes: 4, 4
    assert sizes == [20, 4, 4, 4, 20, 4, 4]
    assert [isinstance(rb, ByteColumns) for at, rb in got if at == 0] == [
        True, True, True, False, True, True, True]
    values = [[] for _ in cols]
    for at, rb in got:
        if at == 0:
            values[0].extend(rb.column(0).to_pylist())
        for j in range(1, rb.num_columns):
            values[at + j].extend(float(v) for v in rb.column(j).to_pylist())
    want = list(reader.read(cols)(iter(parts)))
    for j in range(len(cols)):
        assert values[j] == [float(v) for rb in want for v in rb.column(j).to_pylist()]
