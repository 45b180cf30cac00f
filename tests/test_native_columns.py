"""Numeric features are read in their own Arrow type, not copied to float64 first.

Both readers pass a numeric feature on as read (:func:`vmi_spark.core.rows.feature_array`:
8-, 16- and 32-bit integers, float32, float64), and the statistics, the sample and the
encoder read its values as doubles themselves. What they compute must be what they
computed on the float64 copy with -0.0 as 0.0 (:func:`~vmi_spark.core.rows.typed_array`):

* the codes against a plain per-value loop written here, for every native type, with
  nulls, NaN, -0.0, values off the categories, few and many split points or
  categories, integer categories in a narrow and a wide range;
* the column statistics of a native batch against those of the typed batch;
* through Spark, both readers: the plan, selection and scores of native columns equal
  those computed with every column typed first (the code before this change).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vmi_spark.core import rows as R
from vmi_spark.core.encoding import ColumnPlan, encode_column

NATIVE = [pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32(),
          pa.float32(), pa.float64()]


def reference_codes(values: list, col: ColumnPlan) -> list[int]:
    """The code rule, one value at a time, in plain Python."""
    miss = col.num_states - 1
    out = []
    for x in values:
        v = None if x is None else float(x)
        if v is None or math.isnan(v):
            out.append(miss if col.missing else 0)
        elif col.kind == "constant":
            out.append(0)
        elif col.kind == "bins":
            out.append(sum(1 for s in col.splits if s <= v))
        else:
            hit = [i for i, c in enumerate(col.values) if c == v]  # -0.0 == 0.0
            out.append(hit[0] if hit else (miss if col.missing else 0))
    return out


def _values(rng, typ: pa.DataType, n: int) -> list:
    if pa.types.is_floating(typ):
        pool = [0.0, -0.0, 1.0, 2.5, -3.0, 7.0, 4096.0, 1e6, float("nan"), -1e-3, 0.1]
        v = [pool[i] for i in rng.integers(0, len(pool), n)] + list(rng.normal(0, 3, n))
        if typ == pa.float32():
            v = [float(np.float32(x)) for x in v]
    else:
        info = np.iinfo(typ.to_pandas_dtype())
        lo, hi = max(info.min, -20), min(info.max, 20)
        v = list(rng.integers(lo, hi + 1, n)) + [info.min, info.max, 0]
    v = [int(x) if not pa.types.is_floating(typ) else x for x in v]
    return [None if rng.random() < 0.05 else x for x in v]


def _plans(rng) -> list[ColumnPlan]:
    many = sorted(set(np.round(rng.normal(0, 4, 40), 1).tolist()))
    return [
        ColumnPlan("few bins", "bins", splits=[-1.0, 0.0, 2.5, 7.0], missing=True),
        ColumnPlan("many bins", "bins", splits=many, missing=True),
        ColumnPlan("bins, no missing state", "bins", splits=[0.0, 1.0]),
        ColumnPlan("narrow integers", "category", values=[-3.0, 0.0, 1.0, 7.0], missing=True),
        ColumnPlan("wide integers", "category", values=[-3.0, 0.0, 4096.0, 1e6], missing=True),
        ColumnPlan("fractions", "category", values=[-3.0, 0.0, 0.1, 2.5], missing=True),
        ColumnPlan("many categories", "category", values=[float(i) for i in range(-10, 30)],
                   missing=True),
        ColumnPlan("categories, no missing state", "category", values=[1.0, 2.0]),
        ColumnPlan("constant", "constant", missing=True),
    ]


@pytest.mark.parametrize("typ", NATIVE, ids=str)
def test_codes_of_native_columns_follow_the_rule(typ):
    rng = np.random.default_rng(hash(str(typ)) % 1000)
    values = _values(rng, typ, 400)
    arr = pa.array(values, type=typ, from_pandas=True)
    for col in _plans(rng):
        want = reference_codes(arr.to_pylist(), col)
        assert encode_column(arr, col).tolist() == want, col.name
        # and the typed float64 copy gives the same codes
        assert encode_column(R.typed_array(arr, "double"), col).tolist() == want, col.name


def test_native_types_are_passed_on_as_read():
    for typ in NATIVE:
        arr = pa.array([1, None, 3], type=typ)
        assert R.feature_array(arr, "double") is arr
    # 64-bit integers (two can round to one double), booleans and strings are typed
    assert R.feature_array(pa.array([2**53 + 1], pa.int64()), "double").type == pa.float64()
    assert R.feature_array(pa.array([True, False]), "double").to_pylist() == [1.0, 0.0]
    assert R.feature_array(pa.array(["a"]), "string").type == pa.string()


def _stats(batches, d, cap=6):
    out = [json.loads(rb.column(0)[0].as_py())
           for rb in R.column_stats_fn(d, cap, 50, False)(iter(batches))]
    merged = R.merge_stats(out, d, cap, 50)
    merged["values"] = [None if v is None else sorted(v) for v in merged["values"]]
    merged["classes"] = sorted(merged["classes"])
    return merged


def test_statistics_of_native_columns_equal_the_typed_ones():
    """-0.0 and 0.0 are one value: a column of 6 values as doubles is categorical at
    maxCategories 6, though Arrow sees 7; values come out as doubles, never as ints."""
    rng = np.random.default_rng(3)
    n = 300
    f32 = np.array([-0.0, 0.0, 1.5, 2.0, 3.0, 4.0, 5.0], np.float32)[rng.integers(0, 7, n)]
    f32[:5] = np.nan
    cols = {
        "label": pa.array(rng.integers(0, 3, n).astype(np.float64)),
        "f32": pa.array(f32),
        "i8": pa.array(rng.integers(-2, 3, n).astype(np.int8), mask=rng.random(n) < 0.1),
        "i16 wide": pa.array(rng.integers(-500, 500, n).astype(np.int16)),
        "u32": pa.array(rng.integers(0, 4, n).astype(np.uint32)),
    }
    native = [pa.RecordBatch.from_arrays(
        [R.typed_array(a.slice(s, 100), "double") if i == 0 else a.slice(s, 100)
         for i, a in enumerate(cols.values())], names=list(cols)) for s in (0, 100, 200)]
    typed = [pa.RecordBatch.from_arrays(
        [R.typed_array(c, "double") for c in rb.columns], names=list(cols)) for rb in native]
    got, want = _stats(native, 4), _stats(typed, 4)
    assert got == want
    assert got["values"][0] == [0.0, 1.5, 2.0, 3.0, 4.0, 5.0]
    assert all(isinstance(x, float) for x in got["values"][1])
    assert got["values"][2] is None and got["missing"][:2] == [5, int(
        (~cols["i8"].is_valid().to_numpy(zero_copy_only=False)).sum())]


@pytest.fixture(scope="module")
def native_files(tmp_path_factory):
    """Parquet with a column of every native type Spark reads back the same: int8, int16,
    int32, float32 and float64, with nulls, NaN and -0.0, categories and bins."""
    base = tmp_path_factory.mktemp("native") / "t"
    base.mkdir()
    rng = np.random.default_rng(5)
    for f in range(2):
        n = 1800
        y = rng.integers(0, 3, n)
        f32 = (rng.standard_normal(n) + y).astype(np.float32)
        f32[:10], f32[10:30] = np.nan, -0.0
        zeros = np.where(rng.random(n) < 0.5, -0.0, 0.0) + (y == 1) * rng.integers(0, 3, n)
        table = pa.table({
            "label": pa.array(y.astype(np.int32)),
            "f32": pa.array(f32),
            "f64 signed zeros": pa.array(zeros),
            "f64 wide integers": pa.array(np.array([0.0, 4096.0, 1e6])[(y + rng.integers(0, 2, n)) % 3]),
            "i8": pa.array((y + rng.integers(-2, 2, n)).astype(np.int8), mask=rng.random(n) < 0.03),
            "i16 bins": pa.array((rng.integers(-900, 900, n) + 300 * y).astype(np.int16)),
            "i32": pa.array(rng.integers(0, 5, n).astype(np.int32)),
        })
        pq.write_table(table, str(base / f"part-{f}.parquet"), row_group_size=700)
    return base


@pytest.mark.parametrize("reader", ["parquet", "spark"])
def test_native_columns_select_what_typed_columns_select(spark, native_files, monkeypatch,
                                                         set_limits, reader):
    from vmi_spark.spark.select import run_selection
    from vmi_spark.spark.sources import arrow_source, spark_source
    from vmi_spark.spark.sources.arrow_source import parquet_source

    set_limits(sample_rows=2000)  # the hashed sample too
    df = spark.read.parquet(str(native_files))

    def run():
        source = parquet_source(df, df.columns) if reader == "parquet" else None
        if reader == "parquet":
            assert source is not None
        return run_selection(df, "label", method="vmi_pairwise", num_features=5, num_bins=20,
                             max_categories=8, source=source, reader="spark")

    native = run()
    with monkeypatch.context() as m:  # every column typed to float64 first, as before
        m.setattr(arrow_source, "feature_array", R.typed_array)
        m.setattr(spark_source, "feature_array", R.typed_array)
        typed = run()
    assert native.plan.to_json() == typed.plan.to_json()
    assert native.selection.selected == typed.selection.selected
    assert native.selection.scores == typed.selection.scores
    kinds = {c.name: c for c in native.plan.columns}
    assert kinds["f32"].kind == "bins" and kinds["f32"].missing
    assert len(kinds["f32"].splits) > 16  # the binary-search path of the encoder
    assert kinds["i16 bins"].kind == "bins"
    assert kinds["f64 signed zeros"].values == [0.0, 1.0, 2.0]
    assert "-0.0" not in native.plan.to_json()
    assert kinds["f64 wide integers"].values == [0.0, 4096.0, 1e6]
    assert kinds["i8"].kind == "category" and kinds["i8"].missing


@pytest.mark.parametrize("nulls", [0.1, 0.0], ids=["nulls", "no-nulls"])
@pytest.mark.parametrize("typ", [*NATIVE, pa.int64(), pa.string()], ids=str)
def test_sample_hash_of_native_columns_is_spark_hash_of_doubles(typ, nulls):
    """:func:`~vmi_spark.spark.sources.sparkhash.hash_column` (compiled with numba here) gives the
    numpy :func:`~vmi_spark.spark.sources.sparkhash.hash_doubles` of the typed column (which
    ``tests/test_arrow_source.py`` checks against Spark's own ``xxhash64``), with and
    without nulls (the compiled loop's two ways through)."""
    from vmi_spark.spark.sources import sparkhash as H

    rng = np.random.default_rng(11)
    n = 3000
    if typ == pa.string():
        arr = pa.array([None if rng.random() < nulls else f"s{rng.integers(0, 50)}"
                        for _ in range(n)])
    elif pa.types.is_floating(typ):
        v = rng.normal(0, 1e3, n)
        v[:30], v[30:60], v[60:70], v[70:80] = np.nan, -0.0, np.inf, -np.inf
        arr = pa.array(v.astype(typ.to_pandas_dtype()), mask=rng.random(n) < nulls)
    else:
        info = np.iinfo(typ.to_pandas_dtype())
        arr = pa.array(rng.integers(info.min, info.max, n, dtype=typ.to_pandas_dtype()),
                       mask=rng.random(n) < nulls)
    assert (arr.null_count > 0) == (nulls > 0)
    seed = rng.integers(0, 2**63, n).astype(np.uint64)
    got = H.hash_column(arr, seed)
    if typ == pa.string():
        want = H.hash_strings(arr.to_pylist(), seed)
    else:
        typed = R.typed_array(arr, "double")
        want = H.hash_doubles(typed.to_numpy(zero_copy_only=False),
                              typed.is_valid().to_numpy(zero_copy_only=False), seed)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("types", [
    [pa.float32(), pa.int8(), pa.uint16()],    # every value a float32 by its type
    [pa.float32(), pa.float64(), pa.int32()],  # float32 values in wider types: checked
    [pa.float64(), pa.float32()],              # a double that is no float32
], ids=["narrow-types", "narrow-values", "wide"])
def test_sampled_chunks_are_sent_as_float32_exactly_when_every_value_is_one(types):
    """The bin-edge sample (``arrow_source._Sampler``) sends a chunk of columns as float32
    exactly when every value is a float32 (known from narrow types without looking, else
    by comparing), and the values it sends are the doubles of the rows either way."""
    from vmi_spark.spark.sources.arrow_source import _Sampler

    rng = np.random.default_rng(5)
    n = 257
    cols = []
    for k, typ in enumerate(types):
        v = np.round(rng.normal(0, 50, n), 1 if typ == pa.float64() and k == 0 else 0)
        v[:3] = [np.nan, -0.0, 0.0] if pa.types.is_floating(typ) else [1, 0, 0]
        cols.append(pa.array(v.astype(typ.to_pandas_dtype())))
    batches = [pa.RecordBatch.from_arrays([pa.array(np.arange(m - lo) % 2, pa.int32()),
                                           *(c.slice(lo, m - lo) for c in cols)],
                                          names=[f"_c{j}" for j in range(1 + len(cols))])
               for lo, m in ((0, 100), (100, n))]
    sampler = _Sampler(len(cols), 1 + len(cols), None, False, None, [list(range(len(cols)))])
    for rb in batches:
        sampler.add(rb)
    (row,) = list(sampler.rows())
    mat = np.stack([c.to_numpy(zero_copy_only=False).astype(np.float64) + 0.0 for c in cols])
    as32 = mat.astype(np.float32).astype(np.float64)
    want_narrow = bool(np.all((as32 == mat) | (np.isnan(as32) & np.isnan(mat))))
    assert want_narrow == (types != [pa.float64(), pa.float32()])
    assert row.column("narrow").to_pylist() == [want_narrow]
    got = np.frombuffer(row.column("values")[0].as_py(),
                        dtype=np.float32 if want_narrow else np.float64)
    np.testing.assert_array_equal(got.astype(np.float64).reshape(mat.shape), mat)
