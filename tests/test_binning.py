"""Tests of vmi_spark.core.binning against hand-computed cases and plain reference code.

The references below are written from the rules in the docstrings, over raw sorted
arrays (not value counts), and share no code with the module: today's equal-frequency
rule as vmi_spark/spark/plan.py applies it, the spike-aware rule as a partition of the
observed values, equal width with np.linspace, and Fayyad & Irani's MDLP recursion over
raw (value, class) rows.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vmi_spark.core.binning import (
    DEFAULT_LABEL_BINS,
    MDLP_GRID_CELLS,
    Binning,
    assign_codes,
    best_boundary,
    check_strategy,
    describe,
    fit_binning,
    from_description,
    label_binning,
    limit_spikes,
    looks_continuous,
    mdlp_accepts,
    mdlp_binning,
    mdlp_cuts,
    place_edges,
    quantile_binning,
    regrid_codes,
    resolve_label_type,
    share_bins,
    spike_mask,
    state_labels,
    uniform_binning,
    value_counts,
)

ABOVE_0 = float(np.nextafter(0.0, np.inf))  # 5e-324
INF = math.inf


# --------------------------------------------------------------------------- references


def today_splits(x: np.ndarray, num_bins: int) -> list[float]:
    """The rule on main (plan.equal_frequency_splits): sorted sample, the values at ranks
    floor(j n / numBins), repeats and the minimum dropped."""
    v = np.sort(x[~np.isnan(x)])
    if len(v) == 0:
        return []
    cuts = sorted({float(v[(j * len(v)) // num_bins]) for j in range(1, num_bins)})
    return [c for c in cuts if c > v[0]]


def ref_quantile(x: np.ndarray, num_bins: int) -> tuple[dict[float, int], list[float]]:
    """The spike-aware rule as a partition of the observed values: value -> state, spikes."""
    v = np.sort(x[~np.isnan(x)])
    n = len(v)
    uniq, cnt = np.unique(v, return_counts=True)
    count = dict(zip(uniq.tolist(), cnt.tolist()))
    spikes = [u for u in uniq.tolist() if count[u] * num_bins > n]

    def runs(sp):
        # the values strictly between consecutive spikes (all values below the first,
        # above the last: infinities included)
        below = [v < sp[0]] if sp else [np.ones(n, dtype=bool)]
        between = [(v > lo) & (v < hi) for lo, hi in zip(sp, sp[1:])]
        above = [v > sp[-1]] if sp else []
        return [v[m] for m in below + between + above]

    while spikes and sum(len(r) > 0 for r in runs(spikes)) > num_bins - len(spikes):
        spikes.remove(min(spikes, key=lambda s: (count[s], -s)))
    rs = runs(spikes)
    shares = [1 if len(r) else 0 for r in rs]
    for _ in range(num_bins - len(spikes) - sum(shares)):
        open_ = [j for j, r in enumerate(rs) if len(r) and shares[j] < len(np.unique(r))]
        if not open_:
            break
        best = max(open_, key=lambda j: (Fraction(len(rs[j]), shares[j]), -j))
        shares[best] += 1
    state: dict[float, int] = {}
    code = 0
    for j, r in enumerate(rs):
        if len(r):
            b = shares[j]
            cuts = np.unique(r[(np.arange(1, b) * len(r)) // b]) if b > 1 else np.empty(0)
            cuts = cuts[cuts > r[0]]
            for val in np.unique(r).tolist():
                state[val] = code + int((cuts <= val).sum())
            code += len(cuts) + 1
        if j < len(spikes):
            state[spikes[j]] = code
            code += 1
    return state, spikes


def ref_mdlp(x: np.ndarray, y: np.ndarray, candidates: np.ndarray) -> list[float]:
    """Fayyad & Irani's recursion over raw rows; a cut c puts x < c left, x >= c right."""

    def ent(labels):
        _, c = np.unique(labels, return_counts=True)
        p = c / c.sum()
        return float(-(p * np.log2(p)).sum())

    def split(rows, cands):
        xs, ys = x[rows], y[rows]
        big_n = len(xs)
        best = None
        for c in cands:
            left = xs < c
            n1 = int(left.sum())
            if n1 == 0 or n1 == big_n:
                continue
            e = (n1 * ent(ys[left]) + (big_n - n1) * ent(ys[~left])) / big_n
            if best is None or e < best[0]:
                best = (e, c)
        if best is None:
            return []
        e, c = best
        left = xs < c
        k, k1, k2 = (len(np.unique(a)) for a in (ys, ys[left], ys[~left]))
        delta = math.log2(3 ** k - 2) - (k * ent(ys) - k1 * ent(ys[left]) - k2 * ent(ys[~left]))
        if not ent(ys) - e > (math.log2(big_n - 1) + delta) / big_n:
            return []
        return (split(rows & (x < c), [d for d in cands if d < c]) + [float(c)]
                + split(rows & (x >= c), [d for d in cands if d > c]))

    return split(np.ones(len(x), dtype=bool), list(candidates))


