"""The KDE estimator (binned Gaussian KDE of p(x_i | y)) against direct computations."""

from __future__ import annotations

import numpy as np
import pytest

from vmi_spark.core.kde import MIN_BANDWIDTH, kde_conditional, silverman_bandwidth, smooth
from vmi_spark.errors import InputError
from vmi_spark.spark.select import run_selection
from vmi_spark.synthetic import tree_model


def _direct_kde(cells_of_rows, grid, h):
    """Gaussian kernels summed sample by sample at every grid cell, normalised on the grid."""
    g = np.arange(grid, dtype=np.float64)
    dens = np.zeros(grid)
    for c in cells_of_rows:
        dens += np.exp(-0.5 * ((g - c) / h) ** 2) * (np.abs(g - c) <= np.ceil(5 * h))
    return dens / dens.sum()


def test_silverman_bandwidth_from_the_expanded_sample():
    rng = np.random.default_rng(0)
    sample = np.clip(np.rint(rng.normal(100, 12, 700)), 0, 249).astype(int)
    hist = np.bincount(sample, minlength=250)
    sd = sample.std(ddof=1)
    q1, q3 = np.quantile(sample, [0.25, 0.75], method="inverted_cdf")
    expected = 0.9 * min(sd, (q3 - q1) / 1.34) * len(sample) ** -0.2
    assert silverman_bandwidth(hist) == pytest.approx(expected, rel=1e-12)
    assert silverman_bandwidth(np.bincount([5], minlength=9)) == MIN_BANDWIDTH


@pytest.mark.parametrize("h", [0.5, 1.7, 6.0])
def test_binned_smoothing_equals_the_sum_of_kernels(h):
    rng = np.random.default_rng(1)
    sample = rng.integers(20, 60, 150)
    hist = np.bincount(sample, minlength=80)
    assert np.allclose(smooth(hist, h), _direct_kde(sample, 80, h), rtol=0, atol=1e-13)


def test_kde_conditional_keeps_missing_state_and_plain_columns():
    counts = np.zeros((2, 5, 2), dtype=np.int64)
    counts[0, :4, 0] = [3, 1, 0, 0]
    counts[0, 4, 0] = 2  # missing state of class 0
    counts[0, :4, 1] = [0, 0, 2, 4]
    counts[1, :2, 0] = [5, 1]
    counts[1, :2, 1] = [1, 5]
    cond = kde_conditional(counts, [0], [4, 2], [True, False])
    assert cond[0, 4, 0] == pytest.approx(2 / 6) and cond[0, 4, 1] == 0.0
    assert cond[0, :4, 0].sum() == pytest.approx(4 / 6)
    assert cond[0, :4, 1].sum() == pytest.approx(1.0)
    assert (cond[0, :4, 0] > 0).all()  # smoothed onto cells class 0 never hit
    assert np.array_equal(cond[1, :2], counts[1, :2] / counts[1, :2].sum(axis=0))


def test_kde_first_bound_is_the_kde_mutual_information(spark):
    """The first step's bound is 1/N sum log f_y(x) / sum_y' p(y') f_y'(x) under the KDE."""
    pdf = tree_model(3000, seed=3)
    run = run_selection(spark.createDataFrame(pdf).repartition(3), "y", method="vmi_naive",
                        num_features=1, estimator="kde")
    col = next(c for c in run.plan.columns if c.name == run.report()["selected"][0])
    assert col.kind == "grid" and len(col.splits) == 249
    x = pdf[col.name].to_numpy()
    cells = np.searchsorted(np.asarray(col.splits), x, side="right")
    y = pdf["y"].to_numpy()
    classes = np.unique(y)
    prior = np.array([(y == c).mean() for c in classes])
    dens = []
    for c in classes:
        h = silverman_bandwidth(np.bincount(cells[y == c], minlength=250))
        dens.append(_direct_kde(cells[y == c], 250, h))
    f = np.stack(dens, axis=1)[cells]  # (N, L)
    own = f[np.arange(len(y)), np.searchsorted(classes, y)]
    expected = np.mean(np.log(own / (f @ prior)))
    assert run.selection.scores[0] == pytest.approx(expected, abs=1e-9)


def test_tree_model_with_kde_selects_x1_x2_x3_then_restarts(spark):
    pdf = tree_model(5000, seed=0)
    run = run_selection(spark.createDataFrame(pdf), "y", method="vmi_naive", num_features=4,
                        estimator="kde")
    rep = run.report()
    assert rep["selected"][:3] == ["x1", "x2", "x3"]
    assert rep["blocks"] == [0, 0, 0, 1]  # the 4th step starts a new block


def test_kde_is_for_vmi_naive_only(spark):
    df = spark.createDataFrame(tree_model(200, seed=0))
    with pytest.raises(InputError, match="vmi_naive only"):
        run_selection(df, "y", method="vmi_pairwise", num_features=2, estimator="kde")
    with pytest.raises(InputError, match="unknown estimator"):
        run_selection(df, "y", num_features=2, estimator="parzen")
