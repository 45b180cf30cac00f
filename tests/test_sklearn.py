"""The scikit-learn selector: same selection as the Spark estimator, sklearn API basics."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from helpers import lung_frame, random_discrete  # noqa: E402
from vmi_spark.core.report_schema import SelectionReport  # noqa: E402
from vmi_spark.sklearn import VMIFeatureSelector, encode_column  # noqa: E402


def continuous_frame(seed: int = 3, n: int = 300) -> pd.DataFrame:
    """Continuous columns (with ties and NaNs), a small integer column, a string column."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    cols = {
        "a": y + rng.normal(0, 1.0, n),
        "b": np.round(y * 0.5 + rng.normal(0, 1.0, n), 1),  # many ties
        "c": rng.normal(0, 1, n),
        "d": np.where(rng.random(n) < 0.1, np.nan, -y + rng.exponential(1.0, n)),
        "e": rng.integers(0, 4, n).astype(np.int64) + (y == 2),
        "f": np.where(rng.random(n) < 0.5, "u", "v").astype(object),
        "g": y * 2.0 + rng.normal(0, 3.0, n),
    }
    cols["f"][y == 1] = np.where(rng.random((y == 1).sum()) < 0.7, "w", "u")
    cols["f"][rng.random(n) < 0.05] = None
    df = pd.DataFrame(cols)
    df["label"] = y
    return df


def spark_fit(spark, pdf: pd.DataFrame, features: list[str], **params):
    from vmi_spark import VMISelector

    sdf = spark.createDataFrame(pdf)
    return VMISelector(inputCols=features, labelCol="label", **params).fit(sdf)


# ---------------------------------------------------------------- same as Spark
def test_lung_same_selection_as_spark(spark):
    pdf = lung_frame()
    features = [c for c in pdf.columns if c != "label"]
    model = spark_fit(spark, pdf, features, numTopFeatures=8, restartTolerance=0.01)
    sel = VMIFeatureSelector(n_features_to_select=8, restart_tolerance=0.01)
    sel.fit(pdf[features], pdf["label"])
    assert list(sel.selected_features_) == model.selectedFeatures
    assert [features[i] for i in sel.selected_features_] == model.selectedFeatureNames
    np.testing.assert_allclose(sel.scores_, model.scores, rtol=0, atol=1e-12)
    assert list(sel.blocks_) == model.blocks
    # numpy input gives the same selection as the DataFrame
    sel2 = VMIFeatureSelector(n_features_to_select=8, restart_tolerance=0.01)
    sel2.fit(pdf[features].to_numpy(), pdf["label"].to_numpy())
    assert list(sel2.selected_features_) == list(sel.selected_features_)


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise", "jmi"])
def test_continuous_same_selection_as_spark(spark, method):
    pdf = continuous_frame()
    features = [c for c in pdf.columns if c != "label"]
    model = spark_fit(spark, pdf, features, numTopFeatures=5, method=method, numBins=5,
                      maxCategories=6)
    sel = VMIFeatureSelector(n_features_to_select=5, method=method, num_bins=5,
                             max_categories=6).fit(pdf[features], pdf["label"])
    assert list(sel.selected_features_) == model.selectedFeatures
    np.testing.assert_allclose(sel.scores_, model.scores, rtol=0, atol=1e-12)
    assert list(sel.blocks_) == model.blocks
    spark_columns = {c["name"]: (c["kind"], c["states"]) for c in model.report["columns"]}
    assert {c.name: (c.kind, c.num_states) for c in sel.columns_} == spark_columns


# ---------------------------------------------------------------- encoding rules
def _plan_of(values: np.ndarray):
    """The plan the fitted selector made of one column (the planner every front end uses)."""
    X = pd.DataFrame({"c": pd.Series(values, dtype=values.dtype)})
    y = np.arange(len(values)) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = VMIFeatureSelector(n_features_to_select=1, num_bins=4, max_categories=3,
                                 bias_correction="none", drop_suspects="none").fit(X, y)
    return sel.columns_[0]