def plugin_mi(codes: np.ndarray, y: np.ndarray) -> float:
    """Plug-in I(codes; y) in nats from the joint histogram."""
    joint = np.zeros((int(codes.max()) + 1, int(y.max()) + 1))
    np.add.at(joint, (codes, y), 1.0)
    p = joint / joint.sum()
    outer = p.sum(axis=1, keepdims=True) * p.sum(axis=0, keepdims=True)
    nz = p > 0
    return float((p[nz] * np.log(p[nz] / outer[nz])).sum())


def quantile_of(x: np.ndarray, num_bins: int) -> Binning:
    return quantile_binning(*value_counts(x), num_bins)


def spiky_columns():
    """Columns with zeros, sentinels, ties, integers and plain continuous values."""
    rng = np.random.default_rng(11)
    n = 600
    amounts = rng.lognormal(2.0, 1.0, n).round(2)
    yield np.where(rng.random(n) < 0.92, 0.0, amounts)
    yield np.where(rng.random(n) < 0.3, -1.0,
                   np.where(rng.random(n) < 0.2, 999.0, rng.normal(50, 10, n)))
    yield rng.poisson(1.5, n).astype(float)
    yield rng.integers(0, 40, n).astype(float)
    yield rng.normal(size=n)
    yield np.concatenate([np.full(200, 3.0), np.full(150, 7.0), rng.uniform(0, 10, 250)])
    yield np.concatenate([np.full(300, -2.5), np.full(290, 4.0), [1.0, 8.0, 9.0, -7.0]])
    yield rng.choice([0.0, 1.0, 2.0, 3.0, 4.0], n, p=[0.3, 0.25, 0.2, 0.15, 0.1])
    yield np.concatenate([np.full(500, 0.0), [np.inf] * 60, [-np.inf] * 10, rng.normal(size=30)])


# --------------------------------------------------------------------------- value counts


def test_value_counts_sorts_merges_and_drops_nan():
    vals, cnts = value_counts(np.array([3.0, np.nan, 1.0, 3.0, -0.0, 0.0, 3.0]))
    np.testing.assert_array_equal(vals, [0.0, 1.0, 3.0])
    np.testing.assert_array_equal(cnts, [2, 1, 3])  # -0.0 and 0.0 are one value
    assert not np.signbit(vals[0])


def test_value_counts_of_partitions_equal_those_of_the_whole():
    rng = np.random.default_rng(3)
    x = rng.choice([0.0, -1.0, 2.5, 7.0, np.nan], 1000)
    whole = value_counts(x)
    perm = rng.permutation(x)
    parts = [value_counts(p) for p in np.array_split(perm, 7)]
    merged = value_counts(np.concatenate([p[0] for p in parts]),
                          np.concatenate([p[1] for p in parts]))
    for a, b in zip(whole, merged):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("nan", [False, True])
def test_value_counts_against_a_plain_count_and_leaves_its_input(nan):
    from collections import Counter

    rng = np.random.default_rng(8)
    x = np.round(rng.normal(0, 3, 5000), 1)
    x[::7] = -0.0
    if nan:
        x[::11] = np.nan
    before = x.copy()
    plain = Counter(float(v) + 0.0 for v in x if not np.isnan(v))
    vals, cnts = value_counts(x)
    assert vals.tolist() == sorted(plain) and cnts.tolist() == [plain[v] for v in sorted(plain)]
    assert not np.signbit(vals[vals == 0]).any() and cnts.dtype == np.int64  # -0.0 is 0.0
    np.testing.assert_array_equal(x, before)  # sorted a copy, not the caller's values
    assert np.array_equal(np.signbit(x), np.signbit(before))
    ones = value_counts(x, np.ones(len(x), dtype=np.int64))  # the counted path agrees
    assert ones[0].tolist() == vals.tolist() and ones[1].tolist() == cnts.tolist()


def test_value_counts_rejects_mismatched_or_negative_counts():
    with pytest.raises(ValueError, match="2 values but 1 counts"):
        value_counts(np.array([1.0, 2.0]), np.array([1]))
    with pytest.raises(ValueError, match="negative"):
        value_counts(np.array([1.0]), np.array([-1]))


