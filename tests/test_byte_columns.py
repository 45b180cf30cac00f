"""One-byte columns: coded vector elements are counted and encoded a slab at a time
(issue 21, target 3).

The vector reader hands a slab of elements that are all small integers (no null vector,
every row labelled) to the statistics pass and the encoder as one ``int8`` matrix
(:class:`~vmi_spark.core.rows.ByteColumns`) instead of one Arrow array per element. What
they compute must not change:

* :func:`~vmi_spark.core.encoding.byte_table` against a slow per-value coding written
  here from the plan's rules (categories, bins, constants, a missing state), and
  :func:`~vmi_spark.core.encoding.encode_bytes` against a loop over the values;
* the statistics of one-byte chunks against the same chunks as Arrow batches and a slow
  per-value count (values that grow past the span seen, gaps, a column over the cap,
  negative values);
* the codes of one-byte chunks against the Arrow chunks and :func:`encode_batch`, alone
  and mixed with Arrow chunks in the same rows.

The vector reader's choice of slabs is tested in tests/test_vector_source.py; its
selections under Spark against the expanded columns there too.
"""

from __future__ import annotations

import bisect

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_column_chunks import _slow_stats, _stats_of

from vmi_spark.core import rows as R
from vmi_spark.core.encoding import ColumnPlan, EncodingPlan, byte_table, encode_bytes
from vmi_spark.core.rows import ByteColumns
from vmi_spark.spark.chunks.codes import encode_batch, encode_chunks


def _slow_code(v: int, col: ColumnPlan) -> int:
    """The code of the value ``v`` by the plan's rules, one value at a time."""
    fill = col.num_states - 1 if col.missing else 0
    if col.kind == "constant":
        return 0
    if col.kind == "category":
        values = [float(x) for x in col.values or []]
        return values.index(float(v)) if float(v) in values else fill
    return bisect.bisect_right([float(s) for s in col.splits or []], float(v))


PLANS = [
    ColumnPlan("cat", "category", values=[0.0, 1.0, 2.0, 3.0]),
    ColumnPlan("neg", "category", values=[-128.0, -5.0, 0.0, 127.0], missing=True),
    ColumnPlan("wide", "category", values=[-3.0, 2.0, 300.0, 1e6]),
    ColumnPlan("halves", "category", values=[-1.5, 0.0, 0.5, 4.0], missing=True),
    ColumnPlan("none", "category", values=[], missing=True),
    ColumnPlan("bins", "bins", splits=[-10.5, 0.0, 3.0, 3.5, 100.0]),
    ColumnPlan("bins_m", "bins", splits=[-200.0, 1.0], missing=True),
    ColumnPlan("many", "category", values=[float(v) for v in range(-40, 60, 3)]),
    ColumnPlan("const", "constant"),
    ColumnPlan("const_m", "constant", missing=True),
]


@pytest.mark.parametrize("col", PLANS, ids=[c.name for c in PLANS])
def test_byte_table_codes_every_byte_as_the_plan_says(col):
    table = byte_table(col)
    assert table.shape == (256,) and table.dtype == np.uint8
    for v in range(-128, 128):
        assert table[v & 0xFF] == _slow_code(v, col), v


def test_byte_table_refuses_a_string_column():
    with pytest.raises(ValueError, match="strings"):
        byte_table(ColumnPlan("s", "category", values=["a"], dtype="string"))


def test_encode_bytes_looks_every_value_up_in_its_columns_table():
    rng = np.random.default_rng(3)
    values = rng.integers(-128, 128, (7, 301)).astype(np.int8)
    tables = rng.integers(0, 256, (7, 256)).astype(np.uint8)
    got = encode_bytes(values, tables)
    assert got.dtype == np.uint8 and got.shape == (7, 301)
    for j in range(7):
        for i in range(301):
            assert got[j, i] == tables[j, int(values[j, i]) & 0xFF]
    assert encode_bytes(values[:, :0], tables).shape == (7, 0)
    with pytest.raises(ValueError, match=r"\(7, 256\) tables"):
        encode_bytes(values, tables[:6])


