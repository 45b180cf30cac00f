"""Row weights on Spark (issue 36): every reader and every execution gives the bits of the
in-memory selection of the same table with each row repeated w times.

One small weighted table (a binned column with a spike, a category, a string column with
more values than maxCategories, missing values, rows of weight 0) read by Spark's reader
and by pyarrow, as columns and as a vector, selected by the driver, resident tasks and
passes; the reference is :class:`vmi_spark.sklearn.VMIFeatureSelector` on the repeated
rows. Bad weights are one-line errors naming the parameter, before any pass over the rows
where the schema tells.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from vmi_spark.errors import InputError
from vmi_spark.sklearn import VMIFeatureSelector

K = 4


def _table(seed: int = 0, n: int = 700) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    amount = np.where(rng.random(n) < 0.4, 0.0, y * 2.0 + rng.normal(size=n))
    amount[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({
        "amount": amount,
        "grade": (y + rng.integers(0, 2, n)) % 4,
        "city": [f"c{v}" for v in (y * 7 + rng.integers(0, 40, n)) % 40],
        "noise": rng.normal(size=n),
        "w": rng.integers(0, 4, n).astype(np.int64),
        "y": y,
    })


FEATURES = ["amount", "grade", "city", "noise"]
PARAMS = dict(num_features=K, max_categories=8, num_bins=5)


def _reference(method: str) -> VMIFeatureSelector:
    t = _table()
    rep = np.repeat(np.arange(len(t)), t["w"].to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return VMIFeatureSelector(n_features_to_select=K, method=method, max_categories=8,
                                  num_bins=5).fit(t.loc[rep, FEATURES].reset_index(drop=True),
                                                  t["y"].to_numpy()[rep])


def _same(report: dict, ref: VMIFeatureSelector) -> None:
    assert report["selected_indices"] == ref.selected_features_.tolist()
    assert [float(v).hex() for v in report["scores"]] == [float(v).hex() for v in ref.scores_]
    assert report["weights"]["total"] == float(_table()["w"].sum())
    assert report["weights"]["rows_zero_weight"] == int((_table()["w"] == 0).sum())


@pytest.fixture(scope="module")
def weighted_parquet(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("weights") / "t.parquet")
    spark.createDataFrame(_table()).repartition(3).write.parquet(path)
    return path


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise", "mrmr"])
@pytest.mark.parametrize("reader,execution", [("spark", "passes"), ("auto", "resident"),
                                              ("auto", "passes")])
def test_weighted_selection_is_the_repeated_table_on_spark(spark, weighted_parquet, method,
                                                           reader, execution):
    from vmi_spark.spark.select import run_selection

    df = spark.read.parquet(weighted_parquet)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = run_selection(df, "y", features=FEATURES, weight_col="w", method=method,
                            reader=reader, execution=execution, **PARAMS)
    report = run.report()
    assert report["reader"] == ("spark" if reader == "spark" else "pyarrow")
    assert report["execution"] == execution
    _same(report, _reference(method))


@pytest.mark.driver_auto
def test_weighted_selection_in_the_driver(spark, weighted_parquet):
    from vmi_spark.spark.select import run_selection

    df = spark.read.parquet(weighted_parquet)
    for reader in ("auto", "spark"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = run_selection(df, "y", features=FEATURES, weight_col="w",
                                   method="vmi_pairwise", reader=reader, **PARAMS).report()
        assert report["execution"] == "driver"
        _same(report, _reference("vmi_pairwise"))


def test_weighted_vector_column_and_the_estimator(spark, weighted_parquet):
    """A vector featuresCol with weightCol: VMISelector gives the same bits (all elements,
    so the string column stays out: vectors hold numbers)."""
    from pyspark.ml.feature import VectorAssembler

    from vmi_spark import VMISelector

    cols = ["amount", "grade", "noise"]
    df = spark.read.parquet(weighted_parquet)
    vec = VectorAssembler(inputCols=cols, outputCol="features",
                          handleInvalid="keep").transform(df).select("features", "y", "w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = VMISelector(featuresCol="features", labelCol="y", weightCol="w",
                            numTopFeatures=2, maxCategories=8, numBins=5).fit(vec)
        t = _table()
        rep = np.repeat(np.arange(len(t)), t["w"].to_numpy())
        ref = VMIFeatureSelector(n_features_to_select=2, max_categories=8, num_bins=5).fit(
            t.loc[rep, cols].reset_index(drop=True), t["y"].to_numpy()[rep])
    assert model.selectedFeatures == ref.selected_features_.tolist()
    assert [float(v).hex() for v in model.scores] == [float(v).hex() for v in ref.scores_]
    assert model.getWeightCol() == "w" and model.report["weights"]["column"] == "w"


@pytest.mark.parametrize("weights,message", [
    ([1.0, float("nan"), 2.0], "weightCol 'w' has 10 null or NaN values; weights must be finite "
                               "and non-negative"),
    ([1.0, -1.0, 2.0], "weightCol 'w' has 10 negative values; weights must be finite and "
                       "non-negative"),
    ([0.0, 0.0, 0.0], "every weight of weightCol 'w' is 0 (or below 2**-11, which rounds to 0):"
                      " no row is left with a non-zero weight"),
])
def test_bad_weights_are_one_line_errors(spark, weights, message):
    from vmi_spark import VMISelector

    rows = [(float(i % 2), float(i % 3), weights[i % 3]) for i in range(30)]
    df = spark.createDataFrame(rows, "x double, y double, w double")
    with pytest.raises(InputError) as info:
        VMISelector(inputCols=["x"], labelCol="y", weightCol="w").fit(df)
    assert str(info.value) == message


@pytest.mark.parametrize("column,message", [
    ("s", "weightCol 's' is a string column; weights must be numbers"),
    ("y", "weightCol 'y' is the label; weights must be a column of their own"),
    ("x", "weightCol 'x' is also listed as a feature; weights must be a column of their own"),
    ("ww", "weightCol 'ww' not found in the input; did you mean 'w'?"),
])
def test_a_weight_column_the_schema_refuses(spark, column, message):
    from vmi_spark import VMISelector

    df = spark.createDataFrame([(1.0, 0.0, "a", 1.0)], "x double, y double, s string, w double")
    with pytest.raises(InputError) as info:
        VMISelector(inputCols=["x"], labelCol="y", weightCol=column).fit(df)
    assert str(info.value) == message


def test_the_hashed_sample_keeps_rows_with_their_weight(spark, weighted_parquet, set_limits):
    """Above SAMPLE_ROWS the bin edges are the weighted quantiles of the rows whose content
    hash (Spark's xxhash64 of the label and the binned columns, not the weight) falls below
    the threshold set by the number of rows: the same for both readers, and recomputed
    here from Spark's own hash."""
    from vmi_spark.core.binning import fit_binning
    from vmi_spark.spark.select import run_selection

    set_limits(sample_rows=300)
    df = spark.read.parquet(weighted_parquet)
    reports = []
    for reader in ("spark", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reports.append(run_selection(df, "y", features=FEATURES, weight_col="w",
                                         reader=reader, execution="passes", **PARAMS).report())
    a, b = reports
    assert (a["reader"], b["reader"]) == ("spark", "pyarrow")
    assert a["columns"] == b["columns"] and a["selected"] == b["selected"]
    assert [float(v).hex() for v in a["scores"]] == [float(v).hex() for v in b["scores"]]
    t = _table()
    rows = int((t["w"] > 0).sum())
    threshold = int((1 << 30) * 300 / rows)
    sample = df.where("w > 0").selectExpr(
        "amount", "noise", "w", "pmod(xxhash64(CAST(y AS DOUBLE), "
        "CASE WHEN amount = 0.0D THEN 0.0D ELSE amount END, noise), 1073741824) AS h"
    ).where(f"h < {threshold}").toPandas()
    assert 0 < len(sample) < rows
    for col in ("amount", "noise"):
        want = fit_binning("quantile", sample[col].to_numpy(), 5,
                           weights=sample["w"].to_numpy())
        got = next(c for c in a["columns"] if c["name"] == col)
        assert got["edges"] == [float(e) for e in want.edges], col