def test_binnings_refuse_unsorted_counts():
    with pytest.raises(ValueError, match="value_counts"):
        quantile_binning(np.array([2.0, 1.0]), np.array([1, 1]), 4)


# --------------------------------------------------------------------------- quantile: hand cases


def test_quantile_92_percent_zeros_hand_computed():
    # the docstring example: 46 zeros (> 50/5 rows: a spike) and 1, 2, 3, 4; the four
    # remaining bins take one amount each (cuts at run ranks 1, 2, 3 -> 2, 3, 4)
    x = np.concatenate([np.zeros(46), [1.0, 2.0, 3.0, 4.0]])
    b = quantile_of(x, 5)
    assert b.edges == (ABOVE_0, 2.0, 3.0, 4.0)
    assert b.spikes == (0.0,)
    np.testing.assert_array_equal(assign_codes(b.edges, np.array([0, 1, 2, 3, 4.0])),
                                  [0, 1, 2, 3, 4])
    assert state_labels(b) == ["0", "(0, 2)", "[2, 3)", "[3, 4)", "[4, inf)"]
    # an unseen value just above the spike does not share its state; the end state
    # below the smallest value takes smaller values, as end bins do
    np.testing.assert_array_equal(assign_codes(b.edges, np.array([1e-300, 0.5, -3.0])),
                                  [1, 1, 0])
    # today's rule: every cut (ranks 10, 20, 30, 40) is 0, the minimum: one state
    assert today_splits(x, 5) == []


def test_quantile_sentinels_hand_computed():
    # -1 and 999 hold 3 > 10/4 rows each; the run 10..40 gets the 2 other bins, cut at
    # its rank (1 * 4) // 2 = 2, the value 30
    x = np.array([-1, -1, -1, 10, 20, 30, 40, 999, 999, 999], dtype=float)
    b = quantile_of(x, 4)
    assert b.edges == (float(np.nextafter(-1.0, np.inf)), 30.0, 999.0)
    assert b.spikes == (-1.0, 999.0)
    assert state_labels(b) == ["-1", "(-1, 30)", "[30, 999)", "999"]
    np.testing.assert_array_equal(
        assign_codes(b.edges, np.array([-1, 10, 20, 30, 40, 999, -0.5, 500, 1e6])),
        [0, 1, 1, 2, 2, 3, 1, 2, 3])
    # today's rule: ranks 2, 5, 7 -> -1, 30, 999; -1 is the minimum: -1 shares with 10, 20
    assert today_splits(x, 4) == [30.0, 999.0]


def test_quantile_all_zero_and_all_missing_columns():
    b = quantile_of(np.zeros(20), 5)
    assert b.edges == () and b.spikes == (0.0,) and state_labels(b) == ["0"]
    b = quantile_of(np.array([np.nan, np.nan]), 5)
    assert b == Binning("quantile", (), ())
    assert state_labels(b) == ["(-inf, inf)"]


def test_quantile_too_many_spikes_demotes_the_weakest():
    # numBins 3, n = 10: 0 and 10 hold 4 > 10/3 rows; they leave 1 bin for 2 non-empty
    # runs ({5} and {20}), so the weaker spike (equal counts: the larger value, 10) is an
    # ordinary value again; the run {5, 10 x4, 20} gets both bins, cut at its rank
    # (1 * 6) // 2 = 3, the value 10
    x = np.array([0, 0, 0, 0, 10, 10, 10, 10, 5, 20], dtype=float)
    vals, cnts = value_counts(x)
    np.testing.assert_array_equal(spike_mask(cnts, 3), [True, False, True, False])
    np.testing.assert_array_equal(limit_spikes(cnts, spike_mask(cnts, 3), 3),
                                  [True, False, False, False])
    b = quantile_of(x, 3)
    assert b.edges == (ABOVE_0, 10.0) and b.spikes == (0.0,)
    assert state_labels(b) == ["0", "(0, 10)", "[10, inf)"]


def test_adjacent_spikes_and_the_unseen_gap_between_them():
    # 0 and 1 hold 5 > 12/4 rows each, with nothing between them; the run {2, 3} above
    # gets the 2 other bins (cut at its rank 1, the value 3). The unseen gap (0, 1) joins
    # the upper spike's state, whose lower edge is the double just above 0
    x = np.array([0] * 5 + [1] * 5 + [2, 3], dtype=float)
    b = quantile_of(x, 4)
    assert b.spikes == (0.0, 1.0)
    assert b.edges == (ABOVE_0, float(np.nextafter(1.0, np.inf)), 3.0)
    np.testing.assert_array_equal(assign_codes(b.edges, np.array([0, 0.5, 1, 2, 3.0])),
                                  [0, 1, 1, 2, 3])
    assert state_labels(b) == ["0", "1", "(1, 3)", "[3, inf)"]


