"""Every column type a warehouse table has (issue 37, items 2-4).

Dates, timestamps (with and without a time zone) and intervals are ordered numeric
features: the Spark readers and the scikit-learn selector turn them into the same
numbers (days, microseconds, months), bin them like any numeric column and show their
edges as dates and times. Binary, array, map and struct columns are left out with a note
unless named. A string column with more values than ``maxCategories`` keeps its most
frequent values and one ``(other)`` state. Each is checked against an independent
computation written here (the numbers from Python's datetime, the counts by hand).
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest

from vmi_spark.errors import InputError

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1)


def _days(d: dt.date) -> int:
    return (d - dt.date(1970, 1, 1)).days


def _micros(t: dt.datetime) -> int:
    base = dt.datetime(1970, 1, 1, tzinfo=UTC) if t.tzinfo else EPOCH
    return (t - base) // dt.timedelta(microseconds=1)


@pytest.fixture(scope="module")
def warehouse(spark):
    """A warehouse-shaped table: the label depends on the signup date and the region."""
    from pyspark.sql import types as T

    rng = np.random.default_rng(37)
    n = 400
    signup = [dt.date(2019, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 1500, n)]
    seen = [dt.datetime(2024, 3, 10, tzinfo=UTC) + dt.timedelta(seconds=int(s))
            for s in rng.integers(-10**7, 10**7, n)]
    local = [dt.datetime(2021, 3, 14, 1, 0) + dt.timedelta(minutes=int(m))
             for m in rng.integers(0, 300, n)]
    wait = [dt.timedelta(seconds=int(s), microseconds=int(u))
            for s, u in zip(rng.integers(0, 10**6, n), rng.integers(0, 10**6, n))]
    region = [f"r{int(r):02d}" for r in rng.zipf(1.5, n) % 60]
    late = np.array([d > dt.date(2021, 1, 1) for d in signup])
    y = (late ^ (rng.random(n) < 0.1)).astype(int)
    rows = [(int(y[i]), signup[i], seen[i], local[i], wait[i], region[i], f"id{i:05d}",
             bytes([i % 7]), [i % 3], {"k": i % 2}, (i % 5,), float(rng.normal()))
            for i in range(n)]
    schema = T.StructType([
        T.StructField("y", T.IntegerType()), T.StructField("signup", T.DateType()),
        T.StructField("seen", T.TimestampType()), T.StructField("local", T.TimestampNTZType()),
        T.StructField("wait", T.DayTimeIntervalType()),
        T.StructField("region", T.StringType()), T.StructField("customer_id", T.StringType()),
        T.StructField("blob", T.BinaryType()), T.StructField("tags", T.ArrayType(T.LongType())),
        T.StructField("attrs", T.MapType(T.StringType(), T.LongType())),
        T.StructField("nested", T.StructType([T.StructField("a", T.LongType())])),
        T.StructField("noise", T.DoubleType())])
    df = spark.createDataFrame(rows, schema)
    pdf = pd.DataFrame({"signup": signup, "seen": seen, "local": local, "wait": wait,
                        "region": region, "customer_id": [r[6] for r in rows],
                        "noise": [r[11] for r in rows]})
    return df, pdf, y


def test_a_warehouse_table_runs_and_leaves_out_what_cannot_be_a_feature(spark, warehouse):
    from vmi_spark.spark.select import run_selection

    df, _, _ = warehouse
    with pytest.warns(UserWarning) as caught:
        run = run_selection(df, "y", num_features=3, execution="passes")
    rep = run.report()
    notes = " | ".join(str(w.message) for w in caught)
    for col, typ in (("blob", "binary"), ("tags", "array<bigint>"),
                     ("attrs", "map<string,bigint>"), ("nested", "struct<a:bigint>")):
        assert f"'{col}' ({typ})" in notes
        assert col not in rep["features"]
    assert rep["features"] == ["signup", "seen", "local", "wait", "region", "customer_id",
                               "noise"]
    assert rep["selected"][0] == "signup"
    assert "identifier: 'customer_id' has 400 distinct values in 400 rows" in notes
    # a value seen in fewer than 10 rows is not a state of its own: the ID is one state
    assert {c["name"]: c["states"] for c in rep["columns"]}["customer_id"] == 1
    cols = {c["name"]: c for c in rep["columns"]}
    assert cols["signup"]["unit"] == "days since 1970-01-01"
    assert cols["region"]["other"] is True and cols["region"]["state_names"][-1] == "(other)"
    # named, an unusable column is a one-line error naming it
    with pytest.raises(InputError, match="feature column 'blob' has unsupported type binary"):
        run_selection(df, "y", features=["signup", "blob"], num_features=1)


def test_temporal_edges_are_the_values_python_computes(spark, warehouse):
    """The binned temporal columns' edges are data values of the column in its unit
    (days, microseconds): each reads back, as a date or time, as one of the table's."""
    from vmi_spark.spark.select import run_selection

    df, pdf, _ = warehouse
    rep = run_selection(df, "y", features=["signup", "seen", "local", "wait"], num_features=1,
                        execution="passes").report()
    cols = {c["name"]: c for c in rep["columns"]}
    as_numbers = {"signup": {_days(d) for d in pdf["signup"]},
                  "seen": {_micros(t) for t in pdf["seen"]},
                  "local": {_micros(t) for t in pdf["local"]},
                  "wait": {w // dt.timedelta(microseconds=1) for w in pdf["wait"]}}
    for name, values in as_numbers.items():
        col = cols[name]
        assert col["kind"] == "bins" and len(col["edges"]) == 9, name
        assert {int(e) for e in col["edges"]} <= values, name
        assert all(float(e).is_integer() for e in col["edges"]), name
    shown = cols["signup"]["edges_shown"]
    assert [dt.date.fromisoformat(s) for s in shown] == \
        [dt.date(1970, 1, 1) + dt.timedelta(days=int(e)) for e in cols["signup"]["edges"]]
    seen = [dt.datetime.fromisoformat(s.replace("Z", "+00:00")) for s in cols["seen"]["edges_shown"]]
    assert [_micros(t) for t in seen] == [int(e) for e in cols["seen"]["edges"]]
    assert cols["wait"]["edges_shown"][0].startswith("P")


@pytest.mark.driver_auto
def test_spark_and_memory_code_a_warehouse_table_alike(spark, warehouse):
    """The same table through Spark (Spark's reader, passes and the driver) and through
    the scikit-learn selector (Python dates, aware and naive datetimes, timedeltas):
    the same plan, selection and scores, bit for bit."""
    from vmi_spark.sklearn import VMIFeatureSelector
    from vmi_spark.spark.select import run_selection

    df, pdf, y = warehouse
    with _utc(spark):
        feats = ["signup", "seen", "local", "wait", "region", "noise"]
        sk = VMIFeatureSelector(n_features_to_select=4).fit(pdf[feats], y)
        for execution in ("passes", "driver"):
            rep = run_selection(df, "y", features=feats, num_features=4,
                                execution=execution).report()
            assert rep["selected_indices"] == sk.selected_features_.tolist(), execution
            np.testing.assert_array_equal(rep["scores"], sk.scores_)
            assert rep["columns"] == sk.report()["columns"], execution


class _utc:
    """Run with the session time zone UTC (naive pandas datetimes are wall clocks)."""

    def __init__(self, spark):
        self.spark = spark

    def __enter__(self):
        self.old = self.spark.conf.get("spark.sql.session.timeZone")
        self.spark.conf.set("spark.sql.session.timeZone", "UTC")

    def __exit__(self, *exc):
        self.spark.conf.set("spark.sql.session.timeZone", self.old)


def test_a_wall_clock_timestamp_does_not_move_with_the_session_time_zone(spark):
    """TIMESTAMP_NTZ is a wall clock: the same microseconds in every session time zone,
    also inside a daylight-saving gap (02:30 on 2021-03-14 does not exist in New York)."""
    from vmi_spark.spark.plan import value_sql

    df = spark.sql("SELECT TIMESTAMP_NTZ'2021-03-14 02:30:00.000007' AS t "
                   "UNION ALL SELECT TIMESTAMP_NTZ'1969-12-31 23:59:59.5'")
    want = [_micros(dt.datetime(2021, 3, 14, 2, 30, 0, 7)),
            _micros(dt.datetime(1969, 12, 31, 23, 59, 59, 500000))]
    old = spark.conf.get("spark.sql.session.timeZone")
    try:
        for tz in ("UTC", "America/New_York", "Asia/Kolkata"):
            spark.conf.set("spark.sql.session.timeZone", tz)
            got = [r[0] for r in df.selectExpr(value_sql("t", df.schema["t"].dataType)).collect()]
            assert got == want, tz
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)


def _slow_top(values: list, k: int) -> list:
    counts: dict = {}
    for v in values:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    return sorted(counts, key=lambda v: (-counts[v], v))[:k]


@pytest.mark.driver_auto
def test_many_string_values_keep_the_most_frequent_in_every_reader(spark, tmp_path):
    """A string column with more values than maxCategories: its maxCategories - 1 most
    frequent values (counted here by hand, ties to the smaller value) are states, the rest
    one '(other)' state; the pyarrow reader, Spark's reader, the driver and the
    scikit-learn selector agree bit for bit."""
    from vmi_spark.core.encoding import EncodingPlan
    from vmi_spark.sklearn import VMIFeatureSelector
    from vmi_spark.spark.select import run_selection

    rng = np.random.default_rng(5)
    n = 3000
    county = [f"c{int(v)}" for v in rng.zipf(1.3, n) % 500]
    county = [None if i % 97 == 0 else c for i, c in enumerate(county)]
    store = [f"s{i % 40}" for i in range(n)]  # 40 values, all tied at 75 rows
    y = np.array([int(c[1:]) % 3 if c else 0 for c in county]) ^ (rng.random(n) < 0.2)
    pdf = pd.DataFrame({"county": county, "store": store, "x": rng.normal(size=n), "y": y})
    path = str(tmp_path / "t.parquet")
    spark.createDataFrame(pdf).repartition(3).write.parquet(path)
    df = spark.read.parquet(path)
    reps = {}
    for name, kw in (("pyarrow", {"execution": "passes"}),
                     ("spark", {"reader": "spark", "execution": "resident"}),
                     ("driver", {"execution": "driver"})):
        run = run_selection(df, "y", num_features=2, max_categories=16, **kw)
        reps[name] = run
        cols = {c.name: c for c in run.plan.columns}
        assert cols["county"].values == sorted(_slow_top(county, 15)), name
        assert cols["store"].values == sorted(_slow_top(store, 15)), name  # ties: by value
        assert cols["county"].other and cols["county"].missing
        assert cols["county"].num_states == 17
    assert reps["pyarrow"].reader == "pyarrow" and reps["spark"].reader == "spark"
    first = reps["pyarrow"].report()
    for run in reps.values():
        assert run.report()["selected"] == first["selected"]
        assert run.report()["scores"] == first["scores"]
        assert EncodingPlan.from_json(run.plan.to_json()) == run.plan
    sk = VMIFeatureSelector(n_features_to_select=2, max_categories=16).fit(
        pdf.drop(columns="y"), y)
    assert sk.scores_.tolist() == first["scores"]
    assert [c.values for c in sk.columns_] == [c.values for c in reps["pyarrow"].plan.columns]


def test_the_job_excludes_columns_and_suggests_names(spark, warehouse, tmp_path, capsys):
    from vmi_spark.job import main

    df, _, _ = warehouse
    path = str(tmp_path / "w.parquet")
    df.drop("blob", "tags", "attrs", "nested").write.parquet(path)
    out = tmp_path / "out"
    rc = main(["--input", path, "--label", "y", "--exclude", "customer_id,signup",
               "--num-features", "2", "--output", str(out)], spark=spark)
    assert rc == 0, capsys.readouterr().err
    rep = json.loads((out / "selection.json").read_text())
    assert "customer_id" not in rep["features"] and "signup" not in rep["features"]
    assert rep["label_decision"]["type"] == "categorical"
    for argv, needle in (
            (["--label", "Y"], "error: --label column 'Y' not found in the input; did you "
                               "mean 'y'?"),
            (["--label", "y", "--exclude", "regoin"],
             "error: --exclude names 'regoin', which is not in the input; did you mean 'region'?"),
            (["--label", "y", "--features", "signupp,noise"],
             "feature column 'signupp' not found in the input; did you mean 'signup'?")):
        rc = main(["--input", path, "--output", str(tmp_path / "o2"), *argv], spark=spark)
        err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
        assert rc == 2 and len(err) == 1 and needle in err[0], err