def test_encoding_rules():
    v = np.array([5.0, 1.0, 3.0, np.nan, 3.0])
    p = _plan_of(v)
    assert (p.kind, p.values, p.missing, p.num_states) == ("category", [1.0, 3.0, 5.0], True, 4)
    assert encode_column(v, p).tolist() == [2, 0, 1, 3, 1]
    w = np.arange(10, dtype=float)
    p = _plan_of(w)
    assert p.kind == "bins" and p.splits == [2.0, 5.0, 7.0]
    # bin = number of splits <= v (Bucketizer convention)
    assert encode_column(w, p).tolist() == [0, 0, 1, 1, 1, 2, 2, 3, 3, 3]
    s = np.array(["b", None, "a"], dtype=object)
    p = _plan_of(s)
    assert encode_column(s, p).tolist() == [1, 2, 0]
    # more strings than max_categories: the 2 most frequent (ties to the smaller value)
    # are states, every other value one state after them, as OneHotEncoder(max_categories=3)
    t = np.array(list("dcbaddcb") * 10 + [None], dtype=object)  # 10 rows a value at least
    p = _plan_of(t)
    # counts d 3, c 2, b 2, a 1: d, then b before c (the tie goes to the smaller value)
    assert (p.values, p.other, p.num_states) == (["b", "d"], True, 4)
    assert encode_column(t, p).tolist() == [1, 2, 0, 2, 1, 1, 2, 0] * 10 + [3]
    assert p.state_labels() == ["b", "d", "(other)", "(missing)"]


# ---------------------------------------------------------------- scikit-learn API
def test_params_and_clone():
    sel = VMIFeatureSelector(n_features_to_select=3, method="vmi_pairwise",
                             restart_tolerance=0.01, num_bins=7, max_categories=5)
    params = sel.get_params()
    assert params == {"n_features_to_select": 3, "method": "vmi_pairwise",
                      "restart_tolerance": 0.01, "num_bins": 7, "max_categories": 5,
                      "selection_mode": "numTopFeatures", "selection_threshold": None,
                      "binning": "quantile", "label_type": "auto", "label_bins": 10,
                      "exclude": None, "bias_correction": "significance",
                      "drop_suspects": "identifiers", "stability": 0,
                      "stability_seed": 0, "stability_fraction": 0.5, "n_jobs": None}
    other = clone(sel)
    assert other is not sel and other.get_params() == params
    assert VMIFeatureSelector().get_params()["n_features_to_select"] is None
    sel.set_params(method="mrmr")
    assert sel.method == "mrmr"


@pytest.mark.parametrize("bad", [{"n_features_to_select": 0}, {"method": "nope"},
                                 {"num_bins": 1}, {"max_categories": 256},
                                 {"restart_tolerance": float("nan")},
                                 {"restart_tolerance": "0.1"}])
def test_bad_params(bad):
    df = random_discrete(0, n=60, d=4)
    with pytest.raises(ValueError):
        VMIFeatureSelector(**bad).fit(df.drop(columns="y"), df["y"])


def test_exclude_is_a_list_of_names_never_a_string_split_into_letters():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    X = pd.DataFrame({c: rng.normal(size=400) + y for c in ["ab", "a", "b", "f0"]})
    with pytest.raises(ValueError, match=r"^exclude must be a list of column names, got the "
                                         r"string 'ab' \(one column: \['ab'\]\)$"):
        VMIFeatureSelector(n_features_to_select=2, exclude="ab").fit(X, y)
    with pytest.raises(ValueError, match="^X has no columns: there is no feature to select$"):
        VMIFeatureSelector(n_features_to_select=2).fit(X[[]], y)
    with pytest.raises(ValueError, match="^X has no columns"):
        VMIFeatureSelector(n_features_to_select=2).fit(np.empty((400, 0)), y)
    kept = VMIFeatureSelector(n_features_to_select=3, exclude=("ab",)).fit(X, y)
    assert sorted(kept.get_feature_names_out()) == ["a", "b", "f0"]


def test_minus_inf_restart_tolerance_keeps_one_block():
    df = random_discrete(2, n=400, d=8)
    x, y = df.drop(columns="y"), df["y"]
    never = VMIFeatureSelector(n_features_to_select=6, restart_tolerance=-np.inf).fit(x, y)
    assert never.selection_.blocks == [0] * 6 and never.selection_.restarts == 0
    default = VMIFeatureSelector(n_features_to_select=6).fit(x, y)
    n0 = default.selection_.blocks.count(0)
    assert never.selection_.selected[:n0] == default.selection_.selected[:n0]