def test_place_edges_hand_computed():
    # spikes 0 and 5 with one uncut run between them and nothing outside: no edge below
    # the first state, the run starts just above 0, the spike 5 at 5
    assert place_edges([None, np.empty(0), None], [0.0, 5.0]) == (ABOVE_0, 5.0)
    # a run below the first spike (cut at -2) and two adjacent spikes
    assert place_edges([np.array([-2.0]), None, None], [0.0, 1.0]) == (-2.0, 0.0, ABOVE_0)
    # no spikes: the run's cuts
    assert place_edges([np.array([3.0, 4.0])], []) == (3.0, 4.0)


def test_share_bins_hand_computed():
    # runs of 0, 6 and 3 rows, 4 bins: 1 each to the non-empty runs, then to the run
    # with most rows per bin: 6/1 > 3/1 -> run 1; 6/2 = 3/1 tie -> the lower run, 1
    assert share_bins([0, 6, 3], [0, 6, 3], 4) == [0, 3, 1]
    # a run never gets more bins than distinct values; unusable bins stay unused
    assert share_bins([10, 2], [10, 1], 5) == [4, 1]
    assert share_bins([3], [2], 5) == [2]


def test_share_bins_minimises_the_largest_rows_per_bin():
    rng = np.random.default_rng(5)
    for _ in range(40):
        sizes = rng.integers(1, 30, rng.integers(1, 4)).tolist()
        caps = sizes
        bins = int(rng.integers(len(sizes), len(sizes) + 6))
        got = share_bins(sizes, caps, bins)
        assert sum(got) == min(bins, sum(caps)) and all(g >= 1 for g in got)
        best = min(max(Fraction(s, a) for s, a in zip(sizes, alloc))
                   for alloc in itertools.product(*(range(1, c + 1) for c in caps))
                   if sum(alloc) <= bins)
        assert max(Fraction(s, a) for s, a in zip(sizes, got)) == best


# --------------------------------------------------------------------------- quantile: references


@pytest.mark.parametrize("num_bins", [2, 3, 5, 10, 16])
def test_quantile_matches_the_reference_partition(num_bins):
    for x in spiky_columns():
        b = quantile_of(x, num_bins)
        state, spikes = ref_quantile(x, num_bins)
        vals = np.array(sorted(state))
        np.testing.assert_array_equal(assign_codes(b.edges, vals), [state[v] for v in vals])
        assert list(b.spikes) == spikes
        assert b.num_states == max(state.values()) + 1 <= num_bins
        assert all(e2 > e1 for e1, e2 in zip(b.edges, b.edges[1:]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-4, 12), min_size=1, max_size=60), st.integers(2, 9))
def test_quantile_matches_the_reference_on_small_tied_columns(ints, num_bins):
    # few distinct values and many ties: all-spike columns, adjacent spikes, demotion
    x = np.array(ints, dtype=float) / 2.0
    b = quantile_of(x, num_bins)
    state, spikes = ref_quantile(x, num_bins)
    vals = np.array(sorted(state))
    np.testing.assert_array_equal(assign_codes(b.edges, vals), [state[v] for v in vals])
    assert list(b.spikes) == spikes
    assert b.num_states == max(state.values()) + 1 <= num_bins


def test_quantile_without_spikes_is_todays_rule():
    rng = np.random.default_rng(8)
    for num_bins in (2, 5, 10, 100):
        for x in (rng.normal(size=1000), rng.integers(0, 3000, 1000).astype(float),
                  rng.exponential(size=370)):
            b = quantile_of(x, num_bins)
            assert b.spikes == ()
            assert list(b.edges) == today_splits(x, num_bins)


def test_values_between_spikes_never_share_a_spike_state():
    for x in spiky_columns():
        b = quantile_of(x, 8)
        vals = value_counts(x)[0]
        others = np.setdiff1d(vals, b.spikes)
        for s in b.spikes:
            (code,) = assign_codes(b.edges, np.array([s]))
            assert code not in set(assign_codes(b.edges, others).tolist())
            if s < vals[-1]:  # the double just above a spike is never in its state
                assert assign_codes(b.edges, np.array([np.nextafter(s, np.inf)]))[0] != code


