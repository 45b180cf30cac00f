"""The columns of a run, resolved once (vmi_spark.spark.columns): what every later step
takes instead of the user's label, features, exclude, features_col and weight_col."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.ml.linalg import Vectors
from pyspark.sql import types as T

from vmi_spark.errors import InputError, ParameterError
from vmi_spark.params import Settings
from vmi_spark.spark import routes
from vmi_spark.spark.columns import Columns, resolve


@pytest.fixture()
def frame(spark):
    rows = [(i % 2, float(i), f"s{i % 3}", bytearray(b"x"), 1.0 + i % 2) for i in range(12)]
    schema = "y int, a double, s string, blob binary, w double"
    return spark.createDataFrame(rows, schema)


def test_every_usable_column_but_the_label_the_weights_and_exclude(frame):
    cols = resolve(frame, "y", exclude=["s"], weight_col="w")
    assert cols.features == ["a"] and cols.weight_col == "w" and cols.features_col is None
    assert cols.read == ["y", "a", "w"] and cols.df is frame and cols.schema is frame
    assert cols.notes == ["left out 1 column(s) whose type cannot be a feature: "
                          "'blob' (binary)"]


def test_named_features_and_the_weights_are_checked_once(frame):
    assert resolve(frame, "y", ["s", "a"]).features == ["s", "a"]
    with pytest.raises(InputError, match="feature column 'A' not found.*did you mean 'a'"):
        resolve(frame, "y", ["A"])
    with pytest.raises(InputError, match="'blob' has unsupported type binary"):
        resolve(frame, "y", ["blob"])
    with pytest.raises(ParameterError, match="is also listed as a feature"):
        resolve(frame, "y", ["a", "w"], weight_col="w")
    with pytest.raises(ParameterError, match="'s' is a string column; weights must be numbers"):
        resolve(frame, "y", weight_col="s")


def test_names_given_as_one_string_or_not_as_names_are_refused(frame):
    """``exclude="ab"`` is neither a, b nor ab: a string where a list goes is refused, as is
    a name that is not a string (before, ``exclude="as"`` excluded 'a' and 's' by substring)."""
    with pytest.raises(ParameterError, match=r"^exclude must be a list of column names, got the "
                                             r"string 'as' \(one column: \['as'\]\)$"):
        resolve(frame, "y", exclude="as")
    with pytest.raises(ParameterError, match="^features must be a list of column names, got the "
                                             "string 'a'"):
        resolve(frame, "y", "a")
    with pytest.raises(ParameterError, match=r"^features must be a list of column names, got \['a', 1\]"):
        resolve(frame, "y", ["a", 1])
    with pytest.raises(InputError, match="^label must be a column name, got None$"):
        resolve(frame, None)
    with pytest.raises(InputError, match="^features_col must be a column name, got 3$"):
        resolve(frame, "y", features_col=3)
    assert resolve(frame, "y", exclude=("s",)).features == ["a", "w"]  # any sequence of names


def test_an_input_without_columns_is_named_as_such(spark):
    empty = spark.createDataFrame([], T.StructType([]))  # what an empty CSV file reads as
    with pytest.raises(InputError, match=r"^the input has no columns \(an empty file, or a "
                                         r"CSV without a header row\)$"):
        resolve(empty, "y")


def _named(df, names):
    """``df`` with the element names of its vector column ``v`` in the ML metadata (what
    ``VectorAssembler`` writes)."""
    meta = {"ml_attr": {"num_attrs": len(names),
                        "attrs": {"numeric": [{"idx": i, "name": n} for i, n in enumerate(names)]}}}
    return df.withMetadata("v", meta)


def _vectors(spark, names=None):
    rows = [(i % 2, Vectors.dense([float(i), float(i % 3), 1.0])) for i in range(9)]
    df = spark.createDataFrame(rows, ["y", "v"])
    return df if names is None else _named(df, names)


def test_a_vector_is_cut_by_the_workers_and_expanded_only_for_kde(spark):
    df = _vectors(spark, ["p", "q", "r"])
    cols = resolve(df, "y", exclude=["q"], features_col="v")
    assert cols.features == ["p", "r"] and cols.features_col == "v" and cols.df is df
    assert cols.elements == ["p", "q", "r"]  # the readers cut the vectors by these places
    assert cols.read == ["y", "v"]
    assert isinstance(cols.schema, T.StructType)
    assert [f.name for f in cols.schema.fields] == ["y", "p", "q", "r"]
    kde = resolve(df, "y", exclude=["q"], features_col="v", estimator="kde")
    assert kde.features == ["p", "r"] and kde.features_col is None and kde.elements is None
    assert kde.df.columns == ["y", "p", "q", "r"] and kde.schema is kde.df
    with pytest.raises(ParameterError, match="^exclude names 'P', which is neither a column of the "
                                             "input nor an element of 'v'; did you mean 'p'"):
        resolve(df, "y", exclude=["P"], features_col="v")
    with pytest.raises(InputError, match="every element of featuresCol 'v' is excluded"):
        resolve(df, "y", exclude=["p", "q", "r"], features_col="v")
    unnamed = resolve(_vectors(spark), "y", features_col="v")
    assert unnamed.features == ["v[0]", "v[1]", "v[2]"]


def test_the_row_route_takes_the_columns_as_resolved(spark, tmp_path):
    """choose_rows reads what resolve decided: the Parquet files of the label, the
    features and the weights, read by pyarrow; a vector's own columns likewise."""
    path = str(tmp_path / "t.parquet")
    spark.createDataFrame([(i % 2, float(i), 1.0) for i in range(40)],
                          "y int, a double, w double").write.parquet(path)
    df = spark.read.parquet(path)
    cols = resolve(df, "y", weight_col="w")
    route = routes.choose_rows(cols, None, Settings.of({"execution": "passes"}))
    assert isinstance(cols, Columns) and route.columns is cols
    assert route.read_by == "pyarrow" and route.features == ["a"] and route.df is df
    spark_read = routes.choose_rows(cols, None, Settings.of({"execution": "passes",
                                                             "reader": "spark"}))
    assert spark_read.read_by == "spark"