def test_transform_keeps_selected_columns():
    df = random_discrete(1)
    X, y = df.drop(columns="y"), df["y"]
    sel = VMIFeatureSelector(n_features_to_select=3).fit(X, y)
    assert sel.n_features_in_ == X.shape[1]
    assert list(sel.feature_names_in_) == list(X.columns)
    keep = sorted(sel.selected_features_)
    assert list(sel.get_support(indices=True)) == keep
    np.testing.assert_array_equal(sel.transform(X), X.to_numpy()[:, keep])
    assert list(sel.get_feature_names_out()) == [X.columns[i] for i in keep]
    assert len(sel.scores_) == len(sel.blocks_) == len(sel.selected_features_) == 3


@pytest.mark.parametrize("method", ["vmi_pairwise", "mim", "mrmr", "jmi", "cmim", "cife",
                                    "spec_cmi"])
def test_all_methods_run(method):
    df = random_discrete(2, n=120, d=6)
    sel = VMIFeatureSelector(n_features_to_select=3, method=method)
    sel.fit(df.drop(columns="y"), df["y"])
    assert len(set(sel.selected_features_)) == 3
    assert sel.transform(df.drop(columns="y")).shape == (120, 3)


def test_in_pipeline():
    df = random_discrete(4)
    X, y = df.drop(columns="y"), df["y"]
    pipe = Pipeline([("select", VMIFeatureSelector(n_features_to_select=2)),
                     ("clf", LogisticRegression(max_iter=200))])
    pipe.fit(X, y)
    assert pipe.predict(X).shape == (len(X),)
    assert pipe.named_steps["select"].transform(X).shape == (len(X), 2)


def test_k_capped_and_string_labels():
    df = random_discrete(5, n=90, d=3)
    y = np.array(["no", "yes", "maybe"])[df["y"].to_numpy()]
    with pytest.warns(UserWarning, match="at most 3"):
        sel = VMIFeatureSelector(n_features_to_select=10).fit(df.drop(columns="y"), y)
    assert list(sel.classes_) == ["maybe", "no", "yes"]
    assert len(sel.selected_features_) <= 3
    report = sel.report()
    assert report["selected_indices"] == list(sel.selected_features_)


def test_one_class_refused():
    with pytest.raises(ValueError, match="has one class"):
        VMIFeatureSelector().fit(np.zeros((5, 2)), np.ones(5))