def test_quantile_is_the_same_for_any_row_order_and_partitioning():
    rng = np.random.default_rng(21)
    for x in spiky_columns():
        expected = quantile_of(x, 10)
        perm = rng.permutation(x)
        parts = [value_counts(p) for p in np.array_split(perm, 5)]
        merged = value_counts(np.concatenate([p[0] for p in parts]),
                              np.concatenate([p[1] for p in parts]))
        assert quantile_binning(*merged, 10) == expected


def test_num_bins_must_be_at_least_two():
    with pytest.raises(ValueError, match="numBins must be an integer of at least 2, got 1"):
        quantile_of(np.arange(5.0), 1)


# --------------------------------------------------------------------------- spike demonstration


def test_92_percent_zeros_keep_their_information():
    # x is 0 in 92 % of rows, independently of y; otherwise its amount lies in (0, 1)
    # for y = 0 and (1, 2) for y = 1. With balanced y, I(x; y) = P(x != 0) H(y)
    # = 0.08 ln 2 nats: the information is all in the amounts.
    rng = np.random.default_rng(7)
    n = 20_000
    y = rng.integers(0, 2, n)
    amount = np.where(y == 1, 1.0 + rng.random(n), rng.random(n))
    x = np.where(rng.random(n) < 0.08, amount, 0.0)
    true_mi = 0.08 * math.log(2.0)

    # today's rule: every quantile is 0, the column is one constant state with I = 0
    assert today_splits(x, 10) == []
    # spike-aware: zero is a state, nine equal-frequency bins share the amounts, and one
    # of them straddles 1 (rank 4.5/9 of the amounts), so about 1/9 of the amounts'
    # information is lost, less the plug-in's small upward bias
    b = quantile_of(x, 10)
    assert b.spikes == (0.0,) and b.num_states == 10
    mi = plugin_mi(assign_codes(b.edges, x), y)
    assert 0.85 * true_mi < mi < 1.05 * true_mi
    # supervised bins place the cut at 1 and recover nearly all of it
    grid = quantile_of(x, MDLP_GRID_CELLS)
    counts = np.zeros((grid.num_states, 2), dtype=np.int64)
    np.add.at(counts, (assign_codes(grid.edges, x), y), 1)
    m = mdlp_binning(grid, counts, max_bins=10)
    assert 0.0 in m.spikes
    assert abs(plugin_mi(assign_codes(m.edges, x), y) - true_mi) < 0.03 * true_mi
    # rows coded on the grid get their final codes from a lookup table
    table = regrid_codes(grid, m.edges)
    np.testing.assert_array_equal(table[assign_codes(grid.edges, x)], assign_codes(m.edges, x))


# --------------------------------------------------------------------------- uniform


def test_uniform_hand_computed():
    b = uniform_binning(*value_counts(np.arange(101.0)), 4)  # 101 values: r = 0
    assert b == Binning("uniform", (25.0, 50.0, 75.0), ())
    assert state_labels(b) == ["(-inf, 25)", "[25, 50)", "[50, 75)", "[75, inf)"]


def test_uniform_robust_limits_put_outliers_in_the_end_bins():
    x = np.concatenate([np.arange(1000.0), [1e9]])
    # n = 1001, r = floor(0.005 * 1001) = 5: limits are the values at ranks 5 and 995
    b = uniform_binning(*value_counts(x), 10)
    np.testing.assert_allclose(b.edges, np.linspace(5.0, 995.0, 11)[1:-1], rtol=1e-12)
    np.testing.assert_array_equal(assign_codes(b.edges, np.array([0.0, 1e9])), [0, 9])
    # FEAST's limits (min and max): the outlier squeezes 0..999 into one bin
    feast = uniform_binning(*value_counts(x), 10, tail=0.0)
    assert len(set(assign_codes(feast.edges, np.arange(1000.0)).tolist())) == 1


def test_uniform_matches_linspace_between_reference_quantiles():
    rng = np.random.default_rng(4)
    for x in (rng.normal(size=500), rng.exponential(size=2000), rng.uniform(-3, 9, 77)):
        for num_bins, tail in ((5, 0.005), (10, 0.0), (7, 0.1)):
            v = np.sort(x)
            r = int(math.floor(tail * len(v)))
            expected = np.linspace(v[r], v[len(v) - 1 - r], num_bins + 1)[1:-1]
            b = uniform_binning(*value_counts(x), num_bins, tail=tail)
            np.testing.assert_allclose(b.edges, expected, rtol=1e-12, atol=1e-12)


