"""The binning strategies as the selectors use them (issue 19): a spike (92 % zeros, a
sentinel) keeps its information, `uniform` gives equal widths, and the Spark path (both
readers, any partitioning) codes and selects exactly as the in-memory selector does.

The expected codes come from small numpy rules written here from the documented
definitions, not from :mod:`vmi_spark.core.binning`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from vmi_spark.core.encoding import ColumnPlan, column_binning, equal_frequency_splits
from vmi_spark.core.tables import mutual_information
from vmi_spark.sklearn import VMIFeatureSelector


def _zero_inflated(seed: int = 0, n: int = 4000):
    """A 92 %-zeros amount whose non-zero values carry the label, and noise columns."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    nonzero = rng.random(n) < 0.08
    amount = np.where(nonzero, np.where(y == 1, rng.uniform(50, 100, n), rng.uniform(1, 50, n)),
                      0.0)
    frame = pd.DataFrame({"noise_a": rng.normal(size=n), "amount": amount,
                          "noise_b": rng.integers(0, 40, n).astype(float) + rng.random(n)})
    return frame, y


def _ref_codes_single_low_spike(v: np.ndarray, num_bins: int) -> np.ndarray:
    """The documented rule for one spike at the minimum: the spike is state 0, the other
    values get num_bins - 1 equal-frequency bins cut at ranks floor(k m / (num_bins - 1))."""
    spike = v.min()
    rest = np.sort(v[v != spike])
    m, b = len(rest), num_bins - 1
    cuts = np.unique(rest[(np.arange(1, b) * m) // b])
    cuts = cuts[cuts > rest[0]]
    return np.where(v == spike, 0, 1 + np.searchsorted(cuts, v, side="right"))


def _codes(plan: ColumnPlan, v: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.asarray(plan.splits), v, side="right")


def test_zero_inflated_column_keeps_its_information():
    frame, y = _zero_inflated()
    v = frame["amount"].to_numpy()
    # the old rule collapses the column: every quantile falls on the zeros
    assert equal_frequency_splits(v, 10) == []
    sel = VMIFeatureSelector(n_features_to_select=1, method="vmi_naive").fit(frame, y)
    plan = sel.columns_[1]
    assert plan.kind == "bins" and plan.spikes == [0.0]
    got = _codes(plan, v)
    want = _ref_codes_single_low_spike(v, 10)
    # the same partition of the rows (codes may be numbered from another base)
    assert len(set(zip(got, want))) == len(set(want)) == 10
    assert list(sel.selected_features_) == [1]  # the informative column is found
    counts = np.zeros((1, 10, 2), dtype=np.int64)
    np.add.at(counts, (0, want, y), 1)
    assert sel.mutual_information_[1] == pytest.approx(float(mutual_information(counts)[0]),
                                                       abs=1e-12)
    assert sel.mutual_information_[1] > 0.03  # the old rule: one state, 0


def test_sentinel_and_zero_spikes_are_states_of_their_own():
    rng = np.random.default_rng(1)
    # -1 holds 30 %, 999 holds 21 % of the rows: both more than 1/5
    v = np.concatenate([np.full(300, -1.0), rng.uniform(0.0, 10.0, 490), np.full(210, 999.0)])
    splits, spikes = column_binning(v, 5)
    assert spikes == [-1.0, 999.0]
    codes = np.searchsorted(splits, v, side="right")
    # each spike alone in its state, and no other value shares it
    for s in spikes:
        assert len(set(codes[v == s])) == 1
        assert not np.isin(codes[v != s], codes[v == s]).any()
    # the 490 ordinary values share the 3 remaining states, cut at ranks floor(k m / 3)
    _, per_state = np.unique(codes[(v > -1) & (v < 999)], return_counts=True)
    assert list(per_state) == list(np.diff([0, 490 // 3, 2 * 490 // 3, 490]))
    labels = ColumnPlan("x", "bins", splits=splits, spikes=spikes).state_labels()
    assert labels[0] == "(-inf, -1]" or "-1" in labels[0]
    assert len(labels) == len(splits) + 1


def test_uniform_binning_gives_equal_widths_between_robust_limits():
    rng = np.random.default_rng(2)
    v = np.concatenate([rng.uniform(0.0, 1.0, 995), [1e6, 2e6, -5e5, 3e6, 4e6]])
    frame = pd.DataFrame({"v": v, "w": rng.random(len(v))})
    y = (v > 0.5).astype(int)
    sel = VMIFeatureSelector(n_features_to_select=1, binning="uniform", num_bins=4).fit(frame, y)
    s = np.sort(v)
    r = int(np.floor(0.005 * len(v)))
    lo, hi = s[r], s[len(v) - 1 - r]
    want = lo + (hi - lo) * np.arange(1, 4) / 4
    np.testing.assert_allclose(sel.columns_[0].splits, want, rtol=0, atol=1e-12)
    assert sel.columns_[0].spikes is None  # equal width knows no spikes


def test_bad_binning_names_the_parameter():
    frame, y = _zero_inflated(n=200)
    with pytest.raises(ValueError, match="unknown binning 'kmeans'"):
        VMIFeatureSelector(binning="kmeans").fit(frame, y)


@pytest.mark.parametrize("binning", ["quantile", "uniform", "mdlp"])
def test_spark_codes_and_selects_like_the_in_memory_selector(spark, tmp_path, binning):
    from vmi_spark.spark.select import run_selection
    from vmi_spark.spark.sources.arrow_source import parquet_source

    frame, y = _zero_inflated(seed=3, n=3000)
    pdf = frame.assign(y=y)
    path = str(tmp_path / "data.parquet")
    spark.createDataFrame(pdf).repartition(3).write.parquet(path)
    sk = VMIFeatureSelector(n_features_to_select=3, method="vmi_pairwise",
                            binning=binning).fit(frame, y)
    df = spark.read.parquet(path)
    names = ["noise_a", "amount", "noise_b"]
    reports = []
    for source in (None, parquet_source(df, ["y", *names])):
        for frame_df in (df, df.coalesce(1)):
            run = run_selection(frame_df if source is None else df, "y", features=names,
                                method="vmi_pairwise", num_features=3, binning=binning,
                                source=source, reader="spark")
            reports.append(run.report())
    for rep in reports:
        assert rep["selected_indices"] == list(sk.selected_features_)
        np.testing.assert_array_equal(rep["scores"], sk.scores_)
        amount = rep["columns"][1]
        assert amount["binning"] == binning
        assert amount["edges"] == sk.columns_[1].splits
        assert amount["spikes"] == (sk.columns_[1].spikes or [])
        assert len(amount["state_names"]) == amount["states"]
    assert reports[0]["parameters"]["binning"] == binning
    from vmi_spark.report import render_markdown

    text = render_markdown(reports[0])
    if "amount" in reports[0]["selected"]:
        assert "## States of the selected columns" in text
        row = next(line for line in text.splitlines() if line.startswith("| amount |"))
        assert f"| bins ({binning}) |" in row
        assert all(name in row for name in reports[0]["columns"][1]["state_names"])


def test_model_exposes_the_bins(spark):
    from vmi_spark import VMISelector

    frame, y = _zero_inflated(seed=4, n=2000)
    df = spark.createDataFrame(frame.assign(y=y))
    model = VMISelector(inputCols=list(frame.columns), labelCol="y", numTopFeatures=1).fit(df)
    sk = VMIFeatureSelector(n_features_to_select=1).fit(frame, y)
    bins = model.columnBins
    assert set(bins) == {"noise_a", "amount", "noise_b"}
    assert bins["amount"]["spikes"] == [0.0]
    assert bins["amount"]["edges"] == sk.columns_[1].splits
    assert bins["amount"]["state_names"] == sk.columns_[1].state_labels()


def test_infinite_edges_are_written_as_strings(spark, tmp_path):
    """A column holding inf as a spike: selection.json stays valid JSON (no Infinity)."""
    import json

    from vmi_spark.job import main

    # 120 rows: 10 states a column fit 5 rows a cell (the state budget keeps numBins 10)
    pd.DataFrame({"a": ([0.0] * 30 + [np.inf] * 10 + list(np.linspace(1, 2, 20))) * 2,
                  "y": [0, 1] * 60}).to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "out"
    rc = main(["--input", str(tmp_path / "in.parquet"), "--label", "y", "--output", str(out),
               "--num-features", "1", "--max-categories", "2", "--quiet"], spark=spark)
    assert rc == 0
    col = json.loads((out / "selection.json").read_text())["columns"][0]
    assert col["kind"] == "bins" and "inf" in col["spikes"] and "inf" in col["edges"]