@pytest.mark.parametrize("from_parquet", [False, True])
def test_an_excluded_element_leaves_the_others_where_they_are_in_the_vector(
        spark, tmp_path, from_parquet):
    """Excluding q of the vector [p, q, r] selects p and r read from their own positions:
    the selection and scores of the expanded columns without q, by Spark's vector reader
    and by pyarrow over the Parquet files."""
    from vmi_spark.spark.select import run_selection

    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 400)
    p = (y + (rng.random(400) < 0.3)) % 2
    q = rng.integers(0, 3, 400)
    r = np.where(rng.random(400) < 0.9, y, 1 - y)
    rows = [(int(y[i]), Vectors.dense([float(p[i]), float(q[i]), float(r[i])]))
            for i in range(400)]
    df = _named(spark.createDataFrame(rows, ["y", "v"]), ["p", "q", "r"])
    if from_parquet:
        df.write.parquet(str(tmp_path / "v.parquet"))
        df = spark.read.parquet(str(tmp_path / "v.parquet"))
    flat = spark.createDataFrame([(int(y[i]), float(p[i]), float(r[i])) for i in range(400)],
                                 ["y", "p", "r"])
    values = {"num_features": 2, "execution": "passes"}
    got = run_selection(df, "y", features_col="v", exclude=["q"], **values)
    want = run_selection(flat, "y", **values)
    assert got.reader == ("pyarrow" if from_parquet else "spark")
    names = [[run.plan.columns[i].name for i in run.selection.selected] for run in (got, want)]
    assert names == [["r", "p"], ["r", "p"]]
    assert got.selection.scores == want.selection.scores


def test_kde_over_a_vector_selects_as_over_its_expanded_columns(spark):
    """The KDE estimator expands a vector into double columns: the planner takes their
    types from the expanded frame, so the run equals one over the same values as columns
    (it failed with a KeyError on the element names before the columns were resolved once)."""
    from vmi_spark.spark.select import run_selection

    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 300)
    x = np.column_stack([y + rng.normal(0, 1, 300), rng.normal(0, 1, 300),
                         y * 2.0 + rng.normal(0, 0.5, 300)])
    vec = spark.createDataFrame([(int(y[i]), Vectors.dense(x[i].tolist())) for i in range(300)],
                                ["y", "v"])
    flat = spark.createDataFrame([(int(y[i]), *map(float, x[i])) for i in range(300)],
                                 ["y", "v[0]", "v[1]", "v[2]"])
    values = {"num_features": 2, "estimator": "kde", "execution": "passes"}
    got = run_selection(vec, "y", features_col="v", **values)
    want = run_selection(flat, "y", **values)
    names = [[run.plan.columns[i].name for i in run.selection.selected] for run in (got, want)]
    assert names[0] == names[1] and names[0][0] == "v[2]"
    assert got.selection.scores == want.selection.scores