# ---------------------------------------------------------------- issue 33 item 10: +/-inf
def infinite_frame(seed: int = 8, n: int = 400) -> pd.DataFrame:
    """Continuous columns holding +/-inf: as spikes (a tenth and more of the rows), as a few
    outliers, and a column of the largest doubles beside the infinities."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    spikes = y + rng.normal(0, 1.0, n)
    spikes[rng.random(n) < 0.2] = np.inf
    spikes[(y == 1) & (rng.random(n) < 0.3)] = -np.inf
    few = rng.normal(0, 1.0, n) - y
    few[:3] = [np.inf, -np.inf, np.inf]
    big = rng.normal(0, 1, n)
    big[(y == 1) & (rng.random(n) < 0.4)] = np.finfo(float).max
    big[(y == 0) & (rng.random(n) < 0.4)] = -np.finfo(float).max
    big[rng.random(n) < 0.15] = -np.inf
    return pd.DataFrame({"spikes": spikes, "few": few, "big": big,
                         "noise": rng.normal(0, 1, n), "label": y})


def test_infinities_are_values_like_in_the_job():
    """The selector refused +/-inf ("Input X contains infinity") where the job bins them;
    now they are values, with no RuntimeWarning (numpy's nextafter overflowed at the largest
    double), and the same selection as the same table with the infinities replaced by
    finite stand-ins beyond every other value (the same states, so the same scores)."""
    import warnings

    pdf = infinite_frame()
    features = ["spikes", "few", "big", "noise"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sel = VMIFeatureSelector(n_features_to_select=4, num_bins=5).fit(pdf[features],
                                                                         pdf["label"])
    stand_in = pdf.copy()
    for c in ("spikes", "few"):
        stand_in[c] = stand_in[c].replace({np.inf: 1e300, -np.inf: -1e300})
    stand_in["big"] = stand_in["big"].replace({-np.inf: -1e300, np.finfo(float).max: 1e301,
                                               -np.finfo(float).max: -1e299})
    ref = VMIFeatureSelector(n_features_to_select=4, num_bins=5).fit(stand_in[features],
                                                                     stand_in["label"])
    assert list(sel.selected_features_) == list(ref.selected_features_)
    assert list(sel.scores_) == list(ref.scores_)
    assert [c.num_states for c in sel.columns_] == [c.num_states for c in ref.columns_]
    assert sel.transform(pdf[features]).shape == (len(pdf), 4)


@pytest.mark.parametrize("method", ["vmi_naive", "mrmr"])
def test_infinities_same_selection_as_spark(spark, method):
    pdf = infinite_frame()
    features = ["spikes", "few", "big", "noise"]
    model = spark_fit(spark, pdf, features, numTopFeatures=4, method=method, numBins=5)
    sel = VMIFeatureSelector(n_features_to_select=4, method=method,
                             num_bins=5).fit(pdf[features], pdf["label"])
    assert list(sel.selected_features_) == model.selectedFeatures
    assert list(sel.scores_) == model.scores
    spark_columns = {c["name"]: (c["kind"], c["states"]) for c in model.report["columns"]}
    assert {c.name: (c.kind, c.num_states) for c in sel.columns_} == spark_columns


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64])
def test_integer_columns_plan_and_select_as_their_doubles(dtype):
    """Integer columns go to the planner typed (as the Spark readers give them), not
    widened to doubles first: the same plan, codes, selection and scores, bit for bit,
    as the same numbers given as float64; in a numpy array and in a pandas frame."""
    rng = np.random.default_rng(11)
    n = 3000
    y = rng.integers(0, 2, n)
    cols = [rng.integers(0, 5, n) + y,            # few values: categories
            rng.integers(0, 90, n) * (1 + y),     # many: bins (and spikes at 0)
            rng.integers(0, 3, n),
            rng.integers(0, 120, n) - 3 * y]
    lo = np.iinfo(dtype).min
    X = np.column_stack(cols).astype(np.int64)
    X = np.clip(X, max(lo, -100), None).astype(dtype)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    for data, doubles in ((X, X.astype(np.float64)), (frame, frame.astype(np.float64))):
        as_doubles = VMIFeatureSelector(n_features_to_select=3).fit(doubles, y)
        got = VMIFeatureSelector(n_features_to_select=3).fit(data, y)
        assert got.selected_features_.tolist() == as_doubles.selected_features_.tolist()
        assert got.scores_.tobytes() == as_doubles.scores_.tobytes()
        assert got.plan_.to_json() == as_doubles.plan_.to_json()


def test_integers_not_exact_as_doubles_are_read_as_doubles():
    from vmi_spark.sklearn import _exact_integers

    big = np.array([0, 2**53 + 1, 5], dtype=np.int64)
    assert _exact_integers(big) is None
    assert _exact_integers(np.array([-(2**53), 2**53], dtype=np.int64)) is not None
    assert _exact_integers(np.array([0.5, 1.0])) is None
    assert _exact_integers(pd.Series([1, None, 3], dtype="Int64")) is None  # nullable
    got = _exact_integers(np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1])
    assert got.dtype == np.int32 and got.flags.c_contiguous and got.tolist() == [1, 5, 9]


def _tree(n: int) -> tuple[np.ndarray, np.ndarray]:
    df = random_discrete(9, n=n, d=6, classes=3)
    return df.drop(columns="y").to_numpy(), df["y"].to_numpy()


def test_missing_labels_are_dropped_with_a_warning_as_the_job_does():
    """NaN or None labels: those rows are left out with a warning (issue 44 item 9), and
    the selection is that of the labelled rows alone; all missing is one ValueError."""
    X, y = _tree(400)
    y_missing = y.astype(float)
    gone = np.arange(len(y)) % 7 == 3
    y_missing[gone] = np.nan
    w = np.arange(len(y)) % 3 + 1.0
    with pytest.warns(UserWarning, match=f"dropped {gone.sum()} rows with a missing label"):
        sel = VMIFeatureSelector(n_features_to_select=3).fit(X, y_missing, sample_weight=w)
    ref = VMIFeatureSelector(n_features_to_select=3).fit(X[~gone], y[~gone],
                                                         sample_weight=w[~gone])
    assert list(sel.selected_features_) == list(ref.selected_features_)
    np.testing.assert_array_equal(sel.scores_, ref.scores_)
    assert sel.n_samples_fit_ == (~gone).sum()
    objects = np.where(gone, None, y.astype(object))
    with pytest.warns(UserWarning, match="missing label"):
        VMIFeatureSelector(n_features_to_select=3).fit(pd.DataFrame(X), objects)
    with pytest.raises(ValueError, match="y has no labelled rows"):
        VMIFeatureSelector().fit(X, np.full(len(y), np.nan))


def test_selected_feature_names_next_to_the_indices():
    X, y = _tree(400)
    frame = pd.DataFrame(X, columns=[f"col_{j}" for j in range(X.shape[1])])
    sel = VMIFeatureSelector(n_features_to_select=3).fit(frame, y)
    assert list(sel.selected_feature_names_) == [f"col_{j}" for j in sel.selected_features_]
    assert sorted(sel.get_feature_names_out()) == sorted(sel.selected_feature_names_)
    plain = VMIFeatureSelector(n_features_to_select=3).fit(X, y)
    assert list(plain.selected_feature_names_) == [f"x{j}" for j in plain.selected_features_]
    assert list(plain.get_feature_names_out()) == sorted(plain.selected_feature_names_,
                                                         key=lambda n: int(n[1:]))


def test_check_estimator_passes_the_message_checks():
    """scikit-learn's checks of the error wording for all-zero weights (issue 44 item 9)."""
    from sklearn.utils.estimator_checks import check_all_zero_sample_weights_error

    check_all_zero_sample_weights_error("VMIFeatureSelector", VMIFeatureSelector())


