"""Wide row groups are read and used a few columns at a time (issue 21, target 3).

Without ``handleInvalid=skip`` the rows a pass keeps depend on the label alone, so the
statistics pass and the encoder take a row group as column chunks, each holding the label
and some of the features, and decoding one chunk waits until the one before is used. What
they compute must not change:

* the column statistics of column chunks, of whole batches and of a slow per-value count
  written here (nulls, NaN, -0.0, null labels, strings, integers whose values grow past
  what was seen, caps), for several chunk widths;
* the chunks of ``read_fn`` put side by side again are the whole batches, for whole row
  groups, pieces of them and row groups read batch by batch;
* through Spark, the plan, selection and scores of a table of discrete columns read in
  chunks of a few columns equal the Spark reader's.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vmi_spark.core import rows as R
from vmi_spark.spark.select import run_selection
from vmi_spark.spark.sources.arrow_source import (
    ParquetReader,
    ParquetSource,
    parquet_source,
    read_fn,
    row_group_batches,
)


def _batches(seed: int, sizes: list[int]) -> list[pa.RecordBatch]:
    """Typed batches (label first) whose integer columns take new values batch by batch:
    values inside and outside what the batches before held, and gaps."""
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate(sizes):
        lab = rng.integers(0, 3, n).astype(np.float64)
        lab[rng.random(n) < 0.05] = np.nan
        grow = rng.integers(0, 2 + 2 * k, n).astype(np.int32)  # 0..1, then 0..3, ...
        gaps = (rng.integers(0, 3, n) * (2 + k)).astype(np.int16)  # {0, 2, 4}, {0, 3, 6}, ...
        f32 = np.array([-0.0, 0.0, 1.5, 2.0], np.float32)[rng.integers(0, 4, n)]
        f32[rng.random(n) < 0.05] = np.nan
        strings = np.array(["u", "v", "w"], dtype=object)[rng.integers(0, 3, n)]
        strings[rng.random(n) < 0.05] = None
        cols = [
            pa.array(lab),
            pa.array(grow),
            pa.array(gaps),
            pa.array(rng.integers(0, 4, n).astype(np.uint8), mask=rng.random(n) < 0.05),
            pa.array(f32),
            pa.array(list(strings), pa.string()),
            pa.array(rng.integers(0, 40 if k else 3, n).astype(np.int8)),  # over the cap later
            pa.array(np.full(n, 7 + k, np.int32)),  # one new value a batch, far off
            pa.array(rng.normal(size=n)),
        ]
        out.append(pa.RecordBatch.from_arrays(cols, names=[f"_c{j}" for j in range(len(cols))]))
    return out


def _slow_stats(batches: list[pa.RecordBatch], cap: int) -> dict:
    """Rows, null labels, missing values per feature (in labelled rows), and the distinct
    values of the labelled rows (None above ``cap``), one value at a time."""
    def missing(v):
        return v is None or (isinstance(v, float) and math.isnan(v))

    d = batches[0].num_columns - 1
    out = {"rows": 0, "null_labels": 0, "missing": [0] * d, "classes": set(),
           "values": [set() for _ in range(d)]}
    for rb in batches:
        cols = [c.to_pylist() for c in rb.columns]
        for i in range(rb.num_rows):
            out["rows"] += 1
            if missing(cols[0][i]):
                out["null_labels"] += 1
                continue
            out["classes"].add(cols[0][i] + 0.0)
            for j in range(d):
                v = cols[j + 1][i]
                if missing(v):
                    out["missing"][j] += 1
                else:
                    out["values"][j].add(v if isinstance(v, str) else float(v) + 0.0)
    out["values"] = [None if len(v) > cap else sorted(v) for v in out["values"]]
    out["classes"] = sorted(out["classes"])
    return out


def _stats_of(stats: R.ColumnStats) -> dict:
    got = json.loads(stats.json())
    return {"rows": got["rows"], "null_labels": got["null_labels"], "missing": got["missing"],
            "classes": sorted(got["classes"]),
            "values": [None if v is None else sorted(v) for v in got["values"]]}


def _chunks(rb: pa.RecordBatch, width: int):
    """``rb`` as (at, batch) chunks of ``width`` features, the label in each."""
    d = rb.num_columns - 1
    for at in range(0, d, width):
        idx = [0, *range(1 + at, 1 + min(d, at + width))]
        yield at, pa.RecordBatch.from_arrays([rb.column(j) for j in idx],
                                             names=[rb.schema.names[j] for j in idx])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("width", [1, 3, 8])
def test_statistics_of_column_chunks_are_the_whole_batches(seed, width):
    batches = _batches(seed, [50, 0, 120, 77, 200])
    cap = 12
    want = _slow_stats(batches, cap)
    whole = R.ColumnStats(8, cap, 10, False)
    chunked = R.ColumnStats(8, cap, 10, False)
    for rb in batches:
        whole.add(rb)
        for at, chunk in _chunks(rb, width):
            chunked.add(chunk, at)
    assert _stats_of(whole) == want
    assert _stats_of(chunked) == want
    # what the batches hold: values that grow, gaps, a column over the cap
    assert want["values"][0] == [float(v) for v in range(10)]
    assert want["values"][1] == [0.0, 2.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0]
    assert want["values"][5] is None and want["values"][7] is None
    assert want["values"][6] == [7.0, 9.0, 10.0, 11.0]


def test_an_integer_column_within_the_values_seen_adds_nothing():
    """The shortcut (a min and a max) is taken only where the values seen are every
    integer of their span: {0, 2} and then 1 must still add 1."""
    stats = R.ColumnStats(1, 10, 10, False)

    def batch(values, typ=None):
        typ = typ or pa.int32()
        return pa.RecordBatch.from_arrays([pa.array([1.0] * len(values)),
                                           pa.array(values, typ)], names=["_c0", "_c1"])

    stats.add(batch([0, 2, 2]))
    assert stats.spans[0] is None
    stats.add(batch([1, 1]))
    assert sorted(stats.values[0]) == [0.0, 1.0, 2.0] and stats.spans[0] == (0.0, 2.0)
    stats.add(batch([2, 0, 1]))
    stats.add(batch([3]))
    stats.add(batch([None, 1]))  # a null: not the shortcut, not a value
    stats.add(batch([-1], pa.int8()))
    assert sorted(stats.values[0]) == [-1.0, 0.0, 1.0, 2.0, 3.0]
    assert stats.missing.tolist() == [1]


def test_skipping_rows_needs_every_feature():
    rb = _batches(0, [20])[0]
    stats = R.ColumnStats(8, 6, 10, True)
    at, chunk = next(_chunks(rb, 3))
    with pytest.raises(ValueError, match="every feature"):
        stats.add(chunk, at)


@pytest.fixture(scope="module")
def discrete_files(tmp_path_factory):
    """Two Parquet files of discrete columns only (no column is binned, so the statistics
    pass is the plain one): integers of several widths with nulls, strings, booleans, and
    a label with nulls; row groups of 400 rows."""
    base = tmp_path_factory.mktemp("chunks") / "t"
    base.mkdir()
    rng = np.random.default_rng(11)
    for f in range(2):
        n = 1200 + 400 * f  # row groups of 400 rows each
        y = rng.integers(0, 3, n)
        cols = {"label": pa.array(y.astype(np.int32), mask=rng.random(n) < 0.01)}
        for j in range(24):
            v = (y * (j % 3) + rng.integers(0, 4, n)) % 6
            if j % 4 == 0:
                cols[f"i8_{j}"] = pa.array(v.astype(np.int8), mask=rng.random(n) < 0.02)
            elif j % 4 == 1:
                cols[f"i32_{j}"] = pa.array(v.astype(np.int32))
            elif j % 4 == 2:
                cols[f"s_{j}"] = pa.array(np.array(list("abcdef"), dtype=object)[v], pa.string())
            else:
                cols[f"b_{j}"] = pa.array(v > 2)
        pq.write_table(pa.table(cols), str(base / f"part-{f}.parquet"), row_group_size=400)
    return base


@pytest.mark.parametrize("batch_rows", [150, 16384])
@pytest.mark.parametrize("cells", [400, 1300, 1 << 17])
def test_chunks_side_by_side_are_the_batches(discrete_files, batch_rows, cells):
    """The chunks of row_group_batches, put side by side from each chunk at 0 on, are the
    batches it gives without chunks: whole row groups and pieces of them (evened units)
    in chunks, row groups larger than ``batch_rows`` batch by batch, one chunk each.
    read_fn types each chunk's columns under their own names."""
    paths = sorted(str(f) for f in discrete_files.glob("*.parquet"))
    units = tuple((i, g, pq.ParquetFile(f).metadata.row_group(g).num_rows, 0)
                  for i, f in enumerate(paths) for g in range(pq.ParquetFile(f).num_row_groups))
    columns = pq.ParquetFile(paths[0]).schema_arrow.names
    kinds = {c: "string" if c.startswith("s_") else "double" for c in columns}
    source = ParquetSource(tuple("file://" + f for f in paths), units, kinds).evened(3)
    asked = [pa.RecordBatch.from_pydict({"id": pa.array(range(len(source.units)), pa.int64())})]
    whole = list(row_group_batches(source, columns, batch_rows)(iter(asked)))
    got = list(row_group_batches(source, columns, batch_rows, chunk_cells=cells)(iter(asked)))
    if batch_rows < 400:  # every row group is read batch by batch
        assert all(at == 0 and rb.num_columns == len(columns) for at, rb in got)
    else:
        per = max(1, cells // 400)  # features a chunk of a 400-row group holds
        assert len(got) == len(whole) * -(-(len(columns) - 1) // per)
    joined: list[list[pa.Array]] = []
    for at, rb in got:
        if at == 0:
            joined.append([rb.column(0)])
        assert rb.schema.names == [columns[0], *columns[1 + at:at + rb.num_columns]]
        assert len(joined[-1]) == 1 + at and rb.num_rows == len(joined[-1][0])
        joined[-1].extend(rb.columns[1:])
    assert len(joined) == len(whole)
    for cols, rb in zip(joined, whole):
        assert pa.RecordBatch.from_arrays(cols, names=columns).equals(rb)
    if batch_rows < 400:
        return
    typed = list(read_fn(source, columns, cells)(iter(asked)))  # batches of 16,384 rows
    plain = list(read_fn(source, columns)(iter(asked)))
    assert len(typed) == len(got) and len(plain) == len(whole)
    for (at, rb), (_, raw) in zip(typed, got):
        assert rb.schema.names == ["_c0", *(f"_c{1 + at + j}" for j in range(rb.num_columns - 1))]
        assert rb.num_rows == raw.num_rows
    first = [rb for at, rb in typed if at == 0]
    assert [rb.column(0) for rb in first] == [rb.column(0) for rb in plain]


def _as_spark_reads(df, source, kw):
    """The run of ``source`` (pyarrow) after asserting it has the Spark reader's plan,
    selection and scores (both warn: the null labels are dropped)."""
    with pytest.warns(UserWarning):
        ref = run_selection(df, "label", reader="spark", **kw)
    with pytest.warns(UserWarning):
        fast = run_selection(df, "label", source=source, **kw)
    assert fast.report()["reader"] == "pyarrow"
    assert fast.plan.to_json() == ref.plan.to_json()
    assert (fast.selection.selected, fast.selection.scores) == (ref.selection.selected,
                                                                ref.selection.scores)
    return ref


@pytest.mark.parametrize("handle_invalid", ["keep", "skip"])
def test_column_chunks_select_what_the_spark_reader_selects(spark, discrete_files, set_limits,
                                                            handle_invalid):
    """Chunks of 1,200 cells (three columns of a 400-row group) in the statistics pass and
    the encoder: the Spark reader's plan, selection and scores."""
    set_limits(read_cells=1200)
    df = spark.read.parquet(str(discrete_files))
    source = parquet_source(df, df.columns)
    assert source is not None
    kw = dict(method="vmi_naive", num_features=5, max_categories=8,
              handle_invalid=handle_invalid)
    ref = _as_spark_reads(df, source, kw)
    kinds = {c.name: c for c in ref.plan.columns}
    assert kinds["i8_0"].values == [0.0, 1.0, 2.0, 3.0]
    assert kinds["i8_0"].missing == (handle_invalid == "keep")  # else its rows are skipped
    assert kinds["s_2"].values == list("abcdef") and kinds["i32_1"].values == [
        float(v) for v in range(6)]


def test_columns_sure_to_be_binned_are_found_chunk_by_chunk(discrete_files, monkeypatch):
    """The driver's look at a first batch (which numeric columns have more than
    maxCategories values whatever the other rows hold) reads it a chunk at a time: the
    columns a plain count of the first 400-row group finds, for chunks of 1 to all
    columns; the rows after the first batch are not read."""
    paths = sorted(str(f) for f in discrete_files.glob("*.parquet"))
    names = pq.ParquetFile(paths[0]).schema_arrow.names
    kinds = {c: "string" if c.startswith("s_") else "double" for c in names}
    units = tuple((i, g, 400, 0) for i in range(len(paths)) for g in range(3))
    source = ParquetSource(tuple("file://" + f for f in paths), units, kinds)
    first = pq.ParquetFile(paths[0]).read_row_group(0).to_pydict()
    pulled: list[int] = []  # the chunks read, by their first feature
    real = ParquetReader.read_chunks

    def counted(self, cols):
        read = real(self, cols)

        def chunks(it):
            for at, rb in read(it):
                pulled.append(at)
                yield at, rb
        return chunks
    monkeypatch.setattr(ParquetReader, "read_chunks", counted)
    monkeypatch.setattr(ParquetReader, "few_values", lambda self, cols, most: set())
    features = [c for c in names if c != "label"]
    for cap in (1, 2, 4, 5):
        want = [c for c in features if kinds[c] == "double"
                and len({float(v) for v, y in zip(first[c], first["label"])
                         if v is not None and y is not None}) > cap]
        assert want  # something to find, and not everything
        assert len(want) < sum(kinds[c] == "double" for c in features) or cap == 1
        for cells in (400, 2000, 1 << 17):
            reader = ParquetReader(None, source, 2, presample=(10, "quantile"))
            reader.chunk_cells = cells
            pulled.clear()
            assert reader._sure_binned("label", features, cap) == want, (cap, cells)
            numeric = sum(kinds[c] == "double" for c in features)
            assert pulled == list(range(0, numeric, max(1, cells // 400)))  # no more
    # a row group of two batches: the second is not read
    big = discrete_files.parent / "big.parquet"
    rng = np.random.default_rng(2)
    pq.write_table(pa.table({"label": pa.array(rng.integers(0, 2, 20_000)),
                             "x": pa.array(rng.integers(0, 9, 20_000))}), str(big))
    source = ParquetSource(("file://" + str(big),), ((0, 0, 20_000, 0),),
                           {"label": "double", "x": "double"})
    pulled.clear()
    assert ParquetReader(None, source, 2, presample=(10, "quantile"))._sure_binned(
        "label", ["x"], 8) == ["x"]
    assert pulled == [0]


def test_footer_statistics_spare_the_driver_reading_few_valued_columns(discrete_files, tmp_path):
    """few_values: the integer and boolean columns whose first row group spans at most
    ``most`` integers, by the footer; computed here from the values themselves. A file
    written without statistics gives none."""
    paths = sorted(str(f) for f in discrete_files.glob("*.parquet"))
    table = pq.ParquetFile(paths[0]).read_row_group(0)
    kinds = {c: "string" if c.startswith("s_") else "double" for c in table.column_names}
    units = ((0, 0, 400, 0), (0, 1, 400, 0))
    features = [c for c in table.column_names if c != "label"]
    for most in (2, 4, 6):
        want = set()
        for c in features:
            if c.startswith("s_"):
                continue
            v = [int(x) for x in table.column(c).to_pylist() if x is not None]
            if max(v) - min(v) + 1 <= most:
                want.add(c)
        reader = ParquetReader(None, ParquetSource(("file://" + paths[0],), units, kinds), 2)
        assert reader.few_values(features, most) == want
        assert want or most == 2
    bare = tmp_path / "bare.parquet"
    pq.write_table(table, str(bare), row_group_size=400, write_statistics=False)
    reader = ParquetReader(None, ParquetSource(("file://" + str(bare),), units, kinds), 2)
    assert reader.few_values(features, 6) == set()


@pytest.mark.parametrize("hint", ["honest", "wrong"])
def test_a_wrong_footer_hint_costs_time_not_results(spark, discrete_files, monkeypatch, hint):
    """At maxCategories 4 the 6-valued integer columns are binned (the statistics pass
    samples them). A footer hint that calls every column few-valued (as wrong statistics
    would) only loses that sample: the Spark reader's plan, selection and scores."""
    if hint == "wrong":
        monkeypatch.setattr(ParquetReader, "few_values", lambda self, cols, most: set(cols))
    sure: list[list[str]] = []
    real = ParquetReader._sure_binned
    monkeypatch.setattr(ParquetReader, "_sure_binned",
                        lambda self, *a: sure.append(real(self, *a)) or sure[-1])
    df = spark.read.parquet(str(discrete_files))
    source = parquet_source(df, df.columns)
    features = [c for c in df.columns if c != "label" and not c.startswith("s_")]
    kw = dict(method="vmi_naive", num_features=5, max_categories=4, num_bins=3,
              features=features)  # the 6 strings of s_ would be refused at 4
    ref = _as_spark_reads(df, source, kw)
    assert {c.name: c.kind for c in ref.plan.columns}["i32_1"] == "bins"
    assert ("i32_1" in sure[0]) == (hint == "honest")  # the sample in the statistics pass


def test_distinct_values_past_the_cap_in_a_first_stretch_of_rows(monkeypatch):
    """A column whose first values already pass the cap is capped without counting the
    rest; one that passes it later, or holds -0.0 and 0.0 (one value) at the edge of the
    cap, is counted in full. All as the slow count says, for batches of 700 and 800 rows."""
    from vmi_spark.core import rows

    counted: list[pa.Array] = []
    unique = rows.pc.unique
    monkeypatch.setattr(rows.pc, "unique", lambda arr: counted.append(arr) or unique(arr))

    cap, n = 64, 1500
    prefix = rows._DISTINCT_PREFIX
    assert prefix + 100 < n
    rng = np.random.default_rng(3)
    at_end = np.concatenate([rng.integers(0, 10, prefix).astype(float),
                             np.arange(100.0, 100.0 + n - prefix)])
    edge = np.resize(np.concatenate([np.arange(1.0, 64.0), [-0.0, 0.0]]), n)  # 64 values
    over = np.resize(np.concatenate([np.arange(1.0, 65.0), [-0.0, 0.0]]), n)  # 65 values
    label = pa.array(rng.integers(0, 2, n).astype(float))
    holes = rng.standard_normal(n)
    holes[::10] = np.nan  # missing: counted through a mask of the other rows (630, 720)
    cols = {"continuous": holes, "late": at_end, "edge": edge,
            "edge_over": over, "few": rng.integers(0, 5, n).astype(float),
            "words": np.array([f"w{v}" for v in rng.integers(0, 70, n)], dtype=object)}
    rb = pa.RecordBatch.from_arrays([label, *(pa.array(v) for v in cols.values())],
                                    names=["y", *cols])
    batches = [rb.slice(0, 700), rb.slice(700)]
    stats = R.ColumnStats(len(cols), cap, 10, False)
    for b in batches:
        stats.add(b)
    got = _stats_of(stats)["values"]
    assert got == _slow_stats(batches, cap)["values"]
    assert [v is None for v in got] == [True, True, False, True, False, True]
    whole = [a for a in counted if len(a) in (700, 800)]
    assert len(whole) == 7  # the label twice, late, edge and few, then edge and few
    for name in ("continuous", "edge_over", "words"):  # capped in their first 512 values
        assert not any(a.equals(b.column(name)) for a in whole for b in batches)