def test_uniform_narrow_limits_widen_and_constants_have_no_edges():
    # 996 zeros: both robust limits are 0, so the limits widen to 0 and 4
    x = np.concatenate([np.zeros(996), [1.0, 2.0, 3.0, 4.0]])
    assert uniform_binning(*value_counts(x), 4).edges == (1.0, 2.0, 3.0)
    assert uniform_binning(*value_counts(np.full(9, 2.5)), 4).edges == ()
    assert uniform_binning(*value_counts(np.array([np.nan])), 4).edges == ()
    # infinities stay out of the limits and fall into the end bins
    x = np.concatenate([[-np.inf], np.arange(10.0), [np.inf]])
    b = uniform_binning(*value_counts(x), 3, tail=0.0)
    np.testing.assert_allclose(b.edges, [3.0, 6.0])
    np.testing.assert_array_equal(assign_codes(b.edges, np.array([-np.inf, np.inf])), [0, 2])


# --------------------------------------------------------------------------- mdlp


def test_mdlp_criterion_hand_computed():
    # S1 = 10 of class 0, S2 = 10 of class 1: Gain = 1 bit; k = 2, k1 = k2 = 1,
    # Delta = log2(7) - 2 = 0.807; threshold (log2(19) + 0.807) / 20 = 0.253 < 1
    assert mdlp_accepts(np.array([10, 0]), np.array([0, 10]))
    # S1 = (2, 0), S2 = (1, 1): Ent(S) = H(3/4) = 0.8113, Gain = 0.8113 - 2/4 = 0.3113;
    # Delta = log2(7) - (2 * 0.8113 - 0 - 2 * 1) = 3.1848;
    # threshold (log2(3) + 3.1848) / 4 = 1.1925 > 0.3113: refused
    assert not mdlp_accepts(np.array([2, 0]), np.array([1, 1]))
    # an even mix on both sides gains nothing
    assert not mdlp_accepts(np.array([5, 5]), np.array([5, 5]))


def test_best_boundary_hand_computed():
    # cells (class 0, class 1): the cut after cell 1 leaves (9, 0) | (1, 10), the
    # lowest weighted entropy; an empty cell 2 makes cuts 2 and 3 equal: the lower wins
    counts = np.array([[5, 0], [4, 0], [1, 2], [0, 8]])
    assert best_boundary(counts) == 2
    assert best_boundary(np.array([[3, 0], [0, 0], [0, 0], [0, 4]])) == 1
    assert best_boundary(np.array([[0, 0], [3, 1], [0, 0]])) is None


def test_mdlp_two_separated_classes_one_cut_at_the_boundary():
    x = np.arange(1.0, 21.0)
    y = (x > 10).astype(int)
    grid = quantile_of(x, 20)  # one cell per value: edges 2, 3, ..., 20
    counts = np.zeros((grid.num_states, 2), dtype=np.int64)
    np.add.at(counts, (assign_codes(grid.edges, x), y), 1)
    assert mdlp_binning(grid, counts).edges == (11.0,)


def test_mdlp_independent_label_gives_no_cut():
    rng = np.random.default_rng(2)
    x = rng.normal(size=5000)
    y = rng.integers(0, 3, 5000)
    grid = quantile_of(x, MDLP_GRID_CELLS)
    counts = np.zeros((grid.num_states, 3), dtype=np.int64)
    np.add.at(counts, (assign_codes(grid.edges, x), y), 1)
    assert mdlp_binning(grid, counts).edges == ()


def test_mdlp_matches_the_raw_row_recursion():
    rng = np.random.default_rng(9)
    cases = []
    for seed in range(4):
        r = np.random.default_rng(seed)
        y = r.integers(0, 3, 400)
        cases.append((r.normal(y * 1.5, 1.0).round(1), y))
    y = rng.integers(0, 2, 500)
    cases.append((np.where(rng.random(500) < 0.6, 0.0, rng.normal(3 * y, 1.0)), y))
    y = rng.integers(0, 2, 300)
    cases.append((rng.normal(size=300), y))
    for x, y in cases:
        grid = quantile_of(x, 40)
        counts = np.zeros((grid.num_states, int(y.max()) + 1), dtype=np.int64)
        np.add.at(counts, (assign_codes(grid.edges, x), y), 1)
        got = mdlp_binning(grid, counts).edges
        assert list(got) == ref_mdlp(x, y, np.asarray(grid.edges))
    assert any(len(ref_mdlp(x, y, np.asarray(quantile_of(x, 40).edges))) >= 2
               for x, y in cases)  # the comparison covers recursion, not only one cut


