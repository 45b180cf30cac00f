"""Continuous labels (issue 19): ``labelType`` / ``labelBins``.

A regression target is cut into ``labelBins`` spike-aware equal-frequency classes
before the counts. The expected classes come from the documented rule written here in
numpy (cuts at ranks ``floor(k m / b)`` of the sorted values, a value holding more than
``1 / b`` of the rows a class of its own), not from :mod:`vmi_spark.core.binning`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from vmi_spark.core.binning import resolve_label_type
from vmi_spark.errors import InputError
from vmi_spark.params import METHOD_NAMES
from vmi_spark.sklearn import VMIFeatureSelector


def _ref_label_codes(y: np.ndarray, bins: int) -> np.ndarray:
    """Equal-frequency classes of a label with no spike: cuts at ranks floor(k n / b)."""
    s = np.sort(y)
    cuts = np.unique(s[(np.arange(1, bins) * len(s)) // bins])
    cuts = cuts[cuts > s[0]]
    return np.searchsorted(cuts, y, side="right")


def _ref_spiky_label_codes(y: np.ndarray, bins: int, spike: float) -> np.ndarray:
    """One spike at the minimum: its own class, the rest cut into bins - 1 classes."""
    rest = np.sort(y[y != spike])
    m, b = len(rest), bins - 1
    cuts = np.unique(rest[(np.arange(1, b) * m) // b])
    cuts = cuts[cuts > rest[0]]
    return np.where(y == spike, 0, 1 + np.searchsorted(cuts, y, side="right"))


def _regression(seed: int = 0, n: int = 3000) -> tuple[pd.DataFrame, np.ndarray]:
    """y = x0 + 0.6 x1 + small noise: x0 and x1 carry the target, n0..n5 are noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8))
    y = x[:, 0] + 0.6 * x[:, 1] + 0.1 * rng.normal(size=n)
    frame = pd.DataFrame(x, columns=["x0", "x1", *[f"n{i}" for i in range(6)]])
    return frame, y


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two codings split the rows the same way."""
    return len(set(zip(a.tolist(), b.tolist()))) == len(set(a.tolist())) == len(set(b.tolist()))


# ------------------------------------------------------------------- the rule
@pytest.mark.parametrize("requested, classes, numeric, floating, want", [
    ("auto", [0.0, 1.0, 2.0], True, True, "categorical"),  # integer-valued floats
    ("auto", [0.0, 0.5, 2.0], True, True, "continuous"),  # a non-integer value
    ("auto", None, True, False, "continuous"),  # more than maxClasses integers
    ("auto", None, False, False, "categorical"),  # strings are never continuous
    ("categorical", [0.5, 1.5], True, True, "categorical"),
    ("continuous", [1.0, 2.0], True, False, "continuous"),
])
def test_label_type_rule(requested, classes, numeric, floating, want):
    assert resolve_label_type(requested, classes, numeric=numeric, floating=floating) == want


def test_continuous_needs_a_numeric_label():
    with pytest.raises(ValueError, match="labelType is 'continuous'.*not numeric"):
        resolve_label_type("continuous", ["a", "b"], numeric=False, floating=False)


# ------------------------------------------------------------ in memory (sklearn)
def test_sklearn_bins_a_continuous_target_by_the_documented_rule():
    frame, y = _regression(n=1000)
    sel = VMIFeatureSelector(n_features_to_select=2, label_bins=4).fit(frame, y)
    assert sel.label_binning_ is not None and len(sel.classes_) == 4
    codes = np.searchsorted(np.asarray(sel.label_binning_.edges), y, side="right")
    np.testing.assert_array_equal(codes, _ref_label_codes(y, 4))
    assert sel.report()["label_type"] == "continuous"
    assert sel.report()["label_binning"]["state_names"] == list(sel.classes_)


def test_a_spike_in_the_target_is_a_class_of_its_own():
    rng = np.random.default_rng(5)
    n = 2000
    x = rng.normal(size=(n, 3))
    # 40 % of the rows have a target of exactly 0 (a zero-inflated amount)
    y = np.where(rng.random(n) < 0.4, 0.0, np.exp(x[:, 0]) + 0.01 * rng.random(n))
    sel = VMIFeatureSelector(n_features_to_select=1, label_bins=5).fit(x, y)
    assert list(sel.label_binning_.spikes) == [0.0]
    codes = np.searchsorted(np.asarray(sel.label_binning_.edges), y, side="right")
    assert _same_partition(codes, _ref_spiky_label_codes(y, 5, 0.0))
    assert list(sel.selected_features_) == [0]


@pytest.mark.parametrize("method", METHOD_NAMES)
def test_every_method_finds_the_informative_columns_of_a_regression(method):
    frame, y = _regression()
    sel = VMIFeatureSelector(n_features_to_select=2, method=method).fit(frame, y)
    assert sorted(sel.selected_features_) == [0, 1], method
    assert len(sel.classes_) == 10  # labelBins' default


def test_categorical_is_kept_when_asked_and_auto_keeps_integer_classes():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 3, (300, 2))
    y = (x[:, 0] + rng.integers(0, 2, 300)).astype(float)  # 0.0 .. 3.0: four classes
    sel = VMIFeatureSelector(n_features_to_select=1).fit(x, y)
    assert sel.label_binning_ is None and list(sel.classes_) == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="continuous"):
        # a non-integer target asked to be read as classes is refused by scikit-learn
        VMIFeatureSelector(label_type="categorical").fit(x, y + 0.5 * rng.random(300))
    with pytest.raises(ValueError, match="label_type"):
        VMIFeatureSelector(label_type="ordinal").fit(x, y)


# ------------------------------------------------------------------- on Spark
def test_spark_codes_a_continuous_label_like_the_in_memory_selector(spark, tmp_path):
    """Both readers, two partitionings, the job's report: the same classes and scores."""
    from vmi_spark.spark.select import run_selection
    from vmi_spark.spark.sources.arrow_source import parquet_source

    frame, y = _regression(seed=7, n=2500)
    path = str(tmp_path / "reg.parquet")
    spark.createDataFrame(frame.assign(target=y)).repartition(3).write.parquet(path)
    sk = VMIFeatureSelector(n_features_to_select=3, method="vmi_pairwise",
                            binning="mdlp").fit(frame, y)
    df = spark.read.parquet(path)
    names = list(frame.columns)
    for source in (None, parquet_source(df, ["target", *names])):
        for frame_df in (df, df.coalesce(1)):
            run = run_selection(frame_df if source is None else df, "target",
                                features=names, method="vmi_pairwise", num_features=3,
                                binning="mdlp", source=source,
                                reader="spark" if source is None else "auto")
            rep = run.report()
            assert rep["reader"] == ("spark" if source is None else "pyarrow")
            assert rep["label_type"] == "continuous"
            assert rep["label_binning"]["edges"] == list(sk.label_binning_.edges)
            assert rep["classes"] == list(sk.classes_)
            assert rep["selected_indices"] == list(sk.selected_features_)
            np.testing.assert_array_equal(rep["scores"], sk.scores_)
            assert [c["edges"] for c in rep["columns"]] == [c.splits for c in sk.columns_]