def test_the_report_keys_are_the_declared_schema():
    df = random_discrete(3, n=400, d=6)
    rep = VMIFeatureSelector(n_features_to_select=3, stability=2).fit(
        df.drop(columns="y"), df["y"]).report()
    declared = set(SelectionReport.__annotations__)
    assert {"selected", "scores", "columns", "suspects", "stability"} <= set(rep) <= declared


def test_the_state_budget_note_says_when_even_two_states_leave_too_few_rows_a_cell():
    """600 rows, 600 classes: 2 states a feature (the least) leave 0.5 rows a cell, which
    the note says instead of claiming 5 (before, it claimed 5 whatever the classes)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=600), "b": rng.integers(0, 5, 600)})

    def notes(y):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            VMIFeatureSelector(n_features_to_select=1).fit(X.iloc[:len(y)], y)
        return [str(w.message) for w in caught if "states a feature" in str(w.message)]

    assert notes(np.arange(600).astype(str)) == [
        "600 rows: at most 2 states a feature, the least; even so a count table keeps only "
        "0.5 rows a cell on average, fewer than 5: too few rows for 600 classes (num_bins, "
        "max_categories and label_bins cut to fit)"]
    # 40 rows, 2 classes: 4 states (40 / (5 x 2)) keep 5 rows a cell, as the note says
    assert notes(np.arange(40) % 2) == [
        "40 rows: at most 4 states a feature, so that each count table keeps 5 rows a cell "
        "on average (num_bins, max_categories and label_bins cut to fit)"]


def test_datetime_and_duration_columns_beside_numbers():
    """scikit-learn's checks find no common dtype for datetime64 and numbers; the selector
    takes such a frame and codes the times as microseconds (as the job does): the same
    selection and scores as the microseconds given as numbers; transform keeps the values."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    X = pd.DataFrame({
        "a": rng.normal(size=300),
        "t": pd.to_datetime("2024-01-01") + pd.to_timedelta(rng.integers(0, 100, 300) + 50 * y,
                                                            unit="D"),
        "d": pd.to_timedelta(rng.integers(0, 10, 300) + 5 * y, unit="h")})
    micros = X.assign(t=X["t"].astype("int64") / 1000.0, d=X["d"].astype("int64") / 1000.0)
    sel = VMIFeatureSelector(n_features_to_select=2).fit(X, y)
    ref = VMIFeatureSelector(n_features_to_select=2).fit(micros, y)
    assert list(sel.selected_features_) == list(ref.selected_features_)
    np.testing.assert_array_equal(sel.scores_, ref.scores_)
    out = sel.transform(X)
    names = list(sel.get_feature_names_out())
    assert out.shape == (300, 2) and list(out[:, 0]) == list(X[names[0]])
