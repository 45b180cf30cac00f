"""selectionMode / selection_mode in the front ends: the scikit-learn selector and the
Spark estimator give the core's threshold and fraction selections (the core itself is
checked against slow references in ``test_selection_modes``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmi_spark.core.greedy import select_classic, select_vmi
from vmi_spark.core.inmemory import InMemoryBackend
from vmi_spark.params import ParameterError, selection_size
from vmi_spark.sklearn import VMIFeatureSelector


def _data(seed=3, n=600, d=9):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 3, size=(n, d))
    y = (X[:, 0] + (X[:, 1] > 0) + rng.integers(0, 2, n)) % 3
    X[:, 4] = np.where(rng.random(n) < 0.3, X[:, 0], X[:, 4])
    return X, y


def test_selection_size_rule():
    assert selection_size("numTopFeatures", None, 7, 100) == (7, None)
    assert selection_size("gain", None, 7, 100) == (100, None)  # on the evidence
    assert selection_size("numTopFeatures", None, None, 100) == (50, None)
    assert selection_size("numTopFeatures", None, None, 12) == (12, None)
    assert selection_size("gain", 0.2, 7, 100) == (100, 0.2)
    assert selection_size("fraction", None, 7, 100) == (10, None)
    assert selection_size("fraction", 0.7, 7, 10) == (7, None)  # 0.7 * 10 is 6.999...
    assert selection_size("fraction", 0.01, 7, 10) == (1, None)  # at least one
    assert selection_size("fraction", 1.0, 7, 13) == (13, None)


@pytest.mark.parametrize("method", ["vmi_naive", "vmi_pairwise", "mrmr", "mim"])
def test_sklearn_gain_mode_equals_the_core(method):
    X, y = _data()
    codes = X.T.astype(np.uint8)
    backend = InMemoryBackend(codes, y)
    core = (select_vmi(backend, method, X.shape[1], min_gain=0.02) if method.startswith("vmi")
            else select_classic(backend, method, X.shape[1], min_gain=0.02))
    assert core.stop_reason == "threshold"  # the data must exercise the rule
    sel = VMIFeatureSelector(method=method, selection_mode="gain",
                             selection_threshold=0.02).fit(X, y)
    assert list(sel.selected_features_) == core.selected
    np.testing.assert_array_equal(sel.scores_, core.scores)
    assert sel.stop_reason_ == "threshold"
    assert "below the threshold 0.02" in sel.stopped_early_


def test_sklearn_fraction_mode_selects_the_prefix():
    X, y = _data()
    full = VMIFeatureSelector(n_features_to_select=9, method="cmim").fit(X, y)
    part = VMIFeatureSelector(selection_mode="fraction", selection_threshold=0.5,
                              method="cmim").fit(X, y)
    assert len(part.selected_features_) == math.floor(0.5 * 9)
    assert list(part.selected_features_) == list(full.selected_features_[:4])
    assert part.stop_reason_ == "num_features"


def test_bad_selection_parameters_name_the_parameter():
    X, y = _data()
    with pytest.raises(ParameterError, match="selection_threshold must be a fraction"):
        VMIFeatureSelector(selection_mode="fraction", selection_threshold=2.0).fit(X, y)
    with pytest.raises(ParameterError, match="selection_mode 'gain' is not defined"):
        VMIFeatureSelector(selection_mode="gain", method="spec_cmi").fit(X, y)
    with pytest.raises(ParameterError, match="unknown selection_mode"):
        VMIFeatureSelector(selection_mode="top").fit(X, y)
    with pytest.raises(ParameterError, match="selection_threshold must be >= 0"):
        VMIFeatureSelector(selection_mode="gain", selection_threshold=-1.0).fit(X, y)


def test_estimator_gain_mode_matches_sklearn(spark):
    import pandas as pd

    from vmi_spark import VMISelector

    X, y = _data()
    names = [f"x{j}" for j in range(X.shape[1])]
    pdf = pd.DataFrame(X, columns=names)
    pdf["y"] = y
    df = spark.createDataFrame(pdf)
    sk = VMIFeatureSelector(method="vmi_naive", selection_mode="gain",
                            selection_threshold=0.02, max_categories=32).fit(pdf[names], y)
    est = VMISelector(inputCols=names, labelCol="y", selectionMode="gain",
                      selectionThreshold=0.02)
    assert est.getSelectionMode() == "gain" and est.getSelectionThreshold() == 0.02
    model = est.fit(df)
    assert model.selectedFeatures == list(sk.selected_features_)
    np.testing.assert_array_equal(model.scores, sk.scores_)
    assert model.report["stop_reason"] == "threshold"
    assert VMISelector().getSelectionThreshold() is None
    with pytest.raises(ParameterError, match="selectionMode"):
        VMISelector(selectionMode="percentile")


def test_job_gain_mode_writes_the_stop_reason(spark, tmp_path, capsys):
    import json

    import pandas as pd

    from vmi_spark.job import main

    X, y = _data()
    names = [f"x{j}" for j in range(X.shape[1])]
    pdf = pd.DataFrame(X, columns=names)
    pdf["y"] = y
    pdf.to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "out"
    rc = main(["--input", str(tmp_path / "in.parquet"), "--label", "y", "--output", str(out),
               "--method", "mrmr", "--selection-mode", "gain", "--selection-threshold", "0.02",
               "--quiet"], spark=spark)
    assert rc == 0
    report = json.loads((out / "selection.json").read_text())
    sk = VMIFeatureSelector(method="mrmr", selection_mode="gain",
                            selection_threshold=0.02).fit(pdf[names], y)
    assert report["selected_indices"] == list(sk.selected_features_)
    assert report["stop_reason"] == "threshold"
    assert report["parameters"]["selection_mode"] == "gain"


def test_job_refuses_a_bad_fraction_before_spark(tmp_path, capsys):
    from vmi_spark.job import main

    rc = main(["--input", str(tmp_path / "missing"), "--label", "y", "--output",
               str(tmp_path / "out"), "--selection-mode", "fraction",
               "--selection-threshold", "1.5"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "--selection-threshold must be a fraction in (0, 1] with --selection-mode" in err
    assert not (tmp_path / "out").exists()
