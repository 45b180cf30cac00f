"""Row weights in the numpy core and the in-memory front end (issue 36).

The property everything rests on: a table whose rows carry integer weights gives, bit for
bit, the plan, counts, selection and scores of the same table with each row repeated that
many times. Checked kernel by kernel, for every method through the greedy loop, and end to
end through the scikit-learn selector (bin edges, grouped categories, a continuous label);
the weighted bound and mutual information also against slow float64 definitions written
here, and the wide sums against Python integers.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from vmi_spark.core import bound, criteria, kernels, wide
from vmi_spark.core.bound import NAIVE, PAIRWISE, StepOps
from vmi_spark.core.greedy import select
from vmi_spark.core.inmemory import InMemoryBackend
from vmi_spark.core.tables import conditional, products_equal
from vmi_spark.core.weights import FRACTION_SCALE, MAX_TOTAL_WEIGHT, WeightStats, present, units
from vmi_spark.errors import ParameterError
from vmi_spark.sklearn import VMIFeatureSelector

numba_only = pytest.mark.skipif(kernels.BACKEND != "numba", reason="numba is not installed")
METHODS = [c.name for c in criteria.CRITERIA]


def _table(seed, n=600, d=8, arity=4, classes=3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    codes = ((rng.integers(0, arity, (d, n)) + (rng.random((d, n)) < 0.5) * y) % arity)
    return codes.astype(np.uint8), y, rng.integers(1, 6, n)


def _bits(values):
    return [float(v).hex() for v in values]


# ---------------------------------------------------------------- wide sums, exact products
def test_limb_dot_is_the_exact_integer_sum():
    rng = np.random.default_rng(0)
    for trial in range(50):
        n = int(rng.integers(1, 2000))
        hi = 2**42 if trial % 2 else 7
        w = rng.integers(0, hi, (3, n))
        t = rng.integers(-2**42 + 1, 2**42, (3, n))
        part = wide.limb_dot(w, t)
        assert ((part[1] >= 0) & (part[1] < 2**32)).all()
        want = [sum(int(a) * int(b) for a, b in zip(w[j], t[j])) for j in range(3)]
        assert list(wide.exact(part)) == want


def test_products_equal_past_int64():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2**45, 500), rng.integers(0, 2**45, 500)
    c, d = b.copy(), a.copy()
    c[::3] += 1  # a third differ by one
    got = products_equal(a, b, c, d)
    assert got.tolist() == [int(x) * int(y) == int(z) * int(v) for x, y, z, v in zip(a, b, c, d)]
    assert products_equal(np.array([3]), np.array([4]), np.array([2]), np.array([6])).all()


# ---------------------------------------------------------------- kernels: weights = repeats
@pytest.mark.parametrize("num_classes", [2, 3])
def test_weighted_loops_equal_repeated_rows_and_numpy(num_classes):
    codes, y, w = _table(num_classes, n=900, d=7, classes=num_classes)
    rep = np.repeat(np.arange(len(y)), w)
    counts = InMemoryBackend(codes, y, 4, num_classes).feature_counts()
    cond = conditional(counts)
    rng = np.random.default_rng(5)
    post = rng.random((num_classes, len(y)))
    post /= post.sum(axis=0)
    cands = np.array([0, 2, 3, 6])
    for name, fn, fn_np in (("mix", kernels.mix_log_sums_w, kernels.mix_log_sums_w_np),):
        got = fn(codes, cands, post, cond, w)
        assert np.array_equal(got, fn_np(codes, cands, post, cond, w)), name
        assert list(wide.exact(got)) == list(kernels.mix_log_sums(
            np.ascontiguousarray(codes[:, rep]), cands, np.ascontiguousarray(post[:, rep]), cond))
    ids = rng.integers(0, 5, len(y)).astype(np.intp)
    got = kernels.pattern_counts_w(codes, cands, ids, 5, 4, w)
    assert np.array_equal(got, kernels.pattern_counts_w_np(codes, cands, ids, 5, 4, w))
    assert np.array_equal(got, kernels.pattern_counts(np.ascontiguousarray(codes[:, rep]), cands,
                                                      ids[rep], 5, 4))
    got = kernels.pair_counts_w(codes, y, 3, 4, num_classes, w)
    assert np.array_equal(got, kernels.pair_counts_w_np(codes, y, 3, 4, num_classes, w))
    assert np.array_equal(got, kernels.pair_counts(np.ascontiguousarray(codes[:, rep]), y[rep],
                                                   3, 4, num_classes))
    # the pairwise scores, per row and per (pattern, x_i, y) cell
    others = num_classes - 1
    ratio = rng.normal(size=(7, len(y), others))
    pst = np.ascontiguousarray(post.T)
    got = kernels.pair_scores_w(ratio, pst, y, cands, 2, w)
    assert np.array_equal(got, kernels.pair_scores_w_np(ratio, pst, y, cands, 2, w))
    want = kernels.pair_scores(np.ascontiguousarray(ratio[:, rep]), np.ascontiguousarray(pst[rep]),
                               y[rep], cands, 2)
    assert list(wide.exact(got)) == list(want)
    # cells: the rows of a (pattern, x_i, y) cell share their numbers, the posterior is
    # the pattern's
    pattern_post = rng.random((5, num_classes))
    pattern_post /= pattern_post.sum(axis=1, keepdims=True)
    cell_post = pattern_post[ids]
    table = rng.normal(size=(7, 5, 4, num_classes, others))
    cell_ratio = table[np.arange(7)[:, None], ids[None, :], codes, y[None, :]]
    got = kernels.pair_cell_scores_w(cell_ratio, cell_post, codes, ids, y, cands, 2, 4, 5, w)
    assert np.array_equal(got, kernels.pair_cell_scores_w_np(cell_ratio, cell_post, codes, ids, y,
                                                             cands, 2, 4, 5, w))
    assert list(wide.exact(got)) == list(wide.exact(
        kernels.pair_scores_w(cell_ratio, cell_post, y, cands, 2, w)))


def test_chunk_sums_past_int64_are_exact():
    """Weights near the limit: a chunk's sum needs about 80 bits; Python ints agree."""
    codes, y, _ = _table(9, n=300, d=5, classes=2)
    w = np.full(300, 2**33, dtype=np.int64)  # 300 x 2**33 < 2**42 in all
    counts = InMemoryBackend(codes, y, 4, 2, w=w).feature_counts()
    cond = conditional(counts)
    prior = counts[0].sum(axis=0) / counts[0].sum()
    ops = StepOps(NAIVE, prior, cond, np.ones(5, bool), block=(0,))
    part = bound.naive_partials(codes, ops, None, w)
    unit = bound.naive_partials(codes, ops)  # the same rows, weight 1
    assert list(wide.exact(part)) == [int(v) * 2**33 for v in unit]
    assert max(abs(int(v)) for v in wide.exact(part)) > 2**63
    own = bound.naive_own(counts, cond)
    assert own.dtype == object
    assert list(own) == [int(v) * 2**33 for v in bound.naive_own(counts // 2**33, cond)]


# ---------------------------------------------------------------- the greedy loop
@pytest.mark.parametrize("method", METHODS)
def test_every_method_weighted_is_the_repeated_table_bit_for_bit(method):
    codes, y, w = _table(11)
    rep = np.repeat(np.arange(len(y)), w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rows in (64, 65536):
            a = select(InMemoryBackend(codes, y, 4, 3, chunk_rows=rows, w=w), method, 5)
            b = select(InMemoryBackend(codes[:, rep], y[rep], 4, 3, chunk_rows=rows), method, 5)
            assert (a.selected, a.blocks) == (b.selected, b.blocks)
            assert _bits(a.scores) == _bits(b.scores)
            assert _bits(a.gains) == _bits(b.gains)
            assert _bits(a.mutual_information) == _bits(b.mutual_information)
            assert a.num_rows == b.num_rows == int(w.sum())


@pytest.mark.parametrize("method", [NAIVE, PAIRWISE])
def test_weighted_selection_same_with_numpy_loops(method):
    codes, y, w = _table(12)
    want = select(InMemoryBackend(codes, y, 4, 3, chunk_rows=128, w=w), method, 5)
    with kernels.using("numpy"):
        got = select(InMemoryBackend(codes, y, 4, 3, chunk_rows=128, w=w), method, 5)
    assert got.selected == want.selected and _bits(got.scores) == _bits(want.scores)


def _slow_naive_bound(codes, y, w, block, num_classes):
    """I_LB of ``block`` under the naive Q from weighted counts, in plain float64."""
    total = w.sum()
    prior = np.array([w[y == c].sum() for c in range(num_classes)]) / total
    lb = 0.0
    for k in range(len(y)):
        q = np.array(prior)
        for f in block:
            for c in range(num_classes):
                q[c] *= w[(codes[f] == codes[f, k]) & (y == c)].sum() / w[y == c].sum()
        lb += w[k] * (math.log(q[y[k]] / q.sum()) - math.log(prior[y[k]]))
    return lb / total


def _slow_mi(x, y, w):
    total = w.sum()
    mi = 0.0
    for a in np.unique(x):
        for c in np.unique(y):
            n = w[(x == a) & (y == c)].sum()
            if n:
                mi += n / total * math.log(n * total / (w[x == a].sum() * w[y == c].sum()))
    return mi


def test_weighted_bound_and_mi_against_slow_definitions():
    codes, y, w = _table(13, n=250, d=5, classes=2)
    sel = select(InMemoryBackend(codes, y, 4, 2, chunk_rows=64, w=w), NAIVE, 3,
                 restart_tolerance=float("-inf"))
    for i in range(5):
        assert sel.mutual_information[i] == pytest.approx(_slow_mi(codes[i], y, w), abs=1e-12)
    for step in range(1, 4):
        want = _slow_naive_bound(codes, y, w, sel.selected[:step], 2)
        assert sel.scores[step - 1] == pytest.approx(want, abs=1e-9)


def test_fractional_weights_are_rounded_to_1024ths():
    w = np.array([0.0, 2**-12, 2**-11, 0.0007, 0.3, 1.0, 2.5])
    assert present(w).tolist() == [False, False, False, True, True, True, True]
    assert units(w, FRACTION_SCALE).tolist() == [0, 0, 0, 1, 307, 1024, 2560]
    stats = WeightStats()
    stats.add(w)
    assert (stats.present, stats.absent, stats.whole, stats.scale) == (4, 3, False, 1024)
    assert stats.total_units == 1 + 307 + 1024 + 2560
    whole = WeightStats()
    whole.add(np.array([0.0, 3.0, 1.0]))
    assert (whole.scale, whole.total_units, whole.absent) == (1, 4, 1)


def test_bad_weights_are_counted_and_named():
    stats = WeightStats()
    stats.add(np.array([1.0, np.nan, -2.0, np.inf, 3.0]))
    assert (stats.null, stats.negative, stats.infinite) == (1, 1, 1)
    msg = ParameterError("weight_col", stats.problem("w")).phrase("cli")
    assert msg == "--weight-col 'w' has 1 null or NaN value; weights must be finite and non-negative"
    zero = WeightStats()
    zero.add(np.zeros(4))
    assert ParameterError("weight_col", zero.problem("w")).phrase("ml").startswith(
        "every weight of weightCol 'w' is 0")
    big = WeightStats.merge([{"null": 0, "negative": 0, "infinite": 0, "present": 2, "absent": 0,
                              "whole": True, "fine_units": MAX_TOTAL_WEIGHT * 1024}])
    assert "divide them by a constant" in big.problem("w")


# ---------------------------------------------------------------- the scikit-learn selector
def _frame(seed, n=300):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = pd.DataFrame({
        "cont": rng.normal(size=n) + y,
        "spiky": np.where(rng.random(n) < 0.5, 0.0, rng.normal(size=n) + y),
        "cat": rng.integers(0, 4, n),
        "s": [f"v{v}" for v in rng.integers(0, 60, n)],
        "gaps": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n) * y)})
    return x, y, rng.integers(0, 4, n)


@pytest.mark.parametrize("binning", ["quantile", "uniform", "mdlp"])
@pytest.mark.parametrize("method", [NAIVE, PAIRWISE, "jmi"])
def test_sklearn_sample_weight_is_the_repeated_table(binning, method):
    x, y, w = _frame(3)
    rep = np.repeat(np.arange(len(y)), w)
    kw = dict(n_features_to_select=4, method=method, binning=binning, max_categories=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = VMIFeatureSelector(**kw).fit(x, y, sample_weight=w)
        b = VMIFeatureSelector(**kw).fit(x.iloc[rep].reset_index(drop=True), y[rep])
    assert a.selected_features_.tolist() == b.selected_features_.tolist()
    assert a.scores_.tobytes() == b.scores_.tobytes()
    assert [(c.splits, c.spikes, c.values) for c in a.columns_] == \
        [(c.splits, c.spikes, c.values) for c in b.columns_]
    assert a.plan_.weights == {"column": "sample_weight", "integer": True, "scale": 1,
                               "total": float(w.sum()), "total_units": int(w.sum()),
                               "rows": int((w > 0).sum()), "rows_zero_weight": int((w == 0).sum())}


def test_sklearn_continuous_label_classes_follow_the_weights():
    x, _, w = _frame(4)
    yc = x["cont"].to_numpy() * 2 + np.random.default_rng(4).normal(size=len(x))
    rep = np.repeat(np.arange(len(x)), w)
    kw = dict(n_features_to_select=3, label_type="continuous")
    a = VMIFeatureSelector(**kw).fit(x, yc, sample_weight=w)
    b = VMIFeatureSelector(**kw).fit(x.iloc[rep].reset_index(drop=True), yc[rep])
    assert a.plan_.label_edges == b.plan_.label_edges
    assert a.scores_.tobytes() == b.scores_.tobytes()


def test_sklearn_weight_scale_does_not_matter_for_the_bound():
    """Fractional weights are 1024ths: scaling every weight by a power of two is exact."""
    x, y, w = _frame(5)
    a = VMIFeatureSelector(n_features_to_select=3).fit(x, y, sample_weight=w * 0.5)
    b = VMIFeatureSelector(n_features_to_select=3).fit(x, y, sample_weight=w * 0.25)
    assert a.plan_.weights["scale"] == 1024
    assert a.selected_features_.tolist() == b.selected_features_.tolist()
    assert a.scores_.tobytes() == b.scores_.tobytes()


@pytest.mark.parametrize("weights,message", [
    ("nan", "sample_weight has 1 null or NaN value; weights must be finite and non-negative"),
    ("negative", "sample_weight has 1 negative value; weights must be finite and non-negative"),
    ("zero", "every weight of sample_weight is 0 (or below 2**-11, which rounds to 0): no row "
             "is left with a non-zero weight"),
    ("strings", "sample_weight must hold numbers, not <U1"),
    ("short", "sample_weight must have shape (300,) like X's rows, got (3,)"),
])
def test_sklearn_bad_sample_weight_is_one_line(weights, message):
    x, y, w = _frame(6)
    bad = {"nan": np.where(np.arange(300) == 7, np.nan, 1.0),
           "negative": np.where(np.arange(300) == 7, -1.0, 1.0),
           "zero": np.zeros(300), "strings": np.array(["a"] * 300),
           "short": np.ones(3)}[weights]
    with pytest.raises(ValueError) as info:
        VMIFeatureSelector().fit(x, y, sample_weight=bad)
    assert str(info.value) == message
