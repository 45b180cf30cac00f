"""Tests of vmi_spark.core.tables against hand-computed count tables.

Every expected value below is worked out by hand (or from a closed form) in the
comments; nothing is copied from the output of the code under test.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from vmi_spark.core.tables import (
    conditional,
    entropy,
    log_likelihood_sums,
    mutual_information,
    pair_conditional,
    safe_log,
)

LOG2 = math.log(2.0)
LOG3 = math.log(3.0)


# --------------------------------------------------------------------------- conditional


def test_conditional_normalises_over_states_per_class():
    # counts[a, y]: class 0 column (3, 1) -> (3/4, 1/4); class 1 column (0, 2) -> (0, 1)
    counts = np.array([[3, 0],
                       [1, 2]])
    expected = np.array([[0.75, 0.0],
                         [0.25, 1.0]])
    np.testing.assert_array_equal(conditional(counts), expected)


def test_conditional_zero_over_zero_is_zero():
    # class 1 never observed: its column is 0/0 and must become 0, not nan
    counts = np.array([[2, 0, 1],
                       [2, 0, 3]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero RuntimeWarning either
        p = conditional(counts)
    expected = np.array([[0.5, 0.0, 0.25],
                         [0.5, 0.0, 0.75]])
    np.testing.assert_array_equal(p, expected)
    assert not np.isnan(p).any()


def test_conditional_leading_feature_axis():
    # counts[i, a, y] for two features; normalisation is over a only, per (i, y)
    counts = np.array([
        [[1, 0], [1, 4]],   # feature 0: class0 (1,1) -> (1/2,1/2); class1 (0,4) -> (0,1)
        [[0, 0], [0, 5]],   # feature 1: class0 never seen -> (0,0); class1 -> (0,1)
    ])
    expected = np.array([
        [[0.5, 0.0], [0.5, 1.0]],
        [[0.0, 0.0], [0.0, 1.0]],
    ])
    np.testing.assert_array_equal(conditional(counts), expected)


def test_pair_conditional_normalises_over_axis_one():
    # counts3[i, a, b, y] = n(x_i=a, x_f=b, y), one feature i, binary a and b, one class.
    # b=0 column: n(a=0)=1, n(a=1)=3 -> (1/4, 3/4); b=1 column: (0, 0) -> 0/0 -> (0, 0)
    counts3 = np.zeros((1, 2, 2, 1), dtype=np.int64)
    counts3[0, 0, 0, 0] = 1
    counts3[0, 1, 0, 0] = 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = pair_conditional(counts3)
    assert p.shape == (1, 2, 2, 1)
    assert p[0, 0, 0, 0] == 0.25
    assert p[0, 1, 0, 0] == 0.75
    assert p[0, 0, 1, 0] == 0.0
    assert p[0, 1, 1, 0] == 0.0


# --------------------------------------------------------------------------- safe_log


def test_safe_log_zero_is_minus_inf_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = safe_log(np.array([0.0, 1.0, 0.5, math.e]))
    assert out[0] == -np.inf
    assert out[1] == 0.0
    assert out[2] == pytest.approx(-LOG2, abs=1e-15)
    assert out[3] == pytest.approx(1.0, abs=1e-15)


# --------------------------------------------------------------------------- mutual information


def test_mi_perfectly_dependent_binary_is_log2():
    # x == y, each of the two states 5 times: I = H(y) = log 2
    counts = np.array([[[5, 0],
                        [0, 5]]])
    mi = mutual_information(counts)
    assert mi.shape == (1,)
    assert mi[0] == pytest.approx(LOG2, abs=1e-14)


def test_mi_perfectly_dependent_three_states_is_log3():
    # x is a relabelling of y with three equiprobable classes: I = log 3
    counts = np.array([[[0, 4, 0],
                        [0, 0, 4],
                        [4, 0, 0]]])
    assert mutual_information(counts)[0] == pytest.approx(LOG3, abs=1e-14)


def test_mi_exactly_independent_table_is_exactly_zero():
    # n(a, y) = [[1, 2], [2, 4]], N = 9: n(a) = (3, 6), n(y) = (3, 6) and
    # n(a, y) * N == n(a) * n(y) in every cell, so the sample is exactly independent.
    counts = np.array([[[1, 2],
                        [2, 4]]])
    assert mutual_information(counts)[0] == 0.0


def test_mi_larger_exactly_independent_table_is_exactly_zero():
    # outer product of (1, 2, 3) (states) and (2, 5) (classes): exactly independent;
    # the plain plug-in formula has rounding residue here, the contract says exactly 0.0
    counts = np.outer([1, 2, 3], [2, 5])[None] * 7
    assert mutual_information(counts)[0] == 0.0


def test_mi_constant_column_is_exactly_zero():
    # a constant feature (only state 0 observed) with unbalanced classes
    counts = np.array([[[5, 3, 9],
                        [0, 0, 0]]])
    assert mutual_information(counts)[0] == 0.0


def test_mi_closed_form_two_by_two():
    # n(a, y) = [[2, 1], [1, 2]], N = 6, all margins 1/2:
    # I = 2 * (2/6) log((2/6)/(1/4)) + 2 * (1/6) log((1/6)/(1/4))
    #   = (2/3) log(4/3) + (1/3) log(2/3)
    counts = np.array([[[2, 1],
                        [1, 2]]])
    expected = (2 / 3) * math.log(4 / 3) + (1 / 3) * math.log(2 / 3)
    assert mutual_information(counts)[0] == pytest.approx(expected, abs=1e-14)
    assert expected == pytest.approx(0.0566330122651324, abs=1e-15)


def test_mi_closed_form_three_states_unbalanced_classes():
    # 8 samples: x0 = (0,0,1 | 1,1,0,2,2) with y = (0,0,0 | 1,1,1,1,1)
    # p(x, y): (0,0)=2/8 (1,0)=1/8 (2,0)=0 (0,1)=1/8 (1,1)=2/8 (2,1)=2/8
    # p(x) = (3/8, 3/8, 2/8), p(y) = (3/8, 5/8)
    # I = 1/4 log(16/9) + 1/8 log(8/9) + 1/8 log(8/15) + 1/4 log(16/15) + 1/4 log(8/5)
    counts = np.array([[[2, 1],
                        [1, 2],
                        [0, 2]]])
    expected = (0.25 * math.log(16 / 9) + 0.125 * math.log(8 / 9) + 0.125 * math.log(8 / 15)
                + 0.25 * math.log(16 / 15) + 0.25 * math.log(8 / 5))
    assert mutual_information(counts)[0] == pytest.approx(expected, abs=1e-14)
    assert expected == pytest.approx(0.184178, abs=5e-7)


def test_mi_per_feature_vectorised():
    # three features in one table, each with its own closed form
    counts = np.array([
        [[5, 0], [0, 5]],        # log 2
        [[1, 2], [2, 4]],        # N=9 exactly independent -> 0
        [[2, 1], [1, 2]],        # (2/3) log(4/3) + (1/3) log(2/3)
    ])
    expected = [LOG2, 0.0, (2 / 3) * math.log(4 / 3) + (1 / 3) * math.log(2 / 3)]
    mi = mutual_information(counts)
    assert mi.shape == (3,)
    assert mi[1] == 0.0
    np.testing.assert_allclose(mi, expected, rtol=0, atol=1e-14)


def _mi_from_entropies(table):
    """Independent check: I = H(x) + H(y) - H(x, y) from a 2-D count table."""
    t = np.asarray(table, dtype=float)
    n = t.sum()

    def h(c):
        p = c[c > 0] / n
        return -float(np.sum(p * np.log(p)))

    return h(t.sum(axis=1)) + h(t.sum(axis=0)) - h(t.ravel())


def test_mi_matches_entropy_decomposition_on_random_tables():
    rng = np.random.default_rng(12345)
    tables = rng.integers(0, 7, size=(20, 4, 3))
    tables[3, 2, :] = 0   # an unobserved state
    tables[5, :, 1] = 0   # an unobserved class
    mi = mutual_information(tables)
    for i, t in enumerate(tables):
        assert mi[i] == pytest.approx(_mi_from_entropies(t), abs=1e-12)
        assert mi[i] >= 0.0


# --------------------------------------------------------------------------- log-likelihood sums


def test_log_likelihood_sums_hand_computed():
    # feature 0: n(a, y) = [[3, 0], [1, 2]]: p(a|y=0) = (3/4, 1/4), p(a|y=1) = (0, 1)
    #   sum_k log p(x_k | y_k) = 3 log(3/4) + 1 log(1/4) + 2 log 1
    # feature 1: constant -> p = 1 everywhere -> 0 exactly
    # feature 2: n(a, y) = [[2, 1], [2, 1]]: p(a|y) = 1/2 in every observed cell
    #   sum = 6 log(1/2)
    counts = np.array([
        [[3, 0], [1, 2]],
        [[4, 2], [0, 0]],
        [[2, 1], [2, 1]],
    ])
    expected = [3 * math.log(0.75) + math.log(0.25), 0.0, -6 * LOG2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # unobserved cells (count 0, p 0) must not warn or nan
        out = log_likelihood_sums(counts)
    assert out.shape == (3,)
    assert out[1] == 0.0
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-13)


def test_log_likelihood_sums_equals_row_loop():
    # independent per-row loop on raw data
    rng = np.random.default_rng(7)
    n, d, arity, classes = 40, 3, 3, 2
    x = rng.integers(0, arity, size=(d, n))
    x[1, :] = np.where(x[1] == 2, 0, x[1])  # feature 1 never takes state 2
    y = rng.integers(0, classes, size=n)
    counts = np.zeros((d, arity, classes), dtype=np.int64)
    for i in range(d):
        for k in range(n):
            counts[i, x[i, k], y[k]] += 1
    out = log_likelihood_sums(counts)
    for i in range(d):
        total = 0.0
        for k in range(n):
            same = [kk for kk in range(n) if y[kk] == y[k]]
            hits = sum(1 for kk in same if x[i, kk] == x[i, k])
            total += math.log(hits / len(same))
        assert out[i] == pytest.approx(total, abs=1e-12)


# --------------------------------------------------------------------------- entropy


def test_entropy_hand_computed():
    assert entropy(np.array([5, 5])) == pytest.approx(LOG2, abs=1e-15)
    assert entropy(np.array([1, 1, 1])) == pytest.approx(LOG3, abs=1e-15)
    # (1/2, 1/4, 1/4): H = 1/2 log 2 + 2 * 1/4 log 4 = 1.5 log 2
    assert entropy(np.array([2, 1, 1])) == pytest.approx(1.5 * LOG2, abs=1e-15)
    # zero cells are ignored: (3, 0, 1) -> -(3/4 log 3/4 + 1/4 log 1/4)
    assert entropy(np.array([3, 0, 1])) == pytest.approx(
        -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)), abs=1e-15)
    assert entropy(np.array([7])) == 0.0
    assert entropy(np.array([0, 7, 0])) == 0.0
    assert isinstance(entropy(np.array([2, 1])), float)