def test_mdlp_max_bins_makes_the_largest_cuts_first():
    # blocks: class 0 on 1..10, class 1 on 11..20, class 2 on 21..40. On the whole,
    # cut 11 leaves (10,0,0) | (0,10,20): 30 * H(1/3) = 27.5 bits; cut 21 leaves
    # (10,10,0) | (0,0,20): 20 * 1 = 20 bits, so 21 is cut first
    x = np.arange(1.0, 41.0)
    y = np.where(x <= 10, 0, np.where(x <= 20, 1, 2))
    grid = quantile_of(x, 40)
    counts = np.zeros((grid.num_states, 3), dtype=np.int64)
    np.add.at(counts, (assign_codes(grid.edges, x), y), 1)
    assert mdlp_binning(grid, counts).edges == (11.0, 21.0)
    assert mdlp_binning(grid, counts, max_bins=2).edges == (21.0,)
    assert mdlp_binning(grid, counts, max_bins=3).edges == (11.0, 21.0)


def test_mdlp_counts_summed_over_partitions_give_the_same_cuts():
    rng = np.random.default_rng(13)
    y = rng.integers(0, 2, 2000)
    x = np.where(rng.random(2000) < 0.5, -1.0, rng.normal(2 * y, 1.0))
    grid = quantile_of(x, MDLP_GRID_CELLS)
    whole = np.zeros((grid.num_states, 2), dtype=np.int64)
    np.add.at(whole, (assign_codes(grid.edges, x), y), 1)
    perm = rng.permutation(len(x))
    summed = np.zeros_like(whole)
    for idx in np.array_split(perm, 6):
        part = np.zeros_like(whole)
        np.add.at(part, (assign_codes(grid.edges, x[idx]), y[idx]), 1)
        summed += part
    assert mdlp_cuts(summed).tolist() == mdlp_cuts(whole).tolist()
    assert mdlp_binning(grid, summed) == mdlp_binning(grid, whole)


def test_mdlp_counts_must_match_the_grid():
    grid = quantile_of(np.arange(10.0), 5)
    with pytest.raises(ValueError, match="one row per grid state"):
        mdlp_binning(grid, np.zeros((3, 2), dtype=np.int64))


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize("requested, classes, numeric, floating, expected", [
    ("auto", [0.0, 1.0, 2.0], True, True, "categorical"),   # integer-valued doubles
    ("auto", [0.0, 0.5], True, True, "continuous"),         # a non-integer value
    ("auto", None, True, True, "continuous"),               # more than maxClasses
    ("auto", None, True, False, "continuous"),              # integers beyond maxClasses
    ("auto", [1, 2, 3], True, False, "categorical"),
    ("auto", ["a", "b"], False, False, "categorical"),
    ("auto", None, False, False, "categorical"),            # the caller's error, as today
    ("categorical", [0.25, 0.5], True, True, "categorical"),
    ("continuous", [0, 1], True, False, "continuous"),
])
def test_resolve_label_type(requested, classes, numeric, floating, expected):
    assert resolve_label_type(requested, classes, numeric=numeric,
                              floating=floating) == expected


def test_resolve_label_type_errors_name_the_parameter():
    with pytest.raises(ValueError, match="labelType must be auto, categorical or continuous"):
        resolve_label_type("regression", [0, 1], numeric=True, floating=False)
    with pytest.raises(ValueError, match="labelType is 'continuous' but the label column"):
        resolve_label_type("continuous", ["a", "b"], numeric=False, floating=False)


def test_looks_continuous_above_half_the_rows():
    assert looks_continuous(51, 100) and not looks_continuous(50, 100)
    # the 442-row regression target of issue 19 has 214 classes: below the line
    assert not looks_continuous(214, 442)


def test_label_binning_hand_computed():
    # 100 distinct values: ten equal classes, cuts at ranks 10, 20, ..., 90
    b = label_binning(*value_counts(np.arange(100.0)))
    assert DEFAULT_LABEL_BINS == 10
    assert b.edges == tuple(float(v) for v in range(10, 100, 10))
    # 30 zeros (> 100/10) are a class; 9 classes share 1..70, cut at run ranks
    # floor(j 70 / 9) = 7, 15, 23, 31, 38, 46, 54, 62, the values 8, 16, ..., 63
    y = np.concatenate([np.zeros(30), np.arange(1.0, 71.0)])
    b = label_binning(*value_counts(y))
    assert b.edges == (ABOVE_0, 8.0, 16.0, 24.0, 32.0, 39.0, 47.0, 55.0, 63.0)
    assert b.spikes == (0.0,)
    with pytest.raises(ValueError, match="labelBins must be an integer of at least 2"):
        label_binning(*value_counts(y), label_bins=1)