def test_auto_treats_a_label_with_more_than_max_classes_integers_as_continuous(spark):
    from vmi_spark.spark.select import run_selection

    rng = np.random.default_rng(3)
    n = 600
    x = rng.normal(size=(n, 3))
    y = np.round(100 * x[:, 2]).astype(np.int64)  # integer amounts, many distinct values
    df = spark.createDataFrame(pd.DataFrame(x, columns=["a", "b", "c"]).assign(y=y))
    run = run_selection(df, "y", num_features=1, max_classes=50)
    assert run.plan.label_type == "continuous" and run.report()["selected"] == ["c"]
    # run_selection names its own keywords; the job its flags (test_job.py)
    with pytest.raises(InputError, match="set label_type continuous .* raise max_classes"):
        run_selection(df, "y", num_features=1, max_classes=50, label_type="categorical")


def test_many_valued_integer_labels_are_a_continuous_target_by_default(spark):
    """A whole-number target with more values than labelBins (the issue's 442 rows with
    214 values, like scikit-learn's diabetes; 116 values with 20 rows each: a weight in
    whole units) is continuous under labelType auto, with the reason in the report;
    asked to be categorical it runs as asked (with a warning when its classes are thin);
    ten classes or fewer stay classes."""
    from vmi_spark.spark.select import run_selection

    rng = np.random.default_rng(4)
    for n, k in ((400, 300), (442, 214), (2320, 116)):
        y = np.concatenate([np.arange(k), rng.integers(0, k, n - k)]).astype(float)
        df = spark.createDataFrame(pd.DataFrame({"a": rng.normal(size=n), "y": y}))
        run = run_selection(df, "y", num_features=1)
        decision = run.report()["label_decision"]
        assert run.plan.label_type == decision["type"] == "continuous", (n, k)
        assert f"{k} distinct values, more than label_bins (10)" in decision["reason"]
    with pytest.warns(UserWarning, match="looks like a regression target"):
        run = run_selection(df.limit(442), "y", num_features=1, label_type="categorical")
    assert run.plan.label_type == "categorical"
    for y in (rng.integers(0, 5, 400), np.repeat(np.arange(10), 21)):  # 5 and 10 classes
        df = spark.createDataFrame(pd.DataFrame({"a": rng.normal(size=len(y)), "y": y}))
        run = run_selection(df, "y", num_features=1)
        assert run.plan.label_type == "categorical"
        assert run.report()["label_decision"]["reason"].startswith(
            f"a numeric label with {len(set(y))} distinct values, at most label_bins")