def test_byte_columns_read_as_the_batch_they_stand_for():
    label = pa.array([1.0, 0.0, 2.0])
    values = np.array([[1, -2, 3], [0, 0, 127]], np.int8)
    bc = ByteColumns(label, values)
    assert (bc.num_rows, bc.num_columns) == (3, 3)
    assert bc.column(0) is label
    assert bc.column(1).equals(pa.array([1, -2, 3], pa.int8()))
    assert bc.column(2).to_pylist() == [0, 0, 127]
    for bad in (values.astype(np.int16), values[:, :2], values[0]):
        with pytest.raises(ValueError, match="int8"):
            ByteColumns(label, bad)


def _byte_batches(seed: int, sizes: list[int], d: int = 6) -> list[tuple[pa.Array, np.ndarray]]:
    """(label, (d, n) int8) of batches whose columns take new values batch by batch:
    growing spans, gaps, negatives, a column over the cap after the first batch."""
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate(sizes):
        label = pa.array(rng.integers(0, 3, n).astype(np.float64))
        cols = [rng.integers(0, 2 + 2 * k, n),             # 0..1, then 0..3, ...
                rng.integers(0, 3, n) * (2 + k),            # {0, 2, 4}, {0, 3, 6}, ...
                rng.integers(-128, -125, n),                # the lowest bytes
                rng.integers(0, 40 if k else 3, n),         # over the cap later
                np.full(n, 7 + k),                          # one new value a batch, far off
                rng.integers(120, 128, n)][:d]              # the highest bytes
        out.append((label, np.array(cols, dtype=np.int8).reshape(d, n)))
    return out


def _as_batch(label: pa.Array, values: np.ndarray) -> pa.RecordBatch:
    cols = [label, *(pa.array(v) for v in values)]
    return pa.RecordBatch.from_arrays(cols, names=[f"_c{j}" for j in range(len(cols))])


def _pieces(label, values, width):
    for at in range(0, values.shape[0], width):
        yield at, ByteColumns(label, np.ascontiguousarray(values[at:at + width]))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("width", [1, 4, 6])
def test_statistics_of_byte_columns_are_those_of_the_arrow_columns(seed, width):
    data = _byte_batches(seed, [50, 0, 120, 77, 200])
    cap = 12
    want = _slow_stats([_as_batch(lab, v) for lab, v in data], cap)
    arrow = R.ColumnStats(6, cap, 10, False)
    byte = R.ColumnStats(6, cap, 10, False)
    for label, values in data:
        arrow.add(_as_batch(label, values))
        for at, chunk in _pieces(label, values, width):
            byte.add(chunk, at)
    assert _stats_of(arrow) == want
    assert _stats_of(byte) == want
    assert byte.spans == arrow.spans
    # what the batches hold: values that grow, gaps, negatives, a column over the cap
    assert want["values"][0] == [float(v) for v in range(10)]
    assert want["values"][1] == [0.0, 2.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0]
    assert want["values"][2] == [-128.0, -127.0, -126.0]
    assert want["values"][3] is None
    assert want["values"][4] == [7.0, 9.0, 10.0, 11.0]


def test_a_byte_column_within_its_span_is_not_counted_again(monkeypatch):
    """Values inside the span of every integer seen add nothing and are not counted
    (a min and a max); a value outside it, or a column with gaps, is."""
    counted: list[int] = []
    real = R._add_distinct

    def spy(seen, arr, rows, cap):
        counted.append(len(arr))
        return real(seen, arr, rows, cap)

    monkeypatch.setattr(R, "_add_distinct", spy)
    # and the features are taken as one matrix, never as Arrow columns one by one
    monkeypatch.setattr(ByteColumns, "column",
                        lambda self, j: self.label if j == 0 else pytest.fail("column read"))
    stats = R.ColumnStats(2, 10, 10, False)
    label = pa.array([0.0, 1.0, 0.0])
    stats.add(ByteColumns(label, np.array([[0, 1, 2], [0, 2, 0]], np.int8)))
    assert len(counted) == 3  # the label and both columns
    counted.clear()
    stats.add(ByteColumns(label, np.array([[2, 0, 2], [2, 2, 0]], np.int8)))
    assert len(counted) == 2  # the label and the column with a gap ({0, 2})
    counted.clear()
    stats.add(ByteColumns(label, np.array([[3], [1]], np.int8)[:, [0, 0, 0]]), 0)
    assert len(counted) == 3 and stats.spans == [(0.0, 3.0), (0.0, 2.0)]


