"""The Parquet fast path (pyarrow in the workers) gives what Spark's reader gives.

The plan (categories, bin edges, missing states, dropped rows), the selection and the
scores must be identical, also when the bin edges come from the hashed sample, which
needs Spark's ``xxhash64`` reproduced bit for bit (checked here against Spark itself).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from vmi_spark.job import main
from vmi_spark.spark.select import run_selection
from vmi_spark.spark.sources import sparkhash
from vmi_spark.spark.sources.arrow_source import ParquetSource, parquet_source, row_group_batches


def test_xxhash64_matches_spark(spark):
    rng = np.random.default_rng(0)
    n = 400
    a = rng.standard_normal(n)
    a[:7] = [0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, -1.5e308]
    b = rng.integers(0, 5, n).astype(float)
    b_valid = rng.random(n) > 0.2
    # lengths 0..70 cover every branch of XXH64 over bytes (32-byte stripes, words, tail)
    words = ["x" * k for k in range(71)] + ["ünï", "çødé" * 9, None]
    s = [words[i % len(words)] for i in range(n)]
    rows = [(s[i], float(a[i]), float(b[i]) if b_valid[i] else None) for i in range(n)]
    df = spark.createDataFrame(rows, "s string, a double, b double")
    want = np.array([r[0] for r in df.select(F.xxhash64("s", "a", "b")).collect()],
                    dtype=np.int64).view(np.uint64)
    h = sparkhash.hash_strings(s, np.full(n, sparkhash.SEED, dtype=np.uint64))
    h = sparkhash.hash_doubles(a, None, h)
    h = sparkhash.hash_doubles(np.where(b_valid, b, np.nan), b_valid, h)
    np.testing.assert_array_equal(h, want)
    # the sample rule: pmod(xxhash64(...), 2^30) < threshold
    pm = np.array([r[0] for r in df.select(F.pmod(F.xxhash64("a"), F.lit(1 << 30))).collect()])
    mine = sparkhash.hash_doubles(a, None, np.full(n, sparkhash.SEED, dtype=np.uint64))
    np.testing.assert_array_equal(sparkhash.in_sample(mine, 1 << 29, 1 << 30), pm < (1 << 29))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Three Parquet files, several row groups each, with every kind of column and value
    the typing has to get right: float32 with NaN and -0.0, nullable int64, strings with
    nulls, float64, booleans, and a string label with nulls."""
    base = tmp_path_factory.mktemp("arrow") / "t"
    base.mkdir()
    rng = np.random.default_rng(1)
    for f in range(3):
        n = 1500 + 250 * f
        y = rng.integers(0, 3, n)
        a = (rng.standard_normal(n) + y).astype(np.float32)
        a[:10], a[10:20] = np.nan, -0.0
        b = rng.integers(-3, 4, n).astype(np.int64)
        c = np.array(["u", "v", "w", "ü"], dtype=object)[(y + rng.integers(0, 2, n)) % 4]
        c[5:9] = None
        e = rng.standard_normal(n) * 2 + (y == 1)
        lab = np.array(["no", "yes", "maybe"], dtype=object)[y]
        lab[:3] = None
        table = pa.table({
            "label": pa.array(lab, pa.string()), "a": pa.array(a),
            "b": pa.array(b, mask=rng.random(n) < 0.02), "c": pa.array(c, pa.string()),
            "e": pa.array(e), "flag": pa.array(rng.random(n) < 0.3 + 0.2 * (y == 2))})
        pq.write_table(table, str(base / f"part-{f}.parquet"), row_group_size=600)
    return base