def test_a_sampled_continuous_label_is_the_same_in_both_readers(spark, tmp_path, set_limits):
    """Above the sample size the label's edges come from the hashed sample of whole rows,
    also when no feature is binned (all categorical): both readers pick the same rows."""
    from vmi_spark.spark.select import run_selection
    from vmi_spark.spark.sources.arrow_source import parquet_source

    set_limits(sample_rows=300)
    rng = np.random.default_rng(6)
    n = 1500
    cat = rng.integers(0, 4, (n, 2)).astype(float)
    y = cat[:, 0] * 10 + rng.normal(size=n)
    path = str(tmp_path / "cat.parquet")
    spark.createDataFrame(pd.DataFrame(cat, columns=["c0", "c1"]).assign(
        amount=rng.normal(size=n), y=y)).repartition(2).write.parquet(path)
    df = spark.read.parquet(path)
    for feats in (["c0", "c1"], ["c0", "c1", "amount"]):
        plans = [run_selection(df, "y", features=feats, num_features=1, source=src,
                               reader="spark").plan
                 for src in (None, parquet_source(df, ["y", *feats]))]
        assert plans[0].label_edges == plans[1].label_edges
        assert plans[0].columns == plans[1].columns
        assert len(plans[0].classes) == 10
        # a sample, not all rows: the edges differ from the exact ones
        assert plans[0].label_edges != list(VMIFeatureSelector().fit(cat, y).label_binning_.edges)


def test_job_label_type_flag(spark, tmp_path):
    import json

    from vmi_spark.job import main

    frame, y = _regression(seed=8, n=800)
    frame.assign(price=y).to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "out"
    rc = main(["--input", str(tmp_path / "in.parquet"), "--label", "price", "--output",
               str(out), "--num-features", "2", "--label-bins", "5", "--quiet"], spark=spark)
    assert rc == 0
    rep = json.loads((out / "selection.json").read_text())
    assert rep["label_type"] == "continuous" and rep["num_classes"] == 5
    assert sorted(rep["selected"]) == ["x0", "x1"]
    assert len(rep["label_binning"]["edges"]) == 4
    assert "continuous" in (out / "report.md").read_text()


def test_model_exposes_the_label_binning(spark):
    from vmi_spark import VMISelector

    frame, y = _regression(seed=9, n=600)
    df = spark.createDataFrame(frame.assign(y=y))
    model = VMISelector(inputCols=list(frame.columns), labelCol="y", numTopFeatures=2,
                        labelBins=3).fit(df)
    sk = VMIFeatureSelector(n_features_to_select=2, label_bins=3).fit(frame, y)
    assert model.getLabelBins() == 3 and model.getLabelType() == "auto"
    assert model.labelBinning["edges"] == list(sk.label_binning_.edges)
    assert model.labelBinning["state_names"] == list(sk.classes_)
    assert model.selectedFeatures == list(sk.selected_features_)
    categorical = VMISelector(inputCols=["x0"], labelCol="c", numTopFeatures=1).fit(
        spark.createDataFrame(frame.assign(c=(y > 0).astype(int))))
    assert categorical.labelBinning is None