def test_byte_columns_need_a_label_in_every_row():
    for label in (pa.array([1.0, None]), pa.array([1.0, float("nan")]), pa.array(["a", None])):
        with pytest.raises(ValueError, match="label"):
            ByteColumns(label, np.zeros((1, 2), np.int8))
    with pytest.raises(ValueError, match="every feature"):
        R.ColumnStats(2, 10, 10, True).add(ByteColumns(pa.array([1.0]), np.zeros((1, 1), np.int8)))


def _plan(d: int) -> EncodingPlan:
    cols = [PLANS[j % len(PLANS)] for j in range(d)]
    cols = [ColumnPlan(f"f{j}", c.kind, values=c.values, splits=c.splits, missing=c.missing)
            for j, c in enumerate(cols)]
    return EncodingPlan(label="y", label_dtype="double", classes=[0.0, 1.0, 2.0],
                        columns=cols)


@pytest.mark.parametrize("width", [1, 3, 11, 12])
def test_codes_of_byte_columns_are_those_of_the_arrow_columns(width, monkeypatch):
    # one-byte chunks are encoded as one matrix, never as Arrow columns one by one
    monkeypatch.setattr(ByteColumns, "column",
                        lambda self, j: self.label if j == 0 else pytest.fail("column read"))
    plan = _plan(12)
    rng = np.random.default_rng(5)
    data = []
    for n in (40, 0, 33, 70):
        label = pa.array(rng.integers(0, 3, n).astype(np.float64))
        data.append((label, rng.integers(-128, 128, (12, n)).astype(np.int8)))
    want = [encode_batch(_as_batch(lab, v), plan) for lab, v in data if len(lab)]

    def chunks(mixed: bool):
        for k, (label, values) in enumerate(data):
            for at, bc in _pieces(label, values, width):
                if mixed and (at // width + k) % 2:  # every other chunk as Arrow columns
                    rb = _as_batch(label, bc.values)
                    yield at, rb
                else:
                    yield at, bc

    for mixed in (False, True):
        got = list(encode_chunks(chunks(mixed), plan, 16))
        for k in (0, 1):
            np.testing.assert_array_equal(np.concatenate([g[k] for g in got], axis=-1),
                                          np.concatenate([g[k] for g in want], axis=-1))
    # and by the slow coding, value by value
    codes = np.concatenate([c for c, _ in want], axis=1)
    values = np.concatenate([v for _, v in data], axis=1)
    for j, col in enumerate(plan.columns):
        assert [int(c) for c in codes[j]] == [_slow_code(int(v), col) for v in values[j]]


def test_a_byte_chunk_that_does_not_continue_its_rows_is_refused():
    plan = _plan(4)
    label = pa.array([0.0, 1.0])
    good = ByteColumns(label, np.zeros((2, 2), np.int8))
    short = ByteColumns(pa.array([0.0]), np.zeros((2, 1), np.int8))
    with pytest.raises(ValueError, match="does not continue"):
        list(encode_chunks(iter([(0, good), (2, short)]), plan, 16))
    with pytest.raises(ValueError, match="does not continue"):
        list(encode_chunks(iter([(2, good)]), plan, 16))


def test_integer_columns_of_small_values_become_byte_columns():
    """byte_columns: integer arrays of any width without nulls whose values are bytes, in
    labelled rows; anything else stays as it is (None)."""
    label = pa.array([0.0, 1.0, 1.0])
    cols = [pa.array([1, -128, 127], pa.int32()), pa.array([0, 5, 2], pa.uint8()),
            pa.array([3, 3, -3], pa.int64()), pa.array([9, 0, 1], pa.int16())]
    got = R.byte_columns(label, cols)
    assert got is not None and got.values.dtype == np.int8
    assert got.values.tolist() == [c.to_pylist() for c in cols]
    assert R.byte_columns(label, cols[1:2]).values.tolist() == [[0, 5, 2]]
    for bad in ([pa.array([1, 128, 0], pa.int32())], [pa.array([0, 200, 1], pa.uint8())],
                [pa.array([1, -129, 0], pa.int64())], [pa.array([1, None, 0], pa.int8())],
                [pa.array([1.0, 2.0, 0.0])], [pa.array([True, False, True])],
                [pa.array(["a", "b", "c"])], []):
        assert R.byte_columns(label, cols[:1] + bad if bad else bad) is None
    assert R.byte_columns(pa.array([0.0, None, 1.0]), cols) is None
    assert R.byte_columns(pa.array([0.0, float("nan"), 1.0]), cols) is None


@pytest.fixture(scope="module")
def small_int_files(tmp_path_factory):
    """Parquet files of coded columns in several integer widths, every row labelled:
    columns that are bytes everywhere (one binned: many values), one with a 200 in one
    row group only, one with nulls, a float and a string column; 300-row row groups."""
    base = tmp_path_factory.mktemp("bytes") / "t"
    base.mkdir()
    rng = np.random.default_rng(21)
    for f in range(2):
        n = 900 + 300 * f
        y = rng.integers(0, 3, n)
        noise = rng.integers(0, 4, (8, n))
        big = (y + noise[3]) % 5
        if f == 0:
            big[450] = 200  # the second row group of the first file: not bytes there
        cols = {
            "label": pa.array(y.astype(np.int32)),
            "a32": pa.array(((y + noise[0]) % 4).astype(np.int32)),
            "neg16": pa.array((-(y * noise[1] % 5) - 100).astype(np.int16)),
            "b64": pa.array(((2 * y + noise[2]) % 6).astype(np.int64)),
            "wide": pa.array((rng.integers(-90, 90, n) + 30 * y).clip(-128, 127).astype(np.int32)),
            "big": pa.array(big.astype(np.int32)),
            "s16": pa.array((noise[4] * (y > 0)).astype(np.int16)),
            "null8": pa.array(((y + noise[5]) % 3).astype(np.int8), mask=rng.random(n) < 0.03),
            "f64": pa.array(((y + noise[6]) % 3).astype(np.float64)),
            "s": pa.array(np.array(list("pqr"), dtype=object)[(y + noise[7]) % 3], pa.string()),
        }
        pq.write_table(pa.table(cols), str(base / f"part-{f}.parquet"), row_group_size=300)
    return base


def test_parquet_chunks_of_small_integers_come_as_byte_columns(small_int_files):
    """read_fn: the chunks whose columns are all small integers in labelled rows come as
    one-byte columns, the others as typed batches; side by side they hold the values of
    the typed batches read without chunks."""
    from vmi_spark.spark.sources.arrow_source import ParquetSource, read_fn

    paths = sorted(str(f) for f in small_int_files.glob("*.parquet"))
    units = tuple((i, g, pq.ParquetFile(f).metadata.row_group(g).num_rows, 0)
                  for i, f in enumerate(paths) for g in range(pq.ParquetFile(f).num_row_groups))
    columns = pq.ParquetFile(paths[0]).schema_arrow.names
    kinds = {c: "string" if c == "s" else "double" for c in columns}
    source = ParquetSource(tuple("file://" + f for f in paths), units, kinds)
    asked = [pa.RecordBatch.from_pydict({"id": pa.array(range(len(units)), pa.int64())})]
    plain = list(read_fn(source, columns)(iter(asked)))
    got = list(read_fn(source, columns, 600)(iter(asked)))  # two columns a chunk
    byte = [(k // 5, at) for k, (at, rb) in enumerate(got) if isinstance(rb, ByteColumns)]
    # a32+neg16 and b64+wide in every group; big+s16 where big holds no 200 (not group 1)
    assert byte == [(g, at) for g in range(len(plain)) for at in (0, 2, 4) if (g, at) != (1, 4)]
    assert len(got) == 5 * len(plain)
    for g, rb in enumerate(plain):
        parts = got[5 * g:5 * g + 5]
        assert [at for at, _ in parts] == [0, 2, 4, 6, 8]
        values = [c for _, p in parts for c in (p.column(j) for j in range(1, p.num_columns))]
        assert parts[0][1].column(0).equals(rb.column(0))
        for j, col in enumerate(values):
            assert col.to_pylist() == rb.column(j + 1).to_pylist(), columns[j + 1]


@pytest.mark.parametrize("cells", [600, 1 << 17])
def test_byte_columns_select_what_the_spark_reader_selects(spark, small_int_files,
                                                           set_limits, cells):
    """Parquet columns read as one-byte chunks (or a row group's every column at once):
    the Spark reader's plan, selection and scores, a binned column among them."""
    from vmi_spark.spark.select import run_selection
    from vmi_spark.spark.sources.arrow_source import parquet_source

    set_limits(read_cells=cells)
    df = spark.read.parquet(str(small_int_files))
    source = parquet_source(df, df.columns)
    assert source is not None
    for method in ("vmi_naive", "jmi"):
        kw = dict(method=method, num_features=5, max_categories=8, num_bins=4)
        ref = run_selection(df, "label", reader="spark", **kw)
        fast = run_selection(df, "label", source=source, **kw)
        assert fast.report()["reader"] == "pyarrow"
        assert fast.plan.to_json() == ref.plan.to_json()
        assert (fast.selection.selected, fast.selection.scores) == (ref.selection.selected,
                                                                    ref.selection.scores)
    kinds = {c.name: c.kind for c in ref.plan.columns}
    assert kinds["wide"] == "bins" and kinds["a32"] == kinds["neg16"] == "category"
    assert ref.plan.columns[[c.name for c in ref.plan.columns].index("big")].values[-1] == 200.0


def test_columns_coded_alike_share_one_table(monkeypatch):
    """Columns whose plans code every value alike (names, 3 and 3.0, -0.0 and 0.0 aside)
    make one byte table between them; a missing state, another kind (a constant and a
    category without values) or other values make another. Every column's codes of all 256 bytes are the slow coding's."""
    from vmi_spark.spark.chunks import codes as codes_mod

    four = [0.0, 1.0, 2.0, 3.0]
    cols = [ColumnPlan("a", "category", values=four),
            ColumnPlan("b", "category", values=[0, 1, 2, 3]),
            ColumnPlan("c", "category", values=[-0.0, 1.0, 2.0, 3.0]),
            ColumnPlan("d", "category", values=four, missing=True),
            ColumnPlan("e", "bins", splits=four),
            ColumnPlan("f", "bins", splits=four, spikes=[1.0]),
            ColumnPlan("g", "category", values=[0.0, 1.0, 2.0, 4.0]),
            ColumnPlan("h", "category", values=four),
            ColumnPlan("k", "bins", splits=[0.0, 1.0, 2.0, 5.0]),
            ColumnPlan("l", "grid", splits=four),
            ColumnPlan("i", "constant", missing=True),
            ColumnPlan("j", "category", values=[], missing=True)]
    plan = EncodingPlan(label="y", label_dtype="double", classes=[0.0, 1.0], columns=cols)
    made = []
    monkeypatch.setattr(codes_mod, "byte_table", lambda col: made.append(col.name)
                        or byte_table(col))
    every = np.tile(np.arange(-128, 128, dtype=np.int8), (len(cols), 1))
    label = pa.array(np.zeros(256))
    codes, _ = next(iter(encode_chunks(iter([(0, ByteColumns(label, every))]), plan, 256)))
    assert made == ["a", "d", "e", "g", "k", "l", "i", "j"]
    for j, col in enumerate(cols):
        assert [int(c) for c in codes[j]] == [_slow_code(v, col) for v in range(-128, 128)]