@pytest.mark.parametrize("batch_rows", [250, 600, 16384])
def test_row_group_batches_are_the_files_rows_in_the_asked_order(files, batch_rows):
    """Whole row groups (``read_row_group``, groups of at most ``batch_rows`` rows) and
    row groups read batch by batch give the rows pyarrow's own reader gives, in the order
    of the units and with the columns in the order asked for (not as stored)."""
    paths = sorted(str(f) for f in files.glob("*.parquet"))
    units = tuple((i, g, pq.ParquetFile(f).metadata.row_group(g).num_rows, 0)
                  for i, f in enumerate(paths) for g in range(pq.ParquetFile(f).num_row_groups))
    columns = ["e", "label", "c", "a"]
    source = ParquetSource(tuple("file://" + f for f in paths), units,
                           dict.fromkeys(columns, "double"))
    # a task's units: the second half, then the first (the order asked for is kept)
    order = list(range(len(units) // 2, len(units))) + list(range(len(units) // 2))
    asked = pa.RecordBatch.from_pydict({"id": pa.array(order, pa.int64())})
    got = list(row_group_batches(source, columns, batch_rows)(iter([asked])))
    assert all(rb.schema.names == columns and rb.num_rows <= batch_rows for rb in got)
    groups = [pq.ParquetFile(paths[units[u][0]]).read_row_group(units[u][1]) for u in order]
    want = pa.concat_tables(groups).select(columns)
    got_table = pa.Table.from_batches(got)
    assert got_table.schema == want.schema
    # NaN is not equal to itself in Table.equals: compare the frames (NaN matches NaN)
    pd.testing.assert_frame_equal(got_table.to_pandas(), want.to_pandas(), check_exact=True)
    assert len(got) == sum(-(-units[u][2] // batch_rows) for u in order)


def _rows_of(units) -> list[tuple[int, int, int]]:
    """Every row of ``units`` as (file, row group, row in the group), slowly."""
    out = []
    for f, g, rows, first in units:
        out += [(f, g, first + r) for r in range(rows)]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_evened_units_are_equal_runs_of_the_same_rows(seed):
    """ParquetSource.evened against a row-by-row split: the units of each of ``parts``
    runs (spark.range's contiguous ranges) hold the rows ``total * p // parts`` to
    ``total * (p + 1) // parts`` in order; padding units are empty."""
    rng = np.random.default_rng(seed)
    units = tuple((int(f), int(g), int(rng.integers(0, 50)), 0)
                  for f in range(int(rng.integers(1, 4)))
                  for g in range(int(rng.integers(1, 5))))
    units = tuple(u for u in units if u[2] > 0) or ((0, 0, 7, 0),)
    parts = int(rng.integers(1, 7))
    source = ParquetSource(("a", "b", "c"), units, {})
    even = source.evened(parts)
    assert even.num_rows == source.num_rows
    rows = _rows_of(units)
    n = len(even.units)
    assert n % parts == 0
    for p in range(parts):  # spark.range(0, n, 1, parts): ids [p * n // parts, ...)
        run = even.units[p * n // parts:(p + 1) * n // parts]
        total = len(rows)
        assert _rows_of(run) == rows[total * p // parts:total * (p + 1) // parts]
    assert _rows_of(even.evened(parts).units) == rows  # pieces can be evened again


@pytest.mark.parametrize("batch_rows", [250, 16384])
def test_pieces_of_row_groups_read_their_own_rows(files, batch_rows):
    """The evened units read back (whole groups and pieces, by read_row_group or batch
    by batch) are the files' rows in order, each task's share exactly once."""
    paths = sorted(str(f) for f in files.glob("*.parquet"))
    units = tuple((i, g, pq.ParquetFile(f).metadata.row_group(g).num_rows, 0)
                  for i, f in enumerate(paths) for g in range(pq.ParquetFile(f).num_row_groups))
    source = ParquetSource(tuple("file://" + f for f in paths), units, {})
    want = pa.concat_tables([pq.read_table(f) for f in paths]).select(["label", "e"])
    for parts in (2, 3, 7):
        even = source.evened(parts)
        read = row_group_batches(even, ["label", "e"], batch_rows)
        n = len(even.units)
        got = [rb for p in range(parts) for rb in read(iter([pa.RecordBatch.from_pydict(
            {"id": pa.array(range(p * n // parts, (p + 1) * n // parts), pa.int64())})]))]
        assert all(0 < rb.num_rows <= batch_rows for rb in got)
        pd.testing.assert_frame_equal(pa.Table.from_batches(got).to_pandas(),
                                      want.to_pandas(), check_exact=True)


@pytest.mark.parametrize("handle_invalid", ["keep", "skip"])
@pytest.mark.parametrize("sample_rows", [None, 1500])
def test_same_plan_selection_and_scores_as_spark(spark, files, set_limits, handle_invalid,
                                                 sample_rows):
    if sample_rows is not None:  # bin edges from the hashed sample, not all rows
        set_limits(sample_rows=sample_rows)
    df = spark.read.parquet(str(files))
    source = parquet_source(df, df.columns)
    assert source is not None and len(source.files) == 3 and len(source.units) == 10
    kw = dict(method="vmi_pairwise", num_features=4, num_bins=6, handle_invalid=handle_invalid)
    with pytest.warns(UserWarning):  # null labels dropped (and rows skipped)
        ref = run_selection(df, "label", reader="spark", **kw)
    with pytest.warns(UserWarning):
        fast = run_selection(df, "label", source=source, **kw)
    assert fast.plan.to_json() == ref.plan.to_json()
    assert fast.selection.selected == ref.selection.selected
    assert fast.selection.scores == ref.selection.scores
    # the plan is not trivial: bins with edges, categories, a missing state, dropped rows
    kinds = {c.name: c for c in ref.plan.columns}
    assert kinds["a"].kind == "bins" and len(kinds["a"].splits) == 5
    assert kinds["c"].values == ["u", "v", "w", "ü"]
    assert ref.plan.rows_dropped == 9
    if handle_invalid == "keep":
        assert kinds["a"].missing and kinds["b"].missing
    else:
        assert ref.plan.rows_skipped > 0


def test_sample_keeps_the_rows_spark_keeps(spark, files, set_limits):
    """The sampled split points differ from the full-data ones, and equal Spark's."""
    df = spark.read.parquet(str(files))
    source = parquet_source(df, df.columns)
    full = run_selection(df, "label", num_features=1, num_bins=7, source=source)
    set_limits(sample_rows=1200)
    # reader="spark" reads with Spark, also with the files named
    spark_sample = run_selection(df, "label", num_features=1, num_bins=7, reader="spark",
                                 source=source)
    arrow_sample = run_selection(df, "label", num_features=1, num_bins=7, source=source)
    assert spark_sample.report()["reader"] == "spark"
    assert arrow_sample.report()["reader"] == full.report()["reader"] == "pyarrow"
    edges = {r: {c.name: c.splits for c in x.plan.columns if c.kind == "bins"}
             for r, x in (("full", full), ("spark", spark_sample), ("arrow", arrow_sample))}
    assert edges["arrow"] == edges["spark"]
    assert edges["arrow"] != edges["full"]


def test_not_a_plain_parquet_scan_uses_spark(spark, tmp_path):
    from decimal import Decimal

    local = spark.createDataFrame([(0, 1.0), (1, 2.0)], "y int, x double")
    assert parquet_source(local, ["y", "x"]) is None  # no files behind it
    pq.write_table(pa.table({"y": pa.array([0, 1], pa.int32()),
                             "x": pa.array([Decimal("1.5"), Decimal("2.5")], pa.decimal128(5, 2))}),
                   str(tmp_path / "d.parquet"))
    dec = spark.read.parquet(str(tmp_path / "d.parquet"))
    assert parquet_source(dec, ["y", "x"]) is None  # decimals: Spark's cast, not pyarrow's


def test_only_a_scan_or_a_projection_of_its_columns_is_read_with_pyarrow(spark, files):
    """Whatever changes the rows or values of the files (a filter, a sample, a limit, a
    computed or renamed column, a cache) keeps the Spark reader; a projection does not."""
    df = spark.read.parquet(str(files))
    assert parquet_source(df.select("label", "a", "c"), ["label", "a", "c"]) is not None
    assert parquet_source(df.drop("e"), ["label", "a"]) is not None
    changed = {"filter": df.where(F.col("b") > 0), "sample": df.sample(0.5, seed=1),
               "limit": df.limit(100), "computed": df.withColumn("a", F.col("a") + 1),
               "renamed": df.select("label", F.col("e").alias("a")),
               "distinct": df.dropDuplicates(), "union": df.unionByName(df),
               "cached": df.select("label", "a").cache()}
    for what, frame in changed.items():
        assert parquet_source(frame, ["label", "a"]) is None, what
    changed["cached"].unpersist()


@pytest.mark.parametrize("how", ["projection", "filter"])
def test_a_frame_of_the_files_selects_what_the_spark_reader_selects(spark, files, how):
    """``run_selection`` without ``source`` reads a projection of the files with pyarrow
    and a filtered frame with Spark, which then sees only the rows the filter keeps."""
    df = spark.read.parquet(str(files))
    frame = (df.select("label", "e", "a", "c") if how == "projection"
             else df.where(F.col("b") > 0))
    kw = dict(method="vmi_naive", num_features=3, features=["e", "a", "c"])
    with pytest.warns(UserWarning):
        auto = run_selection(frame, "label", **kw).report()
    with pytest.warns(UserWarning):
        ref = run_selection(frame, "label", reader="spark", **kw).report()
    assert auto["reader"] == ("pyarrow" if how == "projection" else "spark")
    assert ref["reader"] == "spark"
    kept = frame.where(F.col("label").isNotNull()).count()
    assert auto["num_rows"] == ref["num_rows"] == kept
    for key in ("selected", "scores", "columns"):
        assert auto[key] == ref[key]


def test_job_reads_parquet_with_pyarrow_and_matches_spark_reader(spark, files, tmp_path, capsys):
    reports = {}
    for reader in ("auto", "spark"):
        out = tmp_path / reader
        rc = main(["--input", str(files), "--label", "label", "--num-features", "3",
                   "--method", "vmi_naive", "--reader", reader, "--output", str(out)], spark=spark)
        assert rc == 0, capsys.readouterr()
        reports[reader] = json.loads((out / "selection.json").read_text())
    assert reports["auto"]["reader"] == "pyarrow" and reports["spark"]["reader"] == "spark"
    for key in ("selected", "scores", "columns", "num_rows", "rows_dropped"):
        assert reports["auto"][key] == reports["spark"][key]


def test_row_groups_are_cut_into_even_runs_without_a_shuffle(spark, files, monkeypatch):
    """Row groups are split evenly over the task slots, a straddling group cut in pieces,
    and encoded straight into the cache (no range shuffle), also when the groups are
    skewed; the Spark reader's chunks are spread by the shuffle. Same result either way."""
    import dataclasses

    from vmi_spark.spark import routes, select
    from vmi_spark.spark.sources.arrow_source import ParquetReader

    df = spark.read.parquet(str(files))
    source = parquet_source(df, df.columns)
    skewed = dataclasses.replace(source, units=(source.units[0], source.units[-1],
                                                source.units[1]))  # 600, 200, 600 rows
    even = ParquetReader(spark, skewed, 2).evened(2)
    assert [u[2] for u in even.source.units] == [600, 100, 100, 600]  # 700 rows a task
    assert even.frame(2).rdd.getNumPartitions() == 2
    calls = []
    original = routes.keep_chunks
    monkeypatch.setattr(routes, "keep_chunks",
                        lambda *a, **k: calls.append(1) or original(*a, **k))
    kw = dict(method="vmi_naive", num_features=4, execution="resident")
    with pytest.warns(UserWarning):
        fast = select.run_selection(df, "label", source=source, **kw)
    assert calls == []  # no shuffle
    with pytest.warns(UserWarning):
        ref = select.run_selection(df, "label", reader="spark", **kw)
    assert calls == [1]  # the Spark reader: encoded, then spread by the shuffle
    assert fast.selection.selected == ref.selection.selected
    assert fast.selection.scores == ref.selection.scores


def test_chunks_larger_than_the_cache_share_go_to_disk(set_limits, spark, files, monkeypatch):
    """Encoded rows above CACHE_SHARE of a block manager's cache memory are cached on disk
    (the default 1g driver ran out of heap on 5M x 100 otherwise); the result is the same.
    Chunks hold at most CHUNK_BYTES."""
    from pyspark import StorageLevel

    from vmi_spark.spark import routes, select
    from vmi_spark.spark.session import storage_memory

    assert storage_memory(spark) > 0
    df = spark.read.parquet(str(files))
    kw = dict(method="vmi_naive", num_features=3, execution="resident", reader="spark")
    with pytest.warns(UserWarning):
        ref = select.run_selection(df, "label", **kw)
    assert not any("cached on disk" in w for w in ref.warnings)
    levels = []
    original = routes.keep
    monkeypatch.setattr(routes, "keep", lambda df_, level, *a, **k: levels.append(level)
                        or original(df_, level, *a, **k))
    set_limits(cache_share=1e-9, chunk_bytes=2000)  # 2,000 bytes: 333 rows of 6 columns
    with pytest.warns(UserWarning):
        run = select.run_selection(df, "label", **kw)
    assert any("cached on disk" in w for w in run.warnings)
    assert levels and all(str(lv) == str(StorageLevel.DISK_ONLY) for lv in levels)
    assert run.selection.selected == ref.selection.selected
    assert run.selection.scores == ref.selection.scores


@pytest.fixture(scope="module")
def labelled_files(tmp_path_factory):
    """Every row labelled: the statistics pass can sample the rows for the bin edges. The
    column ``late`` has 3 values in the first file and many in the second."""
    base = tmp_path_factory.mktemp("presample") / "t"
    base.mkdir()
    rng = np.random.default_rng(4)
    for f in range(2):
        n = 1400
        y = rng.integers(0, 2, n)
        late = (rng.integers(0, 3, n) if f == 0 else rng.standard_normal(n) * 5) + y
        table = pa.table({
            "y": pa.array(y.astype(np.int64)),
            "f32": pa.array((rng.standard_normal(n) + y).astype(np.float32)),
            "f64": pa.array(rng.exponential(1.0, n) * (1 + y)),
            "i8": pa.array((rng.integers(0, 4, n) + y).astype(np.int8)),
            "late": pa.array(late.astype(np.float64)),
        })
        pq.write_table(table, str(base / f"part-{f}.parquet"), row_group_size=500)
    return base


@pytest.mark.parametrize("columns, presampled", [(["f32", "f64", "i8"], True),
                                                 (["f32", "f64", "i8", "late"], False)])
def test_statistics_pass_places_the_bin_edges_spark_places(spark, labelled_files, monkeypatch,
                                                           set_limits, columns, presampled):
    """The columns binned in a first batch are all the binned columns: the one pass gives
    Spark's plan (the hashed sample of 1,000 of 2,800 rows). ``late`` is binned only after
    its second file: a second pass, the same plan."""
    from vmi_spark.spark.sources import arrow_source

    set_limits(sample_rows=1000)
    df = spark.read.parquet(str(labelled_files)).select("y", *columns)
    path_df = spark.read.parquet(str(labelled_files))
    kw = dict(method="vmi_naive", num_features=3, num_bins=7, max_categories=8,
              features=columns)
    ref = run_selection(path_df, "y", reader="spark", **kw)
    calls = []
    real = arrow_source._quantile_splits
    monkeypatch.setattr(arrow_source, "_quantile_splits",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    fast = run_selection(path_df, "y", source=parquet_source(path_df, path_df.columns), **kw)
    assert fast.plan.to_json() == ref.plan.to_json()
    assert fast.selection.selected == ref.selection.selected
    assert fast.selection.scores == ref.selection.scores
    assert calls == ([] if presampled else [1])
    binned = [c.name for c in ref.plan.columns if c.kind == "bins"]
    assert binned == [c for c in columns if c != "i8"]
    assert df.count() == 2800