# --------------------------------------------------------------------------- describe


def test_describe_round_trips_through_json():
    rng = np.random.default_rng(1)
    binnings = [quantile_of(x, 10) for x in spiky_columns()]
    binnings.append(uniform_binning(*value_counts(rng.normal(size=50)), 5))
    binnings.append(Binning("mdlp", (-INF, 0.5, INF), (INF,)))
    for b in binnings:
        text = json.dumps(describe(b), allow_nan=False)
        assert from_description(json.loads(text)) == b


def test_describe_hand_computed():
    b = quantile_of(np.array([-1, -1, -1, 10, 20, 30, 40, 999, 999, 999], dtype=float), 4)
    assert describe(b) == {"strategy": "quantile",
                           "edges": [-0.9999999999999999, 30.0, 999.0],
                           "spikes": [-1.0, 999.0],
                           "states": ["-1", "(-1, 30)", "[30, 999)", "999"]}
    # a state that ends just above a value it absorbed reads as closed on the right
    assert state_labels(Binning("mdlp", (-1.0, ABOVE_0), ())) == [
        "(-inf, -1)", "[-1, 0]", "(0, inf)"]


@pytest.mark.parametrize("raw, message", [
    ([], "must be an object"),
    ({"strategy": "kmeans", "edges": []}, "unknown binning strategy"),
    ({"strategy": "quantile", "edges": [2.0, 1.0]}, "not strictly increasing"),
    ({"strategy": "quantile", "edges": [1.0, 1.0]}, "not strictly increasing"),
    ({"strategy": "quantile", "edges": [float("nan")]}, "not a number"),
    ({"strategy": "quantile", "edges": ["1.0"]}, "not a number"),
    ({"strategy": "quantile", "edges": [True]}, "not a number"),
    ({"strategy": "quantile", "edges": [10 ** 400]}, "not a number"),
    ({"strategy": "quantile", "edges": "1,2"}, "must be a list"),
    ({"strategy": "uniform", "edges": [], "spikes": [3.0, 3.0]}, "not strictly increasing"),
])
def test_from_description_rejects_what_describe_cannot_write(raw, message):
    with pytest.raises(ValueError, match=message) as err:
        from_description(raw)
    assert "\n" not in str(err.value)


def test_assign_codes_missing_state():
    edges = (1.0, 2.0)
    v = np.array([0.5, 1.0, np.nan, 2.5])
    np.testing.assert_array_equal(assign_codes(edges, v, missing_code=3), [0, 1, 3, 2])
    # without a missing code NaN sorts above every edge: the last state
    np.testing.assert_array_equal(assign_codes(edges, v), [0, 1, 2, 2])


def test_fit_binning_composes_the_strategies():
    rng = np.random.default_rng(17)
    y = rng.integers(0, 3, 3000)
    x = np.where(rng.random(3000) < 0.4, 0.0, rng.normal(y, 1.0))
    x[rng.random(3000) < 0.05] = np.nan  # missing values are dropped
    known = ~np.isnan(x)
    assert fit_binning("quantile", x, 10) == quantile_binning(*value_counts(x[known]), 10)
    assert fit_binning("uniform", x, 10) == uniform_binning(*value_counts(x[known]), 10)
    grid = quantile_binning(*value_counts(x[known]), MDLP_GRID_CELLS)
    counts = np.zeros((grid.num_states, 3), dtype=np.int64)
    for code, label in zip(assign_codes(grid.edges, x[known]), y[known]):
        counts[code, label] += 1
    expected = mdlp_binning(grid, counts, max_bins=10)
    assert len(expected.edges) >= 2  # the label is informative
    assert fit_binning("mdlp", x, 10, labels=y, num_classes=3) == expected
    perm = rng.permutation(len(x))  # any row order: the same bins
    assert fit_binning("mdlp", x[perm], 10, labels=y[perm], num_classes=3) == expected


def test_strategy_errors_name_the_parameter():
    assert check_strategy("uniform") == "uniform"
    with pytest.raises(ValueError, match="binning must be quantile, uniform or mdlp, got 'kbins'"):
        check_strategy("kbins")
    with pytest.raises(ValueError, match="binning 'mdlp' needs the class labels"):
        fit_binning("mdlp", np.arange(5.0), 4)
